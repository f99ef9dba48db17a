// The decoder session class of the session addon (session.cc).
#pragma once

#include <napi.h>

namespace ortserve {

// The `Session` constructor: new Session(modelPath, intraOpThreads, interOpThreads, cachedAttention).
Napi::Function DefineSession(Napi::Env env);

}  // namespace ortserve

// ONNX Runtime, loaded at run time: libonnxruntime is not linked, LoadRuntime() dlopens the
// library onnxruntime-node ships (the same file its binding loads, so one runtime and one
// OrtEnv serve both), checks that it is an ONNX Runtime 1.x the declarations of ort-api.h hold
// for, and asks it for that C API version (the API is append-only, so a newer library serves it).
#pragma once

#include <string>

#include "ort-api.h"

namespace ortserve {

// The loaded runtime's C API, environment and CPU memory description: null until LoadRuntime
// succeeds, then set for the life of the process.
extern const OrtApi* ort;
extern OrtEnv* ortEnv;
extern OrtMemoryInfo* cpuMemory;

// Loads ONNX Runtime from `path` (once per process; later calls return the first version).
// Returns "" and sets *version, or the reason it cannot be used.
std::string LoadRuntime(const std::string& path, std::string* version);

// The message of a failed call (and frees its status); empty on success.
std::string Failure(OrtStatus* status);

}  // namespace ortserve

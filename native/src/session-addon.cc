// The session addon's exports (src/core/runner/native-session.ts loads them): loading ONNX
// Runtime (ort-runtime.h), the Session (session.h), BlockQuantMatMul's kernel choice and the
// KV cache's page advice.
#include <napi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "block-quant-matmul.h"
#include "ort-runtime.h"
#include "session.h"

namespace {

// loadRuntime(path): dlopens libonnxruntime and returns its version string. Idempotent.
Napi::Value LoadRuntime(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "loadRuntime(path): path must be a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string version;
  const std::string error = ortserve::LoadRuntime(info[0].As<Napi::String>().Utf8Value(), &version);
  if (!error.empty()) {
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::String::New(env, version);
}

// keepSmallPages(typedArray): asks the kernel not to back the array's whole pages with transparent
// huge pages (madvise MADV_NOHUGEPAGE). The KV cache reserves its whole budget and relies on pages
// being committed only where rows write; with huge pages set to "always", touching any row's span
// (512 KiB for the default model) would commit the 2 MiB around it. Returns the advised range as
// [start, end) addresses (doubles: exact below 2^53), or undefined where it cannot be advised.
Napi::Value KeepSmallPages(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsTypedArray()) {
    Napi::TypeError::New(env, "keepSmallPages: expected a typed array").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::TypedArray array = info[0].As<Napi::TypedArray>();
  const uintptr_t data = reinterpret_cast<uintptr_t>(array.ArrayBuffer().Data()) + array.ByteOffset();
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = (data + page - 1) & ~(page - 1);
  const uintptr_t end = (data + array.ByteLength()) & ~(page - 1);
#ifdef MADV_NOHUGEPAGE
  if (end > start && madvise(reinterpret_cast<void*>(start), end - start, MADV_NOHUGEPAGE) == 0) {
    Napi::Array range = Napi::Array::New(env, 2);
    range.Set(0u, static_cast<double>(start));
    range.Set(1u, static_cast<double>(end));
    return range;
  }
#endif
  return env.Undefined();
}

// setBlockQuantMatMulKernel(name): the kernel in use afterwards (unchanged for a name this CPU
// does not run).
Napi::Value SetBlockQuantMatMulKernel(const Napi::CallbackInfo& info) {
  if (info.Length() > 0 && info[0].IsString()) ortserve::SetBlockQuantMatMulKernel(info[0].As<Napi::String>());
  return Napi::String::New(info.Env(), ortserve::BlockQuantMatMulKernel());
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("keepSmallPages", Napi::Function::New(env, KeepSmallPages, "keepSmallPages"));
  exports.Set("loadRuntime", Napi::Function::New(env, LoadRuntime, "loadRuntime"));
  exports.Set("apiVersion", Napi::Number::New(env, ortserve::kOrtApiVersion));
  // Whether ortserve.BlockQuantMatMul runs a vector kernel here: the graph rewrite only replaces
  // MatMulNBits where it does (its scalar loop is for correctness, not speed).
  exports.Set("blockQuantMatMulAccelerated", Napi::Boolean::New(env, ortserve::BlockQuantMatMulAccelerated()));
  const std::vector<std::string> kernels = ortserve::BlockQuantMatMulKernels();
  Napi::Array names = Napi::Array::New(env, kernels.size());
  for (size_t i = 0; i < kernels.size(); i++) names.Set(static_cast<uint32_t>(i), kernels[i]);
  exports.Set("blockQuantMatMulKernels", names);
  exports.Set("setBlockQuantMatMulKernel",
              Napi::Function::New(env, SetBlockQuantMatMulKernel, "setBlockQuantMatMulKernel"));
  exports.Set("blockQuantMatMulKernel",
              Napi::Function::New(
                  env,
                  [](const Napi::CallbackInfo& info) -> Napi::Value {
                    return Napi::String::New(info.Env(), ortserve::BlockQuantMatMulKernel());
                  },
                  "blockQuantMatMulKernel"));
  exports.Set("Session", ortserve::DefineSession(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(NODE_GYP_MODULE_NAME, Init)

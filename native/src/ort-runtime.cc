// Loading ONNX Runtime (see ort-runtime.h).
#include "ort-runtime.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace ortserve {

const OrtApi* ort = nullptr;
OrtEnv* ortEnv = nullptr;
OrtMemoryInfo* cpuMemory = nullptr;

namespace {

std::string runtimeVersion;
std::mutex runtimeMutex;

// Whether `version` ("major.minor.patch", maybe with a suffix) is a release ort-api.h holds for.
bool SupportedVersion(const std::string& version) {
  int major = -1;
  int minor = -1;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major == kOrtMajor && minor >= kOrtMinMinor;
}

}  // namespace

std::string Failure(OrtStatus* status) {
  if (status == nullptr) return {};
  std::string message = ort->GetErrorMessage(status);
  if (message.empty()) message = "ONNX Runtime call failed";
  ort->ReleaseStatus(status);
  return message;
}

std::string LoadRuntime(const std::string& path, std::string* version) {
  std::lock_guard<std::mutex> lock(runtimeMutex);
  if (ort != nullptr) {
    *version = runtimeVersion;
    return {};
  }
  // Never closed: the runtime's thread pools live as long as the process.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return "cannot load " + path + ": " + (why ? why : "unknown error");
  }
  auto getApiBase = reinterpret_cast<OrtGetApiBaseFunction>(dlsym(library, "OrtGetApiBase"));
  const OrtApiBase* base = getApiBase != nullptr ? getApiBase() : nullptr;
  if (base == nullptr || base->GetVersionString == nullptr || base->GetApi == nullptr)
    return path + " has no OrtGetApiBase";
  const char* reported = base->GetVersionString();
  const std::string found = reported != nullptr ? reported : "";
  // The table layout of ort-api.h holds for ONNX Runtime 1.x from the version that added its
  // last slot: anything else is refused here rather than called through a wrong table.
  if (!SupportedVersion(found))
    return path + " is ONNX Runtime '" + found + "'; the native session supports " + std::to_string(kOrtMajor) +
           "." + std::to_string(kOrtMinMinor) + " and later " + std::to_string(kOrtMajor) + ".x";
  const OrtApi* api = base->GetApi(kOrtApiVersion);
  if (api == nullptr)
    return "ONNX Runtime " + found + " does not serve C API version " + std::to_string(kOrtApiVersion);
  ort = api;
  // ONNX Runtime keeps one environment per process: if onnxruntime-node made it first, this
  // takes a reference to it (its logging level stays).
  std::string error = Failure(ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ortserve", &ortEnv));
  if (error.empty()) error = Failure(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &cpuMemory));
  if (!error.empty()) {
    ort = nullptr;
    return error;
  }
  runtimeVersion = found;
  *version = found;
  return {};
}

}  // namespace ortserve

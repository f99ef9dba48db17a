// A decoder session over ONNX Runtime's C API with IoBinding, for
// src/core/runner/native-session.ts. Inputs are bound over the callers' typed
// arrays, and so are the outputs the caller pre-allocates (the KV cache's
// present tensors are the very memory of its past tensors, so
// GroupQueryAttention updates the cache in place): nothing is copied in or
// out. onnxruntime-node's own run copies every fetched output into a fresh
// ArrayBuffer, which for a batch's KV cache is most of a decode step.
//
// libonnxruntime is not linked: loadRuntime() dlopens the library that
// onnxruntime-node ships (the same file its binding loads, so one runtime and
// one OrtEnv serve both), checks that it is an ONNX Runtime 1.x the
// declarations of ort-api.h hold for, and asks it for that C API version
// (the API is append-only, so a newer library serves it).
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <napi.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "attention.h"
#include "block-quant-matmul.h"
#include "projection-epilogue.h"
#include "ort-api.h"

namespace {

const OrtApi* ort = nullptr;
OrtEnv* ortEnv = nullptr;
OrtMemoryInfo* cpuMemory = nullptr;
std::string runtimeVersion;
std::mutex runtimeMutex;

// The message of a failed call (and frees its status); empty on success.
// "a;b;;c" -> {"a", "b", "c"}.
std::vector<std::string> SplitEntries(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string failure(OrtStatus* status) {
  if (status == nullptr) return {};
  std::string message = ort->GetErrorMessage(status);
  if (message.empty()) message = "ONNX Runtime call failed";
  ort->ReleaseStatus(status);
  return message;
}

// Bytes of one element of an ONNX tensor type this session binds, 0 for the rest.
size_t elementBytes(int type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
      return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
      return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
      return 8;
    default:
      return 0;
  }
}

// Whether `version` ("major.minor.patch", maybe with a suffix) is a release ort-api.h holds for.
bool supportedVersion(const std::string& version) {
  int major = -1;
  int minor = -1;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major == ortserve::kOrtMajor && minor >= ortserve::kOrtMinMinor;
}

// loadRuntime(path): dlopens libonnxruntime and returns its version string. Idempotent.
Napi::Value LoadRuntime(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "loadRuntime(path): path must be a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::lock_guard<std::mutex> lock(runtimeMutex);
  if (ort != nullptr) return Napi::String::New(env, runtimeVersion);
  std::string path = info[0].As<Napi::String>().Utf8Value();
  // Never closed: the runtime's thread pools live as long as the process.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    Napi::Error::New(env, std::string("cannot load ") + path + ": " + (why ? why : "unknown error"))
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto getApiBase = reinterpret_cast<OrtGetApiBaseFunction>(dlsym(library, "OrtGetApiBase"));
  const OrtApiBase* base = getApiBase != nullptr ? getApiBase() : nullptr;
  if (base == nullptr || base->GetVersionString == nullptr || base->GetApi == nullptr) {
    Napi::Error::New(env, path + " has no OrtGetApiBase").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const char* reported = base->GetVersionString();
  std::string version = reported != nullptr ? reported : "";
  // The table layout of ort-api.h holds for ONNX Runtime 1.x from the version that added its
  // last slot: anything else is refused here rather than called through a wrong table.
  if (!supportedVersion(version)) {
    Napi::Error::New(env, path + " is ONNX Runtime '" + version + "'; the native session supports " +
                              std::to_string(ortserve::kOrtMajor) + "." + std::to_string(ortserve::kOrtMinMinor) +
                              " and later " + std::to_string(ortserve::kOrtMajor) + ".x")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const OrtApi* api = base->GetApi(ortserve::kOrtApiVersion);
  if (api == nullptr) {
    Napi::Error::New(env, "ONNX Runtime " + version + " does not serve C API version " +
                              std::to_string(ortserve::kOrtApiVersion))
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  ort = api;
  // ONNX Runtime keeps one environment per process: if onnxruntime-node made it first, this
  // takes a reference to it (its logging level stays).
  std::string error = failure(ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ortserve", &ortEnv));
  if (error.empty())
    error = failure(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &cpuMemory));
  if (!error.empty()) {
    ort = nullptr;
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  runtimeVersion = version;
  return Napi::String::New(env, runtimeVersion);
}

// ---- ortserve.CachedAttention: the custom operator over attention.cc ----
// Inputs: qkv, past key, past value, seqlens_k, cos cache, sin cache, position ids (the
// GroupQueryAttention inputs src/core/runner/attention-graph.ts keeps), and token_rows (int64,
// the cache row of each new token; empty: the batch form); outputs: the
// attention and the present key and value, which IoBinding binds over the past buffers (when they
// are not, the past is copied into them first).

struct AttentionKernel {
  int heads = 0;
  int kvHeads = 0;
  float scale = 0;
  // Positions a token sees, its own included (local_window_size); 0: all.
  int window = 0;
  ortserve::CacheElement element = ortserve::CacheElement::kFloat;
};

// The operator ONNX Runtime sees, and which cache precision it runs: CachedAttention keeps the
// cache in float, CachedAttentionHalf in IEEE binary16 (ONNX float16), CachedAttentionInt8 in
// bytes with a scale per position (ONNX int8, headDim + 4 per position).
struct AttentionOp {
  OrtCustomOp op;
  const char* name;
  ortserve::CacheElement element;
};

static_assert(offsetof(AttentionOp, op) == 0, "ONNX Runtime hands the OrtCustomOp back: it must start the struct");

const AttentionOp& OpOf(const OrtCustomOp* op) { return *reinterpret_cast<const AttentionOp*>(op); }

constexpr size_t kAttentionInputs = 8;
constexpr size_t kTokenRowsInput = 7;

const char* ORT_API_CALL AttentionName(const OrtCustomOp* op) { return OpOf(op).name; }
const char* ORT_API_CALL AttentionProvider(const OrtCustomOp*) { return "CPUExecutionProvider"; }
ONNXTensorElementDataType CacheType(const OrtCustomOp* op) {
  switch (OpOf(op).element) {
    case ortserve::CacheElement::kHalf:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case ortserve::CacheElement::kInt8:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
    default:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
}
ONNXTensorElementDataType ORT_API_CALL AttentionInputType(const OrtCustomOp* op, size_t index) {
  if (index == 1 || index == 2) return CacheType(op);
  if (index == 3) return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  if (index == 6 || index == kTokenRowsInput) return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}
size_t ORT_API_CALL AttentionInputCount(const OrtCustomOp*) { return kAttentionInputs; }
ONNXTensorElementDataType ORT_API_CALL AttentionOutputType(const OrtCustomOp* op, size_t index) {
  return index == 0 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : CacheType(op);
}
size_t ORT_API_CALL AttentionOutputCount(const OrtCustomOp*) { return 3; }
OrtCustomOpInputOutputCharacteristic ORT_API_CALL AttentionRequired(const OrtCustomOp*, size_t) {
  return INPUT_OUTPUT_REQUIRED;
}
OrtMemType ORT_API_CALL AttentionInputMemory(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
int ORT_API_CALL AttentionNoVariadic(const OrtCustomOp*) { return 0; }
void ORT_API_CALL AttentionDestroy(void* kernel) { delete static_cast<AttentionKernel*>(kernel); }

OrtStatus* ORT_API_CALL AttentionCreate(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info,
                                        void** out) {
  int64_t heads = 0;
  int64_t kvHeads = 0;
  float scale = 0;
  OrtStatus* status = api->KernelInfoGetAttribute_int64(info, "num_heads", &heads);
  if (status == nullptr) status = api->KernelInfoGetAttribute_int64(info, "kv_num_heads", &kvHeads);
  if (status != nullptr) return status;
  // scale is optional (GroupQueryAttention's default is 1/sqrt(head size), applied per run).
  if (OrtStatus* noScale = api->KernelInfoGetAttribute_float(info, "scale", &scale)) {
    api->ReleaseStatus(noScale);
    scale = 0;
  }
  // local_window_size is optional too (GroupQueryAttention's -1: no sliding window).
  int64_t localWindow = -1;
  if (OrtStatus* noWindow = api->KernelInfoGetAttribute_int64(info, "local_window_size", &localWindow)) {
    api->ReleaseStatus(noWindow);
    localWindow = -1;
  }
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return api->CreateStatus(ORT_RUNTIME_EXCEPTION, "CachedAttention: num_heads must be a positive multiple of kv_num_heads");
  if (localWindow >= INT32_MAX)
    return api->CreateStatus(ORT_RUNTIME_EXCEPTION, "CachedAttention: local_window_size is too large");
  auto* kernel = new AttentionKernel();
  // ONNX Runtime's GroupQueryAttention (1.30) lets a token see local_window_size positions, its
  // own included; 0 or less: no window.
  kernel->window = localWindow > 0 ? static_cast<int>(localWindow) : 0;
  kernel->heads = static_cast<int>(heads);
  kernel->kvHeads = static_cast<int>(kvHeads);
  kernel->scale = scale;
  kernel->element = OpOf(op).element;
  *out = kernel;
  return nullptr;
}

struct TensorView {
  void* data = nullptr;
  std::vector<int64_t> dims;
};

std::string Describe(const OrtValue* value, TensorView* view) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  std::string error = failure(ort->GetTensorTypeAndShape(value, &info));
  size_t rank = 0;
  if (error.empty()) error = failure(ort->GetDimensionsCount(info, &rank));
  if (error.empty()) {
    view->dims.resize(rank);
    error = failure(ort->GetDimensions(info, view->dims.data(), rank));
  }
  if (info != nullptr) ort->ReleaseTensorTypeAndShapeInfo(info);
  if (error.empty()) error = failure(ort->GetTensorMutableData(const_cast<OrtValue*>(value), &view->data));
  return error;
}

struct ParallelCall {
  const std::function<void(size_t)>* fn;
};

void RunItem(void* data, size_t item) { (*static_cast<ParallelCall*>(data)->fn)(item); }

// ONNX Runtime's intra-op pool for a kernel's work items (inline when it cannot take them).
ortserve::ParallelFor ParallelForOf(OrtKernelContext* context) {
  return [context](size_t count, const std::function<void(size_t)>& fn) {
    ParallelCall call{&fn};
    OrtStatus* status = ort->KernelContext_ParallelFor(context, RunItem, count, 0, &call);
    if (status != nullptr) {
      ort->ReleaseStatus(status);
      for (size_t i = 0; i < count; i++) fn(i);
    }
  };
}

std::string ComputeAttention(const AttentionKernel& kernel, OrtKernelContext* context) {
  TensorView in[kAttentionInputs];
  for (size_t i = 0; i < kAttentionInputs; i++) {
    const OrtValue* value = nullptr;
    std::string error = failure(ort->KernelContext_GetInput(context, i, &value));
    if (error.empty()) error = Describe(value, &in[i]);
    if (!error.empty()) return error;
  }
  const TensorView& tokenRows = in[kTokenRowsInput];
  if (tokenRows.dims.size() != 1) return "token_rows must be one-dimensional";
  // Ragged tokens: qkv [1, tokens, ...], their cache rows in token_rows.
  const int64_t raggedTokens = tokenRows.dims[0];
  const TensorView& qkv = in[0];
  const TensorView& pastKey = in[1];
  const TensorView& pastValue = in[2];
  if (qkv.dims.size() != 3 || pastKey.dims.size() != 4 || pastValue.dims != pastKey.dims || in[4].dims.size() != 2 ||
      in[5].dims != in[4].dims || in[6].dims.size() != 2)
    return "unexpected input ranks";
  if (raggedTokens > 0 && (qkv.dims[0] != 1 || qkv.dims[1] != raggedTokens))
    return "with token_rows, qkv must be [1, tokens, ...]";
  ortserve::AttentionShape shape;
  shape.batch = static_cast<int>(raggedTokens > 0 ? pastKey.dims[0] : qkv.dims[0]);
  shape.sequence = static_cast<int>(qkv.dims[1]);
  shape.heads = kernel.heads;
  shape.kvHeads = kernel.kvHeads;
  // A position of the 8-bit cache holds its blocks' scales after the head's values; the head
  // size is what qkv's width says (num_heads + 2 kv_num_heads of them).
  const int64_t width = pastKey.dims[3];
  const int64_t packedHeads = kernel.heads + 2 * kernel.kvHeads;
  shape.headDim = static_cast<int>(kernel.element == ortserve::CacheElement::kInt8 ? qkv.dims[2] / packedHeads : width);
  if (ortserve::CacheRowElements(kernel.element, shape.headDim) != width)
    return "the cache's last dimension is not the head size (plus, for int8, its blocks' scales)";
  shape.capacity = static_cast<int>(pastKey.dims[2]);
  shape.rotaryPositions = in[4].dims[0];
  shape.scale = kernel.scale != 0 ? kernel.scale : 1.0f / std::sqrt(static_cast<float>(shape.headDim));
  shape.window = kernel.window;
  if (qkv.dims[2] != static_cast<int64_t>(shape.heads + 2 * shape.kvHeads) * shape.headDim ||
      pastKey.dims[0] != shape.batch || pastKey.dims[1] != shape.kvHeads || in[4].dims[1] * 2 != shape.headDim ||
      in[3].dims.size() != 1 || in[3].dims[0] != shape.batch || in[6].dims[0] != qkv.dims[0] ||
      in[6].dims[1] != shape.sequence)
    return "input shapes do not agree with num_heads, kv_num_heads and each other";

  const int64_t outDims[3] = {qkv.dims[0], shape.sequence, static_cast<int64_t>(shape.heads) * shape.headDim};
  OrtValue* outputs[3] = {nullptr, nullptr, nullptr};
  std::string error = failure(ort->KernelContext_GetOutput(context, 0, outDims, 3, &outputs[0]));
  for (size_t o = 1; o < 3 && error.empty(); o++)
    error = failure(ort->KernelContext_GetOutput(context, o, pastKey.dims.data(), 4, &outputs[o]));
  void* out[3] = {nullptr, nullptr, nullptr};
  for (size_t o = 0; o < 3 && error.empty(); o++) error = failure(ort->GetTensorMutableData(outputs[o], &out[o]));
  if (!error.empty()) return error;
  // Present bound over past (the engine's case) is updated in place; otherwise it starts as a copy.
  size_t cacheBytes = ortserve::CacheElementBytes(kernel.element);
  for (int64_t d : pastKey.dims) cacheBytes *= static_cast<size_t>(d);
  if (out[1] != pastKey.data) std::memcpy(out[1], pastKey.data, cacheBytes);
  if (out[2] != pastValue.data) std::memcpy(out[2], pastValue.data, cacheBytes);

  const ortserve::ParallelFor parallelFor = ParallelForOf(context);
  const char* problem = ortserve::CachedAttention(
      shape, static_cast<const float*>(qkv.data), out[1], out[2], kernel.element, static_cast<const int32_t*>(in[3].data), static_cast<const int64_t*>(in[6].data),
      static_cast<const float*>(in[4].data), static_cast<const float*>(in[5].data), static_cast<float*>(out[0]),
      parallelFor, raggedTokens > 0 ? static_cast<const int64_t*>(tokenRows.data) : nullptr, raggedTokens);
  return problem != nullptr ? problem : "";
}

OrtStatus* ORT_API_CALL AttentionCompute(void* kernel, OrtKernelContext* context) {
  std::string error = ComputeAttention(*static_cast<AttentionKernel*>(kernel), context);
  if (error.empty()) return nullptr;
  return ort->CreateStatus(ORT_RUNTIME_EXCEPTION, ("CachedAttention: " + error).c_str());
}

// What each operator brings: its name, types and kernel.
struct OpCallbacks {
  decltype(OrtCustomOp::GetName) name;
  decltype(OrtCustomOp::GetInputType) inputType;
  decltype(OrtCustomOp::GetInputTypeCount) inputCount;
  decltype(OrtCustomOp::GetOutputType) outputType;
  decltype(OrtCustomOp::GetOutputTypeCount) outputCount;
  decltype(OrtCustomOp::KernelDestroy) destroy;
  decltype(OrtCustomOp::CreateKernelV2) create;
  decltype(OrtCustomOp::KernelComputeV2) compute;
};

// An OrtCustomOp with what every ortserve operator shares (CPU, fixed inputs and outputs, none
// optional or variadic, default memory) and the operator's own callbacks.
OrtCustomOp CpuOp(const OpCallbacks& callbacks) {
  OrtCustomOp op{};
  op.version = ortserve::kOrtApiVersion;
  op.GetExecutionProviderType = AttentionProvider;
  op.GetInputCharacteristic = AttentionRequired;
  op.GetOutputCharacteristic = AttentionRequired;
  op.GetInputMemoryType = AttentionInputMemory;
  op.GetVariadicInputMinArity = AttentionNoVariadic;
  op.GetVariadicInputHomogeneity = AttentionNoVariadic;
  op.GetVariadicOutputMinArity = AttentionNoVariadic;
  op.GetVariadicOutputHomogeneity = AttentionNoVariadic;
  op.GetName = callbacks.name;
  op.GetInputType = callbacks.inputType;
  op.GetInputTypeCount = callbacks.inputCount;
  op.GetOutputType = callbacks.outputType;
  op.GetOutputTypeCount = callbacks.outputCount;
  op.KernelDestroy = callbacks.destroy;
  op.CreateKernelV2 = callbacks.create;
  op.KernelComputeV2 = callbacks.compute;
  return op;
}

AttentionOp MakeAttentionOp(const char* name, ortserve::CacheElement element) {
  AttentionOp def{};
  def.name = name;
  def.element = element;
  def.op = CpuOp({AttentionName, AttentionInputType, AttentionInputCount, AttentionOutputType, AttentionOutputCount, AttentionDestroy, AttentionCreate, AttentionCompute});
  return def;
}

// ---- ortserve.BlockOffsetAdd, SwiGlu, BlockOffsetSwiGlu: projection-epilogue.h ----
// Inputs: the projection (with its block sums appended when the operator takes offsets
// [..., n + blocks]) and the offsets C [blocks, n]; output [..., n], or [..., n / 2] after the
// SwiGLU. Each stands for the Split, MatMul and Add (and Split, Sigmoid, Mul, Mul) the converter
// emits (src/core/runner/epilogue-graph.ts).

struct EpilogueOp {
  OrtCustomOp op;
  const char* name;
  bool offsets;
  bool swiglu;
};

static_assert(offsetof(EpilogueOp, op) == 0, "ONNX Runtime hands the OrtCustomOp back: it must start the struct");

const EpilogueOp& EpilogueOf(const OrtCustomOp* op) { return *reinterpret_cast<const EpilogueOp*>(op); }

struct EpilogueKernel {
  bool offsets;
  bool swiglu;
};

ONNXTensorElementDataType ORT_API_CALL EpilogueType(const OrtCustomOp*, size_t) {
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}
size_t ORT_API_CALL EpilogueInputCount(const OrtCustomOp* op) { return EpilogueOf(op).offsets ? 2 : 1; }
size_t ORT_API_CALL EpilogueOutputCount(const OrtCustomOp*) { return 1; }
const char* ORT_API_CALL EpilogueName(const OrtCustomOp* op) { return EpilogueOf(op).name; }
void ORT_API_CALL EpilogueDestroy(void* kernel) { delete static_cast<EpilogueKernel*>(kernel); }
OrtStatus* ORT_API_CALL EpilogueCreate(const OrtCustomOp* op, const OrtApi*, const OrtKernelInfo*, void** out) {
  *out = new EpilogueKernel{EpilogueOf(op).offsets, EpilogueOf(op).swiglu};
  return nullptr;
}

std::string ComputeEpilogue(const EpilogueKernel& kernel, OrtKernelContext* context) {
  const size_t inputs = kernel.offsets ? 2 : 1;
  TensorView in[2];
  for (size_t i = 0; i < inputs; i++) {
    const OrtValue* value = nullptr;
    std::string error = failure(ort->KernelContext_GetInput(context, i, &value));
    if (error.empty()) error = Describe(value, &in[i]);
    if (!error.empty()) return error;
  }
  const TensorView& projection = in[0];
  if (projection.dims.empty() || (kernel.offsets && in[1].dims.size() != 2)) return "unexpected input ranks";
  const int64_t blocks = kernel.offsets ? in[1].dims[0] : 0;
  const int64_t n = kernel.offsets ? in[1].dims[1] : projection.dims.back();
  if (projection.dims.back() != n + blocks)
    return "the input's last dimension is not n + blocks of the offsets [blocks, n]";
  if (kernel.swiglu && n % 2 != 0) return "the gate/up projection's width is odd";
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < projection.dims.size(); d++) rows *= projection.dims[d];
  std::vector<int64_t> outDims = projection.dims;
  outDims.back() = kernel.swiglu ? n / 2 : n;
  OrtValue* output = nullptr;
  void* out = nullptr;
  std::string error = failure(ort->KernelContext_GetOutput(context, 0, outDims.data(), outDims.size(), &output));
  if (error.empty()) error = failure(ort->GetTensorMutableData(output, &out));
  if (!error.empty()) return error;
  ortserve::ProjectionEpilogue(static_cast<const float*>(projection.data),
                               kernel.offsets ? static_cast<const float*>(in[1].data) : nullptr, rows,
                               static_cast<int>(n), static_cast<int>(blocks), kernel.swiglu, static_cast<float*>(out),
                               ParallelForOf(context));
  return "";
}

OrtStatus* ORT_API_CALL EpilogueCompute(void* kernel, OrtKernelContext* context) {
  const auto& k = *static_cast<EpilogueKernel*>(kernel);
  std::string error = ComputeEpilogue(k, context);
  if (error.empty()) return nullptr;
  const char* name = k.offsets ? (k.swiglu ? "BlockOffsetSwiGlu: " : "BlockOffsetAdd: ") : "SwiGlu: ";
  return ort->CreateStatus(ORT_RUNTIME_EXCEPTION, (name + error).c_str());
}

EpilogueOp MakeEpilogueOp(const char* name, bool offsets, bool swiglu) {
  EpilogueOp def{};
  def.name = name;
  def.offsets = offsets;
  def.swiglu = swiglu;
  def.op = CpuOp({EpilogueName, EpilogueType, EpilogueInputCount, EpilogueType, EpilogueOutputCount, EpilogueDestroy, EpilogueCreate, EpilogueCompute});
  return def;
}

// ---- ortserve.BlockQuantMatMul[Offset][SwiGlu]: block-quant-matmul.h ----
// Inputs: x [..., k], then MatMulNBits' constant B (uint8 [rows, k / bs, bs * bits / 8]) and
// scales ([rows, k / bs]), and for the Offset forms the offsets C [k / bs, n], with bs the
// block_size attribute (32, or 16 for scales per 16 inputs; absent: 32); output [..., n]
// (n = rows, or C's width), or [..., n / 2] for the SwiGlu forms. Each stands for a MatMulNBits
// and the epilogue after it (BlockOffsetAdd, SwiGlu, BlockOffsetSwiGlu) in the converted graph
// (src/core/runner/epilogue-graph.ts); the weights are repacked once, when the session makes the
// kernel.

struct QuantMatMulOp {
  OrtCustomOp op;
  const char* name;
  bool offsets;
  bool swiglu;
};

struct QuantMatMulKernel {
  ortserve::PackedBlockQuantWeight weight;
  const char* name = nullptr;
  bool swiglu = false;
};

static_assert(offsetof(QuantMatMulOp, op) == 0, "ONNX Runtime hands the OrtCustomOp back: it must start the struct");

const QuantMatMulOp& QuantMatMulOf(const OrtCustomOp* op) { return *reinterpret_cast<const QuantMatMulOp*>(op); }

ONNXTensorElementDataType ORT_API_CALL QuantMatMulInputType(const OrtCustomOp*, size_t index) {
  return index == 1 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}
size_t ORT_API_CALL QuantMatMulInputCount(const OrtCustomOp* op) { return QuantMatMulOf(op).offsets ? 4 : 3; }
const char* ORT_API_CALL QuantMatMulName(const OrtCustomOp* op) { return QuantMatMulOf(op).name; }
void ORT_API_CALL QuantMatMulDestroy(void* kernel) { delete static_cast<QuantMatMulKernel*>(kernel); }

std::string PackQuantMatMul(const OrtApi* api, const OrtKernelInfo* info, bool offsets,
                            ortserve::PackedBlockQuantWeight* weight) {
  TensorView in[4];
  for (size_t i = 1; i < (offsets ? 4u : 3u); i++) {
    int constant = 0;
    const OrtValue* value = nullptr;
    std::string error = failure(api->KernelInfoGetConstantInput_tensor(info, i, &constant, &value));
    if (!error.empty()) return error;
    if (constant == 0 || value == nullptr) return "the weights, scales and offsets must be initializers";
    error = Describe(value, &in[i]);
    if (!error.empty()) return error;
  }
  // MatMulNBits' block_size: the inputs a scale covers (32, or 16 for GGUF's 16-input sub-blocks).
  int64_t blockSize = 32;
  if (OrtStatus* absent = api->KernelInfoGetAttribute_int64(info, "block_size", &blockSize)) {
    api->ReleaseStatus(absent);
    blockSize = 32;
  }
  if (blockSize != 16 && blockSize != 32) return "block_size must be 16 or 32";
  const TensorView& quants = in[1];
  const TensorView& scales = in[2];
  if (quants.dims.size() != 3 || (quants.dims[2] * 8 != blockSize * 4 && quants.dims[2] * 8 != blockSize * 8))
    return "the weights must be [rows, blocks, block_size * bits / 8] (4- or 8-bit blocks)";
  const int64_t rows = quants.dims[0];
  const int64_t blocks = quants.dims[1];
  if ((blocks * blockSize) % 32 != 0) return "k must be a multiple of 32";
  int64_t scaleCount = 1;
  for (int64_t d : scales.dims) scaleCount *= d;
  if (scaleCount != rows * blocks) return "the scales do not hold one per block";
  int64_t n = rows;
  if (offsets) {
    if (in[3].dims.size() != 2 || in[3].dims[0] != blocks || in[3].dims[1] > rows)
      return "the offsets must be [blocks, n] with n at most the weights' rows";
    n = in[3].dims[1];
  }
  const char* problem = weight->Pack(static_cast<const uint8_t*>(quants.data), static_cast<const float*>(scales.data),
                                     offsets ? static_cast<const float*>(in[3].data) : nullptr, static_cast<int>(n),
                                     static_cast<int>(blocks * blockSize),
                                     static_cast<int>(quants.dims[2] * 8 / blockSize), static_cast<int>(blockSize));
  return problem != nullptr ? problem : "";
}

OrtStatus* ORT_API_CALL QuantMatMulCreate(const OrtCustomOp* op, const OrtApi* api, const OrtKernelInfo* info,
                                          void** out) {
  auto* kernel = new QuantMatMulKernel();
  kernel->name = QuantMatMulOf(op).name;
  kernel->swiglu = QuantMatMulOf(op).swiglu;
  std::string error = PackQuantMatMul(api, info, QuantMatMulOf(op).offsets, &kernel->weight);
  if (error.empty() && kernel->swiglu && kernel->weight.n() % 2 != 0) error = "the gate/up projection's width is odd";
  if (error.empty()) {
    *out = kernel;
    return nullptr;
  }
  delete kernel;
  return api->CreateStatus(ORT_RUNTIME_EXCEPTION, (std::string(QuantMatMulOf(op).name) + ": " + error).c_str());
}

std::string ComputeQuantMatMul(const QuantMatMulKernel& kernel, OrtKernelContext* context) {
  const ortserve::PackedBlockQuantWeight& weight = kernel.weight;
  const OrtValue* value = nullptr;
  TensorView x;
  std::string error = failure(ort->KernelContext_GetInput(context, 0, &value));
  if (error.empty()) error = Describe(value, &x);
  if (!error.empty()) return error;
  if (x.dims.empty() || x.dims.back() != weight.k()) return "the input's last dimension is not the weights' k";
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < x.dims.size(); d++) rows *= x.dims[d];
  std::vector<int64_t> outDims = x.dims;
  outDims.back() = kernel.swiglu ? weight.n() / 2 : weight.n();
  OrtValue* output = nullptr;
  void* out = nullptr;
  error = failure(ort->KernelContext_GetOutput(context, 0, outDims.data(), outDims.size(), &output));
  if (error.empty()) error = failure(ort->GetTensorMutableData(output, &out));
  if (!error.empty()) return error;
  ortserve::BlockQuantMatMul(weight, static_cast<const float*>(x.data), rows, kernel.swiglu, static_cast<float*>(out),
                             ParallelForOf(context));
  return "";
}

OrtStatus* ORT_API_CALL QuantMatMulCompute(void* kernel, OrtKernelContext* context) {
  const auto& k = *static_cast<QuantMatMulKernel*>(kernel);
  std::string error = ComputeQuantMatMul(k, context);
  if (error.empty()) return nullptr;
  return ort->CreateStatus(ORT_RUNTIME_EXCEPTION, (std::string(k.name) + ": " + error).c_str());
}

QuantMatMulOp MakeQuantMatMulOp(const char* name, bool offsets, bool swiglu) {
  QuantMatMulOp def{};
  def.name = name;
  def.offsets = offsets;
  def.swiglu = swiglu;
  def.op = CpuOp({QuantMatMulName, QuantMatMulInputType, QuantMatMulInputCount, EpilogueType, EpilogueOutputCount, QuantMatMulDestroy, QuantMatMulCreate, QuantMatMulCompute});
  return def;
}

const QuantMatMulOp gQuantMatMulOps[] = {MakeQuantMatMulOp("BlockQuantMatMul", false, false),
                                         MakeQuantMatMulOp("BlockQuantMatMulOffset", true, false),
                                         MakeQuantMatMulOp("BlockQuantMatMulSwiGlu", false, true),
                                         MakeQuantMatMulOp("BlockQuantMatMulOffsetSwiGlu", true, true)};

const EpilogueOp gEpilogueOps[] = {MakeEpilogueOp("BlockOffsetAdd", true, false),
                                   MakeEpilogueOp("SwiGlu", false, true),
                                   MakeEpilogueOp("BlockOffsetSwiGlu", true, true)};

const AttentionOp gAttentionOps[] = {MakeAttentionOp("CachedAttention", ortserve::CacheElement::kFloat),
                                     MakeAttentionOp("CachedAttentionHalf", ortserve::CacheElement::kHalf),
                                     MakeAttentionOp("CachedAttentionInt8", ortserve::CacheElement::kInt8)};

// The "ortserve" operator domain, made once and kept for the process (sessions refer to it).
OrtCustomOpDomain* attentionDomain = nullptr;

std::string AddAttentionDomain(OrtSessionOptions* options) {
  std::lock_guard<std::mutex> lock(runtimeMutex);
  if (attentionDomain == nullptr) {
    OrtCustomOpDomain* domain = nullptr;
    std::string error = failure(ort->CreateCustomOpDomain("ortserve", &domain));
    for (const AttentionOp& def : gAttentionOps)
      if (error.empty()) error = failure(ort->CustomOpDomain_Add(domain, &def.op));
    for (const EpilogueOp& def : gEpilogueOps)
      if (error.empty()) error = failure(ort->CustomOpDomain_Add(domain, &def.op));
    for (const QuantMatMulOp& def : gQuantMatMulOps)
      if (error.empty()) error = failure(ort->CustomOpDomain_Add(domain, &def.op));
    if (!error.empty()) return error;
    attentionDomain = domain;
  }
  return failure(ort->AddCustomOpDomain(options, attentionDomain));
}

struct ValueInfo {
  std::string name;
  bool isTensor = false;
  int type = 0;
  std::vector<int64_t> shape;
  std::vector<std::string> symbolic;
};

class Session;

// One run: the binding and the values bound to it. Everything JavaScript owns that the run
// reads or writes is referenced until the run settles.
class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Env env, Session* session, Napi::Object self);
  ~RunWorker() override;

  Napi::Promise Promise() { return deferred_.Promise(); }
  // Binds feeds and fetches; false (and a JavaScript exception) when an argument is wrong.
  // With `kept`, into the session's kept binding (see Session::Run), on top of what it holds.
  bool Bind(Napi::Array inputs, Napi::Array outputs, OrtIoBinding* kept);

  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& error) override;

 private:
  bool Fail(const std::string& message);
  // The tensor over a typed array of `type` and `dims`, kept alive by the run.
  OrtValue* Wrap(Napi::Value data, int type, Napi::Value dims, const std::string& name);
  void Done();

  Session* session_;
  Napi::ObjectReference self_;
  Napi::Promise::Deferred deferred_;
  OrtIoBinding* binding_ = nullptr;
  // The binding is the session's kept one: not released here, and nothing is fetched back.
  bool kept_ = false;
  std::vector<OrtValue*> values_;
  // Name of each value in values_ ("in:" or "out:" + the value's name).
  std::vector<std::string> valueNames_;
  std::vector<Napi::ObjectReference> arrays_;
  std::vector<bool> onDevice_;
  OrtValue** results_ = nullptr;
  size_t resultCount_ = 0;
};

class Session : public Napi::ObjectWrap<Session> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Session",
                       {InstanceAccessor<&Session::InputMetadata>("inputMetadata"),
                        InstanceAccessor<&Session::OutputMetadata>("outputMetadata"),
                        InstanceAccessor<&Session::PackedWeightBytes>("packedWeightBytes"),
                        InstanceMethod<&Session::Run>("run"), InstanceMethod<&Session::Release>("release")});
  }

  // new Session(modelPath, intraOpThreads, interOpThreads, cachedAttention)
  explicit Session(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Session>(info) {
    Napi::Env env = info.Env();
    if (ort == nullptr) {
      Napi::Error::New(env, "loadRuntime() has not loaded ONNX Runtime").ThrowAsJavaScriptException();
      return;
    }
    if (info.Length() < 3 || !info[0].IsString() || !info[1].IsNumber() || !info[2].IsNumber()) {
      Napi::TypeError::New(env, "Session(modelPath, intraOpThreads, interOpThreads)").ThrowAsJavaScriptException();
      return;
    }
    std::string path = info[0].As<Napi::String>().Utf8Value();
    int intra = info[1].As<Napi::Number>().Int32Value();
    int inter = info[2].As<Napi::Number>().Int32Value();
    // The graph uses ortserve.CachedAttention (src/core/runner/attention-graph.ts).
    bool cachedAttention = info.Length() > 3 && info[3].ToBoolean().Value();
    // The options onnxruntime-node is given by createDecoderSession (src/core/runner/ort-session.ts);
    // the CPU execution provider is the default.
    OrtSessionOptions* options = nullptr;
    std::string error = failure(ort->CreateSessionOptions(&options));
    if (error.empty()) error = failure(ort->SetIntraOpNumThreads(options, intra));
    if (error.empty()) error = failure(ort->SetInterOpNumThreads(options, inter));
    if (error.empty()) error = failure(ort->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL));
    if (error.empty()) error = failure(ort->SetSessionExecutionMode(options, ORT_SEQUENTIAL));
    // The intra-op threads stop spinning when a run returns, not some time after: the engine's
    // JavaScript between two steps (sampling, the next step's inputs) would otherwise share the
    // two cores with a spinning thread, and lose a scheduler time slice (3-6 ms) on ~30% of the
    // steps. The threads still spin between the operators of a run.
    if (error.empty()) error = failure(ort->AddSessionConfigEntry(options, "session.force_spinning_stop", "1"));
    if (error.empty() && cachedAttention) error = AddAttentionDomain(options);
    // A profiling aid, not a setting: ORTSERVE_ORT_PROFILE=<path prefix> traces every node.
    const char* profile = getenv("ORTSERVE_ORT_PROFILE");
    if (error.empty() && profile != nullptr && profile[0] != '\0') error = failure(ort->EnableProfiling(options, profile));
    // A measuring aid, not a setting: ORTSERVE_ORT_CONFIG="key=value;key=value" adds session config
    // entries (the thread pool's spinning and partitioning keys are what it was made for).
    const char* config = getenv("ORTSERVE_ORT_CONFIG");
    for (const std::string& entry : SplitEntries(config == nullptr ? "" : config)) {
      const size_t eq = entry.find('=');
      if (!error.empty()) break;
      if (eq == std::string::npos) error = "ORTSERVE_ORT_CONFIG: expected key=value, got " + entry;
      else error = failure(ort->AddSessionConfigEntry(options, entry.substr(0, eq).c_str(), entry.substr(eq + 1).c_str()));
    }
    // A measuring aid, not a setting: ORTSERVE_ORT_MEMORY="no-pattern;no-arena" turns off ONNX
    // Runtime's per-input-shape memory patterns and its CPU arena (the soak's memory looks).
    const char* memory = getenv("ORTSERVE_ORT_MEMORY");
    for (const std::string& entry : SplitEntries(memory == nullptr ? "" : memory)) {
      if (!error.empty()) break;
      if (entry == "no-pattern") error = failure(ort->DisableMemPattern(options));
      else if (entry == "no-arena") error = failure(ort->DisableCpuMemArena(options));
      else error = "ORTSERVE_ORT_MEMORY: expected no-pattern or no-arena, got " + entry;
    }
    const size_t packedBefore = ortserve::BytesPackedOnThisThread();
    if (error.empty()) error = failure(ort->CreateSession(ortEnv, path.c_str(), options, &session_));
    packedWeightBytes_ = ortserve::BytesPackedOnThisThread() - packedBefore;
    ort->ReleaseSessionOptions(options);
    if (error.empty()) error = ReadMetadata();
    if (!error.empty()) {
      ReleaseSession();
      Napi::Error::New(env, error).ThrowAsJavaScriptException();
    }
  }

  ~Session() override { ReleaseSession(); }

  OrtSession* session() const { return session_; }
  // A run holds the session until it settles; release() waits for the last one.
  void Enter() { running_++; }
  void Leave() {
    if (--running_ == 0 && releasing_) ReleaseSession();
  }

  int OutputIndex(const std::string& name) const {
    for (size_t i = 0; i < outputs_.size(); i++)
      if (outputs_[i].name == name) return static_cast<int>(i);
    return -1;
  }
  int InputIndex(const std::string& name) const {
    for (size_t i = 0; i < inputs_.size(); i++)
      if (inputs_[i].name == name) return static_cast<int>(i);
    return -1;
  }

  // A value now bound under `name` in the kept binding; the one it replaces is released.
  void Hold(const std::string& name, OrtValue* value) {
    OrtValue*& slot = held_[name];
    if (slot != nullptr) ort->ReleaseValue(slot);
    slot = value;
  }

  void ClearKept() {
    if (kept_ != nullptr) {
      ort->ClearBoundInputs(kept_);
      ort->ClearBoundOutputs(kept_);
    }
    for (auto& [name, value] : held_) ort->ReleaseValue(value);
    held_.clear();
  }

 private:
  std::string ReadMetadata() {
    OrtAllocator* allocator = nullptr;
    std::string error = failure(ort->GetAllocatorWithDefaultOptions(&allocator));
    for (int io = 0; io < 2 && error.empty(); io++) {
      size_t count = 0;
      error = failure(io == 0 ? ort->SessionGetInputCount(session_, &count)
                              : ort->SessionGetOutputCount(session_, &count));
      for (size_t i = 0; i < count && error.empty(); i++) {
        ValueInfo value;
        char* name = nullptr;
        error = failure(io == 0 ? ort->SessionGetInputName(session_, i, allocator, &name)
                                : ort->SessionGetOutputName(session_, i, allocator, &name));
        if (!error.empty()) break;
        value.name = name;
        error = failure(ort->AllocatorFree(allocator, name));
        OrtTypeInfo* typeInfo = nullptr;
        if (error.empty())
          error = failure(io == 0 ? ort->SessionGetInputTypeInfo(session_, i, &typeInfo)
                                  : ort->SessionGetOutputTypeInfo(session_, i, &typeInfo));
        if (!error.empty()) break;
        error = DescribeType(typeInfo, &value);
        ort->ReleaseTypeInfo(typeInfo);
        (io == 0 ? inputs_ : outputs_).push_back(std::move(value));
      }
    }
    return error;
  }

  static std::string DescribeType(const OrtTypeInfo* typeInfo, ValueInfo* value) {
    ONNXType kind = ONNX_TYPE_UNKNOWN;
    std::string error = failure(ort->GetOnnxTypeFromTypeInfo(typeInfo, &kind));
    if (!error.empty() || kind != ONNX_TYPE_TENSOR) return error;
    value->isTensor = true;
    const OrtTensorTypeAndShapeInfo* tensor = nullptr;  // owned by typeInfo
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    size_t rank = 0;
    error = failure(ort->CastTypeInfoToTensorInfo(typeInfo, &tensor));
    if (error.empty()) error = failure(ort->GetTensorElementType(tensor, &type));
    if (error.empty()) error = failure(ort->GetDimensionsCount(tensor, &rank));
    if (!error.empty()) return error;
    value->type = type;
    value->shape.resize(rank);
    std::vector<const char*> symbolic(rank, nullptr);
    error = failure(ort->GetDimensions(tensor, value->shape.data(), rank));
    if (error.empty()) error = failure(ort->GetSymbolicDimensions(tensor, symbolic.data(), rank));
    for (const char* s : symbolic) value->symbolic.emplace_back(s != nullptr ? s : "");
    return error;
  }

  static Napi::Array Describe(Napi::Env env, const std::vector<ValueInfo>& values) {
    Napi::Array out = Napi::Array::New(env, values.size());
    for (size_t i = 0; i < values.size(); i++) {
      const ValueInfo& v = values[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", v.name);
      o.Set("isTensor", v.isTensor);
      o.Set("type", v.type);
      Napi::Array shape = Napi::Array::New(env, v.shape.size());
      Napi::Array symbolic = Napi::Array::New(env, v.symbolic.size());
      for (size_t d = 0; d < v.shape.size(); d++) shape.Set(d, static_cast<double>(v.shape[d]));
      for (size_t d = 0; d < v.symbolic.size(); d++) symbolic.Set(d, v.symbolic[d]);
      o.Set("shape", shape);
      o.Set("symbolicDimensions", symbolic);
      out.Set(i, o);
    }
    return out;
  }

  Napi::Value InputMetadata(const Napi::CallbackInfo& info) { return Describe(info.Env(), inputs_); }
  Napi::Value OutputMetadata(const Napi::CallbackInfo& info) { return Describe(info.Env(), outputs_); }
  Napi::Value PackedWeightBytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(packedWeightBytes_));
  }

  // run(inputs: {name, type, data, dims}[], outputs: {name, type?, data?, dims?}[]): Promise<outputs>
  // An output with data is written in place and settles as undefined; one without data is
  // allocated by ONNX Runtime and settles as {type, dims, data} (a fresh copy).
  //
  // A third argument selects the kept binding, which lives across runs so that a decode step
  // binds only what changed (the KV cache's 2 x layers tensors stay bound step after step):
  //   0 (default)  the run's own binding of everything given;
  //   1            the kept binding, emptied, then everything given;
  //   2            the kept binding as it is, with what is given bound over it by name.
  // A kept run takes pre-allocated outputs only and settles as undefined for each. Values stay
  // bound after their run: the caller must give a new tensor for a name before a value it bound
  // there is freed or moved (ortserve's NativeDecoderSession compares tensor identities).
  Napi::Value Run(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (session_ == nullptr) {
      Napi::Error::New(env, "the session has been released").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    if (info.Length() < 2 || !info[0].IsArray() || !info[1].IsArray()) {
      Napi::TypeError::New(env, "run(inputs, outputs): two arrays").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    int mode = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().Int32Value() : 0;
    if (mode < 0 || mode > 2) {
      Napi::TypeError::New(env, "run: the binding mode is 0, 1 or 2").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    OrtIoBinding* kept = nullptr;
    if (mode != 0) {
      // The kept binding is changed before the run starts: no other run may be using it.
      if (running_ > 0) {
        Napi::Error::New(env, "run: the kept binding is in use by a run in flight").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      if (kept_ == nullptr) {
        std::string error = failure(ort->CreateIoBinding(session_, &kept_));
        if (!error.empty()) {
          Napi::Error::New(env, error).ThrowAsJavaScriptException();
          return env.Undefined();
        }
      }
      if (mode == 1) ClearKept();
      kept = kept_;
    }
    auto* worker = new RunWorker(env, this, Value());
    if (!worker->Bind(info[0].As<Napi::Array>(), info[1].As<Napi::Array>(), kept)) {
      delete worker;
      // What was half bound over the kept binding is not known to the caller: start it over.
      if (kept != nullptr) ClearKept();
      return env.Undefined();
    }
    Napi::Promise promise = worker->Promise();
    worker->Queue();
    return promise;
  }

  Napi::Value Release(const Napi::CallbackInfo& info) {
    releasing_ = true;
    if (running_ == 0) ReleaseSession();
    return info.Env().Undefined();
  }

  void ReleaseSession() {
    ClearKept();
    if (kept_ != nullptr) ort->ReleaseIoBinding(kept_);
    kept_ = nullptr;
    if (session_ != nullptr) ort->ReleaseSession(session_);
    session_ = nullptr;
  }

  OrtSession* session_ = nullptr;
  // Bytes of BlockQuantMatMul weights its kernels packed: what a decode step reads of them.
  size_t packedWeightBytes_ = 0;
  // The binding kept across runs (mode 1 and 2 of run()), and the values bound in it by name.
  OrtIoBinding* kept_ = nullptr;
  std::unordered_map<std::string, OrtValue*> held_;
  std::vector<ValueInfo> inputs_;
  std::vector<ValueInfo> outputs_;
  int running_ = 0;
  bool releasing_ = false;
};

RunWorker::RunWorker(Napi::Env env, Session* session, Napi::Object self)
    : Napi::AsyncWorker(env, "ortserve.run"),
      session_(session),
      self_(Napi::Persistent(self)),
      deferred_(Napi::Promise::Deferred::New(env)) {
  session_->Enter();
}

RunWorker::~RunWorker() {
  for (size_t i = 0; i < resultCount_; i++) ort->ReleaseValue(results_[i]);
  if (results_ != nullptr) {
    OrtAllocator* allocator = nullptr;
    if (failure(ort->GetAllocatorWithDefaultOptions(&allocator)).empty())
      failure(ort->AllocatorFree(allocator, results_));
  }
  for (OrtValue* v : values_) ort->ReleaseValue(v);
  if (binding_ != nullptr && !kept_) ort->ReleaseIoBinding(binding_);
  session_->Leave();
}

bool RunWorker::Fail(const std::string& message) {
  Napi::Error::New(Env(), message).ThrowAsJavaScriptException();
  return false;
}

OrtValue* RunWorker::Wrap(Napi::Value data, int type, Napi::Value dimsValue, const std::string& name) {
  size_t bytesPer = elementBytes(type);
  if (bytesPer == 0) return Fail(name + ": unsupported tensor type " + std::to_string(type)), nullptr;
  if (!data.IsTypedArray() || !dimsValue.IsArray())
    return Fail(name + ": data must be a typed array and dims an array"), nullptr;
  Napi::TypedArray array = data.As<Napi::TypedArray>();
  Napi::Array dimsArray = dimsValue.As<Napi::Array>();
  std::vector<int64_t> dims(dimsArray.Length());
  size_t count = 1;
  for (uint32_t d = 0; d < dimsArray.Length(); d++) {
    Napi::Value v = dimsArray.Get(d);
    double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
    if (!(x >= 0) || x != static_cast<double>(static_cast<int64_t>(x)))
      return Fail(name + ": bad dimension"), nullptr;
    dims[d] = static_cast<int64_t>(x);
    count *= static_cast<size_t>(dims[d]);
  }
  // The view's bytes must be exactly the tensor's: ONNX Runtime reads and writes all of them.
  size_t bytes = array.ByteLength();
  if (bytes != count * bytesPer || array.ElementSize() != bytesPer)
    return Fail(name + ": " + std::to_string(bytes) + " bytes for " + std::to_string(count) +
                " elements of type " + std::to_string(type)),
           nullptr;
  // Materializes the ArrayBuffer (an on-heap typed array moves off the heap for good), so the
  // pointer stays valid while the reference below keeps the array alive.
  napi_typedarray_type kind;
  size_t length = 0;
  void* pointer = nullptr;
  napi_value buffer;
  size_t offset = 0;
  if (napi_get_typedarray_info(Env(), array, &kind, &length, &pointer, &buffer, &offset) != napi_ok)
    return Fail(name + ": cannot read the typed array"), nullptr;
  static char empty[8];
  if (pointer == nullptr) pointer = empty;  // a zero-element tensor still needs an address
  OrtValue* value = nullptr;
  std::string error = failure(ort->CreateTensorWithDataAsOrtValue(
      cpuMemory, pointer, bytes, dims.data(), dims.size(), static_cast<ONNXTensorElementDataType>(type), &value));
  if (!error.empty()) return Fail(name + ": " + error), nullptr;
  values_.push_back(value);
  valueNames_.push_back(name);
  arrays_.push_back(Napi::Persistent(array.As<Napi::Object>()));
  return value;
}

bool RunWorker::Bind(Napi::Array inputs, Napi::Array outputs, OrtIoBinding* kept) {
  std::string error;
  if (kept != nullptr) {
    binding_ = kept;
    kept_ = true;
  } else {
    error = failure(ort->CreateIoBinding(session_->session(), &binding_));
    if (!error.empty()) return Fail(error);
  }
  for (uint32_t i = 0; i < inputs.Length(); i++) {
    Napi::Value item = inputs.Get(i);
    if (!item.IsObject()) return Fail("run: inputs must be objects");
    Napi::Object feed = item.As<Napi::Object>();
    Napi::Value nameValue = feed.Get("name");
    Napi::Value typeValue = feed.Get("type");
    if (!nameValue.IsString() || !typeValue.IsNumber()) return Fail("run: an input needs a name and a type");
    std::string name = nameValue.As<Napi::String>().Utf8Value();
    if (session_->InputIndex(name) < 0) return Fail("run: the model has no input " + name);
    OrtValue* value = Wrap(feed.Get("data"), typeValue.As<Napi::Number>().Int32Value(), feed.Get("dims"), name);
    if (value == nullptr) return false;
    valueNames_.back() = "in:" + name;
    error = failure(ort->BindInput(binding_, name.c_str(), value));
    if (!error.empty()) return Fail(name + ": " + error);
  }
  for (uint32_t i = 0; i < outputs.Length(); i++) {
    Napi::Value item = outputs.Get(i);
    if (!item.IsObject()) return Fail("run: outputs must be objects");
    Napi::Object fetch = item.As<Napi::Object>();
    Napi::Value nameValue = fetch.Get("name");
    if (!nameValue.IsString()) return Fail("run: an output needs a name");
    std::string name = nameValue.As<Napi::String>().Utf8Value();
    if (session_->OutputIndex(name) < 0) return Fail("run: the model has no output " + name);
    Napi::Value data = fetch.Get("data");
    if (kept_ && (data.IsUndefined() || data.IsNull()))
      return Fail("run: a kept binding takes pre-allocated outputs only (" + name + ")");
    if (data.IsUndefined() || data.IsNull()) {
      error = failure(ort->BindOutputToDevice(binding_, name.c_str(), cpuMemory));
      onDevice_.push_back(true);
    } else {
      Napi::Value typeValue = fetch.Get("type");
      if (!typeValue.IsNumber()) return Fail("run: a pre-allocated output needs a type");
      OrtValue* value = Wrap(data, typeValue.As<Napi::Number>().Int32Value(), fetch.Get("dims"), name);
      if (value == nullptr) return false;
      valueNames_.back() = "out:" + name;
      error = failure(ort->BindOutput(binding_, name.c_str(), value));
      onDevice_.push_back(false);
    }
    if (!error.empty()) return Fail(name + ": " + error);
  }
  if (kept_) {
    // Bound for good: the session releases each value when its name is bound again.
    for (size_t i = 0; i < values_.size(); i++) session_->Hold(valueNames_[i], values_[i]);
    values_.clear();
  }
  return true;
}

void RunWorker::Execute() {
  std::string error = failure(ort->RunWithBinding(session_->session(), nullptr, binding_));
  if (error.empty() && !kept_) {
    OrtAllocator* allocator = nullptr;
    error = failure(ort->GetAllocatorWithDefaultOptions(&allocator));
    if (error.empty()) error = failure(ort->GetBoundOutputValues(binding_, allocator, &results_, &resultCount_));
  }
  if (!error.empty()) SetError(error);
}

void RunWorker::OnOK() {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  Napi::Array out = Napi::Array::New(env, onDevice_.size());
  if (kept_) {
    // Every output was pre-allocated and written in place.
    deferred_.Resolve(out);
    return;
  }
  if (resultCount_ != onDevice_.size()) {
    deferred_.Reject(Napi::Error::New(env, "ONNX Runtime returned " + std::to_string(resultCount_) +
                                               " outputs for " + std::to_string(onDevice_.size()))
                         .Value());
    return;
  }
  for (size_t i = 0; i < onDevice_.size(); i++) {
    if (!onDevice_[i]) {
      out.Set(i, env.Undefined());
      continue;
    }
    // An output ONNX Runtime allocated: copied out once (the caller had no shape to pre-allocate).
    OrtTensorTypeAndShapeInfo* shape = nullptr;
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    size_t rank = 0;
    size_t count = 0;
    void* data = nullptr;
    std::string error = failure(ort->GetTensorTypeAndShape(results_[i], &shape));
    if (error.empty()) error = failure(ort->GetTensorElementType(shape, &type));
    if (error.empty()) error = failure(ort->GetDimensionsCount(shape, &rank));
    std::vector<int64_t> dims(rank);
    if (error.empty()) error = failure(ort->GetDimensions(shape, dims.data(), rank));
    if (error.empty()) error = failure(ort->GetTensorShapeElementCount(shape, &count));
    if (shape != nullptr) ort->ReleaseTensorTypeAndShapeInfo(shape);
    if (error.empty()) error = failure(ort->GetTensorMutableData(results_[i], &data));
    size_t bytes = count * elementBytes(type);
    if (error.empty() && elementBytes(type) == 0) error = "unsupported output type " + std::to_string(type);
    if (!error.empty()) {
      deferred_.Reject(Napi::Error::New(env, error).Value());
      return;
    }
    Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, bytes);
    if (bytes > 0) std::memcpy(buffer.Data(), data, bytes);
    Napi::Array dimsOut = Napi::Array::New(env, rank);
    for (size_t d = 0; d < rank; d++) dimsOut.Set(d, static_cast<double>(dims[d]));
    Napi::Object o = Napi::Object::New(env);
    o.Set("type", static_cast<int>(type));
    o.Set("dims", dimsOut);
    o.Set("buffer", buffer);
    out.Set(i, o);
  }
  deferred_.Resolve(out);
}

void RunWorker::OnError(const Napi::Error& error) { deferred_.Reject(error.Value()); }

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
  exports.Set("Session", Session::Define(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(NODE_GYP_MODULE_NAME, Init)

// ---- ortserve.CachedAttention[Half|Int8]: the custom operator over attention.cc ----
// Inputs: qkv, past key, past value, seqlens_k, cos cache, sin cache, position ids (the
// GroupQueryAttention inputs src/core/runner/attention-graph.ts keeps), and token_rows (int64,
// the cache row of each new token; empty: the batch form); outputs: the attention and the
// present key and value, which IoBinding binds over the past buffers (when they are not, the
// past is copied into them first). CachedAttention keeps the cache in float, CachedAttentionHalf
// in IEEE binary16 (ONNX float16), CachedAttentionInt8 in bytes with a scale per position (ONNX
// int8, headDim + 4 per position).
#include <cmath>
#include <cstring>

#include "attention.h"
#include "custom-ops.h"
#include "ort-runtime.h"

namespace ortserve {

namespace {

struct AttentionKernel {
  int heads = 0;
  int kvHeads = 0;
  float scale = 0;
  // Positions a token sees, its own included (local_window_size); 0: all.
  int window = 0;
  CacheElement element = CacheElement::kFloat;
};

constexpr size_t kAttentionInputs = 8;
constexpr size_t kTokenRowsInput = 7;

std::string CreateAttention(const void* params, const OrtApi* api, const OrtKernelInfo* info, void** out) {
  int64_t heads = 0;
  int64_t kvHeads = 0;
  float scale = 0;
  OrtStatus* status = api->KernelInfoGetAttribute_int64(info, "num_heads", &heads);
  if (status == nullptr) status = api->KernelInfoGetAttribute_int64(info, "kv_num_heads", &kvHeads);
  if (status != nullptr) return Failure(status);
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
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0) return "num_heads must be a positive multiple of kv_num_heads";
  if (localWindow >= INT32_MAX) return "local_window_size is too large";
  auto* kernel = new AttentionKernel();
  // ONNX Runtime's GroupQueryAttention (1.30) lets a token see local_window_size positions, its
  // own included; 0 or less: no window.
  kernel->window = localWindow > 0 ? static_cast<int>(localWindow) : 0;
  kernel->heads = static_cast<int>(heads);
  kernel->kvHeads = static_cast<int>(kvHeads);
  kernel->scale = scale;
  kernel->element = *static_cast<const CacheElement*>(params);
  *out = kernel;
  return {};
}

void DestroyAttention(void* kernel) { delete static_cast<AttentionKernel*>(kernel); }

std::string ComputeAttention(const void* state, OrtKernelContext* context) {
  const AttentionKernel& kernel = *static_cast<const AttentionKernel*>(state);
  TensorView in[kAttentionInputs];
  if (std::string error = ReadInputs(context, kAttentionInputs, in); !error.empty()) return error;
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
  AttentionShape shape;
  shape.batch = static_cast<int>(raggedTokens > 0 ? pastKey.dims[0] : qkv.dims[0]);
  shape.sequence = static_cast<int>(qkv.dims[1]);
  shape.heads = kernel.heads;
  shape.kvHeads = kernel.kvHeads;
  // A position of the 8-bit cache holds its blocks' scales after the head's values; the head
  // size is what qkv's width says (num_heads + 2 kv_num_heads of them).
  const int64_t width = pastKey.dims[3];
  const int64_t packedHeads = kernel.heads + 2 * kernel.kvHeads;
  shape.headDim = static_cast<int>(kernel.element == CacheElement::kInt8 ? qkv.dims[2] / packedHeads : width);
  if (CacheRowElements(kernel.element, shape.headDim) != width)
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
  std::string error = Failure(ort->KernelContext_GetOutput(context, 0, outDims, 3, &outputs[0]));
  for (size_t o = 1; o < 3 && error.empty(); o++)
    error = Failure(ort->KernelContext_GetOutput(context, o, pastKey.dims.data(), 4, &outputs[o]));
  void* out[3] = {nullptr, nullptr, nullptr};
  for (size_t o = 0; o < 3 && error.empty(); o++) error = Failure(ort->GetTensorMutableData(outputs[o], &out[o]));
  if (!error.empty()) return error;
  // Present bound over past (the engine's case) is updated in place; otherwise it starts as a copy.
  size_t cacheBytes = CacheElementBytes(kernel.element);
  for (int64_t d : pastKey.dims) cacheBytes *= static_cast<size_t>(d);
  if (out[1] != pastKey.data) std::memcpy(out[1], pastKey.data, cacheBytes);
  if (out[2] != pastValue.data) std::memcpy(out[2], pastValue.data, cacheBytes);

  const ParallelFor parallelFor = ParallelForOf(context);
  const char* problem = CachedAttention(
      shape, static_cast<const float*>(qkv.data), out[1], out[2], kernel.element,
      static_cast<const int32_t*>(in[3].data), static_cast<const int64_t*>(in[6].data),
      static_cast<const float*>(in[4].data), static_cast<const float*>(in[5].data), static_cast<float*>(out[0]),
      parallelFor, raggedTokens > 0 ? static_cast<const int64_t*>(tokenRows.data) : nullptr, raggedTokens);
  return problem != nullptr ? problem : "";
}

constexpr CacheElement kFloatCache = CacheElement::kFloat;
constexpr CacheElement kHalfCache = CacheElement::kHalf;
constexpr CacheElement kInt8Cache = CacheElement::kInt8;

// One row per cache precision: the past and present tensors take the cache's element type.
OpDescriptor AttentionRow(const char* name, const CacheElement& element, ONNXTensorElementDataType cache) {
  constexpr auto F = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  constexpr auto I32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  constexpr auto I64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  return {name,
          "CachedAttention",
          kAttentionInputs,
          {F, cache, cache, I32, F, F, I64, I64},
          3,
          {F, cache, cache},
          &element,
          CreateAttention,
          ComputeAttention,
          DestroyAttention};
}

}  // namespace

std::vector<OpDescriptor> AttentionOps() {
  return {AttentionRow("CachedAttention", kFloatCache, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT),
          AttentionRow("CachedAttentionHalf", kHalfCache, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16),
          AttentionRow("CachedAttentionInt8", kInt8Cache, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8)};
}

}  // namespace ortserve

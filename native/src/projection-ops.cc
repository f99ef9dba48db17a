// The projections' custom operators: their epilogues alone (projection-epilogue.h) and
// BlockQuantMatMul with its epilogue fused (block-quant-matmul.h), as rows of custom-ops.h.
#include <string>

#include "block-quant-matmul.h"
#include "custom-ops.h"
#include "file-pages.h"
#include "half-matmul.h"
#include "ort-runtime.h"
#include "projection-epilogue.h"

namespace ortserve {

namespace {

// Which epilogue follows the projection: the offsets' block sums added (Offset), a gated
// activation (SwiGLU, GeGLU).
struct Epilogue {
  bool offsets;
  Glu glu;
};

constexpr Epilogue kPlain{false, Glu::kNone};
constexpr Epilogue kOffset{true, Glu::kNone};
constexpr Epilogue kSwiGlu{false, Glu::kSwiGlu};
constexpr Epilogue kOffsetSwiGlu{true, Glu::kSwiGlu};
constexpr Epilogue kGeGlu{false, Glu::kGeGlu};
constexpr Epilogue kOffsetGeGlu{true, Glu::kGeGlu};

constexpr auto F = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
constexpr auto U8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;

// ---- ortserve.BlockOffsetAdd, SwiGlu, BlockOffsetSwiGlu, GeGlu, BlockOffsetGeGlu: projection-epilogue.h ----
// Inputs: the projection (with its block sums appended when the operator takes offsets
// [..., n + blocks]) and the offsets C [blocks, n]; output [..., n], or [..., n / 2] after a
// gated activation. Each stands for the Split, MatMul and Add (and Split, Sigmoid, Mul, Mul, or
// the Split and GELU table nodes) the converter emits (src/core/runner/epilogue-graph.ts).

std::string CreateEpilogue(const void* params, const OrtApi*, const OrtKernelInfo*, void** out) {
  *out = new Epilogue(*static_cast<const Epilogue*>(params));
  return {};
}

void DestroyEpilogue(void* kernel) { delete static_cast<Epilogue*>(kernel); }

std::string ComputeEpilogue(const void* state, OrtKernelContext* context) {
  const Epilogue& kernel = *static_cast<const Epilogue*>(state);
  TensorView in[2];
  if (std::string error = ReadInputs(context, kernel.offsets ? 2 : 1, in); !error.empty()) return error;
  const TensorView& projection = in[0];
  if (projection.dims.empty() || (kernel.offsets && in[1].dims.size() != 2)) return "unexpected input ranks";
  const int64_t blocks = kernel.offsets ? in[1].dims[0] : 0;
  const int64_t n = kernel.offsets ? in[1].dims[1] : projection.dims.back();
  if (projection.dims.back() != n + blocks)
    return "the input's last dimension is not n + blocks of the offsets [blocks, n]";
  const bool gated = kernel.glu != Glu::kNone;
  if (gated && n % 2 != 0) return "the gate/up projection's width is odd";
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < projection.dims.size(); d++) rows *= projection.dims[d];
  std::vector<int64_t> outDims = projection.dims;
  outDims.back() = gated ? n / 2 : n;
  OrtValue* output = nullptr;
  void* out = nullptr;
  std::string error = Failure(ort->KernelContext_GetOutput(context, 0, outDims.data(), outDims.size(), &output));
  if (error.empty()) error = Failure(ort->GetTensorMutableData(output, &out));
  if (!error.empty()) return error;
  ProjectionEpilogue(static_cast<const float*>(projection.data),
                     kernel.offsets ? static_cast<const float*>(in[1].data) : nullptr, rows, static_cast<int>(n),
                     static_cast<int>(blocks), kernel.glu, static_cast<float*>(out), ParallelForOf(context));
  return "";
}

OpDescriptor EpilogueRow(const char* name, const Epilogue& epilogue) {
  return {name, nullptr, epilogue.offsets ? 2u : 1u, {F, F}, 1, {F}, &epilogue, CreateEpilogue, ComputeEpilogue,
          DestroyEpilogue};
}

// A projection's input x [..., k] as rows, and its output [..., width] made.
struct Projection {
  const float* x = nullptr;
  int64_t rows = 1;
  float* out = nullptr;
};
std::string ProjectionInOut(OrtKernelContext* context, int64_t k, int64_t width, Projection* p) {
  TensorView x;
  std::string error = ReadInputs(context, 1, &x);
  if (!error.empty()) return error;
  if (x.dims.empty() || x.dims.back() != k) return "the input's last dimension is not the weights' k";
  for (size_t d = 0; d + 1 < x.dims.size(); d++) p->rows *= x.dims[d];
  std::vector<int64_t> outDims = x.dims;
  outDims.back() = width;
  OrtValue* output = nullptr;
  void* out = nullptr;
  error = Failure(ort->KernelContext_GetOutput(context, 0, outDims.data(), outDims.size(), &output));
  if (error.empty()) error = Failure(ort->GetTensorMutableData(output, &out));
  p->x = static_cast<const float*>(x.data);
  p->out = static_cast<float*>(out);
  return error;
}

// ---- ortserve.BlockQuantMatMul[Offset][SwiGlu|GeGlu]: block-quant-matmul.h ----
// Inputs: x [..., k], then MatMulNBits' constant B (uint8 [rows, k / bs, bs * bits / 8]) and
// scales ([rows, k / bs]), and for the Offset forms the offsets C [k / bs, n], with bs the
// block_size attribute (32, or 16 for scales per 16 inputs; absent: 32) and the activation_block
// attribute (32, or 256: llama.cpp's Q8_K activations for K-quants; absent: 32); output [..., n]
// (n = rows, or C's width), or [..., n / 2] for the SwiGlu and GeGlu forms. Each stands for a
// MatMulNBits and the epilogue after it (BlockOffsetAdd, SwiGlu, GeGlu, ...) in the converted graph
// (src/core/runner/epilogue-graph.ts); the weights are repacked once, when the session makes the
// kernel.

struct QuantMatMulKernel {
  PackedProjection weight;
  Glu glu = Glu::kNone;
};

std::string PackQuantMatMul(const OrtApi* api, const OrtKernelInfo* info, bool offsets,
                            PackedProjection* weight) {
  TensorView in[4];
  for (size_t i = 1; i < (offsets ? 4u : 3u); i++) {
    int constant = 0;
    const OrtValue* value = nullptr;
    std::string error = Failure(api->KernelInfoGetConstantInput_tensor(info, i, &constant, &value));
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
  // The inputs one activation scale covers: 32, or 256 for K-quant weights (llama.cpp's Q8_K).
  int64_t activationBlock = 32;
  if (OrtStatus* absent = api->KernelInfoGetAttribute_int64(info, "activation_block", &activationBlock)) {
    api->ReleaseStatus(absent);
    activationBlock = 32;
  }
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
                                     static_cast<int>(quants.dims[2] * 8 / blockSize), static_cast<int>(blockSize),
                                     static_cast<int>(activationBlock));
  if (problem != nullptr) return problem;
  // Packed: the initializers' pages are not read again (file-pages.h).
  // Debt: a matrix's file pages are all resident beside its packed copy until it is packed, so
  // loading peaks over the final resident set by the largest matrix (the output head: 0.3 GB on
  // Qwen2.5-1.5B, 0.6 GB on a 7B shape); Pack could give them back tile by tile.
  const size_t quantBytes = static_cast<size_t>(rows * blocks * quants.dims[2]);
  DropFilePages(quants.data, quantBytes);
  DropFilePages(scales.data, static_cast<size_t>(scaleCount) * sizeof(float));
  if (offsets) DropFilePages(in[3].data, static_cast<size_t>(in[3].dims[0] * in[3].dims[1]) * sizeof(float));
  return "";
}

std::string CreateQuantMatMul(const void* params, const OrtApi* api, const OrtKernelInfo* info, void** out) {
  const Epilogue& epilogue = *static_cast<const Epilogue*>(params);
  auto* kernel = new QuantMatMulKernel();
  kernel->glu = epilogue.glu;
  std::string error = PackQuantMatMul(api, info, epilogue.offsets, &kernel->weight);
  if (error.empty() && kernel->glu != Glu::kNone && kernel->weight.n() % 2 != 0) error = "the gate/up projection's width is odd";
  if (!error.empty()) {
    delete kernel;
    return error;
  }
  *out = kernel;
  return {};
}

void DestroyQuantMatMul(void* kernel) { delete static_cast<QuantMatMulKernel*>(kernel); }

std::string ComputeQuantMatMul(const void* state, OrtKernelContext* context) {
  const QuantMatMulKernel& kernel = *static_cast<const QuantMatMulKernel*>(state);
  const PackedProjection& weight = kernel.weight;
  Projection p;
  const int64_t width = kernel.glu != Glu::kNone ? weight.n() / 2 : weight.n();
  if (std::string error = ProjectionInOut(context, weight.k(), width, &p); !error.empty()) return error;
  BlockQuantMatMul(weight, p.x, p.rows, kernel.glu, p.out, ParallelForOf(context));
  return "";
}

OpDescriptor QuantMatMulRow(const char* name, const Epilogue& epilogue) {
  return {name,
          nullptr,
          epilogue.offsets ? 4u : 3u,
          {F, U8, F, F},
          1,
          {F},
          &epilogue,
          CreateQuantMatMul,
          ComputeQuantMatMul,
          DestroyQuantMatMul};
}

// ---- ortserve.HalfMatMul, BFloat16MatMul: half-matmul.h ----
// Inputs: x [..., k] and the constant B [k, n] of F16 (HalfMatMul) or BF16 (BFloat16MatMul)
// values, or [n, k] with the attribute trans_b 1; output [..., n]. Each stands for a MatMul of x by B cast to float (src/core/runner/
// epilogue-graph.ts); B is repacked once, when the session makes the kernel.

std::string CreateHalfMatMul(const void* params, const OrtApi* api, const OrtKernelInfo* info, void** out) {
  int constant = 0;
  const OrtValue* value = nullptr;
  std::string error = Failure(api->KernelInfoGetConstantInput_tensor(info, 1, &constant, &value));
  if (!error.empty()) return error;
  if (constant == 0 || value == nullptr) return "the weights must be an initializer";
  TensorView b;
  error = Describe(value, &b);
  if (!error.empty()) return error;
  if (b.dims.size() != 2) return "the weights must be a matrix";
  // trans_b 1: B comes as [n, k] (a tied head's embedding table).
  int64_t transposed = 0;
  if (OrtStatus* absent = api->KernelInfoGetAttribute_int64(info, "trans_b", &transposed)) {
    api->ReleaseStatus(absent);
    transposed = 0;
  }
  auto* kernel = new PackedHalfProjection();
  const int64_t k = transposed ? b.dims[1] : b.dims[0];
  const int64_t n = transposed ? b.dims[0] : b.dims[1];
  if (const char* problem = kernel->Pack(static_cast<const uint16_t*>(b.data), k, n, transposed != 0,
                                         *static_cast<const HalfFormat*>(params))) {
    delete kernel;
    return problem;
  }
  // Packed: the initializer's pages are not read again (file-pages.h).
  DropFilePages(b.data, static_cast<size_t>(b.dims[0] * b.dims[1]) * sizeof(uint16_t));
  *out = kernel;
  return {};
}

void DestroyHalfMatMul(void* kernel) { delete static_cast<PackedHalfProjection*>(kernel); }

std::string ComputeHalfMatMul(const void* state, OrtKernelContext* context) {
  const PackedHalfProjection& weight = *static_cast<const PackedHalfProjection*>(state);
  Projection p;
  if (std::string error = ProjectionInOut(context, weight.k(), weight.n(), &p); !error.empty()) return error;
  HalfMatMul(weight, p.x, p.rows, p.out, ParallelForOf(context));
  return "";
}

constexpr HalfFormat kF16Weights = HalfFormat::kF16;
constexpr HalfFormat kBF16Weights = HalfFormat::kBF16;

OpDescriptor HalfMatMulRow(const char* name, const HalfFormat& format, ONNXTensorElementDataType type) {
  return {name, nullptr, 2, {F, type}, 1, {F}, &format, CreateHalfMatMul, ComputeHalfMatMul, DestroyHalfMatMul};
}

}  // namespace

std::vector<OpDescriptor> ProjectionOps() {
  return {EpilogueRow("BlockOffsetAdd", kOffset),
          EpilogueRow("SwiGlu", kSwiGlu),
          EpilogueRow("BlockOffsetSwiGlu", kOffsetSwiGlu),
          EpilogueRow("GeGlu", kGeGlu),
          EpilogueRow("BlockOffsetGeGlu", kOffsetGeGlu),
          QuantMatMulRow("BlockQuantMatMul", kPlain),
          QuantMatMulRow("BlockQuantMatMulOffset", kOffset),
          QuantMatMulRow("BlockQuantMatMulSwiGlu", kSwiGlu),
          QuantMatMulRow("BlockQuantMatMulOffsetSwiGlu", kOffsetSwiGlu),
          QuantMatMulRow("BlockQuantMatMulGeGlu", kGeGlu),
          QuantMatMulRow("BlockQuantMatMulOffsetGeGlu", kOffsetGeGlu),
          HalfMatMulRow("HalfMatMul", kF16Weights, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16),
          HalfMatMulRow("BFloat16MatMul", kBF16Weights, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16)};
}

}  // namespace ortserve

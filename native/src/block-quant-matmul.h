// A projection with block-quantized weights, y = x W^T, written for the few rows of a decode step.
//
// The weights come as the converter stores them for com.microsoft MatMulNBits (block 32, 4 or 8
// bits, default zero point 8 or 128: w = scale * (q - zero point)), optionally with the per-block
// offsets of formats such as GGUF's Q4_1 (w += c, the block's offset, src/models/convert/
// quantized-weights.ts). ONNX Runtime's MatMulNBits multiplies them with int8 activations too
// (accuracy_level 4), but costs a 16-row step about 8x one row although the weights are read once,
// and needs three more nodes for the offsets. Here the weights are repacked once, 16 output
// columns side by side, so one AVX-512 VNNI instruction multiplies 4 inputs into 16 outputs and
// every weight register is reused across up to 8 rows (CPUs with AVX2 but not AVX-512 VNNI run
// an AVX2 form of the same arithmetic, 4 rows a pass); the offset term is added in the same pass.
//
// Arithmetic (llama.cpp's Q4_1 x Q8_1, in effect): each row's block of 32 inputs is quantized to
// int8 with scale dx = max|x| / 127 (round to nearest); a block contributes
//   scale * dx * (sum q * xq - zero point * sum xq) + offset * dx * sum xq,
// the integer part exact, accumulated in float over blocks in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attention.h"

namespace ortserve {

class PackedBlockQuantWeight {
 public:
  PackedBlockQuantWeight() = default;
  ~PackedBlockQuantWeight();
  PackedBlockQuantWeight(const PackedBlockQuantWeight&) = delete;
  PackedBlockQuantWeight& operator=(const PackedBlockQuantWeight&) = delete;

  // quants [>= n rows, k / 32 blocks, 32 * bits / 8 bytes] (MatMulNBits' B; for 4 bits element 2j
  // in byte j's low nibble, 2j + 1 in its high one), scales [>= n rows, k / 32], offsets
  // [k / 32, n] or null. Rows past n (the converter's block-sum rows) are ignored. Returns nullptr,
  // or what is wrong.
  const char* Pack(const uint8_t* quants, const float* scales, const float* offsets, int n, int k, int bits);

  int n() const { return n_; }
  int k() const { return k_; }
  int bits() const { return bits_; }
  bool hasOffsets() const { return hasOffsets_; }

  // Output tiles of 16 columns; for tile t and block b the block's quants for the tile's 16
  // columns, then their 16 scales, then (with offsets) their 16 offsets.
  int tiles() const { return (n_ + 15) / 16; }
  int blocks() const { return k_ / 32; }
  size_t quantBytes() const { return static_cast<size_t>(bits_) * 64; }
  size_t blockStride() const { return quantBytes() + (hasOffsets_ ? 128 : 64); }
  const uint8_t* block(int tile, int b) const {
    return data_ + (static_cast<size_t>(tile) * blocks() + b) * blockStride();
  }

 private:
  uint8_t* data_ = nullptr;
  int n_ = 0;
  int k_ = 0;
  int bits_ = 0;
  bool hasOffsets_ = false;
};

// Whether this CPU runs a vector kernel (AVX-512 VNNI, or AVX2 with FMA); otherwise a scalar loop
// computes the same sums, for correctness, not speed.
bool BlockQuantMatMulAccelerated();
// The kernels this CPU runs, fastest first ("avx512-vnni", "avx2", "scalar"); all give the same
// floats.
std::vector<std::string> BlockQuantMatMulKernels();
// The kernel in use (the fastest, unless set).
std::string BlockQuantMatMulKernel();
// Picks the kernel for the whole process (tests hold the kernels to each other; benchmarks measure
// the slower ones on a faster CPU). Returns false, changing nothing, when this CPU has no such kernel.
bool SetBlockQuantMatMulKernel(const std::string& name);

// out [rows, n] = x [rows, k] times the weights; with swiglu (n even) the packed gate/up
// projection's silu(gate) * up instead, out [rows, n / 2] (SwiGluInPlace's arithmetic).
void BlockQuantMatMul(const PackedBlockQuantWeight& w, const float* x, int64_t rows, bool swiglu, float* out,
                      const ParallelFor& parallelFor);

}  // namespace ortserve

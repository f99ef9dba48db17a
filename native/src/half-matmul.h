// A projection with 16-bit float weights (GGUF's and safetensors' F16 and BF16), y = x W, the
// weights kept in their 16 bits: widened to float32 they would take twice the memory, and a decode
// step, which reads every weight once, twice the time.
//
// The weights come as ONNX MatMul's B, [k, n] (the converter stores them so, behind a Cast to
// float that ONNX Runtime alone would fold into a float32 copy; src/core/runner/epilogue-graph.ts
// hands the 16-bit initializer here instead). They are repacked once, 16 output columns side by
// side, one input after another, so one load and one conversion (F16C's VCVTPH2PS, or a 16-bit
// shift for BF16) give 16 columns' weights for every row of the pass.
//
// Arithmetic: each output is a chain of fused multiply-adds over the inputs in order, from 0, in
// float32, with the weights' exact float values and the activations as they are (float32, not
// rounded to 16 bits as llama.cpp's own F16 and BF16 dot products round them). Every kernel runs
// the same chain, so they give the same floats, and a row's result does not depend on the rows
// beside it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention.h"

namespace ortserve {

enum class HalfFormat { kF16, kBF16 };

class PackedHalfProjection {
 public:
  PackedHalfProjection() = default;
  PackedHalfProjection(const PackedHalfProjection&) = delete;
  PackedHalfProjection& operator=(const PackedHalfProjection&) = delete;
  ~PackedHalfProjection();

  // Packs B [k, n] of `format` values, or B^T ([n, k]) when `transposed`; nullptr, or why not.
  const char* Pack(const uint16_t* b, int64_t k, int64_t n, bool transposed, HalfFormat format);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  HalfFormat format() const { return format_; }
  int tiles() const { return static_cast<int>((n_ + 15) / 16); }
  size_t bytes() const { return bytes_; }
  // Tile t: k groups of 16 values, column 16t + c at position c (zero past n).
  const uint16_t* tile(int t) const { return data_ + static_cast<size_t>(t) * 16 * k_; }

 private:
  uint16_t* data_ = nullptr;
  size_t bytes_ = 0;
  int64_t n_ = 0;
  int64_t k_ = 0;
  HalfFormat format_ = HalfFormat::kF16;
};

// out [rows, n] = x [rows, k] times the weights.
void HalfMatMul(const PackedHalfProjection& w, const float* x, int64_t rows, float* out,
                const ParallelFor& parallelFor);

}  // namespace ortserve

// The per-block offset term of weights such as GGUF's Q4_1 (w = d*q + m for each block of 32),
// which MatMulNBits cannot express: the converter appends the activations' block sums to a
// projection's MatMulNBits output as extra columns, and y = that output's first n columns +
// block sums x C, where C [blocks, n] holds each block's offset. ONNX Runtime runs that as Split,
// MatMul and Add, three nodes per projection whose dispatch costs a single-token decode step more
// than their arithmetic; this is the same sum as one operator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention.h"

namespace ortserve {

// both [rows, n + blocks] (the projection, then its block sums); offsets [blocks, n] (C);
// out [rows, n] = both[:, :n] + both[:, n:] x C, the product summed over blocks in order first
// and then added, as the MatMul and Add it replaces.
void BlockOffsetAdd(const float* both, const float* offsets, int64_t rows, int n, int blocks, float* out,
                    const ParallelFor& parallelFor);

}  // namespace ortserve

// What follows a projection's MatMulNBits in the converted decoder graph, as one operator:
//
// - The per-block offset term of weights such as GGUF's Q4_1 (w = d*q + m for each block of 32),
//   which MatMulNBits cannot express: the converter appends the activations' block sums to the
//   projection's output as extra columns, and the projection is y = those first n columns +
//   block sums x C, where C [blocks, n] holds each block's offset (Split, MatMul, Add in the graph).
// - The SwiGLU of the packed gate/up projection: silu(gate) * up over its two halves (Split,
//   Sigmoid, Mul, Mul in the graph).
//
// ONNX Runtime runs each as three or four nodes whose dispatch costs a single-token decode step
// more than their arithmetic; here each is one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention.h"

namespace ortserve {

// in [rows, n + blocks] with offsets (C [blocks, n]), else [rows, n]. The projection p is in's
// first n columns, plus block sums x C (the product over blocks in order, then added, as the
// MatMul and Add it replaces) when offsets is given. out is p [rows, n], or with swiglu
// silu(p[:, :n/2]) * p[:, n/2:] [rows, n/2].
// a[j] = silu(a[j]) * b[j] for j in [0, count).
void SwiGluInPlace(float* a, const float* b, int count);

void ProjectionEpilogue(const float* in, const float* offsets, int64_t rows, int n, int blocks, bool swiglu,
                        float* out, const ParallelFor& parallelFor);

}  // namespace ortserve

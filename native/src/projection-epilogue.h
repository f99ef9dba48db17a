// What follows a projection's MatMulNBits in the converted decoder graph, as one operator:
//
// - The per-block offset term of weights such as GGUF's Q4_1 (w = d*q + m for each block of 32),
//   which MatMulNBits cannot express: the converter appends the activations' block sums to the
//   projection's output as extra columns, and the projection is y = those first n columns +
//   block sums x C, where C [blocks, n] holds each block's offset (Split, MatMul, Add in the graph).
// - The gated activation of the packed gate/up projection over its two halves: SwiGLU,
//   silu(gate) * up (Split, Sigmoid, Mul, Mul in the graph), or GeGLU, gelu(gate) * up with
//   llama.cpp's tabulated GELU (Split and ~18 nodes in the graph: decoder-graph.ts
//   tanhGeluFp16Table).
//
// ONNX Runtime runs each as three or four nodes whose dispatch costs a single-token decode step
// more than their arithmetic; here each is one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention.h"

namespace ortserve {

// Below this many multiply-adds a projection, or its epilogue, runs on the calling thread: a
// decode step's projection (one row, 10k-55k) took as long spread over two threads (measured).
constexpr int64_t kParallelWork = 1 << 18;

// Which gated activation joins the halves of a gate/up projection, if any.
enum class Glu : int { kNone, kSwiGlu, kGeGlu };

// a[j] = silu(a[j]) * b[j] for j in [0, count).
void SwiGluInPlace(float* a, const float* b, int count);

// a[j] = gelu(a[j]) * b[j] for j in [0, count), GELU as llama.cpp's CPU backend computes it for
// GeGLU (ggml_vec_geglu_f32 with GGML_GELU_FP16) and the converter's graph does: below 10, the
// binary16 table entry of the input clamped at -10 and rounded to binary16; from 10 up, the input.
void GeGluInPlace(float* a, const float* b, int count);

// SwiGluInPlace or GeGluInPlace (glu not kNone).
void GluInPlace(Glu glu, float* a, const float* b, int count);

// in [rows, n + blocks] with offsets (C [blocks, n]), else [rows, n]. The projection p is in's
// first n columns, plus block sums x C (the product over blocks in order, then added, as the
// MatMul and Add it replaces) when offsets is given. out is p [rows, n], or with a glu
// glu(p[:, :n/2], p[:, n/2:]) [rows, n/2].
void ProjectionEpilogue(const float* in, const float* offsets, int64_t rows, int n, int blocks, Glu glu,
                        float* out, const ParallelFor& parallelFor);

}  // namespace ortserve

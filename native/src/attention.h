// Cached attention for the decoder graph: what GroupQueryAttention computes
// in the shape ortserve feeds it (packed QKV, rotary from cos/sin caches at
// position_ids, a KV cache whose past and present are one buffer), written
// for the decode step, where ONNX Runtime's kernel packs every cached key for
// a one-row GEMM and so pays per cached position far more than reading it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace ortserve {

struct AttentionShape {
  int batch = 0;
  // New tokens per row (1 while decoding, a chunk while prefilling).
  int sequence = 0;
  int heads = 0;
  int kvHeads = 0;
  int headDim = 0;
  // Positions each row of the cache holds room for.
  int capacity = 0;
  // Rows of the cos/sin caches (the largest position they rotate).
  int64_t rotaryPositions = 0;
  float scale = 0;
  // Sliding window: a token sees only the `window` positions ending at its own (its own included,
  // llama.cpp's n_swa; GroupQueryAttention's local_window_size) and no earlier position is read.
  // 0: every position. With a window the cache is a ring: position p is kept at row p % capacity,
  // so a row may grow past capacity when capacity is a multiple of 256 and at least the window
  // (a step with more new tokens than capacity - window + 1 is attended in pieces that fit).
  int window = 0;
};

// How the cache holds a cached position's headDim values: floats; IEEE binary16; or headDim
// signed bytes followed by one binary16 scale per block of 32 they are multiplied by (symmetric
// 8-bit, llama.cpp's q8_0, per position and KV head; one block for the whole row when headDim is
// not a multiple of 32), headDim + 2 bytes per block in all.
enum class CacheElement { kFloat, kHalf, kInt8 };

// Values of an 8-bit row sharing one scale: 32, or the whole row when headDim is not a multiple of 32.
constexpr int Int8Block(int headDim) { return headDim % 32 == 0 ? 32 : headDim; }

// Elements (of the cache's type) from one cached position to the next.
constexpr int CacheRowElements(CacheElement element, int headDim) {
  return element == CacheElement::kInt8 ? headDim + 2 * (headDim / Int8Block(headDim)) : headDim;
}

// Bytes of one cache element.
constexpr size_t CacheElementBytes(CacheElement element) {
  return element == CacheElement::kFloat ? 4 : element == CacheElement::kHalf ? 2 : 1;
}

// Runs fn(item) for item in [0, count), possibly in parallel.
using ParallelFor = std::function<void(size_t count, const std::function<void(size_t)>& fn)>;

// qkv [batch, sequence, (heads + 2 kvHeads) headDim]; keyCache and valueCache
// [batch, kvHeads, capacity, CacheRowElements(element, headDim)] of the element's
// type, updated in place at each row's new positions; seqlensK [batch] =
// row length after this step minus one; positions [batch, sequence]; cos/sin
// [rotaryPositions, headDim / 2]; out [batch, sequence, heads headDim].
//
// Ragged tokens (tokenRows not null): the step's `tokens` new tokens belong to rows of their own,
// tokenRows[t] the cache row of token t, so one call serves rows with different numbers of new
// tokens (a decode batch and a prompt chunk in one forward pass). A row's tokens are in position
// order, in one run or several that continue each other's positions; each run's row length is read
// from its positions, and after a row's last run must be seqlensK + 1. shape.sequence is ignored;
// qkv [tokens, (heads + 2 kvHeads) headDim], positions [tokens], out [tokens, heads headDim];
// seqlensK and the caches cover shape.batch rows, of which rows without tokens are left as they are.
// Returns nullptr, or what is wrong.
const char* CachedAttention(const AttentionShape& shape, const float* qkv, void* keyCache, void* valueCache,
                            CacheElement element, const int32_t* seqlensK, const int64_t* positions, const float* cosCache,
                            const float* sinCache, float* out, const ParallelFor& parallelFor,
                            const int64_t* tokenRows = nullptr, int64_t tokens = 0);

}  // namespace ortserve

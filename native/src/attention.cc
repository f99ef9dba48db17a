// See attention.h. A token's attention is computed over chunks of 256 cached positions and the
// chunks merged (flash-decoding's split softmax, the same in prefill and decode): per chunk its
// queries are scored against the cached keys four at a time (four independent FMA chains, one
// horizontal add for the four), tile by tile of 64 positions so every query reads a tile from L1,
// softmaxed with a vectorised exp, and the values summed with the unnormalised weights. Prefill
// work items are (row, query head, block of up to 8 new tokens); decode items are (row, KV head,
// chunk), all the query heads of a KV head together, so the cache is read once per step and a
// long row is spread over the threads. Keys and values are read straight from the cache: nothing
// is packed or copied per step (on CPUs with AVX-512VL, an 8-bit or binary16 cache is scored and
// summed from its bytes, up to three queries a pass, each position converted once for all of them;
// elsewhere an 8-bit tile is converted to floats once). The rotary embedding and the
// new positions' cache writes run inside the parallel work too (a decode item rotates its own
// queries and, for a row's last chunk, writes the new key and value first; prefill does its
// tokens in a pass before the items): done before the items on the calling thread, they were a
// fifth of a 16-row step's attention.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu-features.h"
#include "half-float.h"
#include "prefetch.h"

#ifdef ORTSERVE_X86_SIMD
#include <immintrin.h>

#include "simd-exp.h"
#define AVX2_FMA_FN __attribute__((target("avx2,fma,f16c")))
#endif

namespace ortserve {
namespace {

// New tokens of one row handled by one work item while prefilling.
constexpr int kTokenBlock = 8;
// Query heads sharing one KV head that a decode work item holds.
constexpr int kMostGroup = 64;
// Query heads the 8-bit cache's AVX-512VL kernels serve from one read of a tile (SmolLM2's 9
// query heads over 3 KV heads: a decode item's three).
constexpr int kHeadsPerPass = 3;
// Below this many (query, cached position) pairs a step's attention runs on the calling thread:
// waking the pool would cost more than the work.
constexpr int64_t kParallelPairs = 4096;

const bool gAvx2Fma = Cpu().avx2 && Cpu().fma && Cpu().f16c;
// AVX-512VL's 32 vector registers let the 8-bit cache's keys be scored for three query heads at
// once (the AVX2 kernels, with 16, take one head per pass).
const bool gAvx512Vl = gAvx2Fma && Cpu().avx512Vl;

// A cache element: float, binary16 (Half) for the half-precision cache, or a signed byte (Q8) of
// the 8-bit cache, whose position rows are headDim bytes followed by one binary16 scale per block
// of 32 (symmetric, as llama.cpp's q8_0: value = byte x its block's scale).
struct Half {
  uint16_t bits;
};
struct Q8 {
  int8_t value;
};
inline float ToFloat(float x) { return x; }
inline float ToFloat(Half h) { return HalfToFloat(h.bits); }
inline float ToFloat(Q8 q) { return q.value; }

// Elements from one cached position to the next (attention.h's CacheRowElements).
template <typename T>
constexpr int RowStride(int headDim) {
  return headDim;
}
template <>
constexpr int RowStride<Q8>(int headDim) {
  return CacheRowElements(CacheElement::kInt8, headDim);
}
// The binary16 bits of block `block`'s scale in a Q8 row.
inline uint16_t BlockScaleBits(const Q8* row, int headDim, int block) {
  uint16_t bits;
  std::memcpy(&bits, row + headDim + block * sizeof bits, sizeof bits);
  return bits;
}

inline void StoreRow(const float* in, float* out, int n) { std::copy_n(in, n, out); }
inline void StoreRow(const float* in, Half* out, int n) {
  for (int i = 0; i < n; i++) out[i].bits = FloatToHalf(in[i]);
}
// Rounds each block of 32 to the nearest of 255 levels spanning its largest magnitude (the scale
// kept in binary16, and the rounding done against the scale as kept).
inline void StoreRow(const float* in, Q8* out, int n) {
  const int block = Int8Block(n);
  for (int b = 0; b < n / block; b++) {
    const float* x = in + b * block;
    float most = 0;
    for (int i = 0; i < block; i++) most = std::max(most, std::fabs(x[i]));
    const uint16_t bits = FloatToHalf(most / 127.0f);
    const float scale = HalfToFloat(bits);
    const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
    for (int i = 0; i < block; i++)
      out[b * block + i].value =
          static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
    std::memcpy(out + n + b * sizeof bits, &bits, sizeof bits);
  }
}

// Rotary embedding, non-interleaved halves (as GroupQueryAttention with
// rotary_interleaved = 0): x[i] and x[i + half] turn by the angle of pair i.
void Rotate(const float* in, float* out, int headDim, const float* cosRow, const float* sinRow) {
  const int half = headDim / 2;
  for (int i = 0; i < half; i++) {
    const float x1 = in[i];
    const float x2 = in[i + half];
    out[i] = x1 * cosRow[i] - x2 * sinRow[i];
    out[i + half] = x2 * cosRow[i] + x1 * sinRow[i];
  }
}

#ifdef ORTSERVE_X86_SIMD
// No FMA in this target: x1 cos - x2 sin rounds each product as Rotate does, so both give the
// same bits.
#define AVX2_NO_FMA_FN __attribute__((target("avx2,f16c")))

AVX2_NO_FMA_FN void RotateAvx2(const float* in, float* out, int headDim, const float* cosRow, const float* sinRow) {
  const int half = headDim / 2;
  int i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 x1 = _mm256_loadu_ps(in + i);
    const __m256 x2 = _mm256_loadu_ps(in + i + half);
    const __m256 c = _mm256_loadu_ps(cosRow + i);
    const __m256 s = _mm256_loadu_ps(sinRow + i);
    _mm256_storeu_ps(out + i, _mm256_sub_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x2, s)));
    _mm256_storeu_ps(out + i + half, _mm256_add_ps(_mm256_mul_ps(x2, c), _mm256_mul_ps(x1, s)));
  }
  for (; i < half; i++) {
    const float x1 = in[i];
    const float x2 = in[i + half];
    out[i] = x1 * cosRow[i] - x2 * sinRow[i];
    out[i + half] = x2 * cosRow[i] + x1 * sinRow[i];
  }
}

// StoreRow to binary16 with F16C: round to nearest even, as FloatToHalf.
AVX2_NO_FMA_FN void StoreHalfRowF16c(const float* in, Half* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; i++) out[i].bits = FloatToHalf(in[i]);
}
#endif

void RotateRow(const float* in, float* out, int headDim, const float* cosRow, const float* sinRow, bool avx) {
#ifdef ORTSERVE_X86_SIMD
  if (avx) return RotateAvx2(in, out, headDim, cosRow, sinRow);
#endif
  (void)avx;
  Rotate(in, out, headDim, cosRow, sinRow);
}

template <typename T>
void StoreCacheRow(const float* in, T* out, int n, bool avx) {
#ifdef ORTSERVE_X86_SIMD
  if constexpr (std::is_same_v<T, Half>) {
    if (avx) return StoreHalfRowF16c(in, out, n);
  }
#endif
  (void)avx;
  StoreRow(in, out, n);
}

// ---- portable kernels ----

// Positions [0, n) of 8-bit cache rows as floats (byte x its block's scale, exact in float),
// n rows of headDim.
void DequantizeScalar(const Q8* rows, int n, int headDim, float* out) {
  const int stride = RowStride<Q8>(headDim);
  const int block = Int8Block(headDim);
  for (int p = 0; p < n; p++) {
    const Q8* row = rows + static_cast<size_t>(p) * stride;
    float* x = out + static_cast<size_t>(p) * headDim;
    for (int b = 0; b < headDim / block; b++) {
      const float scale = HalfToFloat(BlockScaleBits(row, headDim, b));
      for (int d = b * block; d < (b + 1) * block; d++) x[d] = ToFloat(row[d]) * scale;
    }
  }
}

template <typename T>
void ScoresScalar(const float* q, const T* keys, int length, int headDim, float scale, float* scores) {
  const size_t stride = RowStride<T>(headDim);
  for (int j = 0; j < length; j++) {
    const T* k = keys + j * stride;
    float s = 0;
    for (int d = 0; d < headDim; d++) s += q[d] * ToFloat(k[d]);
    scores[j] = s * scale;
  }
}

// exp(scores - max) in place; returns their sum and sets *maxOut.
float SoftmaxNumeratorsScalar(float* scores, int length, float* maxOut) {
  float max = scores[0];
  for (int j = 1; j < length; j++) max = std::max(max, scores[j]);
  *maxOut = max;
  float sum = 0;
  for (int j = 0; j < length; j++) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  return sum;
}

// out += sum over j of weights[j] values[j].
template <typename T>
void AccumulateValuesScalar(const float* weights, const T* values, int length, int headDim, float* out) {
  const size_t stride = RowStride<T>(headDim);
  for (int j = 0; j < length; j++) {
    const T* v = values + j * stride;
    const float w = weights[j];
    for (int d = 0; d < headDim; d++) out[d] += w * ToFloat(v[d]);
  }
}

#ifdef ORTSERVE_X86_SIMD
// Sums of four vectors' lanes, as one vector of four.
AVX2_FMA_FN inline __m128 Sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);
  const __m256 cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

AVX2_FMA_FN inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
AVX2_FMA_FN inline __m256 Load8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
AVX2_FMA_FN inline __m256 Load8(const Q8* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// DequantizeScalar with F16C and AVX2.
AVX2_FMA_FN void DequantizeAvx2(const Q8* rows, int n, int headDim, float* out) {
  const int stride = RowStride<Q8>(headDim);
  const int block = Int8Block(headDim);
  for (int p = 0; p < n; p++) {
    const Q8* row = rows + static_cast<size_t>(p) * stride;
    float* x = out + static_cast<size_t>(p) * headDim;
    for (int b = 0; b < headDim / block; b++) {
      const __m256 scale = _mm256_set1_ps(_cvtsh_ss(BlockScaleBits(row, headDim, b)));
      for (int d = b * block; d < (b + 1) * block; d += 8) _mm256_storeu_ps(x + d, _mm256_mul_ps(Load8(row + d), scale));
    }
  }
}

template <typename T>
AVX2_FMA_FN void ScoresAvx2(const float* q, const T* keys, int length, int headDim, float scale, float* scores) {
  const size_t stride = RowStride<T>(headDim);
  const __m128 scale4 = _mm_set1_ps(scale);
  int j = 0;
  for (; j + 4 <= length; j += 4) {
    const T* k0 = keys + j * stride;
    const T* k1 = k0 + stride;
    const T* k2 = k1 + stride;
    const T* k3 = k2 + stride;
    __m256 a0 = _mm256_setzero_ps();
    __m256 a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps();
    __m256 a3 = _mm256_setzero_ps();
    for (int d = 0; d < headDim; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qv, Load8(k0 + d), a0);
      a1 = _mm256_fmadd_ps(qv, Load8(k1 + d), a1);
      a2 = _mm256_fmadd_ps(qv, Load8(k2 + d), a2);
      a3 = _mm256_fmadd_ps(qv, Load8(k3 + d), a3);
    }
    _mm_storeu_ps(scores + j, _mm_mul_ps(Sum4(a0, a1, a2, a3), scale4));
  }
  for (; j < length; j++) {
    const T* k = keys + j * stride;
    __m256 a = _mm256_setzero_ps();
    for (int d = 0; d < headDim; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8(k + d), a);
    const __m128 s = Sum4(a, _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
    scores[j] = _mm_cvtss_f32(s) * scale;
  }
}

AVX2_FMA_FN float SoftmaxNumeratorsAvx2(float* scores, int length, float* maxOut) {
  int j = 0;
  __m256 maxv = _mm256_set1_ps(-INFINITY);
  for (; j + 8 <= length; j += 8) maxv = _mm256_max_ps(maxv, _mm256_loadu_ps(scores + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, maxv);
  float max = lanes[0];
  for (int i = 1; i < 8; i++) max = std::max(max, lanes[i]);
  for (; j < length; j++) max = std::max(max, scores[j]);
  *maxOut = max;
  const __m256 m = _mm256_set1_ps(max);
  __m256 sumv = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= length; j += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + j), m));
    _mm256_storeu_ps(scores + j, e);
    sumv = _mm256_add_ps(sumv, e);
  }
  _mm256_store_ps(lanes, sumv);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  for (; j < length; j++) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  return sum;
}

template <typename T>
AVX2_FMA_FN void AccumulateValuesAvx2(const float* weights, const T* values, int length, int headDim, float* out) {
  const size_t stride = RowStride<T>(headDim);
  int d0 = 0;
  // Eight accumulators (64 dimensions) stay in registers across the positions.
  for (; d0 + 64 <= headDim; d0 += 64) {
    __m256 acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_loadu_ps(out + d0 + 8 * i);
    for (int j = 0; j < length; j++) {
      const T* row = values + j * stride;
      const T* v = row + d0;
      const __m256 w = _mm256_set1_ps(weights[j]);
      for (int i = 0; i < 8; i++) acc[i] = _mm256_fmadd_ps(w, Load8(v + 8 * i), acc[i]);
    }
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(out + d0 + 8 * i, acc[i]);
  }
  for (; d0 < headDim; d0 += 8) {
    __m256 acc = _mm256_loadu_ps(out + d0);
    for (int j = 0; j < length; j++) {
      const T* row = values + j * stride;
      acc = _mm256_fmadd_ps(_mm256_set1_ps(weights[j]), Load8(row + d0), acc);
    }
    _mm256_storeu_ps(out + d0, acc);
  }
}

// Positions ahead of the ones being scored or summed that the multi-query kernels (below) fetch,
// into L2, never past the positions the queries read (`reach`, counted from the kernel's first
// row). Making one pass over a tile for several queries, instead of one pass each, leaves less
// arithmetic to hide the stream's misses behind, and a cold cache arrives from memory slower
// than the kernels consume it. A C++ harness (30 layers' caches, each layer after 3.8 MB of other
// reads, as a decode step meets them; 2 threads taking items as ONNX Runtime's pool does):
// float16, 1 x 1,584 positions 57-77 -> 53-68 µs a layer, 16 x 130 99-123 -> 87-107, 1 x 100
// 12.5-13.2 -> 11.1-11.5, and one thread 6-13% less; the 8-bit cache, bound by its arithmetic,
// the same either way. 8 positions into L1 (before), 24, 40, 48, 64 and 96 positions, and 64 into
// L1, were measured too: 32 and 40 into L2 were the best.
constexpr int kStreamAhead = 32;
// Prefetches rows [kStreamAhead, kStreamAhead + count) after `row` (`stride` elements apart),
// those below `reach`.
template <typename T>
inline void PrefetchAhead(const T* row, int count, int reach, size_t stride) {
  const int n = std::min(count, reach - kStreamAhead);
  if (n > 0) PrefetchRange<2>(row + kStreamAhead * stride, n * stride * sizeof(T));
}

// The AVX2 kernels' instructions with AVX-512VL's 32 ymm registers.
#define AVX2_WIDE_FN __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))

// Scores of Q queries against 8-bit cache rows, straight from the bytes: each block of 32 of a
// key is converted once for all Q queries, each query's products summed per block and the sum
// times the block's scale added to the score (no float tile written and read back).
template <int Q>
AVX2_WIDE_FN void ScoresQ8Avx2(const float* const* q, const Q8* keys, int length, int reach, int headDim, float scale,
                               float* const* scores) {
  const size_t stride = RowStride<Q8>(headDim);
  const int block = Int8Block(headDim);
  const int blocks = headDim / block;
  const __m128 scale4 = _mm_set1_ps(scale);
  int j = 0;
  for (; j + 4 <= length; j += 4) {
    const Q8* rows[4] = {keys + j * stride, keys + (j + 1) * stride, keys + (j + 2) * stride, keys + (j + 3) * stride};
    PrefetchAhead(rows[0], 4, reach - j, stride);
    __m256 total[Q][4];
    for (int i = 0; i < Q; i++)
      for (int p = 0; p < 4; p++) total[i][p] = _mm256_setzero_ps();
    for (int b = 0; b < blocks; b++) {
      __m256 acc[Q][4];
      for (int i = 0; i < Q; i++)
        for (int p = 0; p < 4; p++) acc[i][p] = _mm256_setzero_ps();
      for (int d = b * block; d < (b + 1) * block; d += 8) {
        __m256 k[4];
        for (int p = 0; p < 4; p++) k[p] = Load8(rows[p] + d);
        for (int i = 0; i < Q; i++) {
          const __m256 qv = _mm256_loadu_ps(q[i] + d);
          for (int p = 0; p < 4; p++) acc[i][p] = _mm256_fmadd_ps(qv, k[p], acc[i][p]);
        }
      }
      for (int p = 0; p < 4; p++) {
        const __m256 blockScale = _mm256_set1_ps(_cvtsh_ss(BlockScaleBits(rows[p], headDim, b)));
        for (int i = 0; i < Q; i++)
          total[i][p] = _mm256_fmadd_ps(acc[i][p], blockScale, total[i][p]);
      }
    }
    for (int i = 0; i < Q; i++)
      _mm_storeu_ps(scores[i] + j, _mm_mul_ps(Sum4(total[i][0], total[i][1], total[i][2], total[i][3]), scale4));
  }
  for (; j < length; j++) {
    const Q8* row = keys + j * stride;
    for (int i = 0; i < Q; i++) {
      __m256 total = _mm256_setzero_ps();
      for (int b = 0; b < blocks; b++) {
        __m256 acc = _mm256_setzero_ps();
        for (int d = b * block; d < (b + 1) * block; d += 8)
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(q[i] + d), Load8(row + d), acc);
        const __m256 blockScale = _mm256_set1_ps(_cvtsh_ss(BlockScaleBits(row, headDim, b)));
        total = _mm256_fmadd_ps(acc, blockScale, total);
      }
      const __m128 sum = Sum4(total, _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
      scores[i][j] = _mm_cvtss_f32(sum) * scale;
    }
  }
}

// AccumulateValuesAvx2 for Q queries over 8-bit cache rows (blocks of 32), straight from the
// bytes: each value converted once for all Q queries, its block's scale folded into each weight.
template <int Q>
AVX2_WIDE_FN void AccumulateValuesQ8Avx2(const float* const* weights, const Q8* values, int length, int reach,
                                         int headDim, float* const* out) {
  const size_t stride = RowStride<Q8>(headDim);
  for (int d0 = 0; d0 < headDim; d0 += 32) {
    const int b = d0 / 32;
    __m256 acc[Q][4];
    for (int i = 0; i < Q; i++)
      for (int k = 0; k < 4; k++) acc[i][k] = _mm256_loadu_ps(out[i] + d0 + 8 * k);
    for (int j = 0; j < length; j++) {
      const Q8* row = values + j * stride;
      if (d0 == 0) PrefetchAhead(row, 1, reach - j, stride);
      const float blockScale = _cvtsh_ss(BlockScaleBits(row, headDim, b));
      __m256 v[4];
      for (int k = 0; k < 4; k++) v[k] = Load8(row + d0 + 8 * k);
      for (int i = 0; i < Q; i++) {
        const __m256 w = _mm256_set1_ps(weights[i][j] * blockScale);
        for (int k = 0; k < 4; k++) acc[i][k] = _mm256_fmadd_ps(w, v[k], acc[i][k]);
      }
    }
    for (int i = 0; i < Q; i++)
      for (int k = 0; k < 4; k++) _mm256_storeu_ps(out[i] + d0 + 8 * k, acc[i][k]);
  }
}

// ScoresAvx2 for Q queries over binary16 keys: each key converted once for all Q
// queries. Each query's sums run exactly as in ScoresAvx2 (same chains, same order), so its
// scores are the same floats whichever queries share its pass.
template <int Q>
AVX2_WIDE_FN void ScoresMultiAvx2(const float* const* q, const Half* keys, int length, int reach, int headDim,
                                  float scale, float* const* scores) {
  const size_t stride = RowStride<Half>(headDim);
  const __m128 scale4 = _mm_set1_ps(scale);
  int j = 0;
  for (; j + 4 <= length; j += 4) {
    const Half* rows[4] = {keys + j * stride, keys + (j + 1) * stride, keys + (j + 2) * stride, keys + (j + 3) * stride};
    PrefetchAhead(rows[0], 4, reach - j, stride);
    __m256 acc[Q][4];
    for (int i = 0; i < Q; i++)
      for (int p = 0; p < 4; p++) acc[i][p] = _mm256_setzero_ps();
    for (int d = 0; d < headDim; d += 8) {
      __m256 k[4];
      for (int p = 0; p < 4; p++) k[p] = Load8(rows[p] + d);
      for (int i = 0; i < Q; i++) {
        const __m256 qv = _mm256_loadu_ps(q[i] + d);
        for (int p = 0; p < 4; p++) acc[i][p] = _mm256_fmadd_ps(qv, k[p], acc[i][p]);
      }
    }
    for (int i = 0; i < Q; i++)
      _mm_storeu_ps(scores[i] + j, _mm_mul_ps(Sum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), scale4));
  }
  for (; j < length; j++) {
    const Half* row = keys + j * stride;
    __m256 acc[Q];
    for (int i = 0; i < Q; i++) acc[i] = _mm256_setzero_ps();
    for (int d = 0; d < headDim; d += 8) {
      const __m256 k = Load8(row + d);
      for (int i = 0; i < Q; i++) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q[i] + d), k, acc[i]);
    }
    for (int i = 0; i < Q; i++) {
      const __m128 sum = Sum4(acc[i], _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
      scores[i][j] = _mm_cvtss_f32(sum) * scale;
    }
  }
}

// AccumulateValuesAvx2 for Q queries over binary16 values: each value converted once for
// all Q queries, 32 dimensions a pass. Each accumulator sums its positions in the same order as
// AccumulateValuesAvx2, so the sums are the same floats.
template <int Q>
AVX2_WIDE_FN void AccumulateValuesMultiAvx2(const float* const* weights, const Half* values, int length, int reach,
                                            int headDim, float* const* out) {
  const size_t stride = RowStride<Half>(headDim);
  int d0 = 0;
  for (; d0 + 32 <= headDim; d0 += 32) {
    __m256 acc[Q][4];
    for (int i = 0; i < Q; i++)
      for (int k = 0; k < 4; k++) acc[i][k] = _mm256_loadu_ps(out[i] + d0 + 8 * k);
    for (int j = 0; j < length; j++) {
      const Half* row = values + j * stride + d0;
      if (d0 == 0) PrefetchAhead(values + j * stride, 1, reach - j, stride);
      __m256 v[4];
      for (int k = 0; k < 4; k++) v[k] = Load8(row + 8 * k);
      for (int i = 0; i < Q; i++) {
        const __m256 w = _mm256_set1_ps(weights[i][j]);
        for (int k = 0; k < 4; k++) acc[i][k] = _mm256_fmadd_ps(w, v[k], acc[i][k]);
      }
    }
    for (int i = 0; i < Q; i++)
      for (int k = 0; k < 4; k++) _mm256_storeu_ps(out[i] + d0 + 8 * k, acc[i][k]);
  }
  for (; d0 < headDim; d0 += 8) {
    __m256 acc[Q];
    for (int i = 0; i < Q; i++) acc[i] = _mm256_loadu_ps(out[i] + d0);
    for (int j = 0; j < length; j++) {
      const __m256 v = Load8(values + j * stride + d0);
      for (int i = 0; i < Q; i++) acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(weights[i][j]), v, acc[i]);
    }
    for (int i = 0; i < Q; i++) _mm256_storeu_ps(out[i] + d0, acc[i]);
  }
}

// The kernels take their query count as a template argument (their accumulators stay in
// registers): fn(std::integral_constant<int, count>) for a count of 1 to kHeadsPerPass.
static_assert(kHeadsPerPass == 3, "ForQueryCount covers counts 1 to 3");
template <typename Fn>
inline void ForQueryCount(int count, Fn&& fn) {
  if (count == 3) return fn(std::integral_constant<int, 3>{});
  if (count == 2) return fn(std::integral_constant<int, 2>{});
  fn(std::integral_constant<int, 1>{});
}

// The multi-query kernels for 1 to kHeadsPerPass queries, by the cache's element type: `length`
// positions from `keys` (or `values`), and the stream prefetched up to `reach` positions from it.
void ScoresMultiQuery(int count, const float* const* q, const Half* keys, int length, int reach, int headDim,
                      float scale, float* const* scores) {
  ForQueryCount(count, [&](auto n) {
    ScoresMultiAvx2<decltype(n)::value>(q, keys, length, reach, headDim, scale, scores);
  });
}

void ScoresMultiQuery(int count, const float* const* q, const Q8* keys, int length, int reach, int headDim,
                      float scale, float* const* scores) {
  ForQueryCount(count, [&](auto n) {
    ScoresQ8Avx2<decltype(n)::value>(q, keys, length, reach, headDim, scale, scores);
  });
}

void AccumulateValuesMultiQuery(int count, const float* const* weights, const Half* values, int length, int reach,
                                int headDim, float* const* out) {
  ForQueryCount(count, [&](auto n) {
    AccumulateValuesMultiAvx2<decltype(n)::value>(weights, values, length, reach, headDim, out);
  });
}

void AccumulateValuesMultiQuery(int count, const float* const* weights, const Q8* values, int length, int reach,
                                int headDim, float* const* out) {
  ForQueryCount(count, [&](auto n) {
    AccumulateValuesQ8Avx2<decltype(n)::value>(weights, values, length, reach, headDim, out);
  });
}
#endif

// Cached positions per tile: a tile's keys (or values), 64 x 256 bytes for a head of 64, stay in
// L1 while every query of a work item reads them.
constexpr int kPositionTile = 64;
// Cached positions per chunk. A token's attention is computed chunk by chunk (each chunk's own
// softmax maximum and sum, its values summed with those weights) and the chunks are merged in
// order, in prefill and decode alike, so a token's output does not depend on which path computed
// it, nor on the other rows of its batch. In decode a long row's chunks are separate work items,
// so both threads stream its cache (flash-decoding).
constexpr int kPositionChunk = 256;

int ChunksOf(int length) { return (length + kPositionChunk - 1) / kPositionChunk; }

// The first bytes of a decode item's keys or values, fetched into L2 while the item before it
// computes. ONNX Runtime's pool hands each thread a run of consecutive items, and the step's other
// work has pushed the cache out by then: with 16 rows of ~128 positions (16 KB of keys per item)
// the hardware prefetcher otherwise meets each item's stream cold, and a step's attention took
// ~10% longer. The start is enough for it to take the stream over; prefetching whole items made
// long rows slower.
constexpr size_t kPrefetchBytes = 1024;

// exp(scores - max) in place; returns their sum and sets *max.
float SoftmaxNumerators(float* scores, int length, float* max, bool avx) {
#ifdef ORTSERVE_X86_SIMD
  if (avx) return SoftmaxNumeratorsAvx2(scores, length, max);
#endif
  (void)avx;
  return SoftmaxNumeratorsScalar(scores, length, max);
}

// A chunk's result for one query: [score maximum, sum of exp(score - maximum), the values summed
// with those weights (headDim floats)].
inline int PartialStride(int headDim) { return headDim + 2; }

// Queries i < count over the cached positions [first, end) of one KV head, query i seeing
// positions [starts[i], lengths[i]) (a query that sees none of the chunk is skipped; a sliding
// window's query starts past 0). Tile by tile of positions every query that reaches into the tile
// is scored, so each tile is read from memory once, from the first position a query of the tile
// sees; an 8-bit cache's tile is converted to floats once for all the queries (`tile`, room for
// kPositionTile x headDim), which then read it from L1. scores holds `count` rows of
// kPositionChunk floats (position j at j - first); partials[i] receives query i's partial.
// Position j sits at row j - span.origin of keys and values, which hold span.rows rows from there
// (a sliding window's ring: see RingSpan).
struct CacheSpan {
  int origin;
  int rows;
};
template <typename T>
void AttendChunk(const float* const* queries, const int* starts, const int* lengths, int count, int first, int end,
                 const T* keys, const T* values, CacheSpan span, int headDim, float scale, bool avx, float* scores,
                 float* const* partials, float* tile) {
  const size_t D = static_cast<size_t>(headDim);
  const size_t stride = RowStride<T>(headDim);
  // Query i's positions [lo, hi) within [j0, j0 + kPositionTile) and the chunk; empty when hi <= lo.
  auto lo = [&](int i, int j0) { return std::max({starts[i], first, j0}); };
  auto hi = [&](int i, int j0) { return std::min({lengths[i], end, j0 + kPositionTile}); };
  // Positions [j, j + n) of a cache as the kernels read them, and their row stride.
  auto tileOf = [&](const T* cache, int j, int n) {
    if constexpr (std::is_same_v<T, Q8>) {
#ifdef ORTSERVE_X86_SIMD
      if (avx) {
        DequantizeAvx2(cache + (j - span.origin) * stride, n, headDim, tile);
        return static_cast<const float*>(tile);
      }
#endif
      DequantizeScalar(cache + (j - span.origin) * stride, n, headDim, tile);
      return static_cast<const float*>(tile);
    } else {
      (void)n;
      return cache + (j - span.origin) * stride;
    }
  };
  auto forEachTile = [&](const T* cache, auto fn) {
    for (int j0 = first; j0 < end; j0 += kPositionTile) {
      int from = j0 + kPositionTile;
      int to = j0;
      for (int i = 0; i < count; i++)
        if (hi(i, j0) > lo(i, j0)) {
          from = std::min(from, lo(i, j0));
          to = std::max(to, hi(i, j0));
        }
      if (to <= from) continue;
      const auto* data = tileOf(cache, from, to - from);
      for (int i = 0; i < count; i++) {
        const int a = lo(i, j0);
        const int n = hi(i, j0) - a;
        if (n > 0) fn(i, a, n, data + static_cast<size_t>(a - from) * D);
      }
    }
  };
  // The 8-bit and binary16 caches read straight from their bytes, up to kHeadsPerPass queries
  // that see the same positions of a tile at once (fn(i, r, a, n): queries [i, i + r), positions
  // [a, a + n)), each position converted once for all of them, where the CPU has
  // AVX-512VL's registers; otherwise one query at a time (forEachTile), an 8-bit cache through a
  // float tile. A token's floats still do not depend on the path: each query's sums run in the
  // same order whichever queries share its pass. A float cache has nothing to convert and
  // streamed slower through the multi-query kernels (one thread, 4 rows of 700 positions: 324 ->
  // 352 µs a layer), so it keeps the one-query ones.
  bool multiQuery = false;
#ifdef ORTSERVE_X86_SIMD
  multiQuery = !std::is_same_v<T, float> && avx && gAvx512Vl && (std::is_same_v<T, Half> || headDim % 32 == 0);
#endif
  // Where the queries' reads begin and end: the kernels prefetch no further (nor past the rows
  // the span holds from its origin).
  int readStart = end;
  int readEnd = 0;
  for (int i = 0; i < count; i++) {
    readStart = std::min(readStart, std::max(starts[i], first));
    readEnd = std::max(readEnd, lengths[i]);
  }
  readEnd = std::min(readEnd, span.origin + span.rows);
  auto forEachRun = [&](auto fn) {
    for (int j0 = first; j0 < end; j0 += kPositionTile) {
      for (int i = 0; i < count;) {
        const int a = lo(i, j0);
        const int n = hi(i, j0) - a;
        int r = 1;
        while (r < kHeadsPerPass && i + r < count && lo(i + r, j0) == a && hi(i + r, j0) - a == n) r++;
        if (n > 0) fn(i, r, a, n);
        i += r;
      }
    }
  };
  if (multiQuery) {
#ifdef ORTSERVE_X86_SIMD
    // The values' first positions, which the value pass's own prefetch (kStreamAhead ahead) never
    // covers, arrive while the keys are scored: a harness (see kStreamAhead) measured float16 16 x
    // 130 positions 82-84 -> 76-78 µs a layer, 1 x 1,584 52-53 -> 50-51, 1 x 100 9.6 -> 8.8; int8
    // the same either way.
    PrefetchRange<2>(values + (readStart - span.origin) * stride,
                     std::clamp(readEnd - readStart, 0, kStreamAhead) * stride * sizeof(T));
    if constexpr (!std::is_same_v<T, float>)
      forEachRun([&](int i, int r, int a, int n) {
        float* rows[kHeadsPerPass];
        for (int k = 0; k < r; k++) rows[k] = scores + static_cast<size_t>(i + k) * kPositionChunk + (a - first);
        ScoresMultiQuery(r, queries + i, keys + (a - span.origin) * stride, n, readEnd - a, headDim, scale, rows);
      });
#endif
  } else {
    forEachTile(keys, [&](int i, int a, int n, const auto* data) {
      float* row = scores + static_cast<size_t>(i) * kPositionChunk + (a - first);
#ifdef ORTSERVE_X86_SIMD
      if (avx) return ScoresAvx2(queries[i], data, n, headDim, scale, row);
#endif
      ScoresScalar(queries[i], data, n, headDim, scale, row);
    });
  }
  for (int i = 0; i < count; i++) {
    const int a = std::max(starts[i], first);
    const int n = std::min(lengths[i], end) - a;
    if (n <= 0) continue;
    float* partial = partials[i];
    partial[1] = SoftmaxNumerators(scores + static_cast<size_t>(i) * kPositionChunk + (a - first), n, &partial[0], avx);
    std::fill(partial + 2, partial + 2 + D, 0.0f);
  }
  if (multiQuery) {
#ifdef ORTSERVE_X86_SIMD
    if constexpr (!std::is_same_v<T, float>)
      forEachRun([&](int i, int r, int a, int n) {
        const float* weights[kHeadsPerPass];
        float* sums[kHeadsPerPass];
        for (int k = 0; k < r; k++) {
          weights[k] = scores + static_cast<size_t>(i + k) * kPositionChunk + (a - first);
          sums[k] = partials[i + k] + 2;
        }
        AccumulateValuesMultiQuery(r, weights, values + (a - span.origin) * stride, n, readEnd - a, headDim, sums);
      });
#endif
    return;
  }
  forEachTile(values, [&](int i, int a, int n, const auto* data) {
    const float* weights = scores + static_cast<size_t>(i) * kPositionChunk + (a - first);
#ifdef ORTSERVE_X86_SIMD
    if (avx) return AccumulateValuesAvx2(weights, data, n, headDim, partials[i] + 2);
#endif
    AccumulateValuesScalar(weights, data, n, headDim, partials[i] + 2);
  });
}

// A query's output from its chunks' partials (`stride` floats apart), merged in chunk order.
void MergePartials(const float* partials, int chunks, int stride, int headDim, float* out) {
  float max = partials[0];
  for (int c = 1; c < chunks; c++) max = std::max(max, partials[static_cast<size_t>(c) * stride]);
  float sum = 0;
  std::fill(out, out + headDim, 0.0f);
  for (int c = 0; c < chunks; c++) {
    const float* partial = partials + static_cast<size_t>(c) * stride;
    const float weight = std::exp(partial[0] - max);
    sum += partial[1] * weight;
    for (int d = 0; d < headDim; d++) out[d] += weight * partial[2 + d];
  }
  const float inv = 1.0f / sum;
  for (int d = 0; d < headDim; d++) out[d] *= inv;
}

// Whether a sliding-window layer's ring of `capacity` positions serves a step of `sequence` new
// tokens per row: whole chunks (so none wraps), and room for the window before the step's first
// token beside every token the step writes (they are all written before any is attended).
bool RingCapacityFits(int capacity, int window, int sequence) {
  return capacity % kPositionChunk == 0 && capacity >= window + sequence - 1;
}

template <typename T>
const char* Attention(const AttentionShape& s, const float* qkv, T* keyCache, T* valueCache, const int32_t* seqlensK,
                      const int64_t* positions, const float* cosCache, const float* sinCache, float* out,
                      const ParallelFor& parallelFor) {
  if (s.batch <= 0 || s.sequence <= 0) return nullptr;
  if (s.heads <= 0 || s.kvHeads <= 0 || s.heads % s.kvHeads != 0) return "num_heads must be a multiple of kv_num_heads";
  if (s.headDim <= 0 || s.headDim % 2 != 0) return "the head size must be even";
  const int group = s.heads / s.kvHeads;
  if (group > kMostGroup) return "more than 64 query heads share a KV head";
  const size_t D = static_cast<size_t>(s.headDim);
  const size_t packed = static_cast<size_t>(s.heads + 2 * s.kvHeads) * D;
  const size_t rowSpan = static_cast<size_t>(s.capacity) * RowStride<T>(s.headDim);
  const int half = s.headDim / 2;
  const int stride = PartialStride(s.headDim);
#ifdef ORTSERVE_X86_SIMD
  const bool avx = gAvx2Fma && s.headDim % 8 == 0;
#else
  const bool avx = false;
#endif

  // A sliding-window layer's cache may be a ring (RingCapacityFits): position p at row p % capacity.
  const bool ring = s.window > 0;
  auto slotOf = [&](int position) { return ring ? position % s.capacity : position; };
  // Where chunk c's positions sit: a ring's capacity is a whole number of chunks, so no chunk wraps.
  auto spanOf = [&](int c) {
    const int first = c * kPositionChunk;
    return CacheSpan{first - slotOf(first), s.capacity};
  };
  // Each row's new tokens follow its cached ones: past = length after this step - new tokens.
  std::vector<int> past(s.batch);
  for (int b = 0; b < s.batch; b++) {
    const int64_t total = static_cast<int64_t>(seqlensK[b]) + 1;
    if (total < s.sequence) return "seqlens_k is outside the cache";
    if (total > s.capacity && !(ring && RingCapacityFits(s.capacity, s.window, s.sequence)))
      return "seqlens_k is outside the cache";
    past[b] = static_cast<int>(total - s.sequence);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(s.batch) * s.sequence; i++)
    if (positions[i] < 0 || positions[i] >= s.rotaryPositions) return "a position is outside the rotary cache";

  // Token t of row b: its rotated key and its value for KV head g into the cache at its position.
  auto cacheToken = [&](int b, int t, int g) {
    const size_t token = static_cast<size_t>(b) * s.sequence + t;
    const float* in = qkv + token * packed;
    const int64_t pos = positions[token];
    thread_local std::vector<float> rotated;
    rotated.resize(D);
    const size_t cacheRow = (static_cast<size_t>(b) * s.kvHeads + g) * rowSpan +
                            static_cast<size_t>(slotOf(past[b] + t)) * RowStride<T>(s.headDim);
    RotateRow(in + (s.heads + g) * D, rotated.data(), s.headDim, cosCache + pos * half, sinCache + pos * half, avx);
    StoreCacheRow(rotated.data(), keyCache + cacheRow, s.headDim, avx);
    StoreCacheRow(in + (s.heads + s.kvHeads + g) * D, valueCache + cacheRow, s.headDim, avx);
  };
  // Query heads [h0, h0 + count) of token t of row b, rotated, to out (count x headDim).
  auto rotateQueries = [&](int b, int t, int h0, int count, float* out) {
    const size_t token = static_cast<size_t>(b) * s.sequence + t;
    const int64_t pos = positions[token];
    for (int i = 0; i < count; i++)
      RotateRow(qkv + token * packed + (h0 + i) * D, out + i * D, s.headDim, cosCache + pos * half,
                sinCache + pos * half, avx);
  };

  // The first position a token of `length` positions sees: past its sliding window, if the layer has one.
  auto startOf = [&](int length) { return s.window > 0 ? std::max(0, length - s.window) : 0; };

  int64_t pairs = 0;
  for (int b = 0; b < s.batch; b++) pairs += static_cast<int64_t>(past[b] + s.sequence) * s.sequence * s.heads;
  auto run = [&](size_t items, const std::function<void(size_t)>& fn) {
    if (pairs < kParallelPairs)
      for (size_t item = 0; item < items; item++) fn(item);
    else
      parallelFor(items, fn);
  };

  if (s.sequence == 1) {
    // Decode: a work item is (row, KV head, chunk), the query heads that share the KV head
    // together, so every tile of keys and values is read once for all of them; a row's chunks
    // are those its token sees, from firstChunk[b]. The partials are merged once every item is done.
    std::vector<int> chunks(s.batch);
    std::vector<int> firstChunk(s.batch);
    std::vector<size_t> firstItem(s.batch + 1, 0);
    int mostChunks = 0;
    for (int b = 0; b < s.batch; b++) {
      firstChunk[b] = startOf(past[b] + 1) / kPositionChunk;
      chunks[b] = ChunksOf(past[b] + 1) - firstChunk[b];
      mostChunks = std::max(mostChunks, chunks[b]);
      firstItem[b + 1] = firstItem[b] + static_cast<size_t>(s.kvHeads) * chunks[b];
    }
    // partials[b][h][c]
    thread_local std::vector<float> partialStore;
    const size_t partialsPerHead = static_cast<size_t>(mostChunks) * stride;
    partialStore.resize(static_cast<size_t>(s.batch) * s.heads * partialsPerHead);
    float* partials = partialStore.data();
    // Each item rotates its own queries; the item of a row's last chunk, the only one that reads
    // the new position, first writes that position's key and value. A row of one chunk has its
    // output merged by its item, the others once every item is done.
    struct DecodeItem {
      int b, g, c;
    };
    auto decodeItem = [&](size_t item) {
      const auto after = std::upper_bound(firstItem.begin(), firstItem.end(), item);
      const int b = static_cast<int>(after - firstItem.begin()) - 1;
      const size_t within = item - firstItem[b];
      return DecodeItem{b, static_cast<int>(within / chunks[b]), static_cast<int>(within % chunks[b])};
    };
    run(firstItem[s.batch], [&](size_t item) {
      const auto [b, g, c] = decodeItem(item);
      if (item + 1 < firstItem[s.batch]) {
        const DecodeItem next = decodeItem(item + 1);
        const size_t at = (static_cast<size_t>(next.b) * s.kvHeads + next.g) * rowSpan +
                          static_cast<size_t>(slotOf((firstChunk[next.b] + next.c) * kPositionChunk)) *
                              RowStride<T>(s.headDim);
        PrefetchRange<2>(keyCache + at, kPrefetchBytes);
        PrefetchRange<2>(valueCache + at, kPrefetchBytes);
      }
      const int length = past[b] + 1;
      if (c == chunks[b] - 1) cacheToken(b, 0, g);
      thread_local std::vector<float> groupQueries;
      groupQueries.resize(static_cast<size_t>(group) * D);
      rotateQueries(b, 0, g * group, group, groupQueries.data());
      const float* queryRows[kMostGroup];
      float* partialRows[kMostGroup];
      int starts[kMostGroup];
      int lengths[kMostGroup];
      for (int i = 0; i < group; i++) {
        const int h = g * group + i;
        queryRows[i] = groupQueries.data() + i * D;
        partialRows[i] = partials + (static_cast<size_t>(b) * s.heads + h) * partialsPerHead + static_cast<size_t>(c) * stride;
        starts[i] = startOf(length);
        lengths[i] = length;
      }
      thread_local std::vector<float> scores;
      thread_local std::vector<float> tile;
      scores.resize(static_cast<size_t>(group) * kPositionChunk);
      tile.resize(static_cast<size_t>(kPositionTile) * D);
      const size_t cacheRow = (static_cast<size_t>(b) * s.kvHeads + g) * rowSpan;
      const int chunk = firstChunk[b] + c;
      AttendChunk(queryRows, starts, lengths, group, chunk * kPositionChunk,
                  std::min(length, (chunk + 1) * kPositionChunk), keyCache + cacheRow, valueCache + cacheRow,
                  spanOf(chunk), s.headDim, s.scale, avx, scores.data(), partialRows, tile.data());
      if (chunks[b] == 1)
        for (int i = 0; i < group; i++)
          MergePartials(partialRows[i], 1, stride, s.headDim,
                        out + (static_cast<size_t>(b) * s.heads + g * group + i) * D);
    });
    for (int b = 0; b < s.batch; b++)
      if (chunks[b] > 1)
        for (int h = 0; h < s.heads; h++)
          MergePartials(partials + (static_cast<size_t>(b) * s.heads + h) * partialsPerHead, chunks[b], stride,
                        s.headDim, out + (static_cast<size_t>(b) * s.heads + h) * D);
    return nullptr;
  }

  // Prefill: first every new token's rotated queries, and its key and value into the cache; then
  // the work items (row, query head, block of up to kTokenBlock new tokens), token i of the block
  // seeing the cached positions and the new ones up to itself.
  std::vector<float> queries(static_cast<size_t>(s.batch) * s.sequence * s.heads * D);
  run(static_cast<size_t>(s.batch) * s.sequence, [&](size_t token) {
    const int b = static_cast<int>(token / s.sequence);
    const int t = static_cast<int>(token % s.sequence);
    rotateQueries(b, t, 0, s.heads, queries.data() + token * s.heads * D);
    for (int g = 0; g < s.kvHeads; g++) cacheToken(b, t, g);
  });
  const int blocks = (s.sequence + kTokenBlock - 1) / kTokenBlock;
  const size_t items = static_cast<size_t>(s.batch) * s.heads * blocks;
  run(items, [&](size_t item) {
    const int block = static_cast<int>(item % blocks);
    const int h = static_cast<int>((item / blocks) % s.heads);
    const int b = static_cast<int>(item / blocks / s.heads);
    const int g = h / group;
    const size_t cacheRow = (static_cast<size_t>(b) * s.kvHeads + g) * rowSpan;
    const int first = block * kTokenBlock;
    const int count = std::min(s.sequence, first + kTokenBlock) - first;
    const float* queryRows[kTokenBlock];
    int starts[kTokenBlock];
    int lengths[kTokenBlock];
    for (int i = 0; i < count; i++) {
      const size_t token = static_cast<size_t>(b) * s.sequence + first + i;
      queryRows[i] = queries.data() + (token * s.heads + h) * D;
      lengths[i] = past[b] + first + i + 1;
      starts[i] = startOf(lengths[i]);
    }
    const int chunkCount = ChunksOf(lengths[count - 1]);
    // partials[i][c]
    thread_local std::vector<float> partialStore;
    thread_local std::vector<float> scores;
    thread_local std::vector<float> tile;
    partialStore.resize(static_cast<size_t>(count) * chunkCount * stride);
    scores.resize(static_cast<size_t>(count) * kPositionChunk);
    tile.resize(static_cast<size_t>(kPositionTile) * D);
    float* partialRows[kTokenBlock];
    // The block's first token starts earliest: no chunk before its start is read.
    for (int c = starts[0] / kPositionChunk; c < chunkCount; c++) {
      for (int i = 0; i < count; i++) partialRows[i] = partialStore.data() + (static_cast<size_t>(i) * chunkCount + c) * stride;
      AttendChunk(queryRows, starts, lengths, count, c * kPositionChunk,
                  std::min(lengths[count - 1], (c + 1) * kPositionChunk), keyCache + cacheRow, valueCache + cacheRow,
                  spanOf(c), s.headDim, s.scale, avx, scores.data(), partialRows, tile.data());
    }
    for (int i = 0; i < count; i++) {
      const size_t token = static_cast<size_t>(b) * s.sequence + first + i;
      const int firstChunk = starts[i] / kPositionChunk;
      MergePartials(partialStore.data() + (static_cast<size_t>(i) * chunkCount + firstChunk) * stride,
                    ChunksOf(lengths[i]) - firstChunk, stride, s.headDim, out + (token * s.heads + h) * D);
    }
  });
  return nullptr;
}

// Attention, a sliding-window layer's ring permitting: a step with more new tokens per row than
// its ring holds beside the window is attended row by row, in pieces that fit, each piece's keys
// and values written before it is attended, as the whole step's are otherwise. A token's output is
// the same bits either way (it depends on its own query and the positions it sees, not on which
// tokens share its pass).
template <typename T>
const char* AttentionInPieces(const AttentionShape& s, const float* qkv, T* keyCache, T* valueCache,
                              const int32_t* seqlensK, const int64_t* positions, const float* cosCache,
                              const float* sinCache, float* out, const ParallelFor& parallelFor) {
  bool wraps = false;
  for (int b = 0; b < s.batch; b++) wraps = wraps || static_cast<int64_t>(seqlensK[b]) + 1 > s.capacity;
  const int most = s.capacity - s.window + 1;
  if (s.window <= 0 || !wraps || s.sequence <= most)
    return Attention(s, qkv, keyCache, valueCache, seqlensK, positions, cosCache, sinCache, out, parallelFor);
  if (most < 1) return "the sliding window is longer than the cache holds";
  const size_t packed = static_cast<size_t>(s.heads + 2 * s.kvHeads) * s.headDim;
  const size_t outWidth = static_cast<size_t>(s.heads) * s.headDim;
  const size_t cacheRow = static_cast<size_t>(s.kvHeads) * s.capacity * RowStride<T>(s.headDim);
  for (int b = 0; b < s.batch; b++) {
    const int past = seqlensK[b] + 1 - s.sequence;
    for (int t0 = 0; t0 < s.sequence; t0 += most) {
      AttentionShape piece = s;
      piece.batch = 1;
      piece.sequence = std::min(most, s.sequence - t0);
      const int32_t length = past + t0 + piece.sequence - 1;
      const size_t token = static_cast<size_t>(b) * s.sequence + t0;
      if (const char* problem =
              Attention(piece, qkv + token * packed, keyCache + b * cacheRow, valueCache + b * cacheRow, &length,
                        positions + token, cosCache, sinCache, out + token * outWidth, parallelFor))
        return problem;
    }
  }
  return nullptr;
}

// Ragged tokens (attention.h): each run of a row's tokens is attended as a batch of its own shape,
// consecutive rows of one token each as one decode batch. A row may come in several runs, each
// continuing its positions where the one before ended (the engine puts a multi-token row's last
// token among the one-token rows, so the logits it keeps stay a suffix): the runs are attended in
// token order, each after the ones before it wrote their keys and values, with the row's length
// taken from the run's positions. A token's output is the same bits as in a batch of its row alone.
template <typename T>
const char* RaggedAttention(const AttentionShape& s, const float* qkv, T* keyCache, T* valueCache,
                            const int32_t* seqlensK, const int64_t* positions, const float* cosCache,
                            const float* sinCache, float* out, const ParallelFor& parallelFor,
                            const int64_t* tokenRows, int64_t tokens) {
  const size_t packed = static_cast<size_t>(s.heads + 2 * s.kvHeads) * s.headDim;
  const size_t outWidth = static_cast<size_t>(s.heads) * s.headDim;
  const size_t cacheRow = static_cast<size_t>(s.kvHeads) * s.capacity * RowStride<T>(s.headDim);
  struct Run {
    int64_t first, count, row;
  };
  std::vector<Run> runs;
  // Each row's next position: -1 before its first run.
  std::vector<int64_t> next(s.batch, -1);
  for (int64_t t = 0; t < tokens; t++) {
    const int64_t row = tokenRows[t];
    if (row < 0 || row >= s.batch) return "a token_rows entry is outside the batch";
    if (next[row] >= 0 && positions[t] != next[row]) return "a row's tokens in token_rows do not continue its positions";
    next[row] = positions[t] + 1;
    if (!runs.empty() && runs.back().row == row)
      runs.back().count++;
    else
      runs.push_back({t, 1, row});
  }
  // After its last run a row holds seqlens_k + 1 positions, as the attention mask says.
  for (int b = 0; b < s.batch; b++)
    if (next[b] >= 0 && next[b] != static_cast<int64_t>(seqlensK[b]) + 1)
      return "a row's last position in token_rows disagrees with seqlens_k";
  // Rows [row0, row0 + rows), `sequence` tokens each, whose tokens start at token `first`; each
  // row's length after them from the positions of its tokens.
  std::vector<int32_t> lengths;
  auto attend = [&](int64_t first, int row0, int rows, int sequence) {
    AttentionShape part = s;
    part.batch = rows;
    part.sequence = sequence;
    lengths.resize(rows);
    for (int i = 0; i < rows; i++)
      lengths[i] = static_cast<int32_t>(positions[first + static_cast<int64_t>(i + 1) * sequence - 1]);
    return AttentionInPieces(part, qkv + first * packed, keyCache + row0 * cacheRow, valueCache + row0 * cacheRow,
                     lengths.data(), positions + first, cosCache, sinCache, out + first * outWidth, parallelFor);
  };
  for (size_t i = 0; i < runs.size();) {
    const Run& run = runs[i];
    size_t j = i + 1;
    // A one-token run takes the following one-token runs of the next rows into one decode batch.
    if (run.count == 1)
      while (j < runs.size() && runs[j].count == 1 && runs[j].row == runs[j - 1].row + 1) j++;
    const int rows = static_cast<int>(j - i);
    const int sequence = rows == 1 ? static_cast<int>(run.count) : 1;
    if (const char* problem = attend(run.first, static_cast<int>(run.row), rows, sequence)) return problem;
    i = j;
  }
  return nullptr;
}

template <typename T>
const char* Dispatch(const AttentionShape& s, const float* qkv, T* keyCache, T* valueCache, const int32_t* seqlensK,
                     const int64_t* positions, const float* cosCache, const float* sinCache, float* out,
                     const ParallelFor& parallelFor, const int64_t* tokenRows, int64_t tokens) {
  if (tokenRows == nullptr)
    return AttentionInPieces(s, qkv, keyCache, valueCache, seqlensK, positions, cosCache, sinCache, out,
                             parallelFor);
  return RaggedAttention(s, qkv, keyCache, valueCache, seqlensK, positions, cosCache, sinCache, out, parallelFor,
                         tokenRows, tokens);
}

}  // namespace

const char* CachedAttention(const AttentionShape& shape, const float* qkv, void* keyCache, void* valueCache,
                            CacheElement element, const int32_t* seqlensK, const int64_t* positions,
                            const float* cosCache, const float* sinCache, float* out, const ParallelFor& parallelFor,
                            const int64_t* tokenRows, int64_t tokens) {
  if (element == CacheElement::kHalf)
    return Dispatch(shape, qkv, static_cast<Half*>(keyCache), static_cast<Half*>(valueCache), seqlensK, positions,
                    cosCache, sinCache, out, parallelFor, tokenRows, tokens);
  if (element == CacheElement::kInt8)
    return Dispatch(shape, qkv, static_cast<Q8*>(keyCache), static_cast<Q8*>(valueCache), seqlensK, positions,
                    cosCache, sinCache, out, parallelFor, tokenRows, tokens);
  return Dispatch(shape, qkv, static_cast<float*>(keyCache), static_cast<float*>(valueCache), seqlensK, positions,
                  cosCache, sinCache, out, parallelFor, tokenRows, tokens);
}

}  // namespace ortserve

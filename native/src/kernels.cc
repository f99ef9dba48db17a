// Each kernel has a scalar version, a line-by-line port of its TypeScript
// original, and (on x86-64 with GCC or Clang) an AVX2 version picked at run
// time, so one build runs on any x86-64-v2 CPU. The AVX2 versions keep the
// same per-element arithmetic and the same summation order (the TypeScript
// sums run in four interleaved lanes, which is one __m256d accumulator), and
// the build forbids FMA contraction: results stay identical, see kernels.h.
#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <vector>

#include "cpu-features.h"

#ifdef ORTSERVE_X86_SIMD
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2")))
#endif

namespace ortserve {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr double kLimit = kExpTableSize - 1;
constexpr double kSixth = 1.0 / 6;
constexpr double kTwentyFourth = 1.0 / 24;

alignas(64) double gTable[kExpTableSize];
std::once_flag gTableOnce;
std::atomic<bool> gTableReady{false};

const bool gAvx2Available = Cpu().avx2;
std::atomic<bool> gSimd{gAvx2Available};

inline bool simd() { return gSimd.load(std::memory_order_relaxed); }

// ops/exp.ts, expNonPositive.
inline double expNonPositive(double x) {
  const double y = -x * kExpSteps;
  if (!(y < kLimit)) return 0;
  if (y < 0) return std::exp(x);
  const int j = static_cast<int>(y);
  const double f = (j - y) / kExpSteps;
  return gTable[j] * (1 + f * (1 + f * (0.5 + f * (kSixth + f * kTwentyFourth))));
}

// `Math.min(d, LAST_BUCKET) | 0`, also what a Uint16Array stores, for d >= 0; NaN gives 0.
// A negative d (a value above the given max: a caller's mistake) gives 0 too, to stay in range.
inline int bucketOf(double d) {
  if (d < kLastBucket) return d > 0 ? static_cast<int>(d) : 0;
  return d >= kLastBucket ? kLastBucket : 0;
}

// Math.max of non-NaN values: +0 beats -0.
inline double jsMax(double a, double b) { return a > b || (a == b && !std::signbit(a)) ? a : b; }

// The four-lane sum the TypeScript kernels use (lane = index mod 4, tail in lane 0).
double sum4(const double* a, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 3 < n; i += 4) {
    s0 += a[i];
    s1 += a[i + 1];
    s2 += a[i + 2];
    s3 += a[i + 3];
  }
  for (; i < n; i++) s0 += a[i];
  return s0 + s1 + s2 + s3;
}

// Smallest float >= t (NaN stays NaN).
float floatAtOrAbove(double t) {
  if (t > std::numeric_limits<float>::max()) return kInfF;
  if (t < -std::numeric_limits<float>::max()) return t == -kInf ? -kInfF : -std::numeric_limits<float>::max();
  float f = static_cast<float>(t);
  if (static_cast<double>(f) < t) f = std::nextafter(f, kInfF);
  return f;
}

// ---- scalar kernels: the TypeScript code, statement for statement ----

double maxValueScalar(const float* row, size_t n) {
  double m0 = -kInf, m1 = -kInf, m2 = -kInf, m3 = -kInf;
  size_t i = 0;
  for (; i + 3 < n; i += 4) {
    if (row[i] > m0) m0 = row[i];
    if (row[i + 1] > m1) m1 = row[i + 1];
    if (row[i + 2] > m2) m2 = row[i + 2];
    if (row[i + 3] > m3) m3 = row[i + 3];
  }
  for (; i < n; i++)
    if (row[i] > m0) m0 = row[i];
  return jsMax(jsMax(jsMax(m0, m1), m2), m3);
}

// The first index of the maximum, which is what the TypeScript lanes settle on.
// Found in two passes: one compare chain through the row would wait on itself.
int32_t argmaxScalar(const float* row, size_t n) {
  const double m = maxValueScalar(row, n);
  if (!(m > -kInf)) return -1;
  for (size_t i = 0; i < n; i++)
    if (row[i] == m) return static_cast<int32_t>(i);
  return -1;
}

double logSumExpScalar(const float* row, size_t n) {
  const double max = maxValueScalar(row, n);
  if (max == -kInf) return max;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 3 < n; i += 4) {
    s0 += expNonPositive(row[i] - max);
    s1 += expNonPositive(row[i + 1] - max);
    s2 += expNonPositive(row[i + 2] - max);
    s3 += expNonPositive(row[i + 3] - max);
  }
  for (; i < n; i++) s0 += expNonPositive(row[i] - max);
  return max + std::log(s0 + s1 + s2 + s3);
}

size_t rankOfScalar(const float* row, size_t n, float value) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) count += row[i] >= value;
  return count;
}

double blockSumScalar(const float* row, size_t start, size_t end, double max, double inv) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = start;
  for (; i + 3 < end; i += 4) {
    s0 += expNonPositive((row[i] - max) * inv);
    s1 += expNonPositive((row[i + 1] - max) * inv);
    s2 += expNonPositive((row[i + 2] - max) * inv);
    s3 += expNonPositive((row[i + 3] - max) * inv);
  }
  for (; i < end; i++) s0 += expNonPositive((row[i] - max) * inv);
  return s0 + s1 + s2 + s3;
}

size_t collectScalar(const float* row, size_t start, size_t n, double threshold, double max, double inv,
                     bool withBuckets, int32_t* ids, double* weights, uint16_t* buckets, size_t m) {
  for (size_t i = start; i < n; i++) {
    const double v = row[i];
    if (v >= threshold && v > -kInf) {
      const double distance = (max - v) * inv;
      ids[m] = static_cast<int32_t>(i);
      weights[m] = expNonPositive(-distance);
      if (withBuckets) buckets[m] = static_cast<uint16_t>(bucketOf(distance * kBucketsPerNat));
      m++;
    }
  }
  return m;
}

void histogramScalar(const float* row, size_t start, size_t n, double threshold, double max, double inv,
                     double* histogram) {
  for (size_t i = start; i < n; i++) {
    const double v = row[i];
    if (v >= threshold && v > -kInf) {
      const double distance = (max - v) * inv;
      histogram[bucketOf(distance * kBucketsPerNat)] += expNonPositive(-distance);
    }
  }
}

void heapPush(double* values, int32_t* ids, size_t size, double v, int32_t id) {
  size_t i = size;
  while (i > 0) {
    const size_t parent = (i - 1) >> 1;
    if (values[parent] <= v) break;
    values[i] = values[parent];
    ids[i] = ids[parent];
    i = parent;
  }
  values[i] = v;
  ids[i] = id;
}

void siftDown(double* values, int32_t* ids, size_t size) {
  const double v = values[0];
  const int32_t id = ids[0];
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= size) break;
    if (child + 1 < size && values[child + 1] < values[child]) child++;
    if (values[child] >= v) break;
    values[i] = values[child];
    ids[i] = ids[child];
    i = child;
  }
  values[i] = v;
  ids[i] = id;
}

// kthLargest's radix bins: the top 12 bits of a key that orders floats as
// numbers (NaN taken as -inf, as the TypeScript version does).
constexpr int kRadixShift = 20;
constexpr uint32_t kRadixBins = 1u << (32 - kRadixShift);

inline uint32_t radixBin(float v) {
  if (std::isnan(v)) v = -kInfF;
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return (b ^ (static_cast<uint32_t>(static_cast<int32_t>(b) >> 31) | 0x80000000u)) >> kRadixShift;
}

// ---- AVX2 ----

#ifdef ORTSERVE_X86_SIMD

// expNonPositive on four lanes, for x <= 0 or NaN (callers make sure: x is
// logit - max with the row's max). Gathered table entries and the same
// operations in the same order give the same doubles as the scalar code.
AVX2_FN inline __m256d exp4(__m256d x) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d y = _mm256_mul_pd(_mm256_xor_pd(x, _mm256_set1_pd(-0.0)), _mm256_set1_pd(kExpSteps));
  const __m256d fast = _mm256_cmp_pd(y, _mm256_set1_pd(kLimit), _CMP_LT_OQ);
  const __m256d yc = _mm256_and_pd(y, fast);  // 0 on the other lanes, so j stays in range
  const __m128i j = _mm256_cvttpd_epi32(yc);
  const __m256d f = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtepi32_pd(j), yc), _mm256_set1_pd(1.0 / kExpSteps));
  __m256d p = _mm256_add_pd(_mm256_set1_pd(kSixth), _mm256_mul_pd(f, _mm256_set1_pd(kTwentyFourth)));
  p = _mm256_add_pd(_mm256_set1_pd(0.5), _mm256_mul_pd(f, p));
  p = _mm256_add_pd(_mm256_set1_pd(1.0), _mm256_mul_pd(f, p));
  p = _mm256_add_pd(_mm256_set1_pd(1.0), _mm256_mul_pd(f, p));
  // Lanes off the fast path (y >= 8192 or NaN) gather 0 and stay 0.
  return _mm256_mul_pd(_mm256_mask_i32gather_pd(zero, gTable, j, fast, 8), p);
}

AVX2_FN inline __m256d load4(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }

AVX2_FN inline void lanes(__m256d v, double* s) { _mm256_storeu_pd(s, v); }

AVX2_FN float maxFloatAvx2(const float* row, size_t n) {
  // max_ps(v, m) is `v > m ? v : m`: NaN never wins.
  __m256 m0 = _mm256_set1_ps(-kInfF), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(row + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(row + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(row + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(row + i + 24), m3);
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(row + i), m0);
  const __m256 m = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
  alignas(32) float l[8];
  _mm256_store_ps(l, m);
  float r = -kInfF;
  for (float v : l)
    if (v > r) r = v;
  for (; i < n; i++)
    if (row[i] > r) r = row[i];
  return r;
}

AVX2_FN double maxValueAvx2(const float* row, size_t n) {
  const float r = maxFloatAvx2(row, n);
  // Which zero the TypeScript lanes report depends on where the zeros sit: ask the scalar port.
  return r == 0 ? maxValueScalar(row, n) : r;
}

AVX2_FN int32_t argmaxAvx2(const float* row, size_t n) {
  const float m = maxFloatAvx2(row, n);
  if (!(m > -kInfF)) return -1;
  const __m256 mv = _mm256_set1_ps(m);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + i), mv, _CMP_EQ_OQ));
    if (mask != 0) return static_cast<int32_t>(i + __builtin_ctz(static_cast<unsigned>(mask)));
  }
  for (; i < n; i++)
    if (row[i] == m) return static_cast<int32_t>(i);
  return -1;
}

AVX2_FN size_t rankOfAvx2(const float* row, size_t n, float value) {
  const __m256 v = _mm256_set1_ps(value);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // A true comparison is all ones, -1 as an integer.
    c0 = _mm256_sub_epi32(c0, _mm256_castps_si256(_mm256_cmp_ps(_mm256_loadu_ps(row + i), v, _CMP_GE_OQ)));
    c1 = _mm256_sub_epi32(c1, _mm256_castps_si256(_mm256_cmp_ps(_mm256_loadu_ps(row + i + 8), v, _CMP_GE_OQ)));
  }
  alignas(32) int32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), _mm256_add_epi32(c0, c1));
  size_t count = 0;
  for (int32_t c : l) count += static_cast<uint32_t>(c);
  for (; i < n; i++) count += row[i] >= value;
  return count;
}

// First index in [i, n) whose value is > bar (orEqual: >=), or n.
template <bool orEqual>
AVX2_FN size_t nextCandidate(const float* row, size_t i, size_t n, float bar) {
  const __m256 b = _mm256_set1_ps(bar);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(row + i);
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(v, b, orEqual ? _CMP_GE_OQ : _CMP_GT_OQ));
    if (mask != 0) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; i++)
    if (orEqual ? row[i] >= bar : row[i] > bar) return i;
  return n;
}

AVX2_FN double logSumExpAvx2(const float* row, size_t n) {
  const double max = maxValueAvx2(row, n);
  if (max == -kInf) return max;
  const __m256d mv = _mm256_set1_pd(max);
  __m256d acc = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 3 < n; i += 4) acc = _mm256_add_pd(acc, exp4(_mm256_sub_pd(load4(row + i), mv)));
  double s[4];
  lanes(acc, s);
  for (; i < n; i++) s[0] += expNonPositive(row[i] - max);
  return max + std::log(s[0] + s[1] + s[2] + s[3]);
}

AVX2_FN double blockSumAvx2(const float* row, size_t start, size_t end, double max, double inv) {
  const __m256d mv = _mm256_set1_pd(max);
  const __m256d iv = _mm256_set1_pd(inv);
  __m256d acc = _mm256_setzero_pd();
  size_t i = start;
  for (; i + 3 < end; i += 4) acc = _mm256_add_pd(acc, exp4(_mm256_mul_pd(_mm256_sub_pd(load4(row + i), mv), iv)));
  double s[4];
  lanes(acc, s);
  for (; i < end; i++) s[0] += expNonPositive((row[i] - max) * inv);
  return s[0] + s[1] + s[2] + s[3];
}

// Tokens >= threshold (and > -inf), four at a time in index order: hands each
// group with a survivor to sink(i, lane mask, weights, buckets). Returns
// where the scalar tail starts.
template <typename Sink>
AVX2_FN size_t scanSurvivors(const float* row, size_t n, double threshold, double max, double inv, Sink& sink) {
  // Row values are floats, so `v >= threshold` is `v >= the smallest float >= threshold`.
  const __m256 low = _mm256_set1_ps(floatAtOrAbove(threshold));
  const __m256 negInf = _mm256_set1_ps(-kInfF);
  const __m256d mv = _mm256_set1_pd(max);
  const __m256d iv = _mm256_set1_pd(inv);
  const __m256d zero = _mm256_setzero_pd();
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d perNat = _mm256_set1_pd(kBucketsPerNat);
  const __m256d last = _mm256_set1_pd(kLastBucket);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v8 = _mm256_loadu_ps(row + i);
    const int mask8 = _mm256_movemask_ps(
        _mm256_and_ps(_mm256_cmp_ps(v8, low, _CMP_GE_OQ), _mm256_cmp_ps(v8, negInf, _CMP_GT_OQ)));
    if (mask8 == 0) continue;
    for (int h = 0; h < 2; h++) {
      const int mask = (mask8 >> (4 * h)) & 0x0f;
      if (mask == 0) continue;
      const __m256d v = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(v8) : _mm256_extractf128_ps(v8, 1));
      const __m256d distance = _mm256_mul_pd(_mm256_sub_pd(mv, v), iv);
      const __m256d w = exp4(_mm256_xor_pd(distance, sign));
      // bucketOf: max_pd returns its second operand, 0, for NaN (and a negative distance), then the cap.
      const __m256d scaled = _mm256_max_pd(_mm256_mul_pd(distance, perNat), zero);
      sink(i + 4 * h, mask, w, _mm256_cvttpd_epi32(_mm256_min_pd(scaled, last)));
    }
  }
  return i;
}

struct CollectSink {
  int32_t* ids;
  double* weights;
  uint16_t* buckets;
  bool withBuckets;
  size_t m;

  AVX2_FN void operator()(size_t i, int mask, __m256d w, __m128i bucket) {
    if (mask == 0x0f) {
      _mm256_storeu_pd(weights + m, w);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ids + m),
                       _mm_add_epi32(_mm_set1_epi32(static_cast<int32_t>(i)), _mm_setr_epi32(0, 1, 2, 3)));
      if (withBuckets) _mm_storel_epi64(reinterpret_cast<__m128i*>(buckets + m), _mm_packus_epi32(bucket, bucket));
      m += 4;
      return;
    }
    alignas(32) double ws[4];
    alignas(16) int32_t bs[4];
    _mm256_store_pd(ws, w);
    _mm_store_si128(reinterpret_cast<__m128i*>(bs), bucket);
    for (int k = 0; k < 4; k++) {
      if (!(mask & (1 << k))) continue;
      ids[m] = static_cast<int32_t>(i + k);
      weights[m] = ws[k];
      if (withBuckets) buckets[m] = static_cast<uint16_t>(bs[k]);
      m++;
    }
  }
};

struct HistogramSink {
  double* histogram;

  AVX2_FN void operator()(size_t, int mask, __m256d w, __m128i bucket) {
    alignas(32) double ws[4];
    alignas(16) int32_t bs[4];
    _mm256_store_pd(ws, w);
    _mm_store_si128(reinterpret_cast<__m128i*>(bs), bucket);
    // In index order, as the scalar loop adds.
    for (int k = 0; k < 4; k++)
      if (mask & (1 << k)) histogram[bs[k]] += ws[k];
  }
};

AVX2_FN size_t collectAvx2(const float* row, size_t n, double threshold, double max, double inv, bool withBuckets,
                           int32_t* ids, double* weights, uint16_t* buckets) {
  CollectSink sink{ids, weights, buckets, withBuckets, 0};
  const size_t tail = scanSurvivors(row, n, threshold, max, inv, sink);
  return collectScalar(row, tail, n, threshold, max, inv, withBuckets, ids, weights, buckets, sink.m);
}

AVX2_FN void histogramAvx2(const float* row, size_t n, double threshold, double max, double inv,
                           double* histogram) {
  HistogramSink sink{histogram};
  const size_t tail = scanSurvivors(row, n, threshold, max, inv, sink);
  histogramScalar(row, tail, n, threshold, max, inv, histogram);
}

AVX2_FN inline __m256i radixBins8(const float* p) {
  __m256 v = _mm256_loadu_ps(p);
  v = _mm256_blendv_ps(v, _mm256_set1_ps(-kInfF), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i b = _mm256_castps_si256(v);
  const __m256i key = _mm256_xor_si256(b, _mm256_or_si256(_mm256_srai_epi32(b, 31), _mm256_set1_epi32(INT32_MIN)));
  return _mm256_srli_epi32(key, kRadixShift);
}

// Counts bins eight values at a time into four interleaved count arrays; returns where the tail starts.
AVX2_FN size_t radixCountAvx2(const float* row, size_t n, uint32_t* counts) {
  alignas(32) uint32_t bins[8];
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(bins), radixBins8(row + i));
    for (int k = 0; k < 8; k++) counts[(k & 3) * kRadixBins + bins[k]]++;
  }
  return i;
}

// Appends the values of bin `top` (NaN as -inf) in index order; returns where the tail starts.
AVX2_FN size_t radixSelectAvx2(const float* row, size_t n, uint32_t top, float* out, size_t* m) {
  const __m256i t = _mm256_set1_epi32(static_cast<int32_t>(top));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int mask = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(radixBins8(row + i), t)));
    while (mask != 0) {
      const size_t j = i + __builtin_ctz(static_cast<unsigned>(mask));
      out[(*m)++] = std::isnan(row[j]) ? -kInfF : row[j];
      mask &= mask - 1;
    }
  }
  return i;
}

#endif  // ORTSERVE_X86_SIMD

}  // namespace

// ---- entry points ----

bool setExpTable(const double* table) {
  std::call_once(gTableOnce, [table] {
    std::memcpy(gTable, table, sizeof gTable);
    gTableReady.store(true);
  });
  return std::memcmp(gTable, table, sizeof gTable) == 0;
}

bool expTableReady() { return gTableReady.load(); }

bool simdAvailable() { return gAvx2Available; }

bool setSimd(bool on) {
  gSimd.store(on && gAvx2Available);
  return simd();
}

int32_t argmax(const float* row, size_t n) {
#ifdef ORTSERVE_X86_SIMD
  if (simd()) return argmaxAvx2(row, n);
#endif
  return argmaxScalar(row, n);
}

double maxValue(const float* row, size_t n) {
#ifdef ORTSERVE_X86_SIMD
  if (simd()) return maxValueAvx2(row, n);
#endif
  return maxValueScalar(row, n);
}

double logSumExp(const float* row, size_t n) {
#ifdef ORTSERVE_X86_SIMD
  if (simd()) return logSumExpAvx2(row, n);
#endif
  return logSumExpScalar(row, n);
}

size_t rankOf(const float* row, size_t n, float value) {
#ifdef ORTSERVE_X86_SIMD
  if (simd()) return rankOfAvx2(row, n, value);
#endif
  return rankOfScalar(row, n, value);
}

size_t topN(const float* row, size_t n, size_t want, int32_t* ids, double* vals) {
  want = std::min(want, n);
  if (want == 0) return 0;
  size_t size = 0;
  // Once the window is full, a value must beat the current n-th (an equal later index ranks below).
  double bar = -kInf;
  for (size_t i = 0; i < n; i++) {
#ifdef ORTSERVE_X86_SIMD
    // bar holds a float (a row value), so comparing in float is exact.
    if (size == want && simd()) {
      i = nextCandidate<false>(row, i, n, static_cast<float>(bar));
      if (i == n) break;
    }
#endif
    const double v = row[i];
    if (size == want ? !(v > bar) : std::isnan(v)) continue;
    size_t j = size < want ? size++ : want - 1;
    while (j > 0 && vals[j - 1] < v) {
      vals[j] = vals[j - 1];
      ids[j] = ids[j - 1];
      j--;
    }
    vals[j] = v;
    ids[j] = static_cast<int32_t>(i);
    if (size == want) bar = vals[want - 1];
  }
  return size;
}

double kthLargest(const float* row, size_t n, size_t k) {
  // Any selection gives the same k-th value. A radix pass over the top 12 bits
  // of an order-preserving key finds its bin, then only that bin is selected.
  thread_local std::vector<uint32_t> countStore(4 * kRadixBins);
  thread_local std::vector<float> binStore;
  uint32_t* counts = countStore.data();
  std::fill(counts, counts + 4 * kRadixBins, 0);
  size_t i = 0;
#ifdef ORTSERVE_X86_SIMD
  if (simd()) i = radixCountAvx2(row, n, counts);
#endif
  for (; i < n; i++) counts[radixBin(row[i])]++;
  const auto count = [counts](size_t b) {
    return size_t{counts[b]} + counts[kRadixBins + b] + counts[2 * kRadixBins + b] + counts[3 * kRadixBins + b];
  };
  size_t above = 0;
  uint32_t top = kRadixBins - 1;
  while (above + count(top) < k) above += count(top--);
  binStore.resize(count(top));
  float* selected = binStore.data();
  size_t m = 0;
  i = 0;
#ifdef ORTSERVE_X86_SIMD
  if (simd()) i = radixSelectAvx2(row, n, top, selected, &m);
#endif
  for (; i < n; i++)
    if (radixBin(row[i]) == top) selected[m++] = std::isnan(row[i]) ? -kInfF : row[i];
  float* nth = selected + (k - above - 1);
  std::nth_element(selected, nth, selected + m, std::greater<float>());
  return *nth;
}

HeapScan heapTopK(const float* row, size_t n, size_t k, double* heap, int32_t* ids) {
  double max = -kInf;
  for (size_t i = 0; i < k; i++) {
    const double v = std::isnan(row[i]) ? -kInf : row[i];
    if (v > max) max = v;
    heapPush(heap, ids, i, v, static_cast<int32_t>(i));
  }
  // Largest value seen equal to the heap's minimum yet left out of the heap.
  double tie = std::numeric_limits<double>::quiet_NaN();
  double top = heap[0];
  for (size_t i = k; i < n; i++) {
#ifdef ORTSERVE_X86_SIMD
    // Only values >= the heap's minimum do anything; top holds a float (or -inf).
    if (simd()) {
      i = nextCandidate<true>(row, i, n, static_cast<float>(top));
      if (i == n) break;
    }
#endif
    const double v = row[i];
    if (v > top) {
      if (v > max) max = v;
      tie = top;
      heap[0] = v;
      ids[0] = static_cast<int32_t>(i);
      siftDown(heap, ids, k);
      top = heap[0];
    } else if (v == top) {
      tie = v;
    }
  }
  return {max, top, tie == top};
}

size_t collect(const float* row, size_t n, double threshold, double max, double temperature, bool withBuckets,
               int32_t* ids, double* weights, uint16_t* buckets, double* total) {
  const double inv = 1 / temperature;
  size_t m;
#ifdef ORTSERVE_X86_SIMD
  // The vector exp needs every value <= max; a wrong max gets the scalar code's exact answer.
  if (simd() && !(maxFloatAvx2(row, n) > max))
    m = collectAvx2(row, n, threshold, max, inv, withBuckets, ids, weights, buckets);
  else
#endif
    m = collectScalar(row, 0, n, threshold, max, inv, withBuckets, ids, weights, buckets, 0);
  *total = sum4(weights, m);
  return m;
}

double massHistogram(const float* row, size_t n, double threshold, double max, double temperature,
                     double* histogram) {
  const double inv = 1 / temperature;
  std::fill(histogram, histogram + kLastBucket + 1, 0.0);
#ifdef ORTSERVE_X86_SIMD
  if (simd() && !(maxFloatAvx2(row, n) > max))
    histogramAvx2(row, n, threshold, max, inv, histogram);
  else
#endif
    histogramScalar(row, 0, n, threshold, max, inv, histogram);
  double total = 0;
  for (int b = 0; b <= kLastBucket; b++) total += histogram[b];
  return total;
}

int32_t drawDense(const float* row, size_t n, double temperature, double u, double* sums) {
  const double max = maxValue(row, n);
  if (!(max > -kInf)) return -1;
  const double inv = 1 / temperature;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  const bool vector = simd();
  double total = 0;
  for (size_t b = 0; b < blocks; b++) {
    const size_t start = b * kBlock;
    const size_t end = std::min(n, start + kBlock);
#ifdef ORTSERVE_X86_SIMD
    const double s = vector ? blockSumAvx2(row, start, end, max, inv) : blockSumScalar(row, start, end, max, inv);
#else
    (void)vector;
    const double s = blockSumScalar(row, start, end, max, inv);
#endif
    sums[b] = s;
    total += s;
  }
  const double target = u * total;
  double acc = 0;
  ptrdiff_t last = -1;
  for (size_t b = 0; b < blocks; b++) {
    if (sums[b] <= 0) continue;
    if (acc + sums[b] <= target) {
      acc += sums[b];
      last = static_cast<ptrdiff_t>(b);
      continue;
    }
    const size_t end = std::min(n, (b + 1) * kBlock);
    int32_t lastInBlock = -1;
    for (size_t i = b * kBlock; i < end; i++) {
      const double w = expNonPositive((row[i] - max) * inv);
      if (w <= 0) continue;
      acc += w;
      lastInBlock = static_cast<int32_t>(i);
      if (acc > target) return lastInBlock;
    }
    // Rounding: the block's recount fell just short of its stored sum.
    return lastInBlock;
  }
  if (last < 0) return -1;
  // Rounding can leave the target just above the final sum: take the last token with weight.
  const size_t start = static_cast<size_t>(last) * kBlock;
  for (size_t i = std::min(n, start + kBlock); i-- > start;)
    if (expNonPositive((row[i] - max) * inv) > 0) return static_cast<int32_t>(i);
  return -1;
}

}  // namespace ortserve

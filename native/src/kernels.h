// Full-vocabulary passes of the sampler (src/core/sample/ops/), ported from
// the TypeScript kernels with the same arithmetic in the same order: every
// result equals the TypeScript one bit for bit (logSumExp up to the last ulp
// of the final log), so a seeded request draws the same tokens with or without
// this addon. See native/README.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ortserve {

// ops/exp.ts: exp(-j/64) for j in [0, 128 * 64].
constexpr int kExpSteps = 64;
constexpr int kExpTableSize = 128 * kExpSteps + 1;
// ops/candidates.ts: top_p's mass histogram and drawDense's block size.
constexpr int kBucketsPerNat = 8;
constexpr int kLastBucket = 128 * kBucketsPerNat;
constexpr size_t kBlock = 64;

// Installs the exp table the TypeScript side computed (its Math.exp, so both
// sides share every entry). The first call wins; false when a later call
// brings different values.
bool setExpTable(const double* table);
bool expTableReady();

// AVX2 kernels where the CPU has them; off = the portable scalar code.
bool simdAvailable();
bool setSimd(bool on);

int32_t argmax(const float* row, size_t n);
double maxValue(const float* row, size_t n);
double logSumExp(const float* row, size_t n);
size_t rankOf(const float* row, size_t n, float value);
size_t topN(const float* row, size_t n, size_t want, int32_t* ids, double* vals);
// 1 <= k <= n.
double kthLargest(const float* row, size_t n, size_t k);

struct HeapScan {
  double max;
  double top;
  bool tiesOutside;
};
// 1 <= k < n; heap and ids hold k entries.
HeapScan heapTopK(const float* row, size_t n, size_t k, double* heap, int32_t* ids);

// `max` must be the row's maximum (maxValue or heapTopK's).
size_t collect(const float* row, size_t n, double threshold, double max, double temperature,
               bool withBuckets, int32_t* ids, double* weights, uint16_t* buckets, double* total);
double massHistogram(const float* row, size_t n, double threshold, double max, double temperature,
                     double* histogram);
int32_t drawDense(const float* row, size_t n, double temperature, double u, double* blockSums);

}  // namespace ortserve

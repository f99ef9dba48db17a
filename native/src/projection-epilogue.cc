// See projection-epilogue.h. Work items are up to 4 rows x up to 512 output columns. Within one, C
// is read block row by block row, each a contiguous run of the item's columns (the hardware
// prefetcher streams it: C lives in memory, not cache, during a decode step), and the item's sums
// accumulate in a small buffer that stays in L1.
#include "projection-epilogue.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu-features.h"
#include "half-float.h"

#ifdef ORTSERVE_X86_SIMD
#include <immintrin.h>

#include "simd-exp.h"
#endif

namespace ortserve {
namespace {

constexpr int kRowTile = 4;
constexpr int kColumnTile = 512;

const bool gAvx2Fma = Cpu().avx2 && Cpu().fma;
const bool gF16c = Cpu().f16c;

// ggml's GELU table: for every binary16 input, ggml_gelu_f32 of it in its operation order,
// 0.5x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x x))), rounded to binary16 (tanh in double, rounded
// once to float: tanhf to its last bit, as the graph computes it).
const float* GeluTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(1 << 16);
    for (int h = 0; h < (1 << 16); h++) {
      const float x = HalfToFloat(static_cast<uint16_t>(h));
      const float inner = x * 0.044715f * x + 1.0f;
      const float arg = x * static_cast<float>(0.7978845608028654) * inner;
      const float tanh = static_cast<float>(std::tanh(static_cast<double>(arg)));
      t[h] = HalfToFloat(FloatToHalf(x * 0.5f * (tanh + 1.0f)));
    }
    return t;
  }();
  return table.data();
}

using TileRows = float[kRowTile][kColumnTile];

struct Shape {
  const float* in;
  const float* offsets;
  int64_t stride;  // in's row width
  int n;
  int blocks;
};

// acc[r][j] += sums[r] * c[j] for j in [from, count).
void AccumulateScalar(TileRows& acc, const float* sums, int rows, const float* c, int from, int count) {
  for (int r = 0; r < rows; r++)
    for (int j = from; j < count; j++) acc[r][j] += sums[r] * c[j];
}

#ifdef ORTSERVE_X86_SIMD
__attribute__((target("avx2,fma"))) int AccumulateAvx2(TileRows& acc, const float* sums, int rows, const float* c,
                                                       int count) {
  const int vectors = count / 8 * 8;
  for (int r = 0; r < rows; r++) {
    const __m256 s = _mm256_set1_ps(sums[r]);
    float* a = acc[r];
    for (int j = 0; j < vectors; j += 8)
      _mm256_storeu_ps(a + j, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + j), _mm256_loadu_ps(a + j)));
  }
  return vectors;
}

// a[j] = silu(a[j]) * b[j]; returns how many it did (whole vectors).
__attribute__((target("avx2,fma"))) int SwiGluAvx2(float* a, const float* b, int count) {
  const int vectors = count / 8 * 8;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 signBit = _mm256_set1_ps(-0.0f);
  for (int j = 0; j < vectors; j += 8) {
    const __m256 x = _mm256_loadu_ps(a + j);
    // sigmoid(x) from e = exp(-|x|) <= 1: 1 / (1 + e) for x >= 0, e / (1 + e) below.
    const __m256 e = Exp8(_mm256_or_ps(x, signBit));
    const __m256 inv = _mm256_div_ps(one, _mm256_add_ps(one, e));
    const __m256 sig = _mm256_blendv_ps(inv, _mm256_mul_ps(e, inv), x);
    _mm256_storeu_ps(a + j, _mm256_mul_ps(_mm256_mul_ps(x, sig), _mm256_loadu_ps(b + j)));
  }
  return vectors;
}

// a[j] = gelu(a[j]) * b[j]; returns how many it did (whole vectors).
__attribute__((target("avx2,fma,f16c"))) int GeGluAvx2(const float* table, float* a, const float* b, int count) {
  const int vectors = count / 8 * 8;
  const __m256 low = _mm256_set1_ps(-10.0f);
  const __m256 high = _mm256_set1_ps(10.0f);
  for (int j = 0; j < vectors; j += 8) {
    const __m256 x = _mm256_loadu_ps(a + j);
    // VCVTPS2PH rounds to nearest even, as FloatToHalf; a NaN input takes the clamp's -10 here,
    // and is kept below (not below 10).
    const __m256i index = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(_mm256_max_ps(x, low), _MM_FROUND_TO_NEAREST_INT));
    const __m256 gelu = _mm256_i32gather_ps(table, index, 4);
    const __m256 value = _mm256_blendv_ps(x, gelu, _mm256_cmp_ps(x, high, _CMP_LT_OQ));
    _mm256_storeu_ps(a + j, _mm256_mul_ps(value, _mm256_loadu_ps(b + j)));
  }
  return vectors;
}
#endif

// dst[r][0, count) = the projection's columns [col0, col0 + count) for the tile's rows.
void Project(const Shape& s, int64_t row0, int rows, int col0, int count, TileRows& dst) {
  if (s.offsets == nullptr) {
    for (int r = 0; r < rows; r++) std::copy_n(s.in + (row0 + r) * s.stride + col0, count, dst[r]);
    return;
  }
  for (int r = 0; r < rows; r++) std::fill(dst[r], dst[r] + count, 0.0f);
  for (int b = 0; b < s.blocks; b++) {
    float sums[kRowTile];
    for (int r = 0; r < rows; r++) sums[r] = s.in[(row0 + r) * s.stride + s.n + b];
    const float* c = s.offsets + static_cast<int64_t>(b) * s.n + col0;
    int done = 0;
#ifdef ORTSERVE_X86_SIMD
    if (gAvx2Fma) done = AccumulateAvx2(dst, sums, rows, c, count);
#endif
    AccumulateScalar(dst, sums, rows, c, done, count);
  }
  // The product first, then the projection added: the order of the MatMul and Add it replaces.
  for (int r = 0; r < rows; r++) {
    const float* p = s.in + (row0 + r) * s.stride + col0;
    for (int j = 0; j < count; j++) dst[r][j] = p[j] + dst[r][j];
  }
}

}  // namespace

void SwiGluInPlace(float* a, const float* b, int count) {
  int done = 0;
#ifdef ORTSERVE_X86_SIMD
  if (gAvx2Fma) done = SwiGluAvx2(a, b, count);
#endif
  for (int j = done; j < count; j++) a[j] = a[j] / (1.0f + std::exp(-a[j])) * b[j];
}

void GeGluInPlace(float* a, const float* b, int count) {
  const float* table = GeluTable();
  int done = 0;
#ifdef ORTSERVE_X86_SIMD
  if (gAvx2Fma && gF16c) done = GeGluAvx2(table, a, b, count);
#endif
  for (int j = done; j < count; j++) {
    const float x = a[j];
    a[j] = (x < 10.0f ? table[FloatToHalf(std::max(x, -10.0f))] : x) * b[j];
  }
}

void GluInPlace(Glu glu, float* a, const float* b, int count) {
  if (glu == Glu::kGeGlu)
    GeGluInPlace(a, b, count);
  else
    SwiGluInPlace(a, b, count);
}

void ProjectionEpilogue(const float* in, const float* offsets, int64_t rows, int n, int blocks, Glu glu,
                        float* out, const ParallelFor& parallelFor) {
  const bool gated = glu != Glu::kNone;
  if (rows <= 0 || n <= 0) return;
  const Shape s{in, offsets, n + (offsets != nullptr ? blocks : 0), n, blocks};
  const int width = gated ? n / 2 : n;
  const int64_t rowTiles = (rows + kRowTile - 1) / kRowTile;
  // At least two column tiles, so a few rows still spread over the threads.
  const int columns = std::min(kColumnTile, ((width + 1) / 2 + 7) / 8 * 8);
  const int64_t colTiles = (width + columns - 1) / columns;
  auto run = [&](size_t item) {
    const int64_t row0 = static_cast<int64_t>(item) / colTiles * kRowTile;
    const int col0 = static_cast<int>(static_cast<int64_t>(item) % colTiles) * columns;
    const int tileRows = static_cast<int>(std::min<int64_t>(kRowTile, rows - row0));
    const int count = std::min(columns, width - col0);
    alignas(32) TileRows first;
    Project(s, row0, tileRows, col0, count, first);
    if (gated) {
      alignas(32) TileRows up;
      Project(s, row0, tileRows, width + col0, count, up);
      for (int r = 0; r < tileRows; r++) GluInPlace(glu, first[r], up[r], count);
    }
    for (int r = 0; r < tileRows; r++) std::copy_n(first[r], count, out + (row0 + r) * width + col0);
  };
  const size_t items = static_cast<size_t>(rowTiles * colTiles);
  if (rows * n * static_cast<int64_t>(std::max(blocks, 1)) < kParallelWork)
    for (size_t i = 0; i < items; i++) run(i);
  else
    parallelFor(items, run);
}

}  // namespace ortserve

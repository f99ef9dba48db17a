// See block-offset.h. Work items are up to 4 rows x 512 columns. Within one, C is read block row
// by block row, each a contiguous run of the item's columns (so the hardware prefetcher streams
// it: C lives in memory, not cache, during a decode step), and the item's sums accumulate in a
// small buffer that stays in L1. Reading C column tile by column tile instead (every block row
// at once, a few cache lines each) made a decode step's 120 of these take twice as long.
#include "block-offset.h"

#include <algorithm>

#if defined(__GNUC__) && defined(__x86_64__)
#define ORTSERVE_OFFSET_AVX2 1
#include <immintrin.h>
#endif

namespace ortserve {
namespace {

constexpr int kRowTile = 4;
constexpr int kColumnTile = 512;
// Below this many multiply-adds the whole product runs on the calling thread: a decode step's
// projection (one row, 10k-55k) took as long spread over two threads (measured).
constexpr int64_t kParallelWork = 1 << 18;

bool detectAvx2Fma() {
#ifdef ORTSERVE_OFFSET_AVX2
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
const bool gAvx2Fma = detectAvx2Fma();

struct Tile {
  const float* both;
  const float* offsets;
  float* out;
  int64_t row0;
  int rowCount;
  int col0;
  int colCount;
  int n;
  int blocks;
};

// acc[r][j] += sums[r] * c[j] for the tile's rows; j in [from, count).
void AccumulateScalar(float (*acc)[kColumnTile], const float* sums, int rows, const float* c, int from, int count) {
  for (int r = 0; r < rows; r++)
    for (int j = from; j < count; j++) acc[r][j] += sums[r] * c[j];
}

#ifdef ORTSERVE_OFFSET_AVX2
__attribute__((target("avx2,fma"))) int AccumulateAvx2(float (*acc)[kColumnTile], const float* sums, int rows,
                                                       const float* c, int count) {
  const int vectors = count / 8 * 8;
  for (int r = 0; r < rows; r++) {
    const __m256 s = _mm256_set1_ps(sums[r]);
    float* a = acc[r];
    for (int j = 0; j < vectors; j += 8)
      _mm256_storeu_ps(a + j, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + j), _mm256_loadu_ps(a + j)));
  }
  return vectors;
}
#endif

void RunTile(const Tile& t) {
  alignas(32) float acc[kRowTile][kColumnTile];
  for (int r = 0; r < t.rowCount; r++) std::fill(acc[r], acc[r] + t.colCount, 0.0f);
  const int64_t stride = static_cast<int64_t>(t.n) + t.blocks;
  const float* rows[kRowTile];
  for (int r = 0; r < t.rowCount; r++) rows[r] = t.both + (t.row0 + r) * stride;
  for (int b = 0; b < t.blocks; b++) {
    float sums[kRowTile];
    for (int r = 0; r < t.rowCount; r++) sums[r] = rows[r][t.n + b];
    const float* c = t.offsets + static_cast<int64_t>(b) * t.n + t.col0;
    int done = 0;
#ifdef ORTSERVE_OFFSET_AVX2
    if (gAvx2Fma) done = AccumulateAvx2(acc, sums, t.rowCount, c, t.colCount);
#endif
    AccumulateScalar(acc, sums, t.rowCount, c, done, t.colCount);
  }
  // The product first, then the projection added: the order of the MatMul and Add it replaces.
  for (int r = 0; r < t.rowCount; r++) {
    float* out = t.out + (t.row0 + r) * t.n + t.col0;
    const float* in = rows[r] + t.col0;
    for (int j = 0; j < t.colCount; j++) out[j] = in[j] + acc[r][j];
  }
}

}  // namespace

void BlockOffsetAdd(const float* both, const float* offsets, int64_t rows, int n, int blocks, float* out,
                    const ParallelFor& parallelFor) {
  if (rows <= 0 || n <= 0) return;
  const int64_t rowTiles = (rows + kRowTile - 1) / kRowTile;
  // At least two column tiles, so a few rows still spread over the threads.
  const int columns = std::min(kColumnTile, ((n + 1) / 2 + 7) / 8 * 8);
  const int64_t colTiles = (n + columns - 1) / columns;
  auto run = [&](size_t item) {
    const int64_t rt = static_cast<int64_t>(item) / colTiles;
    const int ct = static_cast<int>(static_cast<int64_t>(item) % colTiles);
    Tile t{both, offsets, out, rt * kRowTile, static_cast<int>(std::min<int64_t>(kRowTile, rows - rt * kRowTile)),
           ct * columns, std::min(columns, n - ct * columns), n, blocks};
    RunTile(t);
  };
  const size_t items = static_cast<size_t>(rowTiles * colTiles);
  if (rows * n * static_cast<int64_t>(blocks) < kParallelWork)
    for (size_t i = 0; i < items; i++) run(i);
  else
    parallelFor(items, run);
}

}  // namespace ortserve

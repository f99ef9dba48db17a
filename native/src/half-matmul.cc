// See half-matmul.h.
#include "half-matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "block-quant-matmul.h"
#include "cpu-features.h"
#include "half-float.h"
#include "projection-epilogue.h"
#include "weight-arena.h"

#ifdef ORTSERVE_X86_SIMD
#include <immintrin.h>
#endif

namespace ortserve {
namespace {

constexpr int kTile = 16;
// Rows a pass keeps in registers: 6 rows x 16 columns are 12 of AVX2's 16 registers.
constexpr int kPassRows = 6;

inline float BFloat16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// Rows [0, rows) of x (rows `k` apart) times the tile's columns, the first `count` to out (rows
// `stride` apart): each output one fma chain over the inputs in order.
void TileRowsScalar(const uint16_t* tile, HalfFormat format, int64_t k, const float* x, int rows, float* out,
                    int64_t stride, int count) {
  for (int r = 0; r < rows; r++) {
    float acc[kTile] = {};
    for (int64_t j = 0; j < k; j++) {
      const float in = x[r * k + j];
      for (int c = 0; c < kTile; c++) {
        const uint16_t h = tile[j * kTile + c];
        acc[c] = std::fma(format == HalfFormat::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h), in, acc[c]);
      }
    }
    std::memcpy(out + r * stride, acc, sizeof(float) * count);
  }
}

#ifdef ORTSERVE_X86_SIMD
#define ORTSERVE_AVX2_FMA __attribute__((target("avx2,fma,f16c")))

// Columns 8h..8h+7 of input j's 16 values, as floats.
template <HalfFormat Format>
ORTSERVE_AVX2_FMA inline __m256 LoadWeightsAvx2(const uint16_t* tile, int64_t j, int h) {
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(tile + j * kTile + 8 * h));
  if constexpr (Format == HalfFormat::kF16) return _mm256_cvtph_ps(v);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

template <int R, HalfFormat Format>
ORTSERVE_AVX2_FMA void TilePassAvx2(const uint16_t* tile, int64_t k, const float* x, float* out, int64_t stride,
                                    int count) {
  // Unrolled over the rows, so the sums live in registers (left a loop, they went through the
  // stack at every input: a prefill at half the rate).
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t j = 0; j < k; j++) {
    const __m256 w0 = LoadWeightsAvx2<Format>(tile, j, 0);
    const __m256 w1 = LoadWeightsAvx2<Format>(tile, j, 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const __m256 in = _mm256_broadcast_ss(x + r * k + j);
      acc[r][0] = _mm256_fmadd_ps(w0, in, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(w1, in, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    alignas(32) float row[kTile];
    _mm256_store_ps(row, acc[r][0]);
    _mm256_store_ps(row + 8, acc[r][1]);
    std::memcpy(out + r * stride, row, sizeof(float) * count);
  }
}

template <HalfFormat Format>
void TileRowsAvx2(const uint16_t* tile, int64_t k, const float* x, int rows, float* out, int64_t stride,
                  int count) {
  for (int first = 0; first < rows; first += kPassRows) {
    const float* xr = x + first * k;
    float* o = out + first * stride;
    switch (std::min(kPassRows, rows - first)) {
      case 1: TilePassAvx2<1, Format>(tile, k, xr, o, stride, count); break;
      case 2: TilePassAvx2<2, Format>(tile, k, xr, o, stride, count); break;
      case 3: TilePassAvx2<3, Format>(tile, k, xr, o, stride, count); break;
      case 4: TilePassAvx2<4, Format>(tile, k, xr, o, stride, count); break;
      case 5: TilePassAvx2<5, Format>(tile, k, xr, o, stride, count); break;
      default: TilePassAvx2<6, Format>(tile, k, xr, o, stride, count); break;
    }
  }
}
#endif

void TileRows(const PackedHalfProjection& w, int t, const float* x, int rows, float* out, int64_t stride) {
  const int count = static_cast<int>(std::min<int64_t>(kTile, w.n() - static_cast<int64_t>(t) * kTile));
#ifdef ORTSERVE_X86_SIMD
  const CpuFeatures& cpu = Cpu();
  if (!PortableProjectionKernel() && cpu.avx2 && cpu.fma && cpu.f16c) {
    if (w.format() == HalfFormat::kF16)
      TileRowsAvx2<HalfFormat::kF16>(w.tile(t), w.k(), x, rows, out, stride, count);
    else
      TileRowsAvx2<HalfFormat::kBF16>(w.tile(t), w.k(), x, rows, out, stride, count);
    return;
  }
#endif
  TileRowsScalar(w.tile(t), w.format(), w.k(), x, rows, out, stride, count);
}

}  // namespace

PackedHalfProjection::~PackedHalfProjection() { FreeWeights(data_); }

const char* PackedHalfProjection::Pack(const uint16_t* b, int64_t k, int64_t n, bool transposed, HalfFormat format) {
  if (k <= 0 || n <= 0) return "the weights are empty";
  const int64_t tiles = (n + kTile - 1) / kTile;
  bytes_ = static_cast<size_t>(tiles) * kTile * k * sizeof(uint16_t);
  data_ = static_cast<uint16_t*>(AllocateWeights(bytes_));
  if (data_ == nullptr) return "out of memory for the packed weights";
  k_ = k;
  n_ = n;
  format_ = format;
  // Zeroed memory: the last tile's columns past n stay zero.
  for (int64_t t = 0; t < tiles; t++) {
    const int64_t count = std::min<int64_t>(kTile, n - t * kTile);
    uint16_t* dst = data_ + t * kTile * k;
    if (!transposed) {
      for (int64_t j = 0; j < k; j++) std::memcpy(dst + j * kTile, b + j * n + t * kTile, sizeof(uint16_t) * count);
      continue;
    }
    for (int64_t c = 0; c < count; c++) {
      const uint16_t* column = b + (t * kTile + c) * k;
      for (int64_t j = 0; j < k; j++) dst[j * kTile + c] = column[j];
    }
  }
  AddBytesPackedOnThisThread(bytes_);
  return nullptr;
}

void HalfMatMul(const PackedHalfProjection& w, const float* x, int64_t rows, float* out,
                const ParallelFor& parallelFor) {
  if (rows <= 0) return;
  const int64_t n = w.n();
  auto runTile = [&](size_t item) {
    const int t = static_cast<int>(item);
    TileRows(w, t, x, static_cast<int>(rows), out + static_cast<int64_t>(t) * kTile, n);
  };
  const int tiles = w.tiles();
  if (rows * n * w.k() >= kParallelWork)
    parallelFor(static_cast<size_t>(tiles), runTile);
  else
    for (int t = 0; t < tiles; t++) runTile(static_cast<size_t>(t));
}

}  // namespace ortserve

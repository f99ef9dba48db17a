// See block-quant-matmul.h. A block of the packed layout holds, for 16 output columns, 32 inputs'
// quants as 64-byte chunks whose 32-bit lane o holds 4 consecutive quants of column o: the layout
// VPDPBUSD multiplies by 4 broadcast int8 inputs. 8-bit quants take 8 chunks (chunk g: inputs
// 4g..4g+3); 4-bit ones 4, chunk i holding inputs 8i..8i+3 in its low nibbles and 8i+4..8i+7 in
// its high ones; 6-bit ones (8-bit quants that all lie within 32 of the zero point 128: GGUF's
// Q6_K) the 4-bit chunks of their low nibbles, then 2 chunks of their top 2 bits, chunk 4 + h's
// byte j of lane o holding in bits 2s..2s+1 those of input 4 (4h + s) + j; 5-bit ones (8-bit quants
// within 16 of 128: the 5-bit types) the 4-bit chunks, then 1 chunk of their fifth bits, byte j of
// lane o holding in bit s that of input 4s + j; 2-bit ones (4-bit quants
// all in 8..11, less 8: GGUF's Q2_K) only those 2 chunks, and 3-bit ones (4-bit quants all in 4..11,
// less 4: Q3_K) those 2 and a chunk of their third bits, byte j of lane o holding in bit s that of
// input 4s + j. Work items are output tiles; each runs its rows in groups of up to 8, so a tile's
// unpacked quants serve 8 rows from registers.
#include "block-quant-matmul.h"

#include "projection-epilogue.h"
#include "weight-arena.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cpu-features.h"
#include "half-float.h"
#include "prefetch.h"

#ifdef ORTSERVE_EMULATE_AVX512
// A test build (native/test/kernel-parity.cc): the AVX-512 VNNI kernel over a scalar stand-in for
// its intrinsics, so that a CPU without AVX-512 holds it to the portable loop too. No AVX2 kernel.
#undef ORTSERVE_X86_SIMD
#define ORTSERVE_AVX512_KERNEL 1
#include "../test/avx512-emulation.h"
#elif defined(ORTSERVE_X86_SIMD)
#define ORTSERVE_AVX512_KERNEL 1
#include <immintrin.h>
#endif

namespace ortserve {
namespace {

constexpr int kTile = 16;
constexpr int kBlock = 32;
constexpr int kRowGroup = 8;
// llama.cpp's K-quant super-block, and its Q8_K activation block.
constexpr int kSuperBlock = 256;

// A spin-wait's pause between polls.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

#ifdef ORTSERVE_EMULATE_AVX512
const bool gAvx512Vnni = true;
const bool gAvx2 = false;
#else
const bool gAvx512Vnni = Cpu().avx512Vnni;
const bool gAvx2 = Cpu().avx2 && Cpu().fma && Cpu().f16c;
#endif

// The kernels, fastest last. Every one gives the same floats: the integer dot products are exact
// and the float epilogue runs in the same order.
enum Kernel : int { kScalar, kAvx2, kAvx512Vnni };
constexpr const char* kKernelNames[] = {"scalar", "avx2", "avx512-vnni"};
bool Available(int kernel) {
  return kernel == kScalar || (kernel == kAvx2 && gAvx2) || (kernel == kAvx512Vnni && gAvx512Vnni);
}
int BestKernel() { return gAvx512Vnni ? kAvx512Vnni : gAvx2 ? kAvx2 : kScalar; }
// The kernel in use (tests and benchmarks pick others to hold them to each other).
std::atomic<int> gKernel{BestKernel()};

// What the kernel needs of one row's block besides its quants: the dot product's starting value
// for zero point 8 (-8 * sum of the quants; 16 times it for zero point 128), the sum of the first
// 16 quants (for scales per 16 inputs), the block's scale and scale * sum.
struct BlockMeta {
  int32_t start4;
  int32_t lowSum;
  float scale;
  float scaledSum;
};
static_assert(sizeof(BlockMeta) == 16, "BlockMeta is read as 16 bytes a row");

// x's rows quantized, laid out for the kernel: rows in groups of kRowGroup (the last may be
// shorter), and within a group block by block: the group's rows' 32 quants, then their BlockMetas.
// A row group's block is one contiguous run, reached from one pointer.
class QuantizedRows {
 public:
  void Reset(int64_t rows, int k) {
    rows_ = rows;
    blocks_ = k / kBlock;
    const size_t bytes = static_cast<size_t>(rows) * blocks_ * kRowBytes;
    if (bytes > data_.size()) data_.resize(bytes);
  }
  // Rows of the group starting at row0 (a multiple of kRowGroup).
  int GroupRows(int64_t row0) const { return static_cast<int>(std::min<int64_t>(kRowGroup, rows_ - row0)); }
  // The group's block b: GroupRows(row0) x 32 quants, then as many BlockMetas.
  const uint8_t* Block(int64_t row0, int b) const { return data_.data() + Offset(row0, b); }
  int8_t* Quants(int64_t row, int b) {
    const int64_t row0 = row / kRowGroup * kRowGroup;
    return reinterpret_cast<int8_t*>(data_.data() + Offset(row0, b) + (row - row0) * kBlock);
  }
  BlockMeta* Meta(int64_t row, int b) {
    const int64_t row0 = row / kRowGroup * kRowGroup;
    uint8_t* block = data_.data() + Offset(row0, b);
    return reinterpret_cast<BlockMeta*>(block + GroupRows(row0) * kBlock) + (row - row0);
  }

 private:
  static constexpr int kRowBytes = kBlock + static_cast<int>(sizeof(BlockMeta));
  size_t Offset(int64_t row0, int b) const {
    return (static_cast<size_t>(row0) * blocks_ + static_cast<size_t>(b) * GroupRows(row0)) * kRowBytes;
  }
  std::vector<uint8_t> data_;
  int64_t rows_ = 0;
  int blocks_ = 0;
};

// The zero point of Bits-bit quants: 2^(Bits-1), except 2-bit ones, which have none (GGUF's Q2_K:
// unsigned quants, its offsets apart).
template <int Bits>
constexpr int32_t ZeroPoint() {
  return Bits == 2 ? 0 : 1 << (Bits - 1);
}
// The dot product's starting value for a block's zero point, over all 32 inputs (start4 is -8 times
// the inputs' sum), and over its first 16 (the second 16's is the difference); the zero point known
// at run time (PackedBlockQuantWeight::zeroPoint), or at compile time.
// start4 is a multiple of 8, so the shift divides it exactly (one instruction where / 8 took four).
inline int32_t StartAt(const BlockMeta& m, int32_t zeroPoint) { return (m.start4 >> 3) * zeroPoint; }
inline int32_t LowStartAt(const BlockMeta& m, int32_t zeroPoint) { return -zeroPoint * m.lowSum; }
template <int Bits>
inline int32_t StartOf(const BlockMeta& m) {
  // start4 itself (a multiple of 8): one load, where the division cost a block's rows four
  // instructions each.
  if constexpr (ZeroPoint<Bits>() == 8) return m.start4;
  return StartAt(m, ZeroPoint<Bits>());
}
template <int Bits>
inline int32_t LowStartOf(const BlockMeta& m) {
  return LowStartAt(m, ZeroPoint<Bits>());
}

// dx times the sum of a block's first 16 quantized inputs, and of its second 16: the factors of
// offsets per 16 inputs (each kernel forms them so, for the same floats).
inline float LowScaledSum(const BlockMeta& m) { return m.scale * static_cast<float>(m.lowSum); }
inline float HighScaledSum(const BlockMeta& m) { return m.scale * static_cast<float>(-m.start4 / 8 - m.lowSum); }

// A block of 32 inputs times inv (127 over the largest magnitude the block's scale covers), rounded
// to nearest even into q, with the sum of all 32 and of the first 16.
void QuantizeBlockWithScalar(const float* x, float inv, int8_t* q, int32_t* sum, int32_t* lowSum) {
  int32_t s = 0;
  for (int j = 0; j < kBlock; j++) {
    const float t = x[j] * inv;
    // NaN lands on -127, as the vector path's saturating convert and clamp put it.
    const int v = t >= -127.0f && t <= 127.0f ? static_cast<int>(std::nearbyint(t)) : (t > 0.0f ? 127 : -127);
    q[j] = static_cast<int8_t>(v);
    s += v;
    if (j == kBlock / 2 - 1) *lowSum = s;
  }
  *sum = s;
}

// The largest |x| of `count` inputs, NaN passed over (as llama.cpp's quantizers do).
float AbsMaxScalar(const float* x, int count) {
  float amax = 0.0f;
  for (int j = 0; j < count; j++) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

void QuantizeBlockScalar(const float* x, int8_t* q, float* scale, int32_t* sum, int32_t* lowSum) {
  const float amax = AbsMaxScalar(x, kBlock);
  QuantizeBlockWithScalar(x, amax > 0.0f ? 127.0f / amax : 0.0f, q, sum, lowSum);
  *scale = amax / 127.0f;
}

// Blocks ahead of the one being multiplied whose weights a tile prefetches: in the AVX-512 kernel
// a tile of more than 4 rows, in the AVX2 kernel every tile. With more than 4 rows the tile is
// compute-bound and the hardware prefetcher, meeting each thread's run of tiles cold (the step's
// other work has evicted them), left the kernel waiting on memory: 16 rows over 30 layers'
// projections took ~20% longer without it in a C++ harness. With fewer rows, on Intel Sapphire
// Rapids, the step is bound by the weights' bytes and the extra loads made it slower; on AMD Zen 3
// (AVX2 only) a single row streamed at half the memory's bandwidth without it, the hardware
// prefetcher alone keeping too few lines in flight (1 GB of Q4_K tiles, one thread: 4.4 -> 10.7
// GB/s, against 8.9 for a plain read of 1 GiB).
// Known debt: AMD Zen 4 (AVX-512 VNNI) has not been measured with the prefetch at few rows.
constexpr int kPrefetchBlocks = 8;

// 6-bit codes (kCoded6Meta) as vectors: column c's code is bits 6c..6c+5 of the metadata's 12
// bytes, so with bytes 3L.. in 128-bit lane L, lane L's 32-bit lane m takes the two bytes holding
// column 4L + m's code (from byte 3L + 6m / 8; 0x80: zero) and shifts it down by 6m % 8.
alignas(64) constexpr uint8_t kCoded6Gather[64] = {
    0, 1, 0x80, 0x80, 0, 1, 0x80, 0x80, 1, 2, 0x80, 0x80, 2, 3, 0x80, 0x80,
    3, 4, 0x80, 0x80, 3, 4, 0x80, 0x80, 4, 5, 0x80, 0x80, 5, 6, 0x80, 0x80,
    6, 7, 0x80, 0x80, 6, 7, 0x80, 0x80, 7, 8, 0x80, 0x80, 8, 9, 0x80, 0x80,
    9, 10, 0x80, 0x80, 9, 10, 0x80, 0x80, 10, 11, 0x80, 0x80, 11, 12, 0x80, 0x80};
alignas(64) constexpr int32_t kCoded6Shifts[16] = {0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2};

// One tile's block metadata decoded to floats, kept for the passes over its rows after the first
// (its later row groups' too): valid once a pass has filled it.
struct KeptMeta {
  std::vector<float> store;
  float* floats = nullptr;  // 32-byte aligned, within store
  bool valid = false;

  void Reserve(size_t count) {
    // 8 floats more, so the first can sit on a 32-byte boundary for aligned loads.
    if (store.size() < count + 8) store.resize(count + 8);
    floats = store.data() + (8 - reinterpret_cast<uintptr_t>(store.data()) / sizeof(float) % 8) % 8;
  }
};

#ifdef ORTSERVE_AVX512_KERNEL
#ifdef ORTSERVE_EMULATE_AVX512
#define ORTSERVE_AVX512_VNNI
#else
#define ORTSERVE_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#endif

// Block b's 16 scales or offsets (`which`, as BlockLayout::Meta) as floats, from float, half or
// coded storage (factor * code: exact in float, so the very values the float layout holds).
template <int Meta>
ORTSERVE_AVX512_VNNI inline __m512 LoadMeta16(const PackedBlockQuantWeight& w, const uint8_t* tile,
                                              const BlockLayout& layout, int b, int which) {
  const uint8_t* p = tile + layout.Meta(b, which);
  if constexpr (Meta == kHalfMeta) return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  if constexpr (IsCoded(Meta)) {
    const __m512 factors =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + layout.Factors(b, which))));
    __m512i codes;
    if constexpr (Meta == kCoded4Meta) {
      // Columns 0-7 from the 8 bytes' low nibbles, 8-15 from their high ones.
      const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      const __m128i nibbles = _mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4));
      codes = _mm512_cvtepu8_epi32(_mm_and_si128(nibbles, _mm_set1_epi8(0x0f)));
    } else if constexpr (Meta == kCoded6Meta) {
      // The 16 bytes at p (the 12 of the codes, then the next metadata's, masked off) in every
      // 128-bit lane; lane L takes columns 4L..4L+3 (kCoded6Gather).
      const __m512i bytes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      const __m512i gathered = _mm512_shuffle_epi8(bytes, _mm512_load_si512(kCoded6Gather));
      codes = _mm512_and_si512(_mm512_srlv_epi32(gathered, _mm512_load_si512(kCoded6Shifts)), _mm512_set1_epi32(63));
      codes = _mm512_add_epi32(codes, _mm512_set1_epi32(w.codeBase(which)));
    } else {
      codes = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    return _mm512_mul_ps(factors, _mm512_cvtepi32_ps(codes));
  }
  return _mm512_load_ps(reinterpret_cast<const float*>(p));
}

ORTSERVE_AVX512_VNNI void QuantizeBlockAvx512(const float* x, int8_t* q, float* scale, int32_t* sum,
                                              int32_t* lowSum) {
  const __m512 a = _mm512_loadu_ps(x);
  const __m512 b = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  const __m512i lo = _mm512_set1_epi32(-127);
  const __m512i hi = _mm512_set1_epi32(127);
  // Round to nearest even (the default rounding mode), as nearbyint in the scalar path.
  const __m512i qa = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a, inv)), lo), hi);
  const __m512i qb = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(b, inv)), lo), hi);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(qa));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtepi32_epi8(qb));
  *scale = amax / 127.0f;
  *lowSum = _mm512_reduce_add_epi32(qa);
  *sum = *lowSum + _mm512_reduce_add_epi32(qb);
}


// Each group g's quants OR bit g of the chunk at p's bytes, moved to bit To (3 bits' third bit: 2;
// 5 bits' fifth: 4). 16-bit shifts; the mask drops the bits they carry across bytes.
template <int To>
ORTSERVE_AVX512_VNNI inline void OrGroupBitsAvx512(__m512i (&quants)[8], const uint8_t* p) {
  const __m512i t = _mm512_load_si512(p);
  const __m512i mask = _mm512_set1_epi8(1 << To);
  for (int g = 0; g < 8; g++) {
    const __m512i moved = g < To ? _mm512_slli_epi16(t, To - g) : g > To ? _mm512_srli_epi16(t, g - To) : t;
    quants[g] = _mm512_or_si512(quants[g], _mm512_and_si512(moved, mask));
  }
}

// Rows [row0, row0 + R) of the tile's 16 columns (the first `count`) to dst, rows `stride` apart.
template <int R, int Bits, int Offsets, int Meta, bool Pairs>
ORTSERVE_AVX512_VNNI void TileAvx512(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x, int64_t row0,
                                     float* dst, int64_t stride, int count) {
  const int blocks = w.blocks();
  constexpr BlockLayout kLayout(Bits, Offsets, Meta, Pairs);
  const uint8_t* tileData = w.tile(tile);
  const __m512i lowNibbles = _mm512_set1_epi8(0x0f);
  // 5 bits: 16, or none (known at run time); else ZeroPoint<Bits>.
  const int32_t zeroPoint = Bits == 5 ? w.zeroPoint() : ZeroPoint<Bits>();
  __m512 acc[R];
  for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
  for (int b = 0; b < blocks; b++) {
    const uint8_t* block = tileData + kLayout.Quants(b);
    if constexpr (R > 4) {
      // Past the tile's end this reaches into the next tile, the thread's next work item (a
      // prefetch past the weights' end is harmless).
      PrefetchRange(block + kPrefetchBlocks * kLayout.BlockStride(), kLayout.BlockStride());
    }
    __m512i quants[8];
    if constexpr (Bits <= 3) {
      // Group g's 2 bits at bits 2 (g % 4) of 2-bit chunk g / 4; for 3 bits, its third at bit g of
      // the third-bit chunk, moved to bit 2. 16-bit shifts, the bits they carry across bytes masked off.
      const __m512i twoBits = _mm512_set1_epi8(0x03);
      for (int g = 0; g < 8; g++)
        quants[g] = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(block + 64 * (g / 4)), 2 * (g % 4)), twoBits);
      if constexpr (Bits == 3) OrGroupBitsAvx512<2>(quants, block + 128);
    } else if constexpr (Bits == 4 || Bits == 5 || Bits == 6) {
      for (int i = 0; i < 4; i++) {
        const __m512i v = _mm512_load_si512(block + 64 * i);
        quants[2 * i] = _mm512_and_si512(v, lowNibbles);
        quants[2 * i + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lowNibbles);
      }
      // Each group's fifth bit, from bit g of the fifth-bit chunk to bit 4.
      if constexpr (Bits == 5) OrGroupBitsAvx512<4>(quants, block + 256);
      if constexpr (Bits == 6) {
        // Each group's top 2 bits, moved to bits 4-5 of its bytes (the shifts stay within them).
        const __m512i topBits = _mm512_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
          const __m512i v = _mm512_load_si512(block + 256 + 64 * h);
          quants[4 * h] = _mm512_or_si512(quants[4 * h], _mm512_and_si512(_mm512_slli_epi16(v, 4), topBits));
          quants[4 * h + 1] = _mm512_or_si512(quants[4 * h + 1], _mm512_and_si512(_mm512_slli_epi16(v, 2), topBits));
          quants[4 * h + 2] = _mm512_or_si512(quants[4 * h + 2], _mm512_and_si512(v, topBits));
          quants[4 * h + 3] = _mm512_or_si512(quants[4 * h + 3], _mm512_and_si512(_mm512_srli_epi16(v, 2), topBits));
        }
      }
    } else {
      for (int g = 0; g < 8; g++) quants[g] = _mm512_load_si512(block + 64 * g);
    }
    const __m512 scales = LoadMeta16<Meta>(w, tileData, kLayout, b, 0);
    // The second half's scales with scales per 16 inputs; offsets after the scales (the second
    // half's too with offsets per 16). Unused (and never loaded) without them.
    const __m512 highScales = Pairs ? LoadMeta16<Meta>(w, tileData, kLayout, b, 1) : scales;
    __m512 offsets = Offsets ? LoadMeta16<Meta>(w, tileData, kLayout, b, kLayout.scalesPerBlock) : _mm512_setzero_ps();
    __m512 highOffsets = Offsets == 2 ? LoadMeta16<Meta>(w, tileData, kLayout, b, kLayout.scalesPerBlock + 1) : offsets;
    // Coded and half offsets are stored less offsetFold times the scale (exact: one rounding to the offset).
    if constexpr (Offsets && Meta != kFloatMeta) offsets = _mm512_fmadd_ps(_mm512_set1_ps(w.offsetFold()), scales, offsets);
    if constexpr (Offsets == 2 && Meta != kFloatMeta)
      highOffsets = _mm512_fmadd_ps(_mm512_set1_ps(w.offsetFold()), highScales, highOffsets);
    const uint8_t* xBlock = x.Block(row0, b);
    const int32_t* xq = reinterpret_cast<const int32_t*>(xBlock);
    const BlockMeta* meta = reinterpret_cast<const BlockMeta*>(xBlock + R * kBlock);
    // The rows' dot products interleaved, each split into two chains when there are few rows:
    // independent VPDPBUSDs to overlap (one chain of 8 waits on each result in turn). With scales
    // per 16 inputs the chains are the block's halves (groups 0-3 and 4-7), each with its start.
    constexpr int kChains = Pairs || R < 4 ? 2 : 1;
    __m512i dot[R][kChains];
    for (int r = 0; r < R; r++) {
      if constexpr (Pairs) {
        dot[r][0] = _mm512_set1_epi32(LowStartAt(meta[r], zeroPoint));
        dot[r][1] = _mm512_set1_epi32(StartAt(meta[r], zeroPoint) - LowStartAt(meta[r], zeroPoint));
      } else {
        dot[r][0] = _mm512_set1_epi32(StartAt(meta[r], zeroPoint));
        if constexpr (kChains == 2) dot[r][1] = _mm512_setzero_si512();
      }
    }
    for (int g = 0; g < 8; g++) {
      const int chain = Pairs ? g / 4 : g % kChains;
      for (int r = 0; r < R; r++)
        dot[r][chain] = _mm512_dpbusd_epi32(dot[r][chain], quants[g], _mm512_set1_epi32(xq[r * 8 + g]));
    }
    for (int r = 0; r < R; r++) {
      const __m512 dx = _mm512_set1_ps(meta[r].scale);
      if constexpr (Pairs) {
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][0]), _mm512_mul_ps(scales, dx), acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][1]), _mm512_mul_ps(highScales, dx), acc[r]);
      } else {
        __m512i d = dot[r][0];
        if constexpr (kChains == 2) d = _mm512_add_epi32(d, dot[r][1]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(scales, dx), acc[r]);
      }
      if constexpr (Offsets == 2) {
        acc[r] = _mm512_fmadd_ps(offsets, _mm512_set1_ps(LowScaledSum(meta[r])), acc[r]);
        acc[r] = _mm512_fmadd_ps(highOffsets, _mm512_set1_ps(HighScaledSum(meta[r])), acc[r]);
      } else if constexpr (Offsets == 1) {
        acc[r] = _mm512_fmadd_ps(offsets, _mm512_set1_ps(meta[r].scaledSum), acc[r]);
      }
    }
  }
  const __mmask16 mask = count == kTile ? 0xffff : static_cast<__mmask16>((1u << count) - 1);
  for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(dst + r * stride, mask, acc[r]);
}

template <int Bits, int Offsets, int Meta, bool Pairs>
void TileRowsAvx512(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x, int64_t row0, int rows,
                    float* dst, int64_t stride, int count) {
  switch (rows) {
    case 1: return TileAvx512<1, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    case 2: return TileAvx512<2, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    case 3: return TileAvx512<3, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    case 4: return TileAvx512<4, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    case 5: return TileAvx512<5, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    case 6: return TileAvx512<6, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    case 7: return TileAvx512<7, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
    default: return TileAvx512<8, Bits, Offsets, Meta, Pairs>(w, tile, x, row0, dst, stride, count);
  }
}

#endif  // ORTSERVE_AVX512_KERNEL

#ifdef ORTSERVE_X86_SIMD
// ---- AVX2 (CPUs without AVX-512 VNNI) ----
#define ORTSERVE_AVX2_FMA __attribute__((target("avx2,fma,f16c")))

// The sum of v's eight int32 lanes.
ORTSERVE_AVX2_FMA inline int32_t ReduceAddAvx2(__m256i v) {
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(t);
}

// The largest of v's eight lanes.
ORTSERVE_AVX2_FMA inline float ReduceMaxAvx2(__m256 v) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// QuantizeBlockWithScalar at AVX2 width: the same rounding, clamp and sums.
ORTSERVE_AVX2_FMA void QuantizeBlockWithAvx2(const float* x, float inv, int8_t* q, int32_t* sum, int32_t* lowSum) {
  const __m256 scale = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127);
  const __m256i hi = _mm256_set1_epi32(127);
  __m256i qi[4];
  __m256i total = _mm256_setzero_si256();
  __m256i low = total;
  for (int i = 0; i < 4; i++) {
    // Round to nearest even (the default rounding mode); NaN converts to INT_MIN, clamped to -127.
    qi[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), scale)), lo), hi);
    total = _mm256_add_epi32(total, qi[i]);
    if (i == 1) low = total;
  }
  // Packing works within 128-bit lanes; the permute puts the 32 bytes back in order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *sum = ReduceAddAvx2(total);
  *lowSum = ReduceAddAvx2(low);
}

// AbsMaxScalar at AVX2 width (count a multiple of 8): NaN passed over too, the running maximum
// being the operand VMAXPS returns when the other is NaN.
ORTSERVE_AVX2_FMA float AbsMaxAvx2(const float* x, int count) {
  const __m256 signBit = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < count; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(signBit, _mm256_loadu_ps(x + j)), m);
  return ReduceMaxAvx2(m);
}

// QuantizeBlockAvx512 at AVX2 width: the same maximum, rounding, clamp and sums.
ORTSERVE_AVX2_FMA void QuantizeBlockAvx2(const float* x, int8_t* q, float* scale, int32_t* sum, int32_t* lowSum) {
  const __m256 signBit = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 8 * i);
  __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signBit, v[0]), _mm256_andnot_ps(signBit, v[1])),
                           _mm256_max_ps(_mm256_andnot_ps(signBit, v[2]), _mm256_andnot_ps(signBit, v[3])));
  const float amax = ReduceMaxAvx2(m);
  QuantizeBlockWithAvx2(x, amax > 0.0f ? 127.0f / amax : 0.0f, q, sum, lowSum);
  *scale = amax / 127.0f;
}

// Eight of block b's scales or offsets (`which`; h: which eight) as floats, as LoadMeta16.
template <int Meta>
ORTSERVE_AVX2_FMA inline __m256 LoadMeta8(const PackedBlockQuantWeight& w, const uint8_t* tile,
                                          const BlockLayout& layout, int b, int which, int h) {
  const uint8_t* p = tile + layout.Meta(b, which);
  if constexpr (Meta == kHalfMeta) return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p) + h));
  if constexpr (IsCoded(Meta)) {
    const __m256 factors = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + layout.Factors(b, which)) + h));
    __m256i codes;
    if constexpr (Meta == kCoded4Meta) {
      // Columns 8h..8h+7: the 8 bytes' low nibbles, or their high ones.
      const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      codes = _mm256_cvtepu8_epi32(_mm_and_si128(h ? _mm_srli_epi16(v, 4) : v, _mm_set1_epi8(0x0f)));
    } else if constexpr (Meta == kCoded6Meta) {
      // Columns 8h..8h+7 lie in bytes 6h..6h+5: those 8 bytes (2 masked off) in every 64-bit
      // lane; 128-bit lane L takes columns 8h + 4L..8h + 4L + 3 (kCoded6Gather).
      int64_t eight;
      std::memcpy(&eight, p + 6 * h, 8);
      const __m256i gathered =
          _mm256_shuffle_epi8(_mm256_set1_epi64x(eight), _mm256_load_si256(reinterpret_cast<const __m256i*>(kCoded6Gather)));
      codes = _mm256_and_si256(
          _mm256_srlv_epi32(gathered, _mm256_load_si256(reinterpret_cast<const __m256i*>(kCoded6Shifts))),
          _mm256_set1_epi32(63));
      codes = _mm256_add_epi32(codes, _mm256_set1_epi32(w.codeBase(which)));
    } else {
      codes = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * h)));
    }
    return _mm256_mul_ps(factors, _mm256_cvtepi32_ps(codes));
  }
  return _mm256_load_ps(reinterpret_cast<const float*>(p) + 8 * h);
}

// How a pass over a tile reads its blocks' metadata as floats. Coded metadata takes 5 instructions
// or more per 8 values to decode (6-bit codes 8), and AVX2 goes over a tile once per 4 rows: with
// more rows the first pass decodes it and keeps the floats (kDecodeAndKeep), the others read them
// back (kKept), so a 16-row step decodes each tile's codes once instead of 4 times (4- and 6-bit
// codes: TileRowsAvx2 says why not int8 ones). The floats are the same either way.
enum MetaPass : int { kDecode, kDecodeAndKeep, kKept };
template <int Meta, int Pass>
struct MetaAvx2 {
  const PackedBlockQuantWeight& w;
  const uint8_t* tile;
  const BlockLayout& layout;
  float* kept;  // 16 floats per block and metadata `which`, for kDecodeAndKeep and kKept

  ORTSERVE_AVX2_FMA __m256 Load(int b, int which, int h) const {
    if constexpr (Pass == kDecode) return LoadMeta8<Meta>(w, tile, layout, b, which, h);
    float* at = kept + (static_cast<int64_t>(b) * (layout.scalesPerBlock + layout.offsetsPerBlock) + which) * kTile + 8 * h;
    if constexpr (Pass == kKept) return _mm256_load_ps(at);
    const __m256 v = LoadMeta8<Meta>(w, tile, layout, b, which, h);
    _mm256_store_ps(at, v);
    return v;
  }
};

// Block b's offsets for columns 8h..8h+7 (the second half's too with offsets per 16; both zero
// without offsets), the zero point folded out of coded and half ones added back (one rounding).
struct OffsetsAvx2 {
  __m256 low, high;
};
template <int Offsets, int Meta, bool Pairs, int Pass>
ORTSERVE_AVX2_FMA inline OffsetsAvx2 LoadOffsetsAvx2(const MetaAvx2<Meta, Pass>& in, int b, int h) {
  if constexpr (!Offsets) return {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const int first = in.layout.scalesPerBlock;
  const __m256 scales = in.Load(b, 0, h);
  const __m256 highScales = Pairs ? in.Load(b, 1, h) : scales;
  __m256 low = in.Load(b, first, h);
  __m256 high = Offsets == 2 ? in.Load(b, first + 1, h) : low;
  if constexpr (Meta != kFloatMeta) low = _mm256_fmadd_ps(_mm256_set1_ps(in.w.offsetFold()), scales, low);
  if constexpr (Offsets == 2 && Meta != kFloatMeta)
    high = _mm256_fmadd_ps(_mm256_set1_ps(in.w.offsetFold()), highScales, high);
  return {low, high};
}
// a plus a row's offset terms: each offset times dx times the sum of the quantized inputs it covers.
template <int Offsets>
ORTSERVE_AVX2_FMA inline __m256 AddOffsetsAvx2(__m256 a, const OffsetsAvx2& offsets, const BlockMeta& meta) {
  if constexpr (Offsets == 2) {
    a = _mm256_fmadd_ps(offsets.low, _mm256_set1_ps(LowScaledSum(meta)), a);
    return _mm256_fmadd_ps(offsets.high, _mm256_set1_ps(HighScaledSum(meta)), a);
  } else if constexpr (Offsets == 1) {
    return _mm256_fmadd_ps(offsets.low, _mm256_set1_ps(meta.scaledSum), a);
  }
  return a;
}

// Group g's (inputs 4g..4g+3) 2- or 3-bit quants for columns 8h..8h+7 whole: bits 2 (g % 4) and
// 2 (g % 4) + 1 of 2-bit chunk g / 4, and for 3 bits, bit g of the third-bit chunk moved to bit 2.
// 16-bit shifts, the bits they carry across bytes masked off.
template <int Bits>
ORTSERVE_AVX2_FMA inline __m256i LowBitQuantsAvx2(const uint8_t* block, int g, int h) {
  const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 64 * (g / 4) + 32 * h));
  const __m256i low = _mm256_and_si256(_mm256_srli_epi16(v, 2 * (g % 4)), _mm256_set1_epi8(0x03));
  if constexpr (Bits == 2) return low;
  const __m256i t = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 128 + 32 * h));
  const __m256i third = g < 2 ? _mm256_slli_epi16(t, 2 - g) : g > 2 ? _mm256_srli_epi16(t, g - 2) : t;
  return _mm256_or_si256(low, _mm256_and_si256(third, _mm256_set1_epi8(0x04)));
}

// Group g's (inputs 4g..4g+3) 5- or 6-bit quants for columns 8h..8h+7 whole: the low nibble from
// its 4-bit chunk, the rest moved up to bit 4: 6 bits' top 2 from bits 2 (g % 4).. of chunk
// 4 + g / 4, 5 bits' fifth from bit g of chunk 4.
template <int Bits>
ORTSERVE_AVX2_FMA inline __m256i WholeQuantsAvx2(const uint8_t* block, int g, int h) {
  const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 64 * (g / 2) + 32 * h));
  const __m256i low = _mm256_and_si256(g % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
  const __m256i t = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 256 + (Bits == 6 ? 64 * (g / 4) : 0) + 32 * h));
  // 16-bit shifts, the bits they carry across bytes masked off.
  const int at = Bits == 6 ? 2 * (g % 4) : g;
  const __m256i top = at < 4 ? _mm256_slli_epi16(t, 4 - at) : at > 4 ? _mm256_srli_epi16(t, at - 4) : t;
  return _mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi8(Bits == 6 ? 0x30 : 0x10)));
}

// TileAvx2 for 5- and 6-bit quants (GGUF's 5-bit types and Q6_K, stored as 8-bit), which go in
// whole (0..63): a pair's products are at most 2 x 63 x 127, so two groups' sums stay within 16
// bits before they are widened. Taking the nibbles apart as 8-bit quants are took twice the multiplies, and their
// sums per half of 16 inputs spilled from the 16 registers: a 16-row step's Q6_K projections ran
// at a third of the 4-bit ones' rate. Per column the float operations are TileAvx2's, in its order
// (each half's sum scaled into acc where the half ends, the offsets last).
template <int R, int Bits, int Offsets, int Meta, bool Pairs, int Pass>
ORTSERVE_AVX2_FMA void TileWholeQuantsAvx2(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x,
                                           int64_t row0, int first, int groupRows, float* dst, int64_t stride,
                                           int count, float* kept) {
  const int blocks = w.blocks();
  const bool prefetch = first == 0;
  constexpr BlockLayout kLayout(Bits, Offsets, Meta, Pairs);
  const uint8_t* tileData = w.tile(tile);
  const MetaAvx2<Meta, Pass> metaIn{w, tileData, kLayout, kept};
  const __m256i ones = _mm256_set1_epi16(1);
  constexpr int kGroups = Pairs ? 4 : 8;
  const int32_t zeroPoint = w.zeroPoint();  // 5 bits: 16, or none
  alignas(32) float acc[R][kTile];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < kTile; c++) acc[r][c] = 0.0f;
  for (int b = 0; b < blocks; b++) {
    const uint8_t* block = tileData + kLayout.Quants(b);
    if (prefetch) PrefetchRange(block + kPrefetchBlocks * kLayout.BlockStride(), kLayout.BlockStride());
    const uint8_t* xBlock = x.Block(row0, b);
    const int32_t* xq = reinterpret_cast<const int32_t*>(xBlock) + first * 8;
    // Opaque to the compiler, so each row's input is read at a constant offset from xq: seeing
    // through it, GCC kept first * 32 + each offset as a loop invariant on the stack, a load more
    // for each of a block's 32 broadcasts.
    __asm__("" : "+r"(xq));
    const BlockMeta* meta = reinterpret_cast<const BlockMeta*>(xBlock + groupRows * kBlock) + first;
    __m256i wide[R][2];
    for (int r = 0; r < R; r++)
      for (int h = 0; h < 2; h++) wide[r][h] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int g = 0; g < 8; g += 2) {
      __m256i quants[2][2];
      for (int p = 0; p < 2; p++)
        for (int h = 0; h < 2; h++) quants[p][h] = WholeQuantsAvx2<Bits>(block, g + p, h);
      for (int r = 0; r < R; r++) {
        const __m256i in0 = _mm256_set1_epi32(xq[r * 8 + g]);
        const __m256i in1 = _mm256_set1_epi32(xq[r * 8 + g + 1]);
        for (int h = 0; h < 2; h++) {
          const __m256i pair =
              _mm256_add_epi16(_mm256_maddubs_epi16(quants[0][h], in0), _mm256_maddubs_epi16(quants[1][h], in1));
          wide[r][h] = _mm256_add_epi32(wide[r][h], _mm256_madd_epi16(pair, ones));
          __asm__("" : "+x"(wide[r][h]));
        }
      }
      if ((g + 2) % kGroups != 0) continue;
      const int s = g / kGroups;
      for (int h = 0; h < 2; h++) {
        const __m256 scales = metaIn.Load(b, s, h);
        for (int r = 0; r < R; r++) {
          const int32_t start = !Pairs  ? StartAt(meta[r], zeroPoint)
                                : s == 0 ? LowStartAt(meta[r], zeroPoint)
                                         : StartAt(meta[r], zeroPoint) - LowStartAt(meta[r], zeroPoint);
          const __m256i dot = _mm256_add_epi32(wide[r][h], _mm256_set1_epi32(start));
          __m256 a = _mm256_load_ps(acc[r] + 8 * h);
          a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(scales, _mm256_set1_ps(meta[r].scale)), a);
          _mm256_store_ps(acc[r] + 8 * h, a);
          wide[r][h] = _mm256_setzero_si256();
        }
      }
    }
    if constexpr (Offsets) {
      for (int h = 0; h < 2; h++) {
        const OffsetsAvx2 offsets = LoadOffsetsAvx2<Offsets, Meta, Pairs>(metaIn, b, h);
        for (int r = 0; r < R; r++)
          _mm256_store_ps(acc[r] + 8 * h, AddOffsetsAvx2<Offsets>(_mm256_load_ps(acc[r] + 8 * h), offsets, meta[r]));
      }
    }
  }
  for (int r = 0; r < R; r++) std::memcpy(dst + (first + r) * stride, acc[r], sizeof(float) * count);
}

// Rows [first, first + R) of the row group at row0, the tile's 16 columns as two halves of 8.
// Without VPDPBUSD, VPMADDUBSW multiplies a lane's unsigned quants by the row's 4 signed inputs
// and adds them in pairs into 16 bits; a block's 8 groups are summed there too (a 4-bit quant
// times an input is at most 15 x 127, so 16 of them stay below 2^15), and VPMADDWD then adds
// the pairs into the lane's 32-bit dot product. 8-bit quants go in as their two nibbles, the
// high one's sum times 16: a whole byte times an input would overflow the pairs' 16 bits.
template <int R, int Bits, int Offsets, int Meta, bool Pairs, int Pass>
ORTSERVE_AVX2_FMA void TileAvx2(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x, int64_t row0,
                                int first, int groupRows, float* dst, int64_t stride, int count, float* kept) {
  const int blocks = w.blocks();
  // The first pass over a tile fetches its weights ahead, whatever the rows (kPrefetchBlocks).
  const bool prefetch = first == 0;
  constexpr BlockLayout kLayout(Bits, Offsets, Meta, Pairs);
  const uint8_t* tileData = w.tile(tile);
  const MetaAvx2<Meta, Pass> metaIn{w, tileData, kLayout, kept};
  const __m256i lowNibbles = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) float acc[R][kTile];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < kTile; c++) acc[r][c] = 0.0f;
  for (int b = 0; b < blocks; b++) {
    const uint8_t* block = tileData + kLayout.Quants(b);
    if (prefetch) {
      PrefetchRange(block + kPrefetchBlocks * kLayout.BlockStride(), kLayout.BlockStride());
    }
    const uint8_t* xBlock = x.Block(row0, b);
    const int32_t* xq = reinterpret_cast<const int32_t*>(xBlock) + first * 8;
    // Opaque to the compiler, so each row's input is read at a constant offset from xq: seeing
    // through it, GCC kept first * 32 + each offset as a loop invariant on the stack, a load more
    // for each of a block's 32 broadcasts.
    __asm__("" : "+r"(xq));
    const BlockMeta* meta = reinterpret_cast<const BlockMeta*>(xBlock + groupRows * kBlock) + first;
    // 8 bits: the low nibbles' sums, then the high ones' (times 16) added to them. With scales per
    // 16 inputs, each half of the block (groups 0-3, 4-7) sums apart, from its own start.
    constexpr int kParts = Bits == 8 ? 2 : 1;
    constexpr int kHalves = Pairs ? 2 : 1;
    __m256i dot[R][2][kHalves];
    for (int part = 0; part < kParts; part++) {
      __m256i pairs[R][2][kHalves];
      for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++)
          for (int s = 0; s < kHalves; s++) pairs[r][h][s] = _mm256_setzero_si256();
      // Unrolled, with each sum pinned to its register: left to itself the compiler kept g a
      // run-time loop, or unrolled it into trees of sums whose temporaries spilled (a 64-row
      // prefill's Q6_K projection ~1.5x slower on AMD Zen 3).
#pragma GCC unroll 8
      for (int g = 0; g < 8; g++) {
        const int half = Pairs ? g / 4 : 0;
        __m256i quants[2];
        for (int h = 0; h < 2; h++) {
          if constexpr (Bits <= 3) {
            quants[h] = LowBitQuantsAvx2<Bits>(block, g, h);
            continue;
          }
          const int chunk = Bits == 8 ? g : g / 2;
          const bool high = Bits == 8 ? part == 1 : g % 2 == 1;
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 64 * chunk + 32 * h));
          quants[h] = _mm256_and_si256(high ? _mm256_srli_epi16(v, 4) : v, lowNibbles);
        }
        for (int r = 0; r < R; r++) {
          const __m256i in = _mm256_set1_epi32(xq[r * 8 + g]);
          for (int h = 0; h < 2; h++) {
            pairs[r][h][half] = _mm256_add_epi16(pairs[r][h][half], _mm256_maddubs_epi16(quants[h], in));
            __asm__("" : "+x"(pairs[r][h][half]));
          }
        }
      }
      for (int r = 0; r < R; r++) {
        const int32_t start = StartOf<Bits>(meta[r]);
        const int32_t lowStart = LowStartOf<Bits>(meta[r]);
        for (int h = 0; h < 2; h++)
          for (int s = 0; s < kHalves; s++) {
            const __m256i sums = _mm256_madd_epi16(pairs[r][h][s], ones);
            if (part == 0)
              dot[r][h][s] = _mm256_add_epi32(sums, _mm256_set1_epi32(!Pairs ? start : s == 0 ? lowStart : start - lowStart));
            else
              dot[r][h][s] = _mm256_add_epi32(dot[r][h][s], _mm256_slli_epi32(sums, 4));
          }
      }
    }
    for (int h = 0; h < 2; h++) {
      const __m256 scales = metaIn.Load(b, 0, h);
      const __m256 highScales = Pairs ? metaIn.Load(b, 1, h) : scales;
      const OffsetsAvx2 offsets = LoadOffsetsAvx2<Offsets, Meta, Pairs>(metaIn, b, h);
      for (int r = 0; r < R; r++) {
        __m256 a = _mm256_load_ps(acc[r] + 8 * h);
        const __m256 dx = _mm256_set1_ps(meta[r].scale);
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][h][0]), _mm256_mul_ps(scales, dx), a);
        if constexpr (Pairs) a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][h][1]), _mm256_mul_ps(highScales, dx), a);
        _mm256_store_ps(acc[r] + 8 * h, AddOffsetsAvx2<Offsets>(a, offsets, meta[r]));
      }
    }
  }
  for (int r = 0; r < R; r++) std::memcpy(dst + (first + r) * stride, acc[r], sizeof(float) * count);
}

// A row group (up to 8 rows) in passes of up to 4: AVX2's 16 registers hold 4 rows' sums. With
// `kept` (a tile's rows in more than one pass) 4- and 6-bit codes are decoded by the tile's first
// pass only: the others read back the floats it kept.
template <int Bits, int Offsets, int Meta, bool Pairs>
void TileRowsAvx2(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x, int64_t row0, int rows,
                  float* dst, int64_t stride, int count, KeptMeta* kept) {
  const auto pass = [&]<int R, int Pass>(int first, float* floats) {
    if constexpr (Bits == 5 || Bits == 6)
      TileWholeQuantsAvx2<R, Bits, Offsets, Meta, Pairs, Pass>(w, tile, x, row0, first, rows, dst, stride, count,
                                                               floats);
    else
      TileAvx2<R, Bits, Offsets, Meta, Pairs, Pass>(w, tile, x, row0, first, rows, dst, stride, count, floats);
  };
  // Rows first.. in passes of up to 4.
  const auto passes = [&]<int Pass>(int first, float* floats) {
    for (; first < rows; first += 4) {
      switch (rows - first) {
        case 1: pass.template operator()<1, Pass>(first, floats); break;
        case 2: pass.template operator()<2, Pass>(first, floats); break;
        case 3: pass.template operator()<3, Pass>(first, floats); break;
        default: pass.template operator()<4, Pass>(first, floats); break;
      }
    }
  };
  // Only narrow codes: int8 ones decode in about what the kept floats' store and reloads take
  // (Q6_K's 16-row projection measured no faster kept).
  if constexpr (Meta == kCoded6Meta || Meta == kCoded4Meta) {
    if (kept != nullptr) {
      if (kept->valid) return passes.template operator()<kKept>(0, kept->floats);
      // A tile's first row group has more than 4 rows when kept is given.
      if (rows > 4) {
        constexpr BlockLayout kLayout(Bits, Offsets, Meta, Pairs);
        kept->Reserve(static_cast<size_t>(w.blocks()) * (kLayout.scalesPerBlock + kLayout.offsetsPerBlock) * kTile);
        kept->valid = true;
        pass.template operator()<4, kDecodeAndKeep>(0, kept->floats);
        return passes.template operator()<kKept>(4, kept->floats);
      }
    }
  }
  passes.template operator()<kDecode>(0, nullptr);
}
#endif

// Quant of input j (of 32) for lane (column) `lane` of a packed block.
int QuantAt(const uint8_t* block, int bits, int lane, int j) {
  if (bits == 8) return block[64 * (j / 4) + 4 * lane + j % 4];
  if (bits <= 3) {
    const int g = j / 4;
    const int low = (block[64 * (g / 4) + 4 * lane + j % 4] >> (2 * (g % 4))) & 3;
    return bits == 2 ? low : low | ((block[128 + 4 * lane + j % 4] >> g) & 1) << 2;
  }
  const int within = j % 8;
  const uint8_t byte = block[64 * (j / 8) + 4 * lane + within % 4];
  const int low = within < 4 ? (byte & 15) : (byte >> 4);
  if (bits == 4) return low;
  const int g = j / 4;
  if (bits == 5) return low | ((block[256 + 4 * lane + j % 4] >> g) & 1) << 4;
  return low | ((block[256 + 64 * (g / 4) + 4 * lane + j % 4] >> (2 * (g % 4))) & 3) << 4;
}


void TileRowsScalar(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x, int64_t row0, int rows,
                    float* dst, int64_t stride, int count) {
  const int blocks = w.blocks();
  for (int r = 0; r < rows; r++)
    for (int lane = 0; lane < count; lane++) {
      float acc = 0.0f;
      for (int b = 0; b < blocks; b++) {
        const uint8_t* block = w.block(tile, b);
        const int8_t* xq = reinterpret_cast<const int8_t*>(x.Block(row0, b)) + r * kBlock;
        const BlockMeta& meta = reinterpret_cast<const BlockMeta*>(x.Block(row0, b) + rows * kBlock)[r];
        const int32_t start = StartAt(meta, w.zeroPoint());
        const float scale = w.MetaValue(tile, b, 0, lane);
        if (w.pairScales()) {
          // Each half with its own scale, the first half first (as the vector kernels).
          const int32_t lowStart = LowStartAt(meta, w.zeroPoint());
          int32_t low = lowStart;
          int32_t high = start - lowStart;
          for (int j = 0; j < kBlock / 2; j++) low += QuantAt(block, w.bits(), lane, j) * xq[j];
          for (int j = kBlock / 2; j < kBlock; j++) high += QuantAt(block, w.bits(), lane, j) * xq[j];
          const float highScale = w.MetaValue(tile, b, 1, lane);
          acc = std::fma(static_cast<float>(low), scale * meta.scale, acc);
          acc = std::fma(static_cast<float>(high), highScale * meta.scale, acc);
        } else {
          int32_t dot = start;
          for (int j = 0; j < kBlock; j++) dot += QuantAt(block, w.bits(), lane, j) * xq[j];
          acc = std::fma(static_cast<float>(dot), scale * meta.scale, acc);
        }
        const int firstOffset = w.pairScales() ? 2 : 1;
        if (w.pairOffsets()) {
          acc = std::fma(w.MetaValue(tile, b, firstOffset, lane), LowScaledSum(meta), acc);
          acc = std::fma(w.MetaValue(tile, b, firstOffset + 1, lane), HighScaledSum(meta), acc);
        } else if (w.hasOffsets()) {
          acc = std::fma(w.MetaValue(tile, b, firstOffset, lane), meta.scaledSum, acc);
        }
      }
      dst[r * stride + lane] = acc;
    }
}

// fn(bits, offsets (per block: 0, 1 or 2), meta, pairs) with the weights' kind as compile-time constants
// (std::integral_constant), so a kernel's template is instantiated for each kind once.
template <typename Fn>
void WithKind(const PackedBlockQuantWeight& w, Fn&& fn) {
  auto withPairs = [&](auto bits, auto offsets, auto meta) {
    return w.pairScales() ? fn(bits, offsets, meta, std::true_type{}) : fn(bits, offsets, meta, std::false_type{});
  };
  auto withHalf = [&](auto bits, auto offsets) {
    switch (w.metaKind()) {
      case kHalfMeta: return withPairs(bits, offsets, std::integral_constant<int, kHalfMeta>{});
      case kCodedMeta: return withPairs(bits, offsets, std::integral_constant<int, kCodedMeta>{});
      case kCoded4Meta:
        // Only Q2_K's sub-block scales and mins are all 4-bit codes: instantiated for 2 bits alone.
        if constexpr (decltype(bits)::value == 2)
          return withPairs(bits, offsets, std::integral_constant<int, kCoded4Meta>{});
        break;
      case kCoded6Meta:
        // 6-bit codes only for 3- to 5-bit quants (Q3_K, Q4_K, Q5_K).
        if constexpr (decltype(bits)::value >= 3 && decltype(bits)::value <= 5)
          return withPairs(bits, offsets, std::integral_constant<int, kCoded6Meta>{});
        break;
      default: break;
    }
    // Pack makes no other kinds: unreachable.
    return withPairs(bits, offsets, std::integral_constant<int, kFloatMeta>{});
  };
  using Two = std::integral_constant<int, 2>;
  using Three = std::integral_constant<int, 3>;
  using Four = std::integral_constant<int, 4>;
  using Five = std::integral_constant<int, 5>;
  using Six = std::integral_constant<int, 6>;
  using Eight = std::integral_constant<int, 8>;
  // Offsets per block: none, one, or one per 16 inputs.
  auto withOffsets = [&](auto bits) {
    if (w.pairOffsets()) return withHalf(bits, std::integral_constant<int, 2>{});
    return w.hasOffsets() ? withHalf(bits, std::integral_constant<int, 1>{})
                          : withHalf(bits, std::integral_constant<int, 0>{});
  };
  if (w.bits() == 2) return withOffsets(Two{});
  if (w.bits() == 3) return withOffsets(Three{});
  if (w.bits() == 4) return withOffsets(Four{});
  if (w.bits() == 5) return withOffsets(Five{});
  if (w.bits() == 6) return withOffsets(Six{});
  return withOffsets(Eight{});
}

// Rows [row0, row0 + rows) (at most kRowGroup) of the tile's columns to dst, rows `stride` apart;
// `kept`, when given, keeps the tile's decoded metadata for its next row groups (AVX2).
void TileRows(const PackedBlockQuantWeight& w, int tile, const QuantizedRows& x, int64_t row0, int rows, float* dst,
              int64_t stride, KeptMeta* kept) {
  const int count = std::min(kTile, w.n() - tile * kTile);
#ifdef ORTSERVE_AVX512_KERNEL
  if (gKernel.load(std::memory_order_relaxed) == kAvx512Vnni)
    return WithKind(w, [&](auto bits, auto offsets, auto meta, auto pairs) {
      TileRowsAvx512<bits(), offsets(), meta(), pairs()>(w, tile, x, row0, rows, dst, stride, count);
    });
#endif
#ifdef ORTSERVE_X86_SIMD
  if (gKernel.load(std::memory_order_relaxed) == kAvx2)
    return WithKind(w, [&](auto bits, auto offsets, auto meta, auto pairs) {
      TileRowsAvx2<bits(), offsets(), meta(), pairs()>(w, tile, x, row0, rows, dst, stride, count, kept);
    });
#endif
  TileRowsScalar(w, tile, x, row0, rows, dst, stride, count);
}

// Rows [from, to) of `in` quantized into x: per block of 32 with its own scale (llama.cpp's Q8_1 and
// Q8_0), or with activationBlock 256 per super-block of 8 blocks with one (its Q8_K,
// quantize_row_q8_K_ref: inv = 127 / max|x|, dx = 1 / inv; llama.cpp keeps both negated when the
// largest-magnitude input is positive, which gives the same products).
void QuantizeRows(const float* in, int64_t from, int64_t to, int k, int activationBlock, QuantizedRows& x) {
  const int blocks = k / kBlock;
#ifdef ORTSERVE_AVX512_KERNEL
  const int kernel = gKernel.load(std::memory_order_relaxed);
#endif
  for (int64_t r = from; r < to; r++) {
    if (activationBlock == kSuperBlock) {
      for (int b0 = 0; b0 < blocks; b0 += kSuperBlock / kBlock) {
        const float* src = in + r * k + b0 * kBlock;
#ifdef ORTSERVE_X86_SIMD
        // The AVX-512 kernel's CPUs have AVX2: one quantizer for both.
        const bool avx2 = kernel != kScalar;
        const float amax = avx2 ? AbsMaxAvx2(src, kSuperBlock) : AbsMaxScalar(src, kSuperBlock);
#else
        const float amax = AbsMaxScalar(src, kSuperBlock);
#endif
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int b = b0; b < b0 + kSuperBlock / kBlock; b++) {
          BlockMeta* meta = x.Meta(r, b);
          int32_t sum = 0;
#ifdef ORTSERVE_X86_SIMD
          if (avx2)
            QuantizeBlockWithAvx2(in + r * k + b * kBlock, inv, x.Quants(r, b), &sum, &meta->lowSum);
          else
#endif
            QuantizeBlockWithScalar(in + r * k + b * kBlock, inv, x.Quants(r, b), &sum, &meta->lowSum);
          meta->scale = inv > 0.0f ? 1.0f / inv : 0.0f;
          meta->start4 = -8 * sum;
          meta->scaledSum = meta->scale * static_cast<float>(sum);
        }
      }
      continue;
    }
    for (int b = 0; b < blocks; b++) {
      const float* src = in + r * k + b * kBlock;
      BlockMeta* meta = x.Meta(r, b);
      int32_t sum = 0;
#ifdef ORTSERVE_AVX512_KERNEL
      if (kernel == kAvx512Vnni)
        QuantizeBlockAvx512(src, x.Quants(r, b), &meta->scale, &sum, &meta->lowSum);
      else
#endif
#ifdef ORTSERVE_X86_SIMD
      if (kernel == kAvx2)
        QuantizeBlockAvx2(src, x.Quants(r, b), &meta->scale, &sum, &meta->lowSum);
      else
#endif
        QuantizeBlockScalar(src, x.Quants(r, b), &meta->scale, &sum, &meta->lowSum);
      meta->start4 = -8 * sum;
      meta->scaledSum = meta->scale * static_cast<float>(sum);
    }
  }
}

// A half factor and integer codes with factor * code[i] == v[i] exactly in float, for `count` values;
// false when there are none. A K-quant's sub-block scales are an fp16 times small integers (Q6_K's
// largest is often -128), so the largest value's code is tried from the range's widest magnitude down, either
// sign: some factor d / 2^m with the integers times 2^m is found first, and any exact one will do.
// Codes minCode..maxCode: -128..127 (int8), 0..15 (4-bit), 0..63 or -32..31 (6-bit).
bool FactorExactly(const float* v, int count, uint16_t* factor, int8_t* codes, int minCode, int maxCode) {
  float largest = 0.0f;
  for (int i = 0; i < count; i++)
    if (std::fabs(v[i]) > std::fabs(largest)) largest = v[i];
  if (largest == 0.0f) {
    *factor = 0;
    for (int i = 0; i < count; i++) codes[i] = 0;
    return true;
  }
  // Whether factor largest / c codes every value exactly.
  auto tryCode = [&](int c) {
    if (c > maxCode || c < minCode || c == 0) return false;
    const float f = largest / static_cast<float>(c);
    if (!IsExactHalf(f) || static_cast<double>(f) * c != static_cast<double>(largest)) return false;
    for (int i = 0; i < count; i++) {
      const double q = std::nearbyint(static_cast<double>(v[i]) / f);
      if (!(q >= minCode && q <= maxCode && static_cast<double>(f) * q == static_cast<double>(v[i]) &&
            f * static_cast<float>(q) == v[i]))
        return false;
      codes[i] = static_cast<int8_t>(q);
    }
    *factor = FloatToHalf(f);
    return true;
  };
  // llama.cpp's quantizers give the largest sub-block scale the code width's extreme (Q6_K's -128,
  // Q4_K's and Q5_K's 63, Q3_K's -32, Q2_K's 15): tried first, they spare most super-blocks the
  // search below (up to ~130 divisions), which was about a third of packing a Q4_K_M model.
  for (const int c : {maxCode, minCode, 63, -32, 31, 15})
    if (tryCode(c)) return true;
  for (int magnitude = std::max(maxCode, -minCode); magnitude >= 1; magnitude--)
    for (int sign = 1; sign >= -1; sign -= 2)
      if (tryCode(sign * magnitude)) return true;
  return false;
}

const char* CheckPackArguments(int n, int k, int bits, int scaleBlock, int activationBlock) {
  if (bits != 4 && bits != 8) return "only 4- and 8-bit blocks are supported";
  if (n <= 0 || k <= 0 || k % kBlock != 0) return "k must be a positive multiple of 32";
  if (activationBlock != kBlock && activationBlock != kSuperBlock) return "activation_block must be 32 or 256";
  if (k % activationBlock != 0) return "k must be a multiple of activation_block";
  if (scaleBlock != kBlock && scaleBlock != kBlock / 2) return "scales must come per 32 or per 16 inputs";
  return nullptr;
}

}  // namespace

// What Pack makes of quants given `inBits` wide whose values all lie in low..high (4-bit ones: the
// nibbles'): the bits it keeps and the value it takes off each first, so the same products come
// out of fewer bytes (the zero point is then 2^(inBits - 1) less `from`).
struct QuantForm {
  int bits = 8;
  int from = 0;
  bool operator==(const QuantForm& o) const { return bits == o.bits && from == o.from; }
};
QuantForm NarrowQuants(int inBits, int low, int high) {
  if (inBits == 8) {
    // Within 8 of the zero point 128: 4-bit quants widened (a stack's Q4_K or Q5_0 part beside a
    // Q6_K or Q8_0 one), and narrower still if they allow.
    if (low >= 120 && high < 136) {
      const QuantForm four = NarrowQuants(4, low - 120, high - 120);
      return {four.bits, four.from + 120};
    }
    if (low >= 112 && high < 144) return {5, 112};  // signed 5-bit types (Q5_0): zero point 16
    if (low >= 128 && high < 160) return {5, 128};  // unsigned ones with offsets (Q5_1, Q5_K)
    if (low >= 96 && high < 160) return {6, 96};    // Q6_K: zero point 32
    return {8, 0};
  }
  if (low >= 8 && high < 12) return {2, 8};  // Q2_K, stored q + 8: unsigned, no zero point
  if (low >= 4 && high < 12) return {3, 4};  // Q3_K: zero point 4
  return {4, 0};
}

// The narrowest form of columns [c0, c1) of Pack's arguments: their quants' (NarrowQuants), scales
// per 16 kept per 32 where the halves of every block agree (a stack's Q4_K part, repeated per half
// beside a Q6_K one), offsets per 32 likewise, and none where all are zero (the stack's parts
// without them).
struct PackForm {
  QuantForm quants;
  bool pairScales = false;
  bool pairOffsets = false;
  bool offsets = false;
  bool operator==(const PackForm& o) const {
    return quants == o.quants && pairScales == o.pairScales && pairOffsets == o.pairOffsets && offsets == o.offsets;
  }
};
PackForm FormOf(const uint8_t* quants, const float* scales, const float* offsets, int n, int k, int inBits,
                int scaleBlock, int64_t c0, int64_t c1) {
  const size_t rowBytes = static_cast<size_t>(k) * inBits / 8;
  int low = inBits == 8 ? 255 : 15, high = 0;
  for (size_t i = c0 * rowBytes; i < c1 * rowBytes; i++) {
    const int a = inBits == 8 ? quants[i] : quants[i] & 15;
    const int b = inBits == 8 ? quants[i] : quants[i] >> 4;
    low = std::min({low, a, b});
    high = std::max({high, a, b});
  }
  PackForm form{NarrowQuants(inBits, low, high)};
  const int64_t blockCount = k / kBlock;
  const int perBlock = kBlock / scaleBlock;
  for (int64_t c = c0; c < c1; c++)
    for (int64_t b = 0; b < blockCount; b++) {
      const float* blockScales = scales + (c * blockCount + b) * perBlock;
      if (perBlock == 2 && !(blockScales[0] == blockScales[1])) form.pairScales = true;
      if (offsets == nullptr) continue;
      const float first = offsets[b * perBlock * n + c];
      const float second = offsets[(b * perBlock + perBlock - 1) * n + c];
      if (first != 0.0f || second != 0.0f) form.offsets = true;
      if (!(first == second)) form.pairOffsets = true;
    }
  if (!form.offsets) form.pairOffsets = false;
  // Offsets per 16 come only with scales per 16.
  if (form.pairOffsets) form.pairScales = true;
  return form;
}

namespace {

// One column's (lane's) 32 quants of a block, given InBits wide (8: a byte each; 4: element 2j in
// byte j's low nibble, 2j + 1 in its high one), less `from`, into the packed block in Bits bits,
// with the kind as constants: packing every weight of a model this way takes a fraction of the
// time a loop deciding the kind per quant did.
template <int InBits, int Bits>
void PackLane(const uint8_t* src, int from, int lane, uint8_t* block) {
  if constexpr (InBits == 4 && Bits == 4) {
    // 4-bit quants kept whole (from is then 0): each 4 source bytes (nibbles n0..n7 of chunk c)
    // become the lane's 4 bytes of chunk c, byte p holding n_p low and n_{p+4} high.
    if (from == 0) {
      auto spread = [](uint32_t v) {  // nibble k of v's low 16 bits to byte k's low nibble
        v = (v | v << 8) & 0x00FF00FFu;
        return (v | v << 4) & 0x0F0F0F0Fu;
      };
      for (int c = 0; c < 4; c++) {
        uint32_t x;
        std::memcpy(&x, src + 4 * c, 4);
        const uint32_t bytes = spread(x & 0xFFFFu) | spread(x >> 16) << 4;
        std::memcpy(block + 64 * c + 4 * lane, &bytes, 4);
      }
      return;
    }
  }
  for (int j = 0; j < kBlock; j++) {
    // The quant less what the narrow form takes off (its value in bits `Bits`).
    const int q = (InBits == 8 ? src[j] : j % 2 == 0 ? src[j / 2] & 15 : src[j / 2] >> 4) - from;
    const int within = j % 8;
    const int g = j / 4;
    if constexpr (Bits == 8) {
      block[64 * g + 4 * lane + j % 4] = static_cast<uint8_t>(q);
    } else if constexpr (Bits >= 4) {
      // The low nibble in 4-bit chunk j / 8; 5 bits: the fifth in chunk 4's bit g; 6 bits: the
      // top two in chunk 4 + g / 4's bits 2 (g % 4)..
      block[64 * (j / 8) + 4 * lane + within % 4] |= static_cast<uint8_t>(within < 4 ? q & 15 : (q & 15) << 4);
      if constexpr (Bits == 5) block[256 + 4 * lane + j % 4] |= static_cast<uint8_t>((q >> 4) << g);
      if constexpr (Bits == 6)
        block[256 + 64 * (g / 4) + 4 * lane + j % 4] |= static_cast<uint8_t>((q >> 4) << (2 * (g % 4)));
    } else {
      // 2 and 3 bits: the low 2 in chunk g / 4's bits 2 (g % 4).., the third bit in chunk 2's bit g.
      block[64 * (g / 4) + 4 * lane + j % 4] |= static_cast<uint8_t>((q & 3) << (2 * (g % 4)));
      if constexpr (Bits == 3) block[128 + 4 * lane + j % 4] |= static_cast<uint8_t>((q >> 2) << g);
    }
  }
}
using PackLaneFn = void (*)(const uint8_t*, int, int, uint8_t*);
PackLaneFn PackLaneFor(int inBits, int bits) {
  auto of = [&](auto in) -> PackLaneFn {
    constexpr int kIn = decltype(in)::value;
    switch (bits) {
      case 2: return PackLane<kIn, 2>;
      case 3: return PackLane<kIn, 3>;
      case 4: return PackLane<kIn, 4>;
      case 5: return PackLane<kIn, 5>;
      case 6: return PackLane<kIn, 6>;
      default: return PackLane<kIn, 8>;
    }
  };
  return inBits == 8 ? of(std::integral_constant<int, 8>{}) : of(std::integral_constant<int, 4>{});
}

// fn(begin, end) over [0, count), split between this thread and up to 15 others (one per core)
// when `weights` (the matrix's n x k) is large: packing a model's projections was most of its
// load time on one thread (Qwen2.5-1.5B Q4_K_M: ~14 of ~20 s), and each piece writes its own
// output.
template <typename Fn>
void ForChunks(int64_t count, int64_t weights, Fn&& fn) {
  constexpr int64_t kParallelWeights = int64_t{1} << 22;
  constexpr int64_t kMaxThreads = 16;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = weights < kParallelWeights ? 1 : std::min({cores, kMaxThreads, count});
  if (threads <= 1) {
    fn(int64_t{0}, count);
    return;
  }
  std::vector<std::thread> others;
  for (int64_t i = 1; i < threads; i++)
    others.emplace_back([&fn, i, count, threads] { fn(count * i / threads, count * (i + 1) / threads); });
  fn(int64_t{0}, count / threads);
  for (std::thread& t : others) t.join();
}

// Bytes this thread has packed (BytesPackedOnThisThread).
thread_local size_t tPackedBytes = 0;

}  // namespace

PackedBlockQuantWeight::~PackedBlockQuantWeight() { FreeWeights(data_); }

size_t BytesPackedOnThisThread() { return tPackedBytes; }
void AddBytesPackedOnThisThread(size_t bytes) { tPackedBytes += bytes; }

const char* PackedBlockQuantWeight::Pack(const uint8_t* quants, const float* scales, const float* offsets, int n,
                                         int k, int bits, int scaleBlock, int activationBlock) {
  if (const char* problem = CheckPackArguments(n, k, bits, scaleBlock, activationBlock)) return problem;
  return PackAs(FormOf(quants, scales, offsets, n, k, bits, scaleBlock, 0, n), quants, scales, offsets, n, k, bits,
                scaleBlock, activationBlock);
}

const char* PackedBlockQuantWeight::PackAs(const PackForm& form, const uint8_t* quants, const float* scales,
                                           const float* offsets, int n, int k, int bits, int scaleBlock,
                                           int activationBlock) {
  if (const char* problem = CheckPackArguments(n, k, bits, scaleBlock, activationBlock)) return problem;
  const int64_t blockCount = static_cast<int64_t>(k) / kBlock;
  // Scales (and offsets) per 16 in the source, kept per 32 where the halves agree.
  const int srcPerBlock = kBlock / scaleBlock;
  const bool pairs = form.pairScales;
  const bool pairOffsets = form.pairOffsets;
  if (!form.offsets) offsets = nullptr;
  const int inBits = bits;
  bits = form.quants.bits;
  FreeWeights(data_);
  n_ = n;
  k_ = k;
  bits_ = bits;
  zeroPoint_ = (inBits == 8 ? 128 : 8) - form.quants.from;
  activationBlock_ = activationBlock;
  hasOffsets_ = offsets != nullptr;
  pairScales_ = pairs;
  pairOffsets_ = pairOffsets;
  const int scalesPerBlock = pairs ? 2 : 1;
  const int offsetsPerBlock = offsets == nullptr ? 0 : pairOffsets ? 2 : 1;
  // Column c's metadata `which` of block b (per block of 32: the first half's).
  auto value = [&](int64_t c, int64_t b, int which) {
    return which < scalesPerBlock ? scales[(c * blockCount + b) * srcPerBlock + which]
                                  : offsets[(b * srcPerBlock + which - scalesPerBlock) * n + c];
  };
  // The scale of the inputs offset `which` covers (its half's with offsets per 16).
  auto scaleOfOffset = [&](int which) { return pairOffsets ? which - scalesPerBlock : 0; };
  const int metaPerBlock = scalesPerBlock + offsetsPerBlock;
  // Half metadata only when it reads back as the same floats, coded only when every super-block's
  // values factor exactly: the kernels' results are then the float layout's, bit for bit.
  // Offset `which` of column c's block b less fold times the scale of the same inputs, or NaN
  // when the kernel's one rounding of fold * scale + that would not give the offset back.
  auto unfolded = [&](int64_t c, int64_t b, int which, float fold) {
    const float offset = value(c, b, which);
    const float scale = value(c, b, scaleOfOffset(which));
    const float rest = offset - fold * scale;
    const bool exact = static_cast<double>(rest) == static_cast<double>(offset) - fold * static_cast<double>(scale) &&
                       std::fma(fold, scale, rest) == offset;
    return exact ? rest : std::numeric_limits<float>::quiet_NaN();
  };
  // The converter folds a 4-bit zero point of 8 into the offsets (Q4_1's m + 8d), which takes
  // them off the half grid; with the fold taken out they are the file's halves again.
  auto allHalf = [&](float fold) {
    for (int64_t c = 0; c < n; c++)
      for (int64_t b = 0; b < blockCount; b++)
        for (int which = 0; which < metaPerBlock; which++)
          if (!IsExactHalf(which < scalesPerBlock ? value(c, b, which) : unfolded(c, b, which, fold))) return false;
    return true;
  };
  float halfFold = 0.0f;
  bool half = allHalf(0.0f);
  if (!half && offsets != nullptr && allHalf(8.0f)) {
    half = true;
    halfFold = 8.0f;
  }
  std::vector<int8_t> codes;
  std::vector<uint16_t> factors;
  // Codes every super-block's values of one kind (0: scales; 1: offsets, less fold times the scale
  // of the same inputs: the converter folds a 4-bit zero point of 8 into K-quants' offsets, Q4_K's
  // -dmin * m + 8 * d * sc, which factor only without it), codes in minCode..maxCode stored less
  // base (6-bit codes: their range's low end). False when some value does not factor exactly.
  auto codeKind = [&](int kind, float fold, int minCode, int maxCode, int base) {
    const int64_t supers = blockCount / 8;
    const int per = kind == 0 ? scalesPerBlock : offsetsPerBlock;
    const int first = kind == 0 ? 0 : scalesPerBlock;
    // Column c's super-blocks; false when one does not factor.
    auto codeColumn = [&](int64_t c) {
      float values[16];
      int8_t found[16];
      for (int64_t sb = 0; sb < supers; sb++) {
        for (int i = 0; i < 8 * per; i++) {
          const int64_t b = sb * 8 + i / per;
          if (kind == 0) {
            values[i] = value(c, b, i % per);
            continue;
          }
          const float offset = value(c, b, first + i % per);
          const float scale = value(c, b, scaleOfOffset(first + i % per));
          values[i] = offset - fold * scale;
          // The kernel adds fold * scale back (one rounding): exact only if this was.
          if (static_cast<double>(values[i]) != static_cast<double>(offset) - fold * static_cast<double>(scale) ||
              std::fma(fold, scale, values[i]) != offset)
            return false;
        }
        uint16_t factor = 0;
        if (!FactorExactly(values, 8 * per, &factor, found, minCode, maxCode)) return false;
        factors[(c * supers + sb) * 2 + kind] = factor;
        for (int i = 0; i < 8 * per; i++)
          codes[((c * blockCount + sb * 8 + i / per) * metaPerBlock) + first + i % per] =
              static_cast<int8_t>(found[i] - base);
      }
      return true;
    };
    std::atomic<bool> exact{true};
    ForChunks(n, static_cast<int64_t>(n) * k, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1 && exact.load(std::memory_order_relaxed); c++)
        if (!codeColumn(c)) exact.store(false, std::memory_order_relaxed);
    });
    if (!exact.load()) return false;
    codeBase_[kind] = base;
    return true;
  };
  offsetFold_ = halfFold;
  codeBase_[0] = codeBase_[1] = 0;
  // Codes in the fewest bits every value allows: 4 (Q2_K's sub-block scales and mins; a kernel
  // form for 2-bit quants alone), 6 (Q3_K's, Q4_K's and Q5_K's; 3- to 5-bit quants alone), or 8.
  int codeBits = 0;
  if (!half && blockCount % 8 == 0) {
    codes.assign(static_cast<size_t>(n) * blockCount * metaPerBlock, 0);
    factors.assign(static_cast<size_t>(n) * (blockCount / 8) * 2, 0);
    struct CodeRange {
      int bits, minCode, maxCode;
    };
    constexpr CodeRange kRanges[] = {{4, 0, 15}, {6, 0, 63}, {6, -32, 31}, {8, -128, 127}};
    for (const int width : {4, 6, 8}) {
      if ((width == 4 && bits != 2) || (width == 6 && (bits < 3 || bits > 5))) continue;
      // Each kind in the first of this width's ranges that holds all its codes.
      auto codeIn = [&](int kind, float fold) {
        for (const CodeRange& r : kRanges)
          if (r.bits == width && codeKind(kind, fold, r.minCode, r.maxCode, width == 6 ? r.minCode : 0)) return true;
        return false;
      };
      if (!codeIn(0, 0.0f)) continue;
      if (offsets != nullptr) {
        if (codeIn(1, 0.0f)) offsetFold_ = 0.0f;
        else if (codeIn(1, 8.0f)) offsetFold_ = 8.0f;
        else continue;
      }
      codeBits = width;
      break;
    }
    if (codeBits == 0) {
      codes.clear();
      codeBase_[0] = codeBase_[1] = 0;
      offsetFold_ = halfFold;
    }
  }
  meta_ = half              ? kHalfMeta
          : codeBits == 0 ? kFloatMeta
          : codeBits == 4 ? kCoded4Meta
          : codeBits == 6 ? kCoded6Meta
                          : kCodedMeta;
  layout_ = BlockLayout(bits, offsetsPerBlock, meta_, pairs);
  tileBytes_ = layout_.TileBytes(blocks());
  data_ = static_cast<uint8_t*>(AllocateWeights(bytes()));
  if (data_ == nullptr) return "out of memory packing the weights";
  tPackedBytes += bytes();
  const int blockBytes = kBlock * inBits / 8;
  const PackLaneFn packLane = PackLaneFor(inBits, bits);
  // Tiles [t0, t1): each writes only its own bytes.
  auto packTiles = [&](int64_t t0, int64_t t1) {
    for (int t = static_cast<int>(t0); t < t1; t++)
      for (int b = 0; b < blocks(); b++) {
        uint8_t* tileData = data_ + static_cast<size_t>(t) * tileBytes_;
        uint8_t* block = tileData + layout_.Quants(b);
        for (int lane = 0; lane < kTile && t * kTile + lane < n; lane++) {
          const int64_t column = t * kTile + lane;
          const uint8_t* src = quants + (column * blocks() + b) * blockBytes;
          packLane(src, form.quants.from, lane, block);
          for (int which = 0; which < metaPerBlock; which++) {
            uint8_t* at = tileData + layout_.Meta(b, which);
            if (IsCoded(meta_)) {
              const int8_t code = codes[(column * blockCount + b) * metaPerBlock + which];
              if (meta_ == kCoded4Meta) {
                at[lane % 8] |= static_cast<uint8_t>(code << (4 * (lane / 8)));
              } else if (meta_ == kCoded6Meta) {
                // Bits 6 lane.. of the 12 bytes, little-endian.
                const int bit = 6 * lane;
                const int shifted = static_cast<uint8_t>(code) << (bit % 8);
                at[bit / 8] |= static_cast<uint8_t>(shifted);
                if (shifted > 255) at[bit / 8 + 1] |= static_cast<uint8_t>(shifted >> 8);
              } else {
                at[lane] = static_cast<uint8_t>(code);
              }
              const uint16_t factor =
                  factors[(column * (blockCount / 8) + b / 8) * 2 + (which < scalesPerBlock ? 0 : 1)];
              std::memcpy(tileData + layout_.Factors(b, which) + 2 * lane, &factor, 2);
            } else if (meta_ == kHalfMeta) {
              const float v =
                  which < scalesPerBlock ? value(column, b, which) : unfolded(column, b, which, offsetFold_);
              const uint16_t h = FloatToHalf(v);
              std::memcpy(at + 2 * lane, &h, 2);
            } else {
              const float f = value(column, b, which);
              std::memcpy(at + 4 * lane, &f, 4);
            }
          }
        }
      }
  };
  ForChunks(tiles(), static_cast<int64_t>(n) * k, packTiles);
  return nullptr;
}

const char* PackedProjection::Pack(const uint8_t* quants, const float* scales, const float* offsets, int n, int k,
                                   int bits, int scaleBlock, int activationBlock) {
  if (const char* problem = CheckPackArguments(n, k, bits, scaleBlock, activationBlock)) return problem;
  n_ = n;
  k_ = k;
  activationBlock_ = activationBlock;
  parts_.clear();
  firstTile_.clear();
  partOfTile_.clear();
  const int tiles = (n + kTile - 1) / kTile;
  const int64_t groups = k / scaleBlock;
  const size_t rowBytes = static_cast<size_t>(k) * bits / 8;
  std::vector<PackForm> forms(tiles);
  ForChunks(tiles, static_cast<int64_t>(n) * k, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++)
      forms[t] = FormOf(quants, scales, offsets, n, k, bits, scaleBlock, static_cast<int>(t) * kTile,
                        std::min(n, static_cast<int>(t + 1) * kTile));
  });
  // Each run of tiles of one form is packed as its own part.
  int first = 0;
  PackForm form = forms[0];
  for (int t = 1; t <= tiles; t++) {
    PackForm next;
    if (t < tiles && (next = forms[t]) == form) continue;
    const int c0 = first * kTile;
    const int width = std::min(n, t * kTile) - c0;
    std::vector<float> partOffsets;
    if (offsets != nullptr) {
      partOffsets.resize(static_cast<size_t>(groups) * width);
      for (int64_t g = 0; g < groups; g++)
        std::memcpy(partOffsets.data() + g * width, offsets + g * n + c0, sizeof(float) * width);
    }
    // The run's form is its tiles': NarrowQuants takes the first range that holds the quants, so
    // ranges that each take one form together take it too, and the flags are ORs over columns.
    auto part = std::make_unique<PackedBlockQuantWeight>();
    if (const char* problem = part->PackAs(form, quants + c0 * rowBytes, scales + c0 * groups,
                                           offsets != nullptr ? partOffsets.data() : nullptr, width, k, bits,
                                           scaleBlock, activationBlock))
      return problem;
    firstTile_.push_back(first);
    partOfTile_.insert(partOfTile_.end(), t - first, static_cast<int>(parts_.size()));
    parts_.push_back(std::move(part));
    first = t;
    form = next;
  }
  return nullptr;
}

float PackedBlockQuantWeight::MetaValue(int t, int b, int which, int lane) const {
  const uint8_t* at = tile(t) + layout_.Meta(b, which);
  if (IsCoded(meta_)) {
    uint16_t factor;
    std::memcpy(&factor, tile(t) + layout_.Factors(b, which) + 2 * lane, 2);
    int code;
    if (meta_ == kCoded4Meta) {
      code = (at[lane % 8] >> (4 * (lane / 8))) & 15;
    } else if (meta_ == kCoded6Meta) {
      const int bit = 6 * lane;
      const int two = at[bit / 8] | (bit / 8 + 1 < 12 ? at[bit / 8 + 1] << 8 : 0);
      code = ((two >> (bit % 8)) & 63) + codeBase(which);
    } else {
      code = static_cast<int8_t>(at[lane]);
    }
    const float coded = HalfToFloat(factor) * static_cast<float>(code);
    if (which < layout_.scalesPerBlock) return coded;
    return std::fma(offsetFold_, MetaValue(t, b, pairOffsets_ ? which - layout_.scalesPerBlock : 0, lane), coded);
  }
  if (meta_ == kHalfMeta) {
    uint16_t h;
    std::memcpy(&h, at + 2 * lane, 2);
    if (which < layout_.scalesPerBlock) return HalfToFloat(h);
    return std::fma(offsetFold_, MetaValue(t, b, pairOffsets_ ? which - layout_.scalesPerBlock : 0, lane), HalfToFloat(h));
  }
  float f;
  std::memcpy(&f, at + 4 * lane, 4);
  return f;
}

bool BlockQuantMatMulAccelerated() { return BestKernel() != kScalar; }

std::vector<std::string> BlockQuantMatMulKernels() {
  std::vector<std::string> names;
  for (int k = kAvx512Vnni; k >= kScalar; k--)
    if (Available(k)) names.emplace_back(kKernelNames[k]);
  return names;
}

std::string BlockQuantMatMulKernel() { return kKernelNames[gKernel.load()]; }
bool PortableProjectionKernel() { return gKernel.load(std::memory_order_relaxed) == kScalar; }

bool SetBlockQuantMatMulKernel(const std::string& name) {
  for (int k = kScalar; k <= kAvx512Vnni; k++)
    if (name == kKernelNames[k] && Available(k)) {
      gKernel = k;
      return true;
    }
  return false;
}

void BlockQuantMatMul(const PackedProjection& w, const float* in, int64_t rows, Glu glu, float* out,
                      const ParallelFor& parallelFor) {
  if (rows <= 0) return;
  const bool gated = glu != Glu::kNone;
  if (gated && (w.n() / 2) % kTile != 0) {
    const int n = w.n();
    // Halves that do not split into whole tiles: the projection, then the SwiGLU row by row.
    thread_local std::vector<float> projection;
    projection.resize(static_cast<size_t>(rows) * n);
    BlockQuantMatMul(w, in, rows, Glu::kNone, projection.data(), parallelFor);
    for (int64_t r = 0; r < rows; r++) {
      float* p = projection.data() + r * n;
      GluInPlace(glu, p, p + n / 2, n / 2);
      std::memcpy(out + r * (n / 2), p, sizeof(float) * (n / 2));
    }
    return;
  }
  // Reused across calls: a decode step's projections run one after another on this thread.
  thread_local QuantizedRows x;
  const int k = w.k();
  x.Reset(rows, k);
  QuantizedRows& quantized = x;
  const bool parallel = rows * static_cast<int64_t>(w.n()) * k >= kParallelWork;
  // In parallel, a row group is quantized by whichever thread first needs it, the threads taking
  // the groups between them, instead of the calling thread quantizing every row while the pool's
  // other threads wait (a 16-row step's activations took ~2% of its CPU that way, one thread
  // working). State per group: 0 not started, 1 being quantized, 2 ready.
  const int64_t groups = (rows + kRowGroup - 1) / kRowGroup;
  thread_local std::unique_ptr<std::atomic<uint8_t>[]> groupState;
  thread_local int64_t groupCapacity = 0;
  if (parallel) {
    if (groups > groupCapacity) {
      groupState.reset(new std::atomic<uint8_t>[groups]);
      groupCapacity = groups;
    }
    for (int64_t g = 0; g < groups; g++) groupState[g].store(0, std::memory_order_relaxed);
  } else {
    QuantizeRows(in, 0, rows, k, w.activationBlock(), quantized);
  }
  std::atomic<uint8_t>* state = groupState.get();
  // Returns once group g is ready, quantizing unclaimed groups (g first) meanwhile.
  auto awaitGroup = [&](int64_t g) {
    while (state[g].load(std::memory_order_acquire) != 2) {
      int64_t claimed = -1;
      for (int64_t c = 0; c < groups && claimed < 0; c++) {
        const int64_t h = (g + c) % groups;
        uint8_t expected = 0;
        if (state[h].load(std::memory_order_relaxed) == 0 &&
            state[h].compare_exchange_strong(expected, 1, std::memory_order_acq_rel))
          claimed = h;
      }
      if (claimed < 0) {
        CpuRelax();
        continue;
      }
      QuantizeRows(in, claimed * kRowGroup, std::min(rows, (claimed + 1) * kRowGroup), k, w.activationBlock(),
                   quantized);
      state[claimed].store(2, std::memory_order_release);
    }
  };
  const int n = w.n();
  // With a glu, item t is gate tile t and up tile t + half, each computed into a small buffer;
  // only glu(gate, up) is written out.
  const int halfTiles = n / 2 / kTile;
  // With more than 4 rows a tile is gone over in several passes: the first keeps its decoded
  // metadata for the others (gate's and up's apart), on the thread that runs the tile.
  thread_local KeptMeta keptGate, keptUp;
  auto runTile = [&](size_t item) {
    const int tile = static_cast<int>(item);
    KeptMeta* kept[2] = {nullptr, nullptr};
    if (rows > 4) {
      keptGate.valid = keptUp.valid = false;
      kept[0] = &keptGate;
      kept[1] = &keptUp;
    }
    for (int64_t row0 = 0; row0 < rows; row0 += kRowGroup) {
      const int group = static_cast<int>(std::min<int64_t>(kRowGroup, rows - row0));
      if (parallel) awaitGroup(row0 / kRowGroup);
      int local;
      const PackedBlockQuantWeight& part = w.PartOfTile(tile, &local);
      if (!gated) {
        TileRows(part, local, quantized, row0, group, out + row0 * n + tile * kTile, n, kept[0]);
        continue;
      }
      alignas(64) float gate[kRowGroup][kTile];
      alignas(64) float up[kRowGroup][kTile];
      TileRows(part, local, quantized, row0, group, gate[0], kTile, kept[0]);
      int upLocal;
      const PackedBlockQuantWeight& upPart = w.PartOfTile(tile + halfTiles, &upLocal);
      TileRows(upPart, upLocal, quantized, row0, group, up[0], kTile, kept[1]);
      for (int r = 0; r < group; r++) {
        GluInPlace(glu, gate[r], up[r], kTile);
        std::memcpy(out + (row0 + r) * (n / 2) + tile * kTile, gate[r], sizeof gate[r]);
      }
    }
  };
  const int items = gated ? halfTiles : w.tiles();
  if (parallel)
    parallelFor(static_cast<size_t>(items), runTile);
  else
    for (int t = 0; t < items; t++) runTile(static_cast<size_t>(t));
}

}  // namespace ortserve

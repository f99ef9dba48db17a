// The AVX-512 intrinsics ortserve's AVX-512 VNNI projection kernel uses, computed lane by lane in
// portable C++, for a test build of that kernel on CPUs without AVX-512 (kernel-parity.cc): each
// follows Intel's definition of the instruction, the float reductions in GCC's order of operations.
// Only a translation unit that includes no <immintrin.h> may include it: the type names are
// the compiler's own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../src/half-float.h"

template <int Bytes>
struct alignas(Bytes) EmulatedVector {
  uint8_t bytes[Bytes];
  template <typename T>
  T Lane(int i) const {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  void SetLane(int i, T v) {
    std::memcpy(bytes + i * sizeof(T), &v, sizeof(T));
  }
};
using __m128i = EmulatedVector<16>;
using __m256i = EmulatedVector<32>;
using __m512i = EmulatedVector<64>;
struct __m512 : EmulatedVector<64> {};
using __mmask16 = uint16_t;

// Lane-wise f(lane) into a vector of T lanes.
template <typename V, typename T, typename F>
inline V EmulatedMap(F f) {
  V r;
  for (int i = 0; i < static_cast<int>(sizeof(V) / sizeof(T)); i++) r.template SetLane<T>(i, f(i));
  return r;
}

inline __m128i _mm_loadu_si128(const __m128i* p) {
  __m128i r;
  std::memcpy(r.bytes, p, 16);
  return r;
}
inline void _mm_storeu_si128(__m128i* p, __m128i v) { std::memcpy(p, v.bytes, 16); }
// The low 8 bytes; the high 8 zero.
inline __m128i _mm_loadl_epi64(const __m128i* p) {
  __m128i r{};
  std::memcpy(r.bytes, p, 8);
  return r;
}
inline __m128i _mm_unpacklo_epi64(__m128i a, __m128i b) {
  __m128i r;
  std::memcpy(r.bytes, a.bytes, 8);
  std::memcpy(r.bytes + 8, b.bytes, 8);
  return r;
}
inline __m128i _mm_set1_epi8(char v) { return EmulatedMap<__m128i, int8_t>([&](int) { return v; }); }
inline __m128i _mm_and_si128(__m128i a, __m128i b) {
  return EmulatedMap<__m128i, uint8_t>([&](int i) { return static_cast<uint8_t>(a.bytes[i] & b.bytes[i]); });
}
inline __m128i _mm_srli_epi16(__m128i a, unsigned count) {
  return EmulatedMap<__m128i, uint16_t>(
      [&](int i) { return static_cast<uint16_t>(count > 15 ? 0 : a.Lane<uint16_t>(i) >> count); });
}
inline __m256i _mm256_loadu_si256(const __m256i* p) {
  __m256i r;
  std::memcpy(r.bytes, p, 32);
  return r;
}
inline __m256i _mm256_load_si256(const __m256i* p) { return _mm256_loadu_si256(p); }
inline __m512i _mm512_load_si512(const void* p) {
  __m512i r;
  std::memcpy(r.bytes, p, 64);
  return r;
}
inline __m512 _mm512_loadu_ps(const float* p) {
  __m512 r;
  std::memcpy(r.bytes, p, 64);
  return r;
}
inline __m512 _mm512_load_ps(const float* p) { return _mm512_loadu_ps(p); }
inline void _mm512_mask_storeu_ps(float* p, __mmask16 mask, __m512 v) {
  for (int i = 0; i < 16; i++)
    if (mask >> i & 1) p[i] = v.Lane<float>(i);
}

inline __m512i _mm512_setzero_si512() { return EmulatedMap<__m512i, int32_t>([](int) { return 0; }); }
inline __m512 _mm512_setzero_ps() { return EmulatedMap<__m512, float>([](int) { return 0.0f; }); }
inline __m512i _mm512_set1_epi8(char v) { return EmulatedMap<__m512i, int8_t>([&](int) { return v; }); }
inline __m512i _mm512_set1_epi32(int v) { return EmulatedMap<__m512i, int32_t>([&](int) { return v; }); }
inline __m512 _mm512_set1_ps(float v) { return EmulatedMap<__m512, float>([&](int) { return v; }); }

inline __m512i _mm512_and_si512(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, uint8_t>([&](int i) { return static_cast<uint8_t>(a.bytes[i] & b.bytes[i]); });
}
inline __m512i _mm512_or_si512(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, uint8_t>([&](int i) { return static_cast<uint8_t>(a.bytes[i] | b.bytes[i]); });
}
// Logical shifts of 16-bit lanes; a count past 15 clears them.
inline __m512i _mm512_srli_epi16(__m512i a, unsigned count) {
  return EmulatedMap<__m512i, uint16_t>(
      [&](int i) { return static_cast<uint16_t>(count > 15 ? 0 : a.Lane<uint16_t>(i) >> count); });
}
inline __m512i _mm512_slli_epi16(__m512i a, unsigned count) {
  return EmulatedMap<__m512i, uint16_t>(
      [&](int i) { return static_cast<uint16_t>(count > 15 ? 0 : a.Lane<uint16_t>(i) << count); });
}
// a's 16 bytes in each 128-bit lane.
inline __m512i _mm512_broadcast_i32x4(__m128i a) {
  return EmulatedMap<__m512i, uint8_t>([&](int i) { return a.bytes[i % 16]; });
}
// Byte i: byte b's low 4 bits of i's 128-bit lane of a, or zero where b's top bit is set.
inline __m512i _mm512_shuffle_epi8(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, uint8_t>([&](int i) {
    return static_cast<uint8_t>(b.bytes[i] & 0x80 ? 0 : a.bytes[i / 16 * 16 + (b.bytes[i] & 15)]);
  });
}
// Each 32-bit lane shifted right by b's lane, zero from 32 up.
inline __m512i _mm512_srlv_epi32(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, uint32_t>(
      [&](int i) { return b.Lane<uint32_t>(i) > 31 ? 0u : a.Lane<uint32_t>(i) >> b.Lane<uint32_t>(i); });
}
inline __m512i _mm512_add_epi32(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, uint32_t>([&](int i) { return a.Lane<uint32_t>(i) + b.Lane<uint32_t>(i); });
}
inline __m512i _mm512_min_epi32(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, int32_t>([&](int i) { return std::min(a.Lane<int32_t>(i), b.Lane<int32_t>(i)); });
}
inline __m512i _mm512_max_epi32(__m512i a, __m512i b) {
  return EmulatedMap<__m512i, int32_t>([&](int i) { return std::max(a.Lane<int32_t>(i), b.Lane<int32_t>(i)); });
}
// VPDPBUSD: each 32-bit lane plus its 4 unsigned bytes of a times the 4 signed bytes of b (wrapping).
inline __m512i _mm512_dpbusd_epi32(__m512i src, __m512i a, __m512i b) {
  return EmulatedMap<__m512i, uint32_t>([&](int i) {
    uint32_t sum = src.Lane<uint32_t>(i);
    for (int j = 0; j < 4; j++)
      sum += static_cast<uint32_t>(static_cast<int32_t>(a.bytes[4 * i + j]) * b.Lane<int8_t>(4 * i + j));
    return sum;
  });
}
inline int _mm512_reduce_add_epi32(__m512i a) {
  uint32_t sum = 0;
  for (int i = 0; i < 16; i++) sum += a.Lane<uint32_t>(i);
  return static_cast<int32_t>(sum);
}
// VPMOVDB: each 32-bit lane's low byte.
inline __m128i _mm512_cvtepi32_epi8(__m512i a) {
  return EmulatedMap<__m128i, int8_t>([&](int i) { return static_cast<int8_t>(a.Lane<uint32_t>(i) & 0xff); });
}
inline __m512i _mm512_cvtepu8_epi32(__m128i a) {
  return EmulatedMap<__m512i, int32_t>([&](int i) { return static_cast<int32_t>(a.bytes[i]); });
}
inline __m512i _mm512_cvtepi8_epi32(__m128i a) {
  return EmulatedMap<__m512i, int32_t>([&](int i) { return static_cast<int32_t>(a.Lane<int8_t>(i)); });
}

inline __m512 _mm512_mul_ps(__m512 a, __m512 b) {
  return EmulatedMap<__m512, float>([&](int i) { return a.Lane<float>(i) * b.Lane<float>(i); });
}
inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {
  return EmulatedMap<__m512, float>([&](int i) { return std::fma(a.Lane<float>(i), b.Lane<float>(i), c.Lane<float>(i)); });
}
// MAXPS: the second operand when either is NaN (or both are zeros).
inline float EmulatedMax(float a, float b) { return a > b ? a : b; }
inline __m512 _mm512_max_ps(__m512 a, __m512 b) {
  return EmulatedMap<__m512, float>([&](int i) { return EmulatedMax(a.Lane<float>(i), b.Lane<float>(i)); });
}
inline __m512 _mm512_abs_ps(__m512 a) {
  return EmulatedMap<__m512, float>([&](int i) { return std::fabs(a.Lane<float>(i)); });
}
// GCC's reduction: the upper half against the lower, then the upper 128 bits of that against its
// lower, then lanes (2, 3, 0, 1), then (1, 0, 3, 2); lane 0 of the last.
inline float _mm512_reduce_max_ps(__m512 a) {
  float t[8], u[4], v[4];
  for (int i = 0; i < 8; i++) t[i] = EmulatedMax(a.Lane<float>(8 + i), a.Lane<float>(i));
  for (int i = 0; i < 4; i++) u[i] = EmulatedMax(t[4 + i], t[i]);
  const int swapPairs[4] = {2, 3, 0, 1}, swapLanes[4] = {1, 0, 3, 2};
  for (int i = 0; i < 4; i++) v[i] = EmulatedMax(u[i], u[swapPairs[i]]);
  return EmulatedMax(v[0], v[swapLanes[0]]);
}
inline __m512 _mm512_cvtepi32_ps(__m512i a) {
  return EmulatedMap<__m512, float>([&](int i) { return static_cast<float>(a.Lane<int32_t>(i)); });
}
// CVTPS2DQ: rounded to nearest even; NaN and values out of range give INT_MIN.
inline __m512i _mm512_cvtps_epi32(__m512 a) {
  return EmulatedMap<__m512i, int32_t>([&](int i) {
    const float v = std::nearbyint(a.Lane<float>(i));
    return v >= -2147483648.0f && v < 2147483648.0f ? static_cast<int32_t>(v) : std::numeric_limits<int32_t>::min();
  });
}
inline __m512 _mm512_cvtph_ps(__m256i a) {
  return EmulatedMap<__m512, float>([&](int i) { return ortserve::HalfToFloat(a.Lane<uint16_t>(i)); });
}

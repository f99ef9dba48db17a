// IEEE binary16 conversions (round to nearest even) for portable code; vector code converts
// with F16C (VCVTPH2PS / VCVTPS2PH), which gives the same values.
#pragma once

#include <cstdint>
#include <cstring>

namespace ortserve {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise.
    exponent = 113;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      exponent--;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  // inf; NaN quieted with the top of its payload kept, as F16C's conversion does.
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 | ((abs >> 13) & 0x3ff) : 0);
  if (abs >= 0x477ff000) return sign | 0x7c00;                                      // overflows to inf
  if (abs < 0x38800000) {
    // Subnormal or zero: shift the mantissa (with its implicit bit) into place, rounding to even.
    if (abs < 0x33000000) return sign;
    const uint32_t shift = 113 - (abs >> 23);
    const uint32_t mantissa = (abs & 0x7fffff) | 0x800000;
    uint32_t half = mantissa >> (shift + 13);
    const uint32_t rest = mantissa & ((1u << (shift + 13)) - 1);
    const uint32_t halfway = 1u << (shift + 12);
    if (rest > halfway || (rest == halfway && (half & 1))) half++;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++;
  return sign | static_cast<uint16_t>(half);
}

// Whether f is a binary16 value (zero, subnormal or normal; not inf or NaN), so that storing it
// as half and reading it back gives f's exact bits.
inline bool IsExactHalf(float f) {
  if (!(f - f == 0.0f)) return false;  // inf or NaN
  const float back = HalfToFloat(FloatToHalf(f));
  uint32_t a, b;
  std::memcpy(&a, &f, 4);
  std::memcpy(&b, &back, 4);
  return a == b;
}

}  // namespace ortserve

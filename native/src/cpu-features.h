// What the CPU running the process offers, for kernels chosen at run time. Built with GCC or Clang
// for x86-64, the addons carry vector kernels (each function compiled for its instruction set)
// next to portable code; elsewhere only the portable code, and every feature reads false.
#pragma once

#include <cstdlib>
#include <string_view>

#if defined(__GNUC__) && defined(__x86_64__)
#define ORTSERVE_X86_SIMD 1
#endif

namespace ortserve {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  // AVX-512 foundation with the VL extension (EVEX-encoded ymm: 32 vector registers).
  bool avx512Vl = false;
  // AVX-512 foundation, BW and VNNI (VPDPBUSD).
  bool avx512Vnni = false;
};

// Read once per process.
inline const CpuFeatures& Cpu() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#ifdef ORTSERVE_X86_SIMD
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    const bool avx512 = __builtin_cpu_supports("avx512f");
    f.avx512Vl = avx512 && __builtin_cpu_supports("avx512vl");
    f.avx512Vnni = avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
    // ORTSERVE_MAX_ISA holds every kernel to a lower instruction set than the CPU offers, so one
    // machine can run the suite on the AVX2 and portable paths that other CPUs take.
    if (const char* cap = std::getenv("ORTSERVE_MAX_ISA")) {
      const std::string_view level(cap);
      if (level == "avx2" || level == "portable") f.avx512Vl = f.avx512Vnni = false;
      if (level == "portable") f.avx2 = f.fma = f.f16c = false;
    }
#endif
    return f;
  }();
  return features;
}

}  // namespace ortserve

// The AVX-512 VNNI projection kernel held to the portable loop on any x86-64 CPU: block-quant-
// matmul.cc built with ORTSERVE_EMULATE_AVX512 runs that kernel's code over avx512-emulation.h.
// Every kind of packed weight (2, 3, 4, 5, 6 and 8 bits; scales per 32 or per 16; no offsets,
// offsets per block or per half; float, half or coded scales (4-bit codes for 2-bit quants, 6-bit
// ones for 3- to 5-bit quants), offsets folded or not; activations
// per 32 or per 256; with and without a SwiGLU) times 1 to 16 rows must give the portable loop's
// floats bit for bit. Prints one line per kind of quants and exits 1 at the first difference.
// Built and run by test/runner/avx512-emulated.test.ts:
//
//   g++ -std=gnu++17 -O2 -ffp-contract=off -DORTSERVE_EMULATE_AVX512 native/test/kernel-parity.cc (continued:)
//     native/src/block-quant-matmul.cc native/src/weight-arena.cc native/src/projection-epilogue.cc
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../src/block-quant-matmul.h"
#include "../src/half-float.h"

namespace {

using ortserve::Glu;

struct QuantForm {
  const char* name;
  int inBits;  // as given to Pack
  int low, high;  // the quants' range
  int packedBits;  // what Pack must make of them
};
constexpr QuantForm kForms[] = {
    {"2-bit (Q2_K)", 4, 8, 11, 2},     {"3-bit (Q3_K)", 4, 4, 11, 3},         {"4-bit", 4, 0, 15, 4},
    {"5-bit, zero point 16 (Q5_0)", 8, 112, 143, 5}, {"5-bit (Q5_1, Q5_K)", 8, 128, 159, 5},
    {"6-bit (Q6_K)", 8, 96, 159, 6},   {"8-bit", 8, 0, 255, 8},
};

constexpr int kK = 512;
constexpr int kRowCounts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};

std::mt19937 gRandom(20261129);
float Uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gRandom); }
int Integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gRandom); }
// A random half value in [2^-9, 2^-5), as K-quants' super-block scales are.
float RandomHalf() { return ortserve::HalfToFloat(ortserve::FloatToHalf(Uniform(0.002f, 0.03f))); }

struct Weights {
  std::vector<uint8_t> quants;
  std::vector<float> scales, offsets;
};

// meta: ortserve::MetaKind; offsets 0 (none), 1 (per 32), 2 (per 16, the halves' differing).
Weights MakeWeights(const QuantForm& form, int n, int scaleBlock, int offsets, int meta, float fold) {
  Weights w;
  const int perBlock = 32 / scaleBlock;
  const int groups = kK / scaleBlock;
  w.quants.resize(static_cast<size_t>(n) * kK * form.inBits / 8);
  for (int c = 0; c < n; c++)
    for (int j = 0; j < kK; j++) {
      const int q = Integer(form.low, form.high);
      const size_t i = static_cast<size_t>(c) * kK + j;
      if (form.inBits == 8) w.quants[i] = static_cast<uint8_t>(q);
      else w.quants[i / 2] |= static_cast<uint8_t>(q << (4 * (i % 2)));
    }
  // Coded: per column and super-block of 256 inputs a half factor times integer codes.
  std::vector<float> factors(static_cast<size_t>(n) * (kK / 256) * 2);
  for (float& f : factors) f = RandomHalf();
  auto value = [&](int c, int g, int kind) {
    const float factor = factors[(c * (kK / 256) + g * scaleBlock / 256) * 2 + kind];
    if (meta == ortserve::kCodedMeta) return factor * Integer(-128, 127);
    // Q2_K's: scales d * sc, offsets -dmin * m, sc and m 0..15.
    if (meta == ortserve::kCoded4Meta) return factor * Integer(0, 15) * (kind == 1 ? -1.0f : 1.0f);
    // Q4_K's and Q5_K's: sc and m 0..63; per 16, signed codes -32..31 as Q3_K's scales (both 6-bit).
    if (meta == ortserve::kCoded6Meta)
      return factor * (scaleBlock == 16 ? Integer(-32, 31) : Integer(0, 63) * (kind == 1 ? -1.0f : 1.0f));
    if (meta == ortserve::kHalfMeta) return ortserve::HalfToFloat(ortserve::FloatToHalf(Uniform(-0.05f, 0.05f)));
    return Uniform(-0.05f, 0.05f);
  };
  w.scales.resize(static_cast<size_t>(n) * groups);
  for (int c = 0; c < n; c++)
    for (int g = 0; g < groups; g++) w.scales[static_cast<size_t>(c) * groups + g] = value(c, g, 0);
  if (offsets == 0) return w;
  w.offsets.resize(static_cast<size_t>(groups) * n);
  for (int g = 0; g < groups; g++)
    for (int c = 0; c < n; c++) {
      // Per block, the halves share the first half's offset.
      const bool shared = offsets == 1 && g % perBlock != 0;
      const float own = shared ? w.offsets[static_cast<size_t>(g - 1) * n + c] : value(c, g, 1);
      w.offsets[static_cast<size_t>(g) * n + c] =
          shared ? own : fold * w.scales[static_cast<size_t>(c) * groups + g] + own;
    }
  return w;
}

// w (scales and offsets per 32 or 16) as the converter stacks it: quants 8-bit, scales and offsets per 16.
Weights Widened(Weights w, int inBits, int scaleBlock, int n) {
  if (inBits == 4) {
    std::vector<uint8_t> wide(w.quants.size() * 2);
    for (size_t i = 0; i < wide.size(); i++) wide[i] = static_cast<uint8_t>(((w.quants[i / 2] >> (4 * (i % 2))) & 15) - 8 + 128);
    w.quants = wide;
  }
  if (scaleBlock == 16) return w;
  std::vector<float> scales(w.scales.size() * 2), offsets(w.offsets.size() * 2);
  for (size_t i = 0; i < scales.size(); i++) scales[i] = w.scales[i / 2];
  for (size_t i = 0; i < offsets.size(); i++) offsets[i] = w.offsets[(i / n / 2) * n + i % n];
  w.scales = scales;
  w.offsets = offsets;
  return w;
}

// Parts stacked along the output dimension, offsets zero for a part without them.
Weights Stacked(const std::vector<std::pair<Weights, int>>& parts) {
  Weights stack;
  int n = 0;
  for (const auto& [w, width] : parts) {
    stack.quants.insert(stack.quants.end(), w.quants.begin(), w.quants.end());
    stack.scales.insert(stack.scales.end(), w.scales.begin(), w.scales.end());
    n += width;
  }
  const int groups = kK / 16;
  stack.offsets.assign(static_cast<size_t>(groups) * n, 0.0f);
  int c0 = 0;
  for (const auto& [w, width] : parts) {
    if (!w.offsets.empty())
      for (int g = 0; g < groups; g++)
        for (int c = 0; c < width; c++) stack.offsets[static_cast<size_t>(g) * n + c0 + c] = w.offsets[static_cast<size_t>(g) * width + c];
    c0 += width;
  }
  return stack;
}

void Serial(size_t count, const std::function<void(size_t)>& fn) {
  for (size_t i = 0; i < count; i++) fn(i);
}

std::vector<float> Run(const char* kernel, const ortserve::PackedProjection& w, const std::vector<float>& x,
                       int rows, Glu glu) {
  if (!ortserve::SetBlockQuantMatMulKernel(kernel)) {
    std::printf("no %s kernel in this build\n", kernel);
    std::exit(2);
  }
  std::vector<float> out(static_cast<size_t>(rows) * (glu == Glu::kNone ? w.n() : w.n() / 2));
  ortserve::BlockQuantMatMul(w, x.data(), rows, glu, out.data(), Serial);
  return out;
}

}  // namespace

int main() {
  // Inputs: random, with an all-zero block and a block with one large value.
  std::vector<float> x(16 * kK);
  for (float& v : x) v = Uniform(-1.0f, 1.0f);
  for (int j = 0; j < 32; j++) x[kK + 64 + j] = 0.0f;
  x[2 * kK + 100] = 40.0f;
  int total = 0;
  for (const QuantForm& form : kForms) {
    int cases = 0;
    for (int scaleBlock : {32, 16})
      for (int offsets = 0; offsets <= (scaleBlock == 16 ? 2 : 1); offsets++)
        for (int meta : {ortserve::kFloatMeta, ortserve::kHalfMeta, ortserve::kCodedMeta, ortserve::kCoded4Meta,
                         ortserve::kCoded6Meta})
          for (float fold : {0.0f, 8.0f}) {
            if (fold != 0.0f && (offsets == 0 || meta == ortserve::kFloatMeta)) continue;
            // 4-bit codes are a form of 2-bit quants' alone.
            if (meta == ortserve::kCoded4Meta && form.packedBits != 2) continue;
            // 6-bit codes, of 3- to 5-bit quants' alone.
            if (meta == ortserve::kCoded6Meta && (form.packedBits < 3 || form.packedBits > 5)) continue;
            for (int activationBlock : {32, 256})
              for (Glu glu : {Glu::kNone, Glu::kSwiGlu}) {
                // 40 columns end in a partial tile; a glu needs whole tiles in each half.
                const int n = glu == Glu::kNone ? 40 : 64;
                const Weights weights = MakeWeights(form, n, scaleBlock, offsets, meta, fold);
                ortserve::PackedProjection projection;
                const char* error = projection.Pack(weights.quants.data(), weights.scales.data(),
                                           offsets ? weights.offsets.data() : nullptr, n, kK, form.inBits,
                                           scaleBlock, activationBlock);
                char label[200];
                std::snprintf(label, sizeof label, "%s, scales per %d, offsets %d, meta %d, fold %g, activations per %d, glu %d",
                              form.name, scaleBlock, offsets, meta, fold, activationBlock, static_cast<int>(glu));
                if (error == nullptr && projection.parts() != 1) error = "packed in several parts";
                if (error != nullptr) {
                  std::printf("FAIL %s: %s\n", label, error);
                  return 1;
                }
                const ortserve::PackedBlockQuantWeight& w = projection.part(0);
                const bool asMeant = error == nullptr && w.bits() == form.packedBits && w.metaKind() == meta &&
                                     w.offsetFold() == (meta == ortserve::kFloatMeta ? 0.0f : fold) &&
                                     w.pairScales() == (scaleBlock == 16) && w.pairOffsets() == (offsets == 2);
                if (!asMeant) {
                  std::printf("FAIL %s: packed as %d bits, meta %d, fold %g\n", label, w.bits(), w.metaKind(),
                              w.offsetFold());
                  return 1;
                }
                for (int rows : kRowCounts) {
                  const std::vector<float> expected = Run("scalar", projection, x, rows, glu);
                  const std::vector<float> got = Run("avx512-vnni", projection, x, rows, glu);
                  for (size_t i = 0; i < expected.size(); i++)
                    if (std::memcmp(&expected[i], &got[i], sizeof(float)) != 0) {
                      std::printf("FAIL %s, %d rows: output %zu is %.9g, the portable loop's %.9g\n", label, rows, i,
                                  got[i], expected[i]);
                      return 1;
                    }
                  cases++;
                }
              }
          }
    std::printf("ok %s: %d cases\n", form.name, cases);
    total += cases;
  }
  // A stack as Q4_K_M's Q, K and V come (a Q4_K part, a Q6_K one, and a Q2_K one for its offsets
  // per 16), all 8-bit with scales per 16: packed as three parts, each in its own form (with 6-bit
  // codes, the Q4_K part's alone: the others' quants take int8 ones).
  {
    int cases = 0;
    for (int meta : {ortserve::kFloatMeta, ortserve::kHalfMeta, ortserve::kCodedMeta, ortserve::kCoded6Meta})
      for (int activationBlock : {32, 256}) {
        const Weights stack = Stacked({
            {Widened(MakeWeights(kForms[2], 32, 32, 1, meta, 0.0f), 4, 32, 32), 32},
            {MakeWeights(kForms[5], 16, 16, 0, meta, 0.0f), 16},
            {Widened(MakeWeights(kForms[0], 24, 16, 2, meta, 0.0f), 4, 16, 24), 24},
        });
        ortserve::PackedProjection projection;
        const char* error =
            projection.Pack(stack.quants.data(), stack.scales.data(), stack.offsets.data(), 72, kK, 8, 16, activationBlock);
        const bool asMeant = error == nullptr && projection.parts() == 3 && projection.part(0).bits() == 4 &&
                             !projection.part(0).pairScales() && projection.part(0).hasOffsets() &&
                             projection.part(1).bits() == 6 && projection.part(1).pairScales() &&
                             !projection.part(1).hasOffsets() && projection.part(2).bits() == 2 &&
                             projection.part(2).pairOffsets() && projection.part(0).metaKind() == meta;
        if (!asMeant) {
          std::printf("FAIL stack (meta %d): packed in %d parts (%s)\n", meta, projection.parts(),
                      error ? error : "no error");
          return 1;
        }
        for (int rows : kRowCounts) {
          const std::vector<float> expected = Run("scalar", projection, x, rows, Glu::kNone);
          const std::vector<float> got = Run("avx512-vnni", projection, x, rows, Glu::kNone);
          if (std::memcmp(expected.data(), got.data(), sizeof(float) * expected.size()) != 0) {
            std::printf("FAIL stack (meta %d, activations per %d), %d rows\n", meta, activationBlock, rows);
            return 1;
          }
          cases++;
        }
      }
    std::printf("ok a stack of three forms: %d cases\n", cases);
    total += cases;
  }
  std::printf("ok %d cases\n", total);
  return 0;
}

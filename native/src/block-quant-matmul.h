// A projection with block-quantized weights, y = x W^T, written for the few rows of a decode step.
//
// The weights come as the converter stores them for com.microsoft MatMulNBits (block 32, 4 or 8
// bits, default zero point 8 or 128: w = scale * (q - zero point)), optionally with the per-block
// offsets of formats such as GGUF's Q4_1 (w += c, the block's offset, src/models/convert/
// quantized-weights.ts). A block's scales may also come per 16 inputs (GGUF's Q6_K and Q3_K
// sub-blocks): each half of the block then has its own scale, and its own offset where the
// halves' differ (Q2_K). ONNX Runtime's MatMulNBits multiplies them with int8 activations too
// (accuracy_level 4), but costs a 16-row step about 8x one row although the weights are read once,
// and needs three more nodes for the offsets. Here the weights are repacked once, 16 output
// columns side by side, so one AVX-512 VNNI instruction multiplies 4 inputs into 16 outputs and
// every weight register is reused across up to 8 rows (CPUs with AVX2 but not AVX-512 VNNI run
// an AVX2 form of the same arithmetic, 4 rows a pass); the offset term is added in the same pass.
//
// Arithmetic (llama.cpp's Q4_1 x Q8_1, in effect): each row's block of 32 inputs is quantized to
// int8 with scale dx = max|x| / 127 (round to nearest); a block contributes
//   scale * dx * (sum q * xq - zero point * sum xq) + offset * dx * sum xq,
// the integer part exact, accumulated in float over blocks in order (with scales per 16 inputs,
// the two halves' terms one after the other, the first half first; with offsets per 16, each
// half's offset times dx times the sum of its half's xq, likewise). For weights from GGUF's
// K-quants (activation block 256) the inputs are quantized as llama.cpp's Q8_K instead: one dx per
// 256 inputs (1 / (127 / max|x|)), the same for the super-block's 8 blocks; the integer products
// are then llama.cpp's Q4_K x Q8_K ones, summed in float per block rather than in int32 per
// super-block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention.h"
#include "projection-epilogue.h"

namespace ortserve {

// How a block's scales and offsets are stored: float; IEEE half (when every one is a half
// value); or coded, as an int8 code per value and, per 16 columns and super-block of 8 blocks
// (256 inputs), a half factor, the value being factor * code exactly (GGUF's K-quants store
// theirs so: an fp16 super-block scale times 6- or 8-bit sub-block scales); or coded in 4 bits,
// when every code is 0..15 (GGUF's Q2_K: 4-bit sub-block scales and mins), two to a byte: byte i
// of a block's 8 holds column i's in its low nibble, column 8 + i's in its high one; or coded in
// 6 bits, when every code of a kind (scales, offsets) lies in 0..63 or in -32..31 (Q4_K's and
// Q5_K's scales and mins, Q3_K's signed scales), stored less that range's low end (the weight's
// codeBase) in 12 bytes: column i's in bits 6i..6i + 5, little-endian.
enum MetaKind : int { kFloatMeta = 0, kHalfMeta = 1, kCodedMeta = 2, kCoded4Meta = 3, kCoded6Meta = 4 };
constexpr bool IsCoded(int meta) { return meta == kCodedMeta || meta == kCoded4Meta || meta == kCoded6Meta; }

// Where a block's quants, scales and offsets sit within its tile, for one kind of weight (bits,
// offsets per block: 0, 1, or 2 with offsets per 16 inputs, metadata kind, scales per 16):
// constexpr, so a kernel built for one kind computes the addresses with constants. Metadata
// `which` is 0 for the block's (first) 16 scales, 1 for the second half's with scales per 16, and
// scalesPerBlock (+ 1 for the second half's, with offsets per 16) for its offsets.
struct BlockLayout {
  size_t quantBytes;
  int meta;
  int scalesPerBlock;
  int offsetsPerBlock;
  // Float and half: bytes of one block's 16 scales, or of its 16 offsets.
  size_t metaBytes;
  // Bytes of one block's metadata (scales, then offsets; coded: their codes).
  size_t blockMetaBytes;
  // Blocks whose metadata sits together after their quants: 1 << groupShift, so that every
  // block's quants stay 64-byte aligned (coded: the 8 blocks of a super-block, then their codes
  // and factors, padded to 64 bytes).
  int groupShift;
  // Bytes of such a group.
  size_t groupStride;

  static constexpr size_t Align64(size_t n) { return (n + 63) / 64 * 64; }
  constexpr BlockLayout(int bits, int offsetsPerBlock_, int metaKind, bool pairScales = false)
      : quantBytes(static_cast<size_t>(bits) * 64),
        meta(metaKind),
        scalesPerBlock(pairScales ? 2 : 1),
        offsetsPerBlock(offsetsPerBlock_),
        metaBytes(metaKind == kCoded4Meta   ? 8
                  : metaKind == kCoded6Meta ? 12
                  : metaKind == kCodedMeta  ? 16
                  : metaKind == kHalfMeta   ? 32
                                            : 64),
        blockMetaBytes(metaBytes * (scalesPerBlock + offsetsPerBlock_)),
        groupShift(IsCoded(metaKind) ? 3 : blockMetaBytes % 64 != 0 ? 1 : 0),
        groupStride(IsCoded(metaKind)
                        ? Align64(8 * (quantBytes + blockMetaBytes) + 32 * (offsetsPerBlock_ > 0 ? 2 : 1))
                        : (quantBytes + blockMetaBytes) << groupShift) {}
  constexpr size_t Group(int b) const { return static_cast<size_t>(b >> groupShift) * groupStride; }
  constexpr size_t Quants(int b) const {
    return Group(b) + static_cast<size_t>(b & ((1 << groupShift) - 1)) * quantBytes;
  }
  // The block's metadata `which` (coded: its 16 codes).
  constexpr size_t Meta(int b, int which) const {
    return Group(b) + (quantBytes << groupShift) +
           static_cast<size_t>(b & ((1 << groupShift) - 1)) * blockMetaBytes + static_cast<size_t>(which) * metaBytes;
  }
  // Coded: the 16 half factors of the block's super-block for its scales, or its offsets.
  constexpr size_t Factors(int b, int which) const {
    return Group(b) + ((quantBytes + blockMetaBytes) << groupShift) + (which < scalesPerBlock ? 0 : 32);
  }
  constexpr size_t TileBytes(int blocks) const {
    return static_cast<size_t>((blocks + (1 << groupShift) - 1) >> groupShift) * groupStride;
  }
  // Bytes from one block's quants to the next's, on average (how far ahead to prefetch).
  constexpr size_t BlockStride() const { return groupStride >> groupShift; }
};

// The narrowest form a run of columns packs in (block-quant-matmul.cc).
struct PackForm;

class PackedBlockQuantWeight {
 public:
  PackedBlockQuantWeight() = default;
  ~PackedBlockQuantWeight();
  PackedBlockQuantWeight(const PackedBlockQuantWeight&) = delete;
  PackedBlockQuantWeight& operator=(const PackedBlockQuantWeight&) = delete;

  // quants [>= n rows, k / 32 blocks, 32 * bits / 8 bytes] (MatMulNBits' B; for 4 bits element 2j
  // in byte j's low nibble, 2j + 1 in its high one), scales [>= n rows, k / scaleBlock] with
  // scaleBlock 32 or 16, offsets [k / scaleBlock, n] or null. Scales per 16 are kept per 32 when
  // the two halves of every block of 32 carry the same one, offsets likewise (else per 16: GGUF's
  // Q2_K), and offsets that are all zero not at all (see PackedProjection). Rows past n (the converter's block-sum rows) are ignored. activationBlock: the inputs
  // one activation scale covers, 32 or 256 (see the arithmetic above). Returns nullptr, or what is
  // wrong.
  const char* Pack(const uint8_t* quants, const float* scales, const float* offsets, int n, int k, int bits,
                   int scaleBlock = 32, int activationBlock = 32);
  // Pack with the columns' form (their narrowest quants and which scales and offsets they need)
  // already known: PackedProjection finds it tile by tile, in parallel.
  const char* PackAs(const PackForm& form, const uint8_t* quants, const float* scales, const float* offsets, int n,
                     int k, int bits, int scaleBlock, int activationBlock);

  int n() const { return n_; }
  int k() const { return k_; }
  // 4 or 8 as given to Pack, or fewer where the quants allow, giving the same products: 5 for
  // 8-bit quants that all lie in 112..143 or 128..159 (GGUF's 5-bit types), 6 in 96..159 (Q6_K),
  // 4 in 120..135 (4-bit ones widened), 3 for 4-bit ones all in 4..11 (Q3_K; zero point 4), 2 for
  // 4-bit ones all in 8..11 (Q2_K's unsigned quants; no zero point).
  int bits() const { return bits_; }
  // What the packed quants are less: 2^(bits - 1), but none for 2 bits (Q2_K's unsigned quants)
  // and 5-bit ones taken from 128..159 (Q5_1's, Q5_K's).
  int zeroPoint() const { return zeroPoint_; }
  // Whether offsets are kept: given to Pack and not all zero.
  bool hasOffsets() const { return hasOffsets_; }
  // The inputs one activation scale covers: 32, or 256 (llama.cpp's Q8_K, for K-quant weights).
  int activationBlock() const { return activationBlock_; }
  // Whether scales come per 16 inputs (two a block): given so, and differing between the halves
  // of some block.
  bool pairScales() const { return pairScales_; }
  // Whether offsets come per 16 inputs too (two a block; only with pairScales).
  bool pairOffsets() const { return pairOffsets_; }

  // Output tiles of 16 columns, one after another; in a tile, block by block the 16 columns'
  // quants, then their 16 scales and (with offsets) 16 offsets. The scales and offsets are stored
  // as IEEE half when every one of them is a half value (GGUF's Q4_1 and Q8_0 store theirs so;
  // Q4_1's offsets once the folded zero point is out, see offsetFold: 20 and 34 bytes per 32 weights, as in the file,
  // instead of 24 and 36 as float; a decode step reads every weight, so these bytes are its
  // time); else coded when k is a multiple of 256 and
  // every super-block's values factor exactly into a half and codes, in the fewest bits that
  // hold them (GGUF's K-quants: Q4_K in 18 bytes per 32 weights, as in the file, instead of 24
  // as float); else as float. Without offsets, half metadata
  // comes after each pair of blocks (32 + 32 bytes), so every block's quants stay 64-byte aligned.
  int tiles() const { return (n_ + 15) / 16; }
  int blocks() const { return k_ / 32; }
  bool halfMeta() const { return meta_ == kHalfMeta; }
  MetaKind metaKind() const { return meta_; }
  // Coded and half offsets are stored less this times the scale of the same inputs (0 or 8).
  float offsetFold() const { return offsetFold_; }
  // 6-bit codes: what a stored code of metadata `which` (BlockLayout::Meta) is less than the code,
  // 0 or -32 (scales and offsets each their own); else 0.
  int codeBase(int which) const { return codeBase_[which < layout_.scalesPerBlock ? 0 : 1]; }
  // Packed bytes: what a decode step reads.
  size_t bytes() const { return static_cast<size_t>(tiles()) * tileBytes_; }
  const uint8_t* tile(int t) const { return data_ + static_cast<size_t>(t) * tileBytes_; }
  const uint8_t* block(int t, int b) const { return tile(t) + layout_.Quants(b); }
  // Block b's metadata `which` (BlockLayout::Meta) as a float, for column `lane` of tile t.
  float MetaValue(int t, int b, int which, int lane) const;

 private:
  uint8_t* data_ = nullptr;
  int n_ = 0;
  int k_ = 0;
  int bits_ = 0;
  int zeroPoint_ = 0;
  int activationBlock_ = 32;
  bool hasOffsets_ = false;
  MetaKind meta_ = kFloatMeta;
  float offsetFold_ = 0.0f;
  int codeBase_[2] = {0, 0};
  bool pairScales_ = false;
  bool pairOffsets_ = false;
  BlockLayout layout_{4, 0, kFloatMeta};
  size_t tileBytes_ = 0;
};

// A projection's weights as the kernels read them: its 16-column tiles in runs, each run packed
// apart (a PackedBlockQuantWeight) in the narrowest form its own quants, scales and offsets allow.
// The converter stacks Q, K and V (and gate and up) in the widest form any part needs, so Q4_K_M's
// Q4_K Q and K beside a Q6_K V come 8-bit with scales per 16 for all three; packed so, the Q and K
// tiles are 4-bit with scales per 32 again and the V ones 6-bit: each part read as its GGUF type.
class PackedProjection {
 public:
  // As PackedBlockQuantWeight::Pack.
  const char* Pack(const uint8_t* quants, const float* scales, const float* offsets, int n, int k, int bits,
                   int scaleBlock = 32, int activationBlock = 32);

  int n() const { return n_; }
  int k() const { return k_; }
  int activationBlock() const { return activationBlock_; }
  int tiles() const { return static_cast<int>(partOfTile_.size()); }
  int parts() const { return static_cast<int>(parts_.size()); }
  const PackedBlockQuantWeight& part(int i) const { return *parts_[i]; }
  // The part holding tile t; *local is t's index within it.
  const PackedBlockQuantWeight& PartOfTile(int t, int* local) const {
    const int p = partOfTile_[t];
    *local = t - firstTile_[p];
    return *parts_[p];
  }

 private:
  int n_ = 0;
  int k_ = 0;
  int activationBlock_ = 32;
  std::vector<std::unique_ptr<PackedBlockQuantWeight>> parts_;
  std::vector<int> firstTile_;
  std::vector<int> partOfTile_;
};

// Bytes of weights packed on the calling thread so far (a session's kernels are made on the
// thread that creates it: the difference across its creation is what its decode steps read).
size_t BytesPackedOnThisThread();
// Counts `bytes` another projection kind packed on this thread (half-matmul.h).
void AddBytesPackedOnThisThread(size_t bytes);

// Whether this CPU runs a vector kernel (AVX-512 VNNI, or AVX2 with FMA); otherwise a scalar loop
// computes the same sums, for correctness, not speed.
bool BlockQuantMatMulAccelerated();
// The kernels this CPU runs, fastest first ("avx512-vnni", "avx2", "scalar"); all give the same
// floats.
std::vector<std::string> BlockQuantMatMulKernels();
// The kernel in use (the fastest, unless set).
std::string BlockQuantMatMulKernel();
// Picks the kernel for the whole process (tests hold the kernels to each other; benchmarks measure
// the slower ones on a faster CPU). Returns false, changing nothing, when this CPU has no such kernel.
bool SetBlockQuantMatMulKernel(const std::string& name);
// Whether the portable kernel is in use: the other projections (half-matmul.h) follow the choice,
// their vector form standing in for both AVX2 and AVX-512.
bool PortableProjectionKernel();

// out [rows, n] = x [rows, k] times the weights; with a glu (n even) the packed gate/up
// projection's glu(gate, up) instead, out [rows, n / 2] (GluInPlace's arithmetic).
void BlockQuantMatMul(const PackedProjection& w, const float* x, int64_t rows, Glu glu, float* out,
                      const ParallelFor& parallelFor);

}  // namespace ortserve

// See weight-arena.h.
#include "weight-arena.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace ortserve {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kChunk = size_t{32} << 20;
constexpr size_t kAlign = 64;

struct Chunk {
  char* base;
  size_t size;
  size_t used;
  size_t live;  // blocks carved and not yet freed
};

std::mutex gMutex;
std::vector<Chunk> gChunks;
// The chunk new blocks are carved from (an index into gChunks), or none.
ptrdiff_t gCurrent = -1;

// A fresh anonymous mapping is zero-filled, so blocks need no memset; mmap's result is page
// aligned, and over-allocating by one huge page lets the chunk start on a huge-page boundary.
char* MapChunk(size_t size) {
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  // Give back the slack before and after the aligned chunk.
  if (aligned > start) munmap(raw, aligned - start);
  const size_t tail = (start + size + kHugePage) - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<char*>(aligned);
}

}  // namespace

void* AllocateWeights(size_t bytes) {
  if (bytes == 0) bytes = kAlign;
  bytes = (bytes + kAlign - 1) & ~(kAlign - 1);
  std::lock_guard<std::mutex> lock(gMutex);
  if (bytes > kChunk / 4) {
    // A large matrix (the embedding) gets a chunk of its own, so the shared ones do not strand it.
    const size_t size = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    char* base = MapChunk(size);
    if (base == nullptr) return nullptr;
    gChunks.push_back({base, size, bytes, 1});
    return base;
  }
  if (gCurrent < 0 || gChunks[gCurrent].size - gChunks[gCurrent].used < bytes) {
    char* base = MapChunk(kChunk);
    if (base == nullptr) return nullptr;
    gChunks.push_back({base, kChunk, 0, 0});
    gCurrent = static_cast<ptrdiff_t>(gChunks.size()) - 1;
  }
  Chunk& chunk = gChunks[gCurrent];
  char* block = chunk.base + chunk.used;
  chunk.used += bytes;
  chunk.live++;
  return block;
}

void FreeWeights(void* block) {
  if (block == nullptr) return;
  std::lock_guard<std::mutex> lock(gMutex);
  char* p = static_cast<char*>(block);
  for (size_t i = 0; i < gChunks.size(); i++) {
    Chunk& chunk = gChunks[i];
    if (p < chunk.base || p >= chunk.base + chunk.size) continue;
    if (--chunk.live > 0) return;
    munmap(chunk.base, chunk.size);
    gChunks.erase(gChunks.begin() + static_cast<ptrdiff_t>(i));
    const ptrdiff_t at = static_cast<ptrdiff_t>(i);
    if (gCurrent == at) gCurrent = -1;
    else if (gCurrent > at) gCurrent--;
    return;
  }
  std::abort();  // not a block of this arena: a bug in the caller
}

}  // namespace ortserve

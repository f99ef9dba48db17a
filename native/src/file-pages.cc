// See file-pages.h.
#include "file-pages.h"

#include <cstdint>
#include <cstdio>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace ortserve {

#ifdef __linux__
namespace {

// Whether [start, end) lies within one mapping of /proc/self/maps that is private and backed by a
// file (an inode other than 0).
bool InPrivateFileMapping(uintptr_t start, uintptr_t end) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  bool found = false;
  char line[512];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long from = 0;
    unsigned long to = 0;
    char perms[5] = {};
    unsigned long long offset = 0;
    char device[16] = {};
    unsigned long long inode = 0;
    if (std::sscanf(line, "%lx-%lx %4s %llx %15s %llu", &from, &to, perms, &offset, device, &inode) != 6) continue;
    if (start < from || start >= to) continue;
    found = end <= to && perms[3] == 'p' && inode != 0;
    break;
  }
  std::fclose(maps);
  return found;
}

}  // namespace

size_t DropFilePages(const void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t at = reinterpret_cast<uintptr_t>(data);
  const uintptr_t start = (at + page - 1) & ~(page - 1);
  const uintptr_t end = (at + bytes) & ~(page - 1);
  if (data == nullptr || end <= start || !InPrivateFileMapping(at, at + bytes)) return 0;
  if (madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) != 0) return 0;
  return end - start;
}
#else
size_t DropFilePages(const void*, size_t) { return 0; }
#endif

}  // namespace ortserve

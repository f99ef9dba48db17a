// Software prefetch of a byte range, one cache line at a time. Locality 3 (prefetcht0 on x86)
// fetches toward L1, 2 (prefetcht1) toward L2. A prefetch never faults, so a range may run past
// the end of its buffer.
#pragma once

#include <cstddef>

namespace ortserve {

template <int Locality = 3>
inline void PrefetchRange(const void* from, size_t bytes) {
  const char* p = static_cast<const char*>(from);
  for (size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(p + offset, 0, Locality);
}

}  // namespace ortserve

// Memory for repacked weights, on transparent huge pages where the kernel allows them.
//
// A decode step reads every packed weight once, ~114 MB for the default model. On 4 KiB pages
// that is ~28,000 pages per token: a TLB miss at each, and the hardware prefetchers, which do not
// cross a page boundary, start over at each. Weights are carved from 32 MiB chunks advised
// MADV_HUGEPAGE (honoured when /sys/kernel/mm/transparent_hugepage/enabled is "always" or
// "madvise"), so one 2 MiB page covers hundreds of KiB of several matrices. A chunk is unmapped
// when the last block carved from it is freed (a session's weights go together when it is
// released). Thread-safe: sessions may be made in several engine threads.
#pragma once

#include <cstddef>

namespace ortserve {

// `bytes` of zeroed memory, 64-byte aligned; nullptr when the system has none to give.
void* AllocateWeights(size_t bytes);
// Frees a block from AllocateWeights (nullptr is ignored).
void FreeWeights(void* block);

}  // namespace ortserve

// Giving back the resident pages of a constant input that a kernel has copied into a layout of its
// own (BlockQuantMatMul's packing).
//
// ONNX Runtime maps a model's external data file (`<model>_data`) into memory, a private mapping
// per initializer, and keeps every initializer for as long as the session lives. Once packed, the
// projections' quants, scales and offsets are never read again, but the pages the packing touched
// stay in the process's resident set: for a 7B-shaped model that is the file's 6.8 GB beside the
// 4.6 GB of packed weights. Dropping those pages (madvise MADV_DONTNEED) leaves the mapping in
// place; a later read would fault the same bytes back in from the file, so dropping is safe even
// where some other node shared the initializer. Memory that is not such a mapping (an initializer
// stored inside the .onnx file itself, copied to the heap) is left alone: dropping anonymous pages
// would zero them.
#pragma once

#include <cstddef>

namespace ortserve {

// Drops the resident pages of [data, data + bytes) when the range lies in one file-backed private
// mapping, whole pages only (the first and last, shared with neighbours, stay). Returns the bytes
// given back to the system's page cache (0 when the range is not such a mapping, or off Linux).
size_t DropFilePages(const void* data, size_t bytes);

}  // namespace ortserve

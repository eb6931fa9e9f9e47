#include "traces/inflate_whole.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

namespace parallax::traces {
namespace {

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

//! The size the last member declares (ISIZE: its inflated size mod 2^32): exact for the usual
//! single-member file under 4 GiB, a first guess otherwise.
size_t DeclaredSize(std::string_view gz) {
  uint32_t isize = 0;
  for (int i = 3; i >= 0; --i) {
    isize = (isize << 8) | static_cast<unsigned char>(gz[gz.size() - 4 + static_cast<size_t>(i)]);
  }
  return isize;
}

//! Uninitialised bytes (the inflater writes every one it hands on): no pass over the memory
//! before it is used. Null when they cannot be had.
std::unique_ptr<char[]> Allocate(size_t n) { return std::unique_ptr<char[]>(new (std::nothrow) char[n]); }

}  // namespace

std::optional<InflatedBytes> InflateWhole(std::string_view gz, size_t max_bytes) {
  constexpr size_t kMinMember = 18;  // 10-byte header, empty deflate stream, 8-byte trailer
  if (gz.size() < kMinMember) return std::nullopt;
  std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(libdeflate_alloc_decompressor());
  if (!d) return std::nullopt;
  size_t capacity = std::max<size_t>(DeclaredSize(gz), 1);
  if (capacity > max_bytes) return std::nullopt;
  InflatedBytes out{Allocate(capacity), 0};
  size_t in_pos = 0;
  while (out.data != nullptr && in_pos < gz.size()) {
    size_t used_in = 0, used_out = 0;
    const libdeflate_result r =
        libdeflate_gzip_decompress_ex(d.get(), gz.data() + in_pos, gz.size() - in_pos, out.data.get() + out.size,
                                      capacity - out.size, &used_in, &used_out);
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      // More than declared (several members, or 4 GiB and more): grow and inflate the member again.
      if (capacity >= max_bytes) return std::nullopt;
      capacity = capacity > max_bytes / 2 ? max_bytes : capacity * 2;
      std::unique_ptr<char[]> bigger = Allocate(capacity);
      if (bigger != nullptr) std::memcpy(bigger.get(), out.data.get(), out.size);
      out.data = std::move(bigger);
      continue;
    }
    if (r != LIBDEFLATE_SUCCESS) return std::nullopt;
    in_pos += used_in;
    out.size += used_out;
  }
  if (out.data == nullptr) return std::nullopt;
  return out;
}

size_t DefaultInflateLimit() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return static_cast<size_t>(kib / 2 * 1024);
  }
  return size_t{1} << 30;
}

}  // namespace parallax::traces

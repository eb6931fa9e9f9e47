#pragma once
// Whole-buffer gzip inflation with libdeflate (internal to the Chrome reader): 2-3x zlib's
// speed, and the inflated JSON can then be scanned on every core. What it cannot do (corrupt or
// truncated input, an output over the memory limit) it leaves to the streaming zlib reader,
// which says where the input is bad, loads a cut file leniently and needs one buffer of memory.

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

namespace parallax::traces {

//! Inflated bytes, owned.
struct InflatedBytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  std::string_view View() const { return {data.get(), size}; }
};

//! Inflates every gzip member of `gz` (concatenated members are one file) into one buffer of at
//! most `max_bytes`. nullopt when `gz` is not complete, valid gzip, inflates to more, or the
//! memory cannot be had.
std::optional<InflatedBytes> InflateWhole(std::string_view gz, size_t max_bytes);

//! The default for `max_bytes`: half the memory the system has available now (the other half
//! is for the trace built from it), or 1 GiB when that is unknown.
size_t DefaultInflateLimit();

}  // namespace parallax::traces

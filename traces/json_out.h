#pragma once
// JsonOut: a small buffered JSON text emitter over a ByteSink (internal to the writers).
// Numbers are formatted with std::to_chars; nanoseconds become exact microsecond decimals.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "traces/byte_stream.h"

namespace parallax::traces {

class JsonOut {
 public:
  explicit JsonOut(ByteSink& sink) : sink_(sink) { buf_.reserve(kFlushAt + 4096); }

  void Raw(std::string_view s) {
    buf_.append(s);
    MaybeFlush();
  }
  void Char(char c) { buf_.push_back(c); }
  //! A quoted, escaped JSON string.
  void Str(std::string_view s);
  void Int(int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    buf_.append(tmp, r.ptr);
  }
  //! Shortest round-trip decimal; non-finite values become 0 (JSON has no NaN/Inf).
  void Double(double v) {
    if (!std::isfinite(v)) v = 0;
    char tmp[32];
    auto r = std::to_chars(tmp, tmp + sizeof(tmp), v);
    buf_.append(tmp, r.ptr);
  }
  //! Integer ns as exact µs: 12345 -> "12.345", 12000 -> "12", -5 -> "-0.005".
  void Micros(int64_t ns);
  //! `"key":` (the key must not need escaping).
  void Key(std::string_view k) {
    buf_.push_back('"');
    buf_.append(k);
    buf_.append("\":");
  }
  void MaybeFlush() {
    if (buf_.size() >= kFlushAt) Flush();
  }
  void Flush() {
    if (status_.ok() && !buf_.empty()) status_ = sink_.Write(buf_);
    buf_.clear();
  }
  const Status& status() const { return status_; }

 private:
  static constexpr size_t kFlushAt = 1 << 16;
  ByteSink& sink_;
  std::string buf_;
  Status status_;
};

}  // namespace parallax::traces

#pragma once
// JsonScanner: a strict, allocation-light JSON tokenizer over one contiguous buffer window
// (internal to the Chrome reader). Running off the end of the window throws ScanNeedMore: the
// reader refills the buffer and re-scans the unit (one event) from its start. Syntax errors
// throw ScanError with the byte position. Nesting is limited so hostile input cannot overflow
// the stack.

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>

#include "model/json_io.h"

namespace parallax::traces {

struct ScanNeedMore {};
struct ScanError {
  const char* at;
  std::string what;
};

enum class ValueType : uint8_t { kNone, kNumber, kString, kTrue, kFalse, kNull, kObject, kArray };

//! A scalar's text (number digits, or the unescaped string); objects/arrays carry no text.
struct RawValue {
  ValueType type = ValueType::kNone;
  std::string_view text;
  bool present() const { return type != ValueType::kNone; }
};

class JsonScanner {
 public:
  static constexpr int kMaxDepth = 256;

  void SetWindow(const char* p, const char* end) {
    p_ = p;
    end_ = end;
  }
  //! Marks whether the window's end is the end of the input (a number may then end there).
  void SetFinal(bool final) { final_ = final; }
  const char* pos() const { return p_; }
  const char* end() const { return end_; }
  void set_pos(const char* p) { p_ = p; }
  //! Forgets decoded strings of the previous unit.
  void ResetScratch() { scratch_used_ = 0; }

  void SkipWs() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  //! Next non-space character, not consumed.
  char Peek() {
    SkipWs();
    if (p_ == end_) throw ScanNeedMore{};
    return *p_;
  }
  void Expect(char c) {
    if (p_ != end_ && *p_ == c) {
      ++p_;
      return;
    }
    ExpectSlow(c);
  }
  //! True (and consumed) when the next non-space character is `c`.
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++p_;
    return true;
  }
  //! Consumes `text` (a quoted key and its ':', e.g. "\"ph\":") when the input continues with
  //! exactly those bytes; otherwise consumes nothing. A fast path beside String(): a key written
  //! any other way (spaces before ':', escapes) is left for String() to read.
  template <size_t N>
  bool TryLiteral(const char (&text)[N]) {
    constexpr size_t n = N - 1;  // without the terminating NUL; a constant, so memcmp inlines
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, text, n) != 0) return false;
    p_ += n;
    return true;
  }
  std::string_view String();
  std::string_view Number();
  //! Any value; objects and arrays are skipped (validated) and reported by type only.
  RawValue Value(int depth);
  void Skip(int depth) { (void)Value(depth); }
  //! Any value as a JSON DOM (for small top-level metadata only).
  Json ToJson(int depth);

  [[noreturn]] void Fail(const char* at, std::string what) const { throw ScanError{at, std::move(what)}; }

 private:
  void Literal(std::string_view lit);
  void ExpectSlow(char c);
  std::string_view DecodeEscaped(const char* start);
  //! `s` if valid UTF-8, else a sanitized copy in scratch (reusing the last slot if `in_scratch`).
  std::string_view Utf8Checked(std::string_view s, bool in_scratch);

  const char* p_ = nullptr;
  const char* end_ = nullptr;
  bool final_ = false;
  std::deque<std::string> scratch_;
  size_t scratch_used_ = 0;
};

//! Exact conversions of JSON number text.
bool ParseInt64(std::string_view text, int64_t* out);
bool ParseDouble(std::string_view text, double* out);
//! Microseconds text ("12.3456", "1.5e3") to integer ns, rounding half away from zero.
bool ParseMicrosToNs(std::string_view text, int64_t* out);

}  // namespace parallax::traces

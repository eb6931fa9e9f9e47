#pragma once
// JsonScanner: a strict, allocation-light JSON tokenizer over one contiguous buffer window
// (internal to the Chrome reader). Running off the end of the window throws ScanNeedMore: the
// reader refills the buffer and re-scans the unit (one event) from its start. Syntax errors
// throw ScanError with the byte position. Nesting is limited so hostile input cannot overflow
// the stack.

#include <bit>
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
  //! A number as JsonScanner scanned it: when it has no exponent and at most 18 digits,
  //! `mantissa` is all its digits as one signed integer and this the count after the '.';
  //! otherwise -1 (convert the text). Saves reading the digits twice.
  int8_t fraction_digits = -1;
  std::string_view text;
  int64_t mantissa = 0;

  RawValue() = default;
  RawValue(ValueType t, std::string_view s) : type(t), text(s) {}
  bool present() const { return type != ValueType::kNone; }
};

class JsonScanner {
 public:
  static constexpr int kMaxDepth = 256;

  void SetWindow(const char* p, const char* end) {
    p_ = p;
    end_ = end;
    bounded_ = end > p && !IsNumberByte(end[-1]);
  }
  //! Marks whether the window's end is the end of the input (a number may then end there).
  void SetFinal(bool final) { final_ = final; }
  const char* pos() const { return p_; }
  const char* end() const { return end_; }
  void set_pos(const char* p) { p_ = p; }
  //! Forgets decoded strings of the previous unit.
  void ResetScratch() { scratch_used_ = 0; }

  void SkipWs() {
    // One compare in the common case (no space: any byte above ' ').
    while (p_ != end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
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
  std::string_view String() {
    if (Peek() != '"') Fail(p_, "expected a string");
    const char* start = ++p_;
    // Most keys and names end within the first 8 bytes: one word, no call.
    if (end_ - p_ >= 8) {
      const uint64_t special = SpecialBytes(p_);
      if (special == 0) {
        p_ += 8;
      } else if (const char* q = p_ + std::countr_zero(special) / 8; *q == '"') {
        p_ = q + 1;
        return {start, static_cast<size_t>(q - start)};
      }
    }
    return StringRest(start);
  }
  //! Any value; objects and arrays are skipped (validated) and reported by type only.
  RawValue Value(int depth);
  void Skip(int depth) { (void)Value(depth); }
  //! Any value as a JSON DOM (for small top-level metadata only).
  Json ToJson(int depth);

  [[noreturn]] void Fail(const char* at, std::string what) const { throw ScanError{at, std::move(what)}; }

 private:
  static bool IsNumberByte(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  }
  //! The 8 bytes at `p` with bit 7 set in each byte that is '"', '\\', below 0x20 or not
  //! ASCII (p[0] is the lowest byte). The lowest flag is exact: the borrows of these byte-wise
  //! subtractions only carry upward from a flagged byte.
  static uint64_t SpecialBytes(const char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    const uint64_t quote = w ^ (kOnes * '"'), slash = w ^ (kOnes * '\\');
    return (((quote - kOnes) & ~quote) | ((slash - kOnes) & ~slash) | (w - kOnes * 0x20) | w) & kHigh;
  }
  //! A number at p_ (not a space), its digits read once into RawValue::mantissa where they fit.
  RawValue Number();
  RawValue NumberChecked();
  //! String() after its first word: 8 bytes at a time, then StringTail.
  std::string_view StringRest(const char* start);
  void Literal(std::string_view lit);
  //! String() from p_ on, one byte at a time: non-ASCII text, escapes, the window's end.
  std::string_view StringTail(const char* start);
  void ExpectSlow(char c);
  std::string_view DecodeEscaped(const char* start);
  //! `s` if valid UTF-8, else a sanitized copy in scratch (reusing the last slot if `in_scratch`).
  std::string_view Utf8Checked(std::string_view s, bool in_scratch);

  const char* p_ = nullptr;
  const char* end_ = nullptr;
  bool final_ = false;
  bool bounded_ = false;  //!< the window's last byte cannot be part of a number
  std::deque<std::string> scratch_;
  size_t scratch_used_ = 0;
};

//! Exact conversions of JSON number text.
bool ParseInt64(std::string_view text, int64_t* out);
bool ParseDouble(std::string_view text, double* out);
//! Microseconds text ("12.3456", "1.5e3") to integer ns, rounding half away from zero.
bool ParseMicrosToNs(std::string_view text, int64_t* out);

//! The same of a scanned value (its text when it is not a number): equal results, without
//! reading the digits again when the scanner kept them (RawValue::fraction_digits >= 0).
inline bool ParseInt64(const RawValue& v, int64_t* out) {
  if (v.fraction_digits == 0) {
    *out = v.mantissa;
    return true;
  }
  return ParseInt64(v.text, out);
}
inline bool ParseDouble(const RawValue& v, double* out) {
  // Integers below 2^53 are exact doubles; "-0" keeps its sign through the text.
  constexpr int64_t kExact = int64_t{1} << 53;
  if (v.fraction_digits == 0 && v.mantissa > 0 && v.mantissa <= kExact) {
    *out = static_cast<double>(v.mantissa);
    return true;
  }
  return ParseDouble(v.text, out);
}
inline bool ParseMicrosToNs(const RawValue& v, int64_t* out) {
  // Up to 3 fractional digits: ns = mantissa x 10^(3 - digits), exact (no rounding needed).
  constexpr int64_t kScale[4] = {1000, 100, 10, 1};
  constexpr int64_t kMax = INT64_MAX / 1000;
  if (v.fraction_digits >= 0 && v.fraction_digits <= 3 && v.mantissa <= kMax && v.mantissa >= -kMax) {
    *out = v.mantissa * kScale[v.fraction_digits];
    return true;
  }
  return ParseMicrosToNs(v.text, out);
}

}  // namespace parallax::traces

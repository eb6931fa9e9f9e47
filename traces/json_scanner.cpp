#include "traces/json_scanner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "traces/utf8.h"

namespace parallax::traces {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }



}  // namespace

void JsonScanner::ExpectSlow(char c) {
  const char got = Peek();
  if (got != c) Fail(p_, std::string("expected '") + c + "' but found '" + got + "'");
  ++p_;
}

void JsonScanner::Literal(std::string_view lit) {
  for (char c : lit) {
    if (p_ == end_) throw ScanNeedMore{};
    if (*p_ != c) Fail(p_, "invalid literal (expected " + std::string(lit) + ")");
    ++p_;
  }
}

std::string_view JsonScanner::StringRest(const char* start) {
  while (end_ - p_ >= 8) {
    const uint64_t special = SpecialBytes(p_);
    if (special != 0) {
      p_ += std::countr_zero(special) / 8;
      if (*p_ != '"') break;  // escape, control or non-ASCII: byte by byte from here
      std::string_view s(start, static_cast<size_t>(p_ - start));
      ++p_;
      return s;
    }
    p_ += 8;
  }
  return StringTail(start);
}

std::string_view JsonScanner::StringTail(const char* start) {
  unsigned char high = 0;  // OR of the bytes from p_ on (those before are ASCII): bit 7 if not
  while (p_ != end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) {
    high |= static_cast<unsigned char>(*p_);
    ++p_;
  }
  if (p_ == end_) throw ScanNeedMore{};
  if (*p_ == '\\') return Utf8Checked(DecodeEscaped(start), true);
  if (*p_ != '"') Fail(p_, "control character in string");
  std::string_view s(start, static_cast<size_t>(p_ - start));
  ++p_;
  return (high & 0x80) != 0 ? Utf8Checked(s, false) : s;
}

std::string_view JsonScanner::Utf8Checked(std::string_view s, bool in_scratch) {
  if (IsValidUtf8(s)) return s;
  // Invalid UTF-8 (JSON requires UTF-8): keep the text readable, replace the bad bytes.
  std::string fixed = SanitizeUtf8(s);
  if (!in_scratch) {
    if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
    ++scratch_used_;
  }
  scratch_[scratch_used_ - 1] = std::move(fixed);
  return scratch_[scratch_used_ - 1];
}

std::string_view JsonScanner::DecodeEscaped(const char* start) {
  if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
  std::string& out = scratch_[scratch_used_++];
  out.assign(start, static_cast<size_t>(p_ - start));
  for (;;) {
    if (p_ == end_) throw ScanNeedMore{};
    const char c = *p_;
    if (c == '"') {
      ++p_;
      return out;
    }
    if (static_cast<unsigned char>(c) < 0x20) Fail(p_, "control character in string");
    if (c != '\\') {
      out.push_back(c);
      ++p_;
      continue;
    }
    if (end_ - p_ < 2) throw ScanNeedMore{};
    const char e = p_[1];
    p_ += 2;
    switch (e) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        auto hex4 = [&](const char* q) -> int {
          if (end_ - q < 4) throw ScanNeedMore{};
          int v = 0;
          for (int i = 0; i < 4; ++i) {
            const int h = HexValue(q[i]);
            if (h < 0) Fail(q + i, "invalid \\u escape");
            v = v * 16 + h;
          }
          return v;
        };
        uint32_t cp = static_cast<uint32_t>(hex4(p_));
        p_ += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (end_ - p_ < 2) throw ScanNeedMore{};
          if (p_[0] == '\\' && p_[1] == 'u') {
            const auto lo = static_cast<uint32_t>(hex4(p_ + 2));
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              p_ += 6;
            }
          }
        }
        AppendUtf8(out, cp);
        break;
      }
      default:
        Fail(p_ - 1, std::string("invalid escape '\\") + e + "'");
    }
  }
}

RawValue JsonScanner::Number() {
  if (bounded_) {
    // No digit run reaches the window's end, so the loops need no bounds checks. Anything but
    // a plain number (an exponent, an error) is left to the checked scan below.
    const char* q = p_;
    const bool negative = *q == '-';
    q += negative ? 1 : 0;
    uint64_t mantissa = 0;
    const char* d = q;
    if (*q == '0') {
      ++q;
    } else {
      while (IsDigit(*q)) mantissa = mantissa * 10 + static_cast<uint64_t>(*q++ - '0');
    }
    const ptrdiff_t whole = q - d;
    ptrdiff_t fraction = 0;
    if (*q == '.') {
      const char* f = ++q;
      while (IsDigit(*q)) mantissa = mantissa * 10 + static_cast<uint64_t>(*q++ - '0');
      fraction = q - f;
      if (fraction == 0) q = d;  // "1." is invalid: the checked scan says so
    }
    if (whole > 0 && q != d && *q != 'e' && *q != 'E') {
      RawValue v(ValueType::kNumber, {p_, static_cast<size_t>(q - p_)});
      if (whole + fraction <= 18) {
        v.fraction_digits = static_cast<int8_t>(fraction);
        v.mantissa = negative ? -static_cast<int64_t>(mantissa) : static_cast<int64_t>(mantissa);
      }
      p_ = q;
      return v;
    }
  }
  return NumberChecked();
}

RawValue JsonScanner::NumberChecked() {
  const char* start = p_;
  uint64_t mantissa = 0;  // wraps harmlessly past 19 digits: kept only up to 18
  int ndigits = 0;
  auto need = [&] {
    if (p_ == end_) throw ScanNeedMore{};
  };
  auto digits = [&] {
    const char* d = p_;
    while (p_ != end_ && IsDigit(*p_)) mantissa = mantissa * 10 + static_cast<uint64_t>(*p_++ - '0');
    if (p_ == end_ && !final_) throw ScanNeedMore{};
    if (p_ == d) Fail(p_, "invalid number");
    const int n = static_cast<int>(std::min<ptrdiff_t>(p_ - d, 100));
    ndigits += n;
    return n;
  };
  need();
  const bool negative = *p_ == '-';
  if (negative) {
    ++p_;
    need();
  }
  if (*p_ == '0') {
    ++p_;
    ndigits = 1;
    if (p_ == end_ && !final_) throw ScanNeedMore{};
  } else {
    digits();
  }
  int fraction = 0;
  if (p_ != end_ && *p_ == '.') {
    ++p_;
    fraction = digits();
  }
  bool exponent = false;
  if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
    exponent = true;
    ++p_;
    need();
    if (*p_ == '+' || *p_ == '-') ++p_;
    digits();
  }
  RawValue v(ValueType::kNumber, {start, static_cast<size_t>(p_ - start)});
  if (!exponent && ndigits <= 18) {
    v.fraction_digits = static_cast<int8_t>(fraction);
    v.mantissa = negative ? -static_cast<int64_t>(mantissa) : static_cast<int64_t>(mantissa);
  }
  return v;
}

RawValue JsonScanner::Value(int depth) {
  const char c = Peek();
  switch (c) {
    case '"': return {ValueType::kString, String()};
    case 't': Literal("true"); return {ValueType::kTrue, "true"};
    case 'f': Literal("false"); return {ValueType::kFalse, "false"};
    case 'n': Literal("null"); return {ValueType::kNull, "null"};
    case '{': {
      if (depth >= kMaxDepth) Fail(p_, "nesting deeper than " + std::to_string(kMaxDepth));
      ++p_;
      if (Consume('}')) return {ValueType::kObject, {}};
      do {
        (void)String();
        Expect(':');
        (void)Value(depth + 1);
      } while (Consume(','));
      Expect('}');
      return {ValueType::kObject, {}};
    }
    case '[': {
      if (depth >= kMaxDepth) Fail(p_, "nesting deeper than " + std::to_string(kMaxDepth));
      ++p_;
      if (Consume(']')) return {ValueType::kArray, {}};
      do {
        (void)Value(depth + 1);
      } while (Consume(','));
      Expect(']');
      return {ValueType::kArray, {}};
    }
    default:
      if (c == '-' || IsDigit(c)) return Number();
      Fail(p_, std::string("unexpected character '") + c + "'");
  }
}

Json JsonScanner::ToJson(int depth) {
  const char c = Peek();
  if (c == '{' || c == '[') {
    if (depth >= kMaxDepth) Fail(p_, "nesting deeper than " + std::to_string(kMaxDepth));
    ++p_;
    if (c == '{') {
      Json obj = Json::object();
      if (Consume('}')) return obj;
      do {
        std::string key(String());
        Expect(':');
        obj[key] = ToJson(depth + 1);
      } while (Consume(','));
      Expect('}');
      return obj;
    }
    Json arr = Json::array();
    if (Consume(']')) return arr;
    do {
      arr.push_back(ToJson(depth + 1));
    } while (Consume(','));
    Expect(']');
    return arr;
  }
  const RawValue v = Value(depth);
  switch (v.type) {
    case ValueType::kString: return std::string(v.text);
    case ValueType::kTrue: return true;
    case ValueType::kFalse: return false;
    case ValueType::kNull: return nullptr;
    default: break;
  }
  int64_t i;
  if (ParseInt64(v.text, &i)) return i;
  double d = 0;
  ParseDouble(v.text, &d);
  return d;
}

bool ParseInt64(std::string_view text, int64_t* out) {
  // Fast path: up to 18 plain digits (cannot overflow); anything else as from_chars decides.
  const bool neg = !text.empty() && text[0] == '-';
  const size_t n = text.size() - (neg ? 1 : 0);
  if (n >= 1 && n <= 18) {
    int64_t v = 0;
    size_t i = neg ? 1 : 0;
    for (; i < text.size() && IsDigit(text[i]); ++i) v = v * 10 + (text[i] - '0');
    if (i == text.size()) {
      *out = neg ? -v : v;
      return true;
    }
  }
  auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double* out) {
  auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && std::isfinite(*out);
}

bool ParseMicrosToNs(std::string_view text, int64_t* out) {
  const char* p = text.data();
  const char* end = p + text.size();
  bool neg = false;
  if (p != end && *p == '-') {
    neg = true;
    ++p;
  }
  // Significant digits into `mant` (at most 19: 10^19 - 1 fits 64 bits; Kineto writes 19, absolute
  // microseconds with three decimals), scaled by 10^exp10.
  uint64_t mant = 0;
  int ndig = 0;
  int64_t exp10 = 3;  // µs -> ns
  bool round_up = false;
  bool any = false;
  auto take = [&](char c, bool fractional) {
    any = true;
    if (ndig < 19) {
      mant = mant * 10 + static_cast<uint64_t>(c - '0');
      if (mant != 0) ++ndig;
      if (fractional) --exp10;
    } else {
      if (ndig == 19 && !round_up && c >= '5') round_up = true;
      if (!fractional) ++exp10;
      ndig = 20;
    }
  };
  while (p != end && IsDigit(*p)) take(*p++, false);
  if (p != end && *p == '.') {
    ++p;
    while (p != end && IsDigit(*p)) take(*p++, true);
  }
  if (!any) return false;
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    int64_t e = 0;
    bool eneg = false;
    if (p != end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    if (p == end) return false;
    while (p != end && IsDigit(*p)) {
      e = e * 10 + (*p++ - '0');
      if (e > 100000) return false;
    }
    exp10 += eneg ? -e : e;
  }
  if (p != end) return false;
  if (round_up) ++mant;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (mant == 0) {
    *out = 0;
    return true;
  }
  if (exp10 >= 0) {
    for (int64_t i = 0; i < exp10; ++i) {
      if (mant > kMax / 10) return false;
      mant *= 10;
    }
  } else {
    if (-exp10 > 19) {
      mant = 0;  // below 0.5 ns
    } else {
      uint64_t dropped = 0;
      for (int64_t i = 0; i < -exp10; ++i) {
        dropped = mant % 10;
        mant /= 10;
      }
      if (dropped >= 5) ++mant;  // half away from zero on the first dropped digit
    }
  }
  if (mant > kMax) return false;
  *out = neg ? -static_cast<int64_t>(mant) : static_cast<int64_t>(mant);
  return true;
}

}  // namespace parallax::traces

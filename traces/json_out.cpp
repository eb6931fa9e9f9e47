#include "traces/json_out.h"

#include "traces/utf8.h"

namespace parallax::traces {

void JsonOut::Str(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      if (!IsValidUtf8(s)) {
        const std::string fixed = SanitizeUtf8(s);  // JSON text must be UTF-8
        return Str(fixed);
      }
      break;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  buf_.push_back('"');
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    buf_.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': buf_.append("\\\""); break;
      case '\\': buf_.append("\\\\"); break;
      case '\n': buf_.append("\\n"); break;
      case '\t': buf_.append("\\t"); break;
      case '\r': buf_.append("\\r"); break;
      default:
        buf_.append("\\u00");
        buf_.push_back(kHex[c >> 4]);
        buf_.push_back(kHex[c & 15]);
    }
  }
  buf_.append(s.data() + run, s.size() - run);
  buf_.push_back('"');
}

void JsonOut::Micros(int64_t ns) {
  uint64_t mag;
  if (ns < 0) {
    buf_.push_back('-');
    mag = 0 - static_cast<uint64_t>(ns);
  } else {
    mag = static_cast<uint64_t>(ns);
  }
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof(tmp), mag / 1000);
  buf_.append(tmp, r.ptr);
  unsigned frac = static_cast<unsigned>(mag % 1000);
  if (frac != 0) {
    char f[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                 static_cast<char>('0' + frac % 10)};
    size_t len = 4;
    while (f[len - 1] == '0') --len;
    buf_.append(f, len);
  }
}

}  // namespace parallax::traces

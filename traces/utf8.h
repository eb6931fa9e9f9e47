#pragma once
// UTF-8 validation: every string in a Trace is valid UTF-8, so everything written from it is
// valid JSON for strict consumers (nlohmann::json, Perfetto).

#include <string>
#include <string_view>

namespace parallax::traces {

//! True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool IsValidUtf8(std::string_view s);
//! `s` with each invalid byte replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view s);

}  // namespace parallax::traces

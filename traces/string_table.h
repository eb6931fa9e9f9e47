#pragma once
// StringTable: interns names and categories so a slice stores a 4-byte id, not a string.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace parallax::traces {

using StringId = uint32_t;
//! Id 0 is always the empty string.
inline constexpr StringId kEmptyString = 0;

class StringTable {
 public:
  StringTable();
  StringTable(StringTable&&) noexcept = default;
  StringTable& operator=(StringTable&&) noexcept = default;
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;

  //! Returns the id of `s`, adding it the first time. Allocates only for new strings.
  StringId Intern(std::string_view s);
  //! The id of `s` if already interned.
  bool Find(std::string_view s, StringId* id) const;
  std::string_view View(StringId id) const { return views_[id]; }
  size_t size() const { return views_.size(); }
  //! Approximate bytes held (strings + index).
  size_t MemoryBytes() const;

 private:
  std::deque<std::string> storage_;  // deque: push_back never moves existing strings
  std::deque<std::string_view> views_;
  std::unordered_map<std::string_view, StringId> index_;
};

}  // namespace parallax::traces

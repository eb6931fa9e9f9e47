#include "traces/string_table.h"

namespace parallax::traces {

StringTable::StringTable() {
  storage_.emplace_back();
  views_.emplace_back(storage_.back());
  index_.emplace(views_.back(), kEmptyString);
}

StringId StringTable::Intern(std::string_view s) {
  if (auto it = index_.find(s); it != index_.end()) return it->second;
  const auto id = static_cast<StringId>(views_.size());
  storage_.emplace_back(s);
  views_.emplace_back(storage_.back());
  index_.emplace(views_.back(), id);
  return id;
}

bool StringTable::Find(std::string_view s, StringId* id) const {
  auto it = index_.find(s);
  if (it == index_.end()) return false;
  *id = it->second;
  return true;
}

size_t StringTable::MemoryBytes() const {
  size_t bytes = 0;
  for (const auto& s : storage_) bytes += sizeof(std::string) + (s.capacity() > 15 ? s.capacity() : 0);
  bytes += views_.size() * sizeof(std::string_view);
  bytes += index_.size() * (sizeof(std::string_view) + sizeof(StringId) + 2 * sizeof(void*));
  bytes += index_.bucket_count() * sizeof(void*);
  return bytes;
}

}  // namespace parallax::traces

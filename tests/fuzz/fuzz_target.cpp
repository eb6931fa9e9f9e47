#include "tests/fuzz/fuzz_target.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace parallax::fuzz {
namespace {

std::map<std::string, FuzzFn, std::less<>>& Registry() {
  static std::map<std::string, FuzzFn, std::less<>> registry;
  return registry;
}

std::atomic<int64_t> g_accepted{0};

}  // namespace

bool Register(const char* reader, FuzzFn fn) {
  Registry()[reader] = fn;
  return true;
}

FuzzFn Find(std::string_view reader) {
  auto it = Registry().find(reader);
  return it == Registry().end() ? nullptr : it->second;
}

void NoteAccepted() { g_accepted.fetch_add(1, std::memory_order_relaxed); }
int64_t AcceptedCount() { return g_accepted.load(std::memory_order_relaxed); }

void Violation(const char* reader, const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz %s: property violated: %s: %s\n", reader, what, detail.c_str());
  std::abort();
}

void CheckBadInput(const char* reader, const Error& e, std::string_view origin) {
  if (e.kind != ErrorKind::kBadInput) Violation(reader, "a rejection is not bad input", e.message);
  const std::string prefix = std::string(origin) + ": ";
  if (e.message.size() <= prefix.size() || e.message.compare(0, prefix.size(), prefix) != 0) {
    Violation(reader, "the message does not start with the file name", e.message);
  }
}

}  // namespace parallax::fuzz

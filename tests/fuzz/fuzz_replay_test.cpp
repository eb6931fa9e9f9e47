// Replays every reader's fuzz entry without libFuzzer, under the project's compiler (and so under
// the AddressSanitizer + UBSan build): the committed seed corpus (tests/fuzz/corpus/<reader>), every
// crash found so far (tests/fuzz/regressions/<reader>), and a bounded number of deterministic
// mutations of the seeds. A property violation or an escaped exception aborts the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace parallax::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Readers() {
  std::vector<std::string> out;
  std::stringstream ss(PARALLAX_FUZZ_READERS);
  std::string r;
  while (std::getline(ss, r, ',')) {
    if (!r.empty()) out.push_back(r);
  }
  return out;
}

struct Input {
  std::string name;
  std::string bytes;
};

std::vector<Input> ReadDir(const fs::path& dir) {
  std::vector<Input> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename().string().starts_with(".")) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    out.push_back({e.path().filename().string(), ss.str()});
  }
  std::sort(out.begin(), out.end(), [](const Input& a, const Input& b) { return a.name < b.name; });
  return out;
}

int Feed(FuzzFn fn, const std::string& s) { return fn(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

// Byte-level mutations plus JSON-aware ones (extreme numbers, deep nesting, duplicated keys).
std::string Mutate(const std::vector<Input>& seeds, std::mt19937_64& rng) {
  static constexpr char kAlphabet[] = "{}[]\",:=0123456789.-+eE \\u\xef\xbb\xbf\xff";
  static const char* kTokens[] = {"-1", "0", "1e400", "-1e400", "99999999999999999999", "1.5", "NaN",
                                  "Infinity", "null", "true", "\"\"", "[]", "{}", "\"\\ud800\"",
                                  "9223372036854775807", "-9223372036854775808", "4.9e-324"};
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  std::string s = seeds[pick(seeds.size())].bytes;
  const int rounds = 1 + static_cast<int>(pick(4));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(8)) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1 + pick(255));
        break;
      case 1:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)), kAlphabet[pick(sizeof(kAlphabet) - 1)]);
        break;
      case 2:
        s.erase(pick(s.size() + 1), pick(16));
        break;
      case 3: {
        const std::string piece = s.substr(pick(s.size() + 1), pick(64));
        s.insert(pick(s.size() + 1), piece);
        break;
      }
      case 4:
        s.resize(pick(s.size() + 1));
        break;
      case 5: {
        const std::string& o = seeds[pick(seeds.size())].bytes;
        s = s.substr(0, pick(s.size() + 1)) + o.substr(pick(o.size() + 1));
        break;
      }
      case 6: {  // replace a value (after a ':' or '=') with an extreme token
        const size_t at = s.find_first_of(":=", pick(s.size() + 1));
        if (at == std::string::npos) break;
        const size_t end = s.find_first_of(",}]", at + 1);
        s.replace(at + 1, end == std::string::npos ? std::string::npos : end - at - 1,
                  kTokens[pick(std::size(kTokens))]);
        break;
      }
      default: {  // wrap a value in deep nesting
        const size_t at = s.find(':', pick(s.size() + 1));
        if (at == std::string::npos) break;
        const size_t depth = 1 + pick(600);
        s.insert(at + 1, std::string(depth, '['));
        break;
      }
    }
  }
  return s;
}

class FuzzReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzReplay, SeedsRegressionsAndBoundedMutations) {
  const std::string reader = GetParam();
  const FuzzFn fn = Find(reader);
  ASSERT_NE(fn, nullptr) << "fuzz_" << reader << ".cpp is not linked into this test";
  const fs::path root = fs::path(PARALLAX_SOURCE_DIR) / "tests" / "fuzz";
  const std::vector<Input> seeds = ReadDir(root / "corpus" / reader);
  ASSERT_FALSE(seeds.empty()) << "no seed corpus in tests/fuzz/corpus/" << reader;

  // Seeds named ok_* are valid inputs: each must be accepted, or the corpus tests nothing.
  for (const Input& in : seeds) {
    const int64_t before = AcceptedCount();
    Feed(fn, in.bytes);
    if (in.name.starts_with("ok_")) {
      EXPECT_EQ(AcceptedCount(), before + 1) << reader << " seed " << in.name << " was rejected";
    }
  }
  for (const Input& in : ReadDir(root / "regressions" / reader)) {
    SCOPED_TRACE(in.name);
    Feed(fn, in.bytes);
  }

  std::mt19937_64 rng(20261123);
  constexpr int kMutations = 4000;
  const int64_t before = AcceptedCount();
  for (int i = 0; i < kMutations; ++i) Feed(fn, Mutate(seeds, rng));
  const int64_t accepted = AcceptedCount() - before;
  // Both outcomes must occur, or the mutations do not reach the reader's checks.
  EXPECT_GT(accepted, 0) << reader << ": no mutation was accepted";
  EXPECT_LT(accepted, kMutations) << reader << ": every mutation was accepted";
}

INSTANTIATE_TEST_SUITE_P(Readers, FuzzReplay, ::testing::ValuesIn(Readers()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
}  // namespace parallax::fuzz

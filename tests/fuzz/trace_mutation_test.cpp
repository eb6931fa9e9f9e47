// Runs the trace reader's fuzz entry (fuzz_trace.cpp) without libFuzzer: a bounded number of
// deterministic random mutations of real trace snippets (Kineto traces in tests/data and our own
// output), plain and gzip. A property violation aborts the test binary.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <random>
#include <sstream>

#include "tests/fuzz/fuzz_target.h"
#include "traces/byte_stream.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/tracer.h"

namespace parallax::traces {
namespace {

std::string Gunzip(const std::string& path) {
  auto src = OpenTraceSource(path);
  EXPECT_TRUE(src.ok());
  std::string out(1 << 17, '\0');
  size_t n = 0;
  while (n < out.size()) {
    auto got = (*src)->Read(out.data() + n, out.size() - n);
    if (!got.ok() || *got == 0) break;
    n += *got;
  }
  out.resize(n);
  return out;
}

std::string Gzip(const std::string& s) {
  std::string out;
  auto sink = GzipSink(StringSink(&out), 1);
  EXPECT_TRUE(sink->Write(s).ok());
  EXPECT_TRUE(sink->Finish().ok());
  return out;
}

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (const char* f : {"nccl_parser_config__nccl_data.json.gz", "trace_diff__control__control.json.gz",
                        "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}) {
    // The first 8 KiB of the GPU traces (cut mid-event: exercises truncation too); all of the
    // small CPU trace, whose first 8 KiB are only its distributedInfo header.
    const std::string text = Gunzip(PARALLAX_TEST_DATA_DIR "/traces/kineto/" + std::string(f));
    seeds.push_back(std::string(f).starts_with("cpu_only") ? text : text.substr(0, 8192));
  }
  Tracer tr("predicted");
  const TrackId c = tr.Track(0, Stream::kCompute);
  const TrackId tp = tr.Track(0, Stream::kTpComm);
  OpIdentity id;
  for (int i = 0; i < 20; ++i) {
    id.layer = i;
    id.op = OpKind::kQkv;
    tr.Record(c, tr.OpName(OpKind::kQkv), int64_t{i} * 100, 60, id, SliceArgs::Compute(1e9));
    id.op = OpKind::kTpAllReduce;
    tr.Record(tp, tr.OpName(OpKind::kTpAllReduce), int64_t{i} * 100 + 60, 30, id, SliceArgs::Comm(4096, 2));
  }
  tr.Flow(c, 50, tp, 70, tr.Intern("dep"));
  tr.Counter(c, tr.Intern("memory"), tr.Intern("bytes"), 10, 123.5);
  std::string ours;
  auto sink = StringSink(&ours);
  EXPECT_TRUE(WriteChromeTrace(tr.trace(), *sink).ok());
  seeds.push_back(ours);
  seeds.push_back(R"([{"ph":"B","name":"a","pid":"p","tid":1,"ts":1},{"ph":"E","pid":"p","tid":1,"ts":2},)"
                  R"({"ph":"b","id":"0x1","cat":"c","pid":1,"ts":1},{"ph":"e","id":"0x1","cat":"c","pid":1,"ts":3},)"
                  R"({"ph":"C","name":"m","pid":1,"ts":1,"args":{"v":1e3}},{"ph":"i","name":"\u00e9\n","pid":1,"tid":1,"ts":0.5}])");
  return seeds;
}

std::string Mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  static constexpr char kAlphabet[] = "{}[]\",:0123456789.-eE \\utfnXBEiICMsbfph";
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  std::string s = seeds[pick(seeds.size())];
  const int rounds = 1 + static_cast<int>(pick(4));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(7)) {
      case 0:  // flip a byte
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1 + pick(255));
        break;
      case 1:  // insert a JSON-ish character
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pick(s.size() + 1)), kAlphabet[pick(sizeof(kAlphabet) - 1)]);
        break;
      case 2: {  // delete a range
        const size_t at = pick(s.size() + 1);
        s.erase(at, pick(32));
        break;
      }
      case 3: {  // duplicate a range
        const size_t at = pick(s.size() + 1);
        const std::string piece = s.substr(at, pick(200));
        s.insert(pick(s.size() + 1), piece);
        break;
      }
      case 4:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 5: {  // splice with another seed
        const std::string& o = seeds[pick(seeds.size())];
        s = s.substr(0, pick(s.size() + 1)) + o.substr(pick(o.size() + 1));
        break;
      }
      default: {  // replace a digit run start with an extreme number
        static const char* kNums[] = {"-1", "1e400", "99999999999999999999", "-0.0005", "1E-30", "0x10"};
        const size_t at = s.find_first_of("0123456789", pick(s.size() + 1));
        if (at != std::string::npos) s.insert(at, kNums[pick(6)]);
      }
    }
  }
  return s;
}

TEST(FuzzReader, BoundedDeterministicMutationsOfRealTraces) {
  const fuzz::FuzzFn entry = fuzz::Find("trace");
  ASSERT_NE(entry, nullptr) << "fuzz_trace.cpp is not linked in";
  const std::vector<std::string> seeds = Seeds();
  std::mt19937_64 rng(20261121);
  int loaded = 0;
  constexpr int kIterations = 3000;
  for (int i = 0; i < kIterations; ++i) {
    std::string input = Mutate(seeds, rng);
    if (i % 5 == 0) {
      input = Gzip(input);
      if (i % 10 == 0 && !input.empty()) {
        // Corrupt or cut the compressed stream itself.
        input.resize(input.size() - (rng() % input.size()));
        if (!input.empty()) input[rng() % input.size()] ^= 0x20;
      }
    }
    entry(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ReadOptions o;
    o.lenient = true;
    loaded += ReadChromeTraceFromMemory(input, o).ok() ? 1 : 0;
  }
  // The mutations must exercise both outcomes, or the test proves nothing.
  EXPECT_GT(loaded, kIterations / 10);
  EXPECT_LT(loaded, kIterations);
  // The unmutated seeds all load (leniently: the 8 KiB Kineto prefixes end mid-event).
  for (const std::string& s : seeds) {
    ReadOptions o;
    o.lenient = true;
    auto t = ReadChromeTraceFromMemory(s, o);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    entry(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
}

}  // namespace
}  // namespace parallax::traces

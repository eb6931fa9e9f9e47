// Reading gzip traces: a file that fits in memory is inflated whole (libdeflate) and read as
// plain JSON on several threads; one over the memory limit, or not complete valid gzip, streams
// through zlib. Either way the result is the plain file's: the same trace (byte-identical when
// written back), the same ReadStats but the compressed size, the same error messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "traces/byte_stream.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/tracer.h"
#include "tests/traces/trace_text.h"

namespace parallax::traces {
namespace {

//! A simulator-like trace: 4 ranks x 2 streams, op identities with flops and bytes, flows
//! between ranks, a memory counter, process and thread metadata (about 4 MB of JSON).
std::string SimulatorLikeJson() {
  Tracer tr("predicted");
  std::vector<TrackId> compute, tp;
  for (int64_t r = 0; r < 4; ++r) {
    compute.push_back(tr.Track(r, Stream::kCompute));
    tp.push_back(tr.Track(r, Stream::kTpComm));
  }
  const OpKind ops[] = {OpKind::kQkv, OpKind::kAttnCore, OpKind::kFc1, OpKind::kFc2};
  for (int64_t i = 0; i < 20000; ++i) {
    const auto r = static_cast<size_t>(i % 4);
    OpIdentity id;
    id.rank = static_cast<int64_t>(r);
    id.microbatch = i / 400;
    id.layer = (i / 4) % 96;
    id.stage = 0;
    id.op = ops[i % 4];
    id.phase = i % 3 == 0 ? Phase::kBwd : Phase::kFwd;
    tr.Record(compute[r], tr.OpName(id.op), i * 1000 + 7, 900 + i % 13, id, SliceArgs::Compute(2.5e12 + i));
    if (i % 5 == 0) {
      id.op = OpKind::kTpAllReduce;
      tr.Record(tp[r], tr.OpName(id.op), i * 1000 + 950, 40, id, SliceArgs::Comm(16 << 20, 8));
      tr.Flow(compute[r], i * 1000 + 10, compute[(r + 1) % 4], i * 1000 + 500, tr.Intern("p2p"));
    }
    if (i % 50 == 0) tr.Counter(compute[r], tr.Intern("memory"), tr.Intern("allocated_bytes"), i * 1000, 1e9 + i);
  }
  std::string json;
  auto sink = StringSink(&json);
  EXPECT_TRUE(WriteChromeTrace(tr.trace(), *sink).ok());
  return json;
}

std::string Gzip(std::string_view bytes) {
  std::string gz;
  auto sink = GzipSink(StringSink(&gz), 1);
  EXPECT_TRUE(sink->Write(bytes).ok());
  EXPECT_TRUE(sink->Finish().ok());
  return gz;
}

struct Outcome {
  bool ok = false;
  std::string text;  // the trace written back, or the error message
  ReadStats stats;
  std::vector<int64_t> progress_totals;  // -1: streamed (a ByteSource's total is unknown)
};

ReadOptions Options(size_t inflate_max_bytes = 0) {
  ReadOptions o;
  o.origin = "t.json.gz";
  o.threads = 2;
  o.parallel_min_bytes = 0;  // scanned in parallel whenever it is read from memory
  o.chunk_bytes = 64 << 10;
  o.inflate_max_bytes = inflate_max_bytes;
  return o;
}

Outcome Finish(const Result<Trace>& t, Outcome r) {
  r.ok = TraceText(t, &r.text);
  return r;
}

Outcome ReadMemory(const std::string& bytes, ReadOptions o) {
  Outcome r;
  o.progress = [&r](int64_t, int64_t total) {
    r.progress_totals.push_back(total);
    return true;
  };
  auto t = ReadChromeTraceFromMemory(bytes, o, &r.stats);
  return Finish(t, std::move(r));
}

Outcome ReadFile(const std::string& bytes, const ReadOptions& o) {
  const auto path = std::filesystem::temp_directory_path() / ("parallax_gzip_read_" + std::to_string(::getpid()) + ".gz");
  std::ofstream(path, std::ios::binary) << bytes;
  Outcome r;
  auto t = ReadChromeTrace(path.string(), o, &r.stats);
  std::filesystem::remove(path);
  return Finish(t, std::move(r));
}

bool Streamed(const Outcome& r) {
  for (int64_t total : r.progress_totals) {
    if (total >= 0) return false;
  }
  return !r.progress_totals.empty();
}

void ExpectSameAsPlain(const Outcome& gz, const Outcome& plain, int64_t gz_bytes, const std::string& what) {
  ASSERT_TRUE(gz.ok) << what << ": " << gz.text;
  EXPECT_TRUE(gz.text == plain.text) << what << ": outputs differ (" << gz.text.size() << " vs " << plain.text.size()
                                     << " bytes)";
  EXPECT_EQ(gz.stats.events, plain.stats.events) << what;
  EXPECT_EQ(gz.stats.phases, plain.stats.phases) << what;
  EXPECT_EQ(gz.stats.categories, plain.stats.categories) << what;
  EXPECT_EQ(gz.stats.warnings, plain.stats.warnings) << what;
  EXPECT_EQ(gz.stats.json_bytes, plain.stats.json_bytes) << what;
  EXPECT_EQ(gz.stats.raw_bytes, gz_bytes) << what;
}

TEST(GzipRead, InflatedWholeAndScannedInParallelEqualsThePlainRead) {
  const std::string json = SimulatorLikeJson();
  ASSERT_GT(json.size(), size_t{2} << 20);
  const std::string gz = Gzip(json);
  ReadOptions one = Options();
  one.threads = 1;
  const Outcome plain = ReadMemory(json, one);
  ASSERT_TRUE(plain.ok) << plain.text;
  const Outcome mem = ReadMemory(gz, Options());
  ExpectSameAsPlain(mem, plain, static_cast<int64_t>(gz.size()), "gzip in memory");
  // Read as plain JSON in memory: progress counts JSON bytes of a known total.
  EXPECT_FALSE(Streamed(mem));
  EXPECT_EQ(mem.progress_totals.back(), static_cast<int64_t>(json.size()));
  ExpectSameAsPlain(ReadFile(gz, Options()), plain, static_cast<int64_t>(gz.size()), "gzip file");
}

TEST(GzipRead, OverTheMemoryLimitItStreamsThroughZlibWithTheSameResult) {
  const std::string json = SimulatorLikeJson();
  const std::string gz = Gzip(json);
  ReadOptions one = Options();
  one.threads = 1;
  const Outcome plain = ReadMemory(json, one);
  const Outcome streamed = ReadMemory(gz, Options(json.size() - 1));
  ExpectSameAsPlain(streamed, plain, static_cast<int64_t>(gz.size()), "streamed");
  EXPECT_TRUE(Streamed(streamed));
  ExpectSameAsPlain(ReadFile(gz, Options(1024)), plain, static_cast<int64_t>(gz.size()), "streamed file");
  // At the limit exactly it still fits.
  EXPECT_FALSE(Streamed(ReadMemory(gz, Options(json.size()))));
}

TEST(GzipRead, ConcatenatedMembersAreOneFile) {
  // The last member's declared size is a third of the JSON: the buffer grows while inflating.
  const std::string json = SimulatorLikeJson();
  const size_t cut = json.size() * 2 / 3 + 11;
  const std::string gz = Gzip(json.substr(0, cut / 2)) + Gzip(json.substr(cut / 2, cut - cut / 2)) + Gzip(json.substr(cut));
  ReadOptions one = Options();
  one.threads = 1;
  const Outcome plain = ReadMemory(json, one);
  const Outcome whole = ReadMemory(gz, Options());
  ExpectSameAsPlain(whole, plain, static_cast<int64_t>(gz.size()), "three members");
  EXPECT_FALSE(Streamed(whole));
  // A limit between the first guess and the whole: streamed after all, same result.
  const Outcome streamed = ReadMemory(gz, Options(json.size() / 2));
  ExpectSameAsPlain(streamed, plain, static_cast<int64_t>(gz.size()), "three members, streamed");
  EXPECT_TRUE(Streamed(streamed));
}

TEST(GzipRead, CutOrCorruptGzipGivesTheStreamingReadersMessages) {
  const std::string json = SimulatorLikeJson();
  const std::string gz = Gzip(json);
  std::string bad_crc = gz;
  bad_crc[gz.size() - 6] = static_cast<char>(bad_crc[gz.size() - 6] ^ 1);  // in the CRC-32
  std::string bad_data = gz;
  for (size_t i = 1000; i < 1100; ++i) bad_data[i] = static_cast<char>(bad_data[i] ^ 0x5a);
  const std::string trailing = gz + "garbage";
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"cut", gz.substr(0, gz.size() / 2)}, {"bad crc", bad_crc}, {"bad data", bad_data}, {"trailing", trailing}}) {
    for (bool lenient : {false, true}) {
      ReadOptions o = Options();
      o.lenient = lenient;
      ReadOptions stream = Options(1);
      stream.lenient = lenient;
      const Outcome fast = ReadMemory(bytes, o);
      const Outcome slow = ReadMemory(bytes, stream);
      EXPECT_EQ(fast.ok, slow.ok) << name;
      EXPECT_TRUE(fast.text == slow.text) << name << ": " << fast.text.substr(0, 200) << " | " << slow.text.substr(0, 200);
      EXPECT_EQ(fast.stats.truncated, slow.stats.truncated) << name;
      EXPECT_EQ(fast.stats.warnings, slow.stats.warnings) << name;
      if (!lenient) {
        EXPECT_FALSE(fast.ok) << name;
        EXPECT_NE(fast.text.find("gzip"), std::string::npos) << name << ": " << fast.text;
      }
    }
  }
}

}  // namespace
}  // namespace parallax::traces

// The parallel reader (a plain input cut into chunks scanned on several threads) gives exactly
// the sequential reader's result: the same trace (byte-identical when written back), the same
// ReadStats and, for bad input, the same error message. Checked on the real Kineto traces, on a
// hand-made trace with every phase, escapes and "}, {" inside args (wrong chunk guesses), and on
// every cut and many corruptions of it, with chunks down to one byte.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "traces/byte_stream.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "tests/traces/trace_text.h"

namespace parallax::traces {
namespace {

std::string Gunzip(const std::string& path) {
  auto src = OpenTraceSource(path);
  EXPECT_TRUE(src.ok()) << path;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    auto got = (*src)->Read(buf, sizeof buf);
    EXPECT_TRUE(got.ok());
    if (!got.ok() || *got == 0) break;
    out.append(buf, *got);
  }
  return out;
}

struct Outcome {
  bool ok = false;
  std::string text;  // the trace written back, or the error message
  ReadStats stats;
};

Outcome Read(const std::string& json, bool lenient, int threads, size_t chunk_bytes) {
  ReadOptions o;
  o.origin = "t.json";
  o.lenient = lenient;
  o.threads = threads;
  o.parallel_min_bytes = 0;
  o.chunk_bytes = chunk_bytes;
  Outcome r;
  r.ok = TraceText(ReadChromeTraceFromMemory(json, o, &r.stats), &r.text);
  return r;
}

//! Sequential vs parallel; returns whether the sequential read succeeded.
bool ExpectSame(const std::string& json, bool lenient, int threads, size_t chunk_bytes,
                const std::string& what) {
  const Outcome a = Read(json, lenient, 1, chunk_bytes);
  const Outcome b = Read(json, lenient, threads, chunk_bytes);
  const std::string ctx = what + " (threads " + std::to_string(threads) + ", chunk " +
                          std::to_string(chunk_bytes) + (lenient ? ", lenient)" : ")");
  EXPECT_EQ(a.ok, b.ok) << ctx << ": " << a.text.substr(0, 300) << " | " << b.text.substr(0, 300);
  EXPECT_TRUE(a.text == b.text) << ctx << ": outputs differ (" << a.text.size() << " vs "
                                << b.text.size() << " bytes): " << a.text.substr(0, 200) << " | "
                                << b.text.substr(0, 200);
  EXPECT_EQ(a.stats.events, b.stats.events) << ctx;
  EXPECT_EQ(a.stats.phases, b.stats.phases) << ctx;
  EXPECT_EQ(a.stats.categories, b.stats.categories) << ctx;
  EXPECT_EQ(a.stats.nccl_kernels, b.stats.nccl_kernels) << ctx;
  EXPECT_EQ(a.stats.warnings, b.stats.warnings) << ctx;
  EXPECT_EQ(a.stats.truncated, b.stats.truncated) << ctx;
  EXPECT_EQ(a.stats.raw_bytes, b.stats.raw_bytes) << ctx;
  return a.ok;
}

//! Every phase, string pids, B/E and b/e and flows across any cut, escapes, invalid UTF-8,
//! args holding arrays of objects (so "}, {" also appears inside events), metadata after use.
std::string HandMade(bool minified) {
  const std::vector<std::string> events = {
      R"({"ph":"M","pid":0,"tid":0,"name":"process_name","args":{"name":"rank 0"}})",
      R"({"ph":"B","pid":0,"tid":1,"ts":1,"name":"outer","cat":"cpu_op"})",
      R"({"ph":"X","pid":0,"tid":0,"ts":1.5,"dur":2,"name":"gemm","cat":"kernel","args":{"flops":1e9,"list":[{"a":1}, {"b":[{},{}]}],"s":"}, {"}})",
      R"({"ph":"s","id":7,"pid":0,"tid":0,"ts":2,"name":"launch","cat":"ac2g"})",
      R"({"ph":"X","pid":"Spans","tid":"main thread","ts":3,"dur":1,"name":"esc\"aped\u00e9\ud83d\ude00","cat":"user_annotation"})",
      R"({"ph":"i","pid":0,"tid":0,"ts":4,"name":"mark","s":"t"})",
      R"({"ph":"C","pid":0,"tid":0,"ts":5,"name":"memory","args":{"allocated":1024,"reserved":4096.5}})",
      R"({"ph":"b","pid":0,"tid":0,"ts":5,"id":"0x1","name":"async op","cat":"user"})",
      R"({"ph":"f","bp":"e","id":7,"pid":1,"tid":7,"ts":6,"name":"launch","cat":"ac2g"})",
      R"({"ph":"X","pid":0,"tid":0,"ts":6,"dur":3,"name":"qkv","cat":"compute","args":{"step":0,"rank":0,"mb":1,"stage":0,"layer":2,"op":"qkv","phase":"fwd","flops":3e+12}})",
      R"({"ph":"f","id":9,"pid":1,"tid":7,"ts":6.5,"name":"recv","cat":"pp"})",
      R"({"ph":"s","id":9,"pid":0,"tid":2,"ts":6.2,"name":"send","cat":"pp"})",
      R"({"ph":"E","pid":0,"tid":1,"ts":7})",
      R"({"ph":"e","pid":0,"tid":0,"ts":8,"id":"0x1","name":"async op","cat":"user"})",
      R"({"ph":"E","pid":0,"tid":3,"ts":8})",
      R"j({"ph":"X","pid":1,"tid":7,"ts":5,"dur":4,"name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)","cat":"kernel","args":{"In msg nelems":1024,"Out msg nelems":1024,"dtype":"Float","Group size":8}})j",
      R"({"ph":"X","pid":0,"tid":0,"ts":9,"dur":0.001,"name":"BADBYTE","cat":"kernel"})",
      R"({"ph":"n","pid":0,"tid":0,"ts":9,"name":"ignored"})",
      R"({"ph":"X","pid":0,"tid":0,"ts":10,"dur":1,"name":"tail","cat":"kernel","args":{}})",
      R"({"ph":"M","pid":1,"tid":7,"name":"thread_name","args":{"name":"stream 7"}})",
  };
  std::string out = minified ? R"({"traceEvents":[)" : "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n";
  for (int rep = 0; rep < 3; ++rep) {
    for (size_t i = 0; i < events.size(); ++i) {
      if (rep > 0 || i > 0) out += minified ? ", " : ",\n";
      out += minified ? events[i] : "  " + events[i];
    }
  }
  out += minified ? R"(],"displayTimeUnit":"ns","otherData":{"trace_kind":"measured"}})"
                  : "\n  ],\n  \"displayTimeUnit\": \"ns\"\n}\n";
  for (size_t at; (at = out.find("BADBYTE")) != std::string::npos;) out.replace(at, 7, "bad\xff utf8");
  return out;
}

TEST(ParallelReader, KinetoTracesAsSequential) {
  for (const char* f : {"nccl_parser_config__nccl_data.json.gz", "trace_diff__control__control.json.gz",
                        "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}) {
    const std::string json = Gunzip(std::string(PARALLAX_TEST_DATA_DIR "/traces/kineto/") + f);
    ASSERT_GT(json.size(), 1000U) << f;
    for (size_t chunk : {size_t{4096}, size_t{1} << 20}) {
      EXPECT_TRUE(ExpectSame(json, false, 2, chunk, f)) << f;
    }
    EXPECT_TRUE(ExpectSame(json, false, 3, 100000, f)) << f;
  }
}

TEST(ParallelReader, HandMadeEveryChunkSize) {
  for (bool minified : {false, true}) {
    const std::string json = HandMade(minified);
    ASSERT_TRUE(ExpectSame(json, false, 2, 64, "hand-made"));
    for (size_t chunk = 1; chunk < json.size(); chunk += chunk < 40 ? 1 : 37) {
      ExpectSame(json, false, 2, chunk, minified ? "minified" : "one event per line");
      ExpectSame(json, false, 3, chunk, minified ? "minified" : "one event per line");
    }
  }
}

TEST(ParallelReader, ArrayFormatAndTrailingComma) {
  const std::string base = R"([{"ph":"X","pid":0,"tid":0,"ts":1,"dur":1,"name":"a"},
{"ph":"X","pid":0,"tid":0,"ts":2,"dur":1,"name":"b"},
{"ph":"X","pid":0,"tid":0,"ts":3,"dur":1,"name":"c"})";
  for (const std::string& json : {base + "]", base + ",\n]", base + ",\n", base, base + "]  x"}) {
    for (size_t chunk : {1, 5, 20, 60}) ExpectSame(json, false, 2, chunk, json.substr(json.size() - 4));
  }
}

TEST(ParallelReader, CutsAndCorruptionsAsSequential) {
  const std::string json = HandMade(false);
  int failed = 0, loaded = 0;
  for (size_t cut = 0; cut < json.size(); cut += 3) {
    for (bool lenient : {false, true}) {
      (ExpectSame(json.substr(0, cut), lenient, 2, 97, "cut at " + std::to_string(cut)) ? loaded : failed)++;
    }
  }
  // Deterministic corruptions: one byte replaced by a structural character.
  const char repl[] = {'{', '}', ',', '"', ']', '[', ':', '\\', 'x', '\n', '1'};
  uint64_t rng = 12345;
  for (int i = 0; i < 600; ++i) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    std::string bad = json;
    bad[(rng >> 33) % bad.size()] = repl[(rng >> 20) % sizeof repl];
    (ExpectSame(bad, i % 2 == 1, 2, 1 + (rng >> 40) % 200, "corruption " + std::to_string(i)) ? loaded : failed)++;
  }
  EXPECT_GT(failed, 100);  // the errors were compared, not only successes
  EXPECT_GT(loaded, 100);
}

TEST(ParallelReader, ErrorNamesEventAndByte) {
  std::string json = HandMade(false);
  const size_t at = json.find("\"ts\":6.5");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 8, "\"ts\":\"x\"");
  const Outcome r = Read(json, false, 2, 50);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.text.rfind("t.json: event 10 (JSON byte ", 0), 0U) << r.text;
  EXPECT_NE(r.text.find("ts must be a number"), std::string::npos) << r.text;
}

TEST(ParallelReader, ProgressAndCancel) {
  const std::string json = Gunzip(PARALLAX_TEST_DATA_DIR "/traces/kineto/nccl_parser_config__nccl_data.json.gz");
  ReadOptions o;
  o.origin = "k.json";
  o.threads = 2;
  o.parallel_min_bytes = 0;
  o.chunk_bytes = 100000;
  int64_t last = -1, calls = 0;
  o.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, static_cast<int64_t>(json.size()));
    EXPECT_GE(done, last);
    last = done;
    return ++calls < 5;
  };
  auto t = ReadChromeTraceFromMemory(json, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "k.json: cancelled");
  EXPECT_EQ(calls, 5);
}

}  // namespace
}  // namespace parallax::traces

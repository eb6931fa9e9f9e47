// Chrome Trace Event JSON write + read: round trips (plain and gzip), the format's details as
// Perfetto expects them, every phase the reader accepts, and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/json_io.h"
#include "tests/traces/identity_util.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/json_scanner.h"
#include "traces/tracer.h"

namespace parallax::traces {
namespace {

namespace fs = std::filesystem;

fs::path TempDir() {
  fs::path d = fs::temp_directory_path() / ("parallax_traces_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Rank 1, stage 2: identities whose every field differs from the defaults.
OpIdentity Id(int64_t step, int64_t mb, int64_t layer, OpKind op, Phase phase) {
  return testing::Id(step, 1, mb, layer, op, phase, 2);
}

Trace SampleTrace() {
  Tracer tr("predicted");
  tr.metadata().tool_version = "parallax test";
  tr.metadata().plan = Json{{"dp", 2}, {"tp", 4}};
  const TrackId c = tr.Track(1, Stream::kCompute);
  const TrackId tp = tr.Track(1, Stream::kTpComm);
  const TrackId host = tr.Track(1, Stream::kHost);
  tr.Record(c, tr.Intern("layer 3"), 1'000'001, 9'999);
  tr.Record(c, tr.OpName(OpKind::kQkv), 1'000'001, 1'234, Id(7, 3, 3, OpKind::kQkv, Phase::kFwd),
            SliceArgs::Compute(3.25e12));
  tr.Record(tp, tr.OpName(OpKind::kTpAllReduce), 1'001'235, 777, Id(7, 3, 3, OpKind::kTpAllReduce, Phase::kFwd),
            SliceArgs::Comm(12'582'912, 4, tr.Intern("allreduce")));
  tr.Record(host, tr.Intern("quote \" back\\slash\nnewline \x01 ü"), 5, 0);
  tr.Flow(c, 1'001'000, tp, 1'001'300, tr.Intern("launch"));
  tr.Counter(c, tr.Intern("memory"), tr.Intern("allocated_bytes"), 1'000'000, 1.5e9);
  return tr.Take();
}

void ExpectSameTrace(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.slices().size(), b.slices().size());
  ASSERT_EQ(a.tracks().size(), b.tracks().size());
  // Match slices by (pid, tid, start, dur, name): the writer orders them per track.
  auto key = [](const Trace& t, const Slice& s) {
    const Track& tr = t.track(s.track);
    return std::make_tuple(tr.pid, tr.tid, s.start_ns, s.dur_ns, std::string(t.Str(s.name)));
  };
  std::map<decltype(key(a, a.slice(0))), const Slice*> in_b;
  b.slices().ForEach([&](const Slice& s) { in_b[key(b, s)] = &s; });
  a.slices().ForEach([&](const Slice& s) {
    auto it = in_b.find(key(a, s));
    ASSERT_NE(it, in_b.end()) << std::get<4>(key(a, s));
    const Slice& o = *it->second;
    EXPECT_EQ(a.identity(s), b.identity(o));
    EXPECT_EQ(a.Str(s.category), b.Str(o.category));
    EXPECT_EQ(s.flags & ~slice_flags::kInstant, o.flags & ~slice_flags::kInstant);
    const SliceArgs* x = a.args(s);
    const SliceArgs* y = b.args(o);
    ASSERT_EQ(x == nullptr, y == nullptr);
    if (x != nullptr) {
      EXPECT_EQ(x->flops, y->flops);
      EXPECT_EQ(x->bytes, y->bytes);
      EXPECT_EQ(x->group_size, y->group_size);
      EXPECT_EQ(a.Str(x->collective), b.Str(y->collective));
    }
  });
  for (size_t i = 0; i < a.tracks().size(); ++i) {
    const Track& x = a.tracks()[i];
    auto id = b.FindTrack(x.pid, x.tid);
    ASSERT_TRUE(id.has_value());
    const Track& y = b.track(*id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.process_name, y.process_name);
    EXPECT_EQ(x.stream, y.stream);
    EXPECT_EQ(x.rank, y.rank);
  }
  ASSERT_EQ(a.flows().size(), b.flows().size());
  ASSERT_EQ(a.counters().size(), b.counters().size());
  for (size_t i = 0; i < a.flows().size(); ++i) {
    EXPECT_EQ(a.flows()[i].from_ns, b.flows()[i].from_ns);
    EXPECT_EQ(a.flows()[i].to_ns, b.flows()[i].to_ns);
  }
  for (size_t i = 0; i < a.counters().size(); ++i) {
    EXPECT_EQ(a.counters()[i].ts_ns, b.counters()[i].ts_ns);
    EXPECT_EQ(a.counters()[i].value, b.counters()[i].value);
    EXPECT_EQ(a.Str(a.counters()[i].series), b.Str(b.counters()[i].series));
  }
  EXPECT_EQ(a.metadata.kind, b.metadata.kind);
  EXPECT_EQ(a.metadata.plan, b.metadata.plan);
}

TEST(ChromeWriter, WritesValidChromeJsonWithMetadataFlowsAndCounters) {
  const Trace t = SampleTrace();
  std::string text;
  auto sink = StringSink(&text);
  ASSERT_TRUE(WriteChromeTrace(t, *sink).ok());
  const Json j = Json::parse(text);  // valid JSON (nlohmann is strict)
  EXPECT_EQ(j["kind"], "trace");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["otherData"]["trace_kind"], "predicted");
  EXPECT_EQ(j["otherData"]["plan"]["tp"], 4);
  std::map<std::string, int> phases;
  bool saw_thread_name = false, saw_flow_end = false, saw_identity = false;
  for (const Json& e : j["traceEvents"]) {
    ++phases[e["ph"].get<std::string>()];
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 1) {
      EXPECT_EQ(e["args"]["name"], "tp-comm");
      EXPECT_EQ(e["pid"], 1);
      saw_thread_name = true;
    }
    if (e["ph"] == "f") {
      EXPECT_EQ(e["bp"], "e");
      saw_flow_end = true;
    }
    if (e["ph"] == "X" && e["name"] == "qkv") {
      EXPECT_EQ(e["ts"].get<double>(), 1000.001);
      EXPECT_EQ(e["dur"].get<double>(), 1.234);
      EXPECT_EQ(e["args"], (Json{{"step", 7}, {"rank", 1}, {"mb", 3}, {"stage", 2}, {"layer", 3},
                                 {"op", "qkv"}, {"phase", "fwd"}, {"flops", 3.25e12}}));
      saw_identity = true;
    }
  }
  EXPECT_TRUE(saw_thread_name && saw_flow_end && saw_identity);
  EXPECT_EQ(phases["X"], 4);  // a zero-length slice is still an X event
  EXPECT_EQ(phases["s"], 1);
  EXPECT_EQ(phases["C"], 1);
  // Parent before child on the same track: "layer 3" precedes "qkv" (same start, longer).
  EXPECT_LT(text.find("\"layer 3\""), text.find("\"qkv\""));
}

TEST(ChromeRoundTrip, PlainAndGzipFilesReadBackIdentically) {
  const Trace t = SampleTrace();
  for (const char* name : {"sample.json", "sample.json.gz"}) {
    const fs::path p = TempDir() / name;
    ASSERT_TRUE(WriteChromeTrace(t, p.string()).ok());
    const std::string bytes = Slurp(p);
    const bool gz = bytes.size() > 2 && static_cast<unsigned char>(bytes[0]) == 0x1f;
    EXPECT_EQ(gz, std::string(name).ends_with(".gz"));
    ReadStats st;
    auto back = ReadChromeTrace(p.string(), {}, &st);
    ASSERT_TRUE(back.ok()) << back.error().message;
    ExpectSameTrace(t, *back);
    EXPECT_TRUE(st.warnings.empty()) << st.warnings[0];
    // Written again, the bytes are identical (stable order and formatting).
    const fs::path p2 = TempDir() / (std::string("again_") + name);
    ASSERT_TRUE(WriteChromeTrace(*back, p2.string()).ok());
    auto again = ReadChromeTrace(p2.string());
    ASSERT_TRUE(again.ok());
    ExpectSameTrace(*back, *again);
  }
}

TEST(ChromeRoundTrip, AtomicWriteLeavesNoTempFileAndReplacesTarget) {
  const fs::path dir = TempDir() / "atomic";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path p = dir / "t.json";
  {
    std::ofstream(p) << "old";
  }
  ASSERT_TRUE(WriteChromeTrace(SampleTrace(), p.string()).ok());
  EXPECT_NE(Slurp(p), "old");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(WriteChromeTrace(SampleTrace(), (dir / "missing_dir" / "t.json").string()).ok());
}

TEST(ChromeRoundTrip, LargeTraceStreamsThroughSmallBuffers) {
  Tracer tr;
  const TrackId c = tr.Track(0, Stream::kCompute);
  for (int64_t i = 0; i < 60000; ++i) {
    tr.Record(c, tr.OpName(OpKind::kFc1), i * 1000 + 7, 999, Id(i / 1000, i % 8, i % 96, OpKind::kFc1, Phase::kBwd));
  }
  std::string text;
  auto sink = GzipSink(StringSink(&text), 1);
  ASSERT_TRUE(WriteChromeTrace(tr.trace(), *sink).ok());
  auto back = ReadChromeTraceFromMemory(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->slices().size(), 60000u);
  EXPECT_EQ(back->identity(back->slice(59999)), Id(59, 7, 59999 % 96, OpKind::kFc1, Phase::kBwd));
  EXPECT_EQ(back->slice(59999).start_ns, 59999 * 1000 + 7);
}

Result<Trace> Read(const std::string& json, ReadStats* st = nullptr, bool lenient = false) {
  ReadOptions o;
  o.lenient = lenient;
  o.origin = "in.json";
  return ReadChromeTraceFromMemory(json, o, st);
}

TEST(ChromeReader, AllSupportedPhases) {
  const std::string json = R"({"traceEvents":[
    {"ph":"M","name":"process_name","pid":"Spans","tid":0,"args":{"name":"spans"}},
    {"ph":"M","name":"thread_name","pid":1,"tid":"main","args":{"name":"main thread"}},
    {"ph":"B","name":"outer","pid":1,"tid":"main","ts":1.5,"cat":"cpu_op"},
    {"ph":"B","name":"inner","pid":1,"tid":"main","ts":2,"args":{"op":"fc1","phase":"bwd","step":3,"mb":1}},
    {"ph":"E","pid":1,"tid":"main","ts":3},
    {"ph":"E","pid":1,"tid":"main","ts":4.0005},
    {"ph":"i","name":"mark","pid":"Spans","tid":"x","ts":5,"s":"g"},
    {"ph":"I","name":"mark2","pid":1,"tid":"main","ts":5},
    {"ph":"C","name":"mem","pid":1,"ts":6,"args":{"a":1,"b":2.5,"c":"skip"}},
    {"ph":"b","name":"req","cat":"net","id":"0x1","pid":1,"ts":7},
    {"ph":"e","name":"req","cat":"net","id":"0x1","pid":1,"ts":9},
    {"ph":"s","id":5,"cat":"f","name":"flow","pid":1,"tid":"main","ts":2},
    {"ph":"t","id":5,"cat":"f","name":"flow","pid":1,"tid":"main","ts":2.5},
    {"ph":"f","id":5,"cat":"f","name":"flow","pid":1,"tid":"main","ts":3,"bp":"e"},
    {"ph":"X","name":"k","pid":2,"tid":7,"ts":1e1,"dur":2.5E-1,"cat":"kernel","tts":3,"extra":{"a":[1,{"b":null}]}},
    {"ph":"P","name":"sample","pid":1,"tid":1,"ts":1}
  ],"displayTimeUnit":"ns"})";
  ReadStats st;
  auto t = Read(json, &st);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(st.events, 16);
  EXPECT_EQ(st.phases["B"], 2);
  EXPECT_EQ(st.phases["P"], 1);
  std::map<std::string, const Slice*> by_name;
  t->slices().ForEach([&](const Slice& s) { by_name[std::string(t->Str(s.name))] = &s; });
  ASSERT_EQ(by_name.size(), 6u);  // outer, inner, mark, mark2, req, k
  EXPECT_EQ(by_name["outer"]->start_ns, 1500);
  EXPECT_EQ(by_name["outer"]->dur_ns, 2501);  // 4.0005 µs rounds half up to 4001 ns
  EXPECT_EQ(by_name["inner"]->dur_ns, 1000);
  auto id = t->identity(*by_name["inner"]);
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->op, OpKind::kFc1);
  EXPECT_EQ(id->phase, Phase::kBwd);
  EXPECT_EQ(id->step, 3);
  EXPECT_EQ(id->microbatch, 1);
  EXPECT_EQ(id->layer, -1);
  EXPECT_TRUE(by_name["mark"]->has(slice_flags::kInstant));
  EXPECT_TRUE(by_name["req"]->has(slice_flags::kAsync));
  EXPECT_EQ(by_name["req"]->dur_ns, 2000);
  EXPECT_EQ(by_name["k"]->start_ns, 10000);
  EXPECT_EQ(by_name["k"]->dur_ns, 250);
  EXPECT_TRUE(by_name["k"]->has(slice_flags::kCompute));
  EXPECT_EQ(t->counters().size(), 2u);
  ASSERT_EQ(t->flows().size(), 1u);
  EXPECT_EQ(t->flows()[0].from_ns, 2000);
  EXPECT_EQ(t->flows()[0].to_ns, 3000);
  const Track& main = t->track(by_name["inner"]->track);
  EXPECT_EQ(main.name, "main thread");
  EXPECT_LT(main.tid, 0);  // string tid -> synthetic negative id
  EXPECT_EQ(t->track(by_name["mark"]->track).process_name, "spans");
  EXPECT_TRUE(st.warnings.empty()) << st.warnings[0];
}

TEST(ChromeReader, ArrayFormatWithAndWithoutClosingBracket) {
  const std::string ev = R"({"ph":"X","name":"a","pid":0,"tid":0,"ts":1,"dur":1})";
  const std::string two = "[" + ev + "," + ev;
  for (const std::string& json : std::vector<std::string>{two + "]", two + ",]", two + ",\n", two, "[]", "  [ ]  "}) {
    auto t = Read(json);
    ASSERT_TRUE(t.ok()) << json << ": " << t.error().message;
    EXPECT_EQ(t->slices().size(), json.find("dur") == std::string::npos ? 0u : 2u) << json;
  }
}

TEST(ChromeReader, TimestampsAreExactNanoseconds) {
  int64_t ns = 0;
  EXPECT_TRUE(ParseMicrosToNs("1661203462598738", &ns));
  EXPECT_EQ(ns, 1661203462598738000);
  EXPECT_TRUE(ParseMicrosToNs("4458676522690.655", &ns));
  EXPECT_EQ(ns, 4458676522690655);
  // 19 significant digits (HTA's ns_resolution_trace): the last is a nanosecond, not rounded to
  // ten.
  EXPECT_TRUE(ParseMicrosToNs("1712195495519689.047", &ns));
  EXPECT_EQ(ns, 1712195495519689047);
  EXPECT_TRUE(ParseMicrosToNs("0.0004", &ns));
  EXPECT_EQ(ns, 0);
  EXPECT_TRUE(ParseMicrosToNs("0.0005", &ns));
  EXPECT_EQ(ns, 1);
  EXPECT_TRUE(ParseMicrosToNs("-2.5", &ns));
  EXPECT_EQ(ns, -2500);
  EXPECT_TRUE(ParseMicrosToNs("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  EXPECT_TRUE(ParseMicrosToNs("25E-3", &ns));
  EXPECT_EQ(ns, 25);
  EXPECT_TRUE(ParseMicrosToNs("0.00007", &ns));
  EXPECT_EQ(ns, 0);
  EXPECT_FALSE(ParseMicrosToNs("1e30", &ns));
  EXPECT_FALSE(ParseMicrosToNs("", &ns));
}

// The scanner keeps a number's digits (RawValue::mantissa) so they are not read twice; the
// conversions of a scanned value must equal those of its text, with the number ending before
// the window's end (the unchecked scan) or at it (the checked one).
TEST(ChromeReader, ScannedNumbersConvertAsTheirText) {
  std::vector<std::string> numbers = {"0", "-0", "7", "-7", "0.5", "-0.0005", "12.345", "12.3456", "1.0", "10",
                                      "123456789012345678", "-123456789012345678", "1234567890123456789",
                                      "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                                      "9007199254740992", "9007199254740993", "9223372036854.775", "9223372036854775.807",
                                      "1e3", "1.5E-3", "-2e+2", "0.000000000000000001", "24862882.42", "231928233984"};
  for (int digits = 1; digits <= 20; ++digits) {
    std::string n;
    for (int i = 0; i < digits; ++i) n += static_cast<char>('1' + (i * 7) % 9);
    numbers.push_back(n);
    if (digits > 1) numbers.push_back(n.substr(0, n.size() / 2) + "." + n.substr(n.size() / 2));
  }
  for (const std::string& text : numbers) {
    for (const std::string& after : {std::string("]"), std::string()}) {
      const std::string window = text + after;
      JsonScanner s;
      s.SetWindow(window.data(), window.data() + window.size());
      s.SetFinal(true);
      const RawValue v = s.Value(0);
      ASSERT_EQ(v.type, ValueType::kNumber) << text;
      ASSERT_EQ(v.text, text);
      int64_t a = 0, b = 0;
      EXPECT_EQ(ParseInt64(v, &a), ParseInt64(text, &b)) << text;
      EXPECT_EQ(a, b) << text;
      a = b = 0;
      EXPECT_EQ(ParseMicrosToNs(v, &a), ParseMicrosToNs(text, &b)) << text;
      EXPECT_EQ(a, b) << text;
      double x = 0, y = 0;
      EXPECT_EQ(ParseDouble(v, &x), ParseDouble(text, &y)) << text;
      EXPECT_EQ(std::signbit(x), std::signbit(y)) << text;
      EXPECT_EQ(x, y) << text;
    }
  }
}

void ExpectBadInput(const std::string& json, const std::string& needle, bool lenient = false) {
  auto t = Read(json, nullptr, lenient);
  ASSERT_FALSE(t.ok()) << json;
  EXPECT_EQ(t.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(t.error().message.find(needle), std::string::npos) << t.error().message;
  EXPECT_EQ(t.error().message.rfind("in.json: ", 0), 0u) << t.error().message;
}

TEST(ChromeReader, BadInputNamesEventAndByteOffset) {
  const std::string ok = R"({"ph":"X","name":"a","pid":0,"tid":0,"ts":1,"dur":1})";
  ExpectBadInput("[" + ok + R"(,{"ph":"Q","ts":1}])", "event 1 (JSON byte 54): unknown phase 'Q'");
  ExpectBadInput("[" + ok + R"(,{"ph":"X","ts":1,"dur":-3}])", "event 1 (JSON byte 54): negative duration");
  ExpectBadInput("[" + ok + R"(,{"ph":"X","dur":3}])", "event 1 (JSON byte 54): missing ts");
  ExpectBadInput(R"([{"ph":"X","ts":"12","dur":3}])", "event 0 (JSON byte 1): ts must be a number");
  ExpectBadInput(R"({"traceEvents":[{"ph":"X","ts":1,"dur":3,}]})", "invalid JSON");
  ExpectBadInput(R"({"traceEvents":[{"ph":"X","ts":01}]})", "invalid JSON");
  ExpectBadInput(R"({"traceEvents":[]} x)", "unexpected data after the trace");
  ExpectBadInput(R"({"kind":"model","traceEvents":[]})", "not a trace file");
  ExpectBadInput(R"({"version":99,"traceEvents":[]})", "unsupported trace version");
  ExpectBadInput(R"({"otherData":{}})", "no traceEvents");
  ExpectBadInput(R"({"traceEvents":{"ph":"X"}})", "(JSON byte 15): /traceEvents: must be an array of events, found an object");
  ExpectBadInput(R"({"traceEvents":null})", "/traceEvents: must be an array of events, found null");
  ExpectBadInput("", "truncated JSON");
  ExpectBadInput("garbage", "expected '{' or '['");
  ExpectBadInput(R"([{"ph":"X","args":{"a":)" + std::string(300, '[') + std::string(300, ']') + "}}]",
                 "nesting deeper");
  ExpectBadInput(R"({"traceEvents":[{"ph":"X","name":"a\q","ts":1,"dur":1}]})", "invalid escape");
}

TEST(ChromeReader, TruncatedFileFailsUnlessLenient) {
  std::string full;
  auto sink = StringSink(&full);
  ASSERT_TRUE(WriteChromeTrace(SampleTrace(), *sink).ok());
  const std::string cut = full.substr(0, full.find("\"tp_allreduce\"") + 5);  // inside an event
  ExpectBadInput(cut, "truncated JSON: input ends inside event");
  ReadStats st;
  auto t = Read(cut, &st, /*lenient=*/true);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_TRUE(st.truncated);
  ASSERT_FALSE(st.warnings.empty());
  EXPECT_NE(st.warnings[0].find("complete events"), std::string::npos);
  // Every complete slice before the cut was kept: M events plus the slices written before it.
  EXPECT_GE(t->slices().size(), 2u);
  EXPECT_LT(t->slices().size(), 4u);
}

TEST(ChromeReader, TruncatedGzipIsAnErrorWithOffsetAndLenientLoadsThePrefix) {
  Tracer tr;
  const TrackId c = tr.Track(0, Stream::kCompute);
  for (int64_t i = 0; i < 20000; ++i) tr.Record(c, tr.Intern("op"), i * 10, 5);
  std::string gz;
  auto sink = GzipSink(StringSink(&gz), 6);
  ASSERT_TRUE(WriteChromeTrace(tr.trace(), *sink).ok());
  const std::string cut = gz.substr(0, gz.size() / 2);
  auto t = Read(cut);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(t.error().message.find("truncated gzip at compressed byte"), std::string::npos) << t.error().message;
  ReadStats st;
  auto lenient = Read(cut, &st, true);
  ASSERT_TRUE(lenient.ok()) << lenient.error().message;
  EXPECT_TRUE(st.truncated);
  EXPECT_GT(lenient->slices().size(), 1000u);
  EXPECT_LT(lenient->slices().size(), 20000u);
  // Corrupt (not truncated) gzip: an error in strict mode.
  std::string bad = gz;
  for (size_t i = 100; i < 200; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  auto corrupt = Read(bad);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.error().message.find("gzip"), std::string::npos) << corrupt.error().message;
}

TEST(ChromeReader, InvalidUtf8IsReplacedSoOutputStaysStrictJson) {
  const std::string json = "[{\"ph\":\"X\",\"name\":\"bad\xff\xfe name \xc3\xa9\",\"pid\":0,\"tid\":0,\"ts\":1,"
                           "\"dur\":1,\"cat\":\"\\ud800x\"}]";
  auto t = Read(json);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->slices().size(), 1u);
  EXPECT_EQ(t->Str(t->slice(0).name), "bad\xEF\xBF\xBD\xEF\xBF\xBD name \xC3\xA9");  // é is kept
  EXPECT_EQ(t->Str(t->slice(0).category), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx");  // lone surrogate
  std::string out;
  auto sink = StringSink(&out);
  ASSERT_TRUE(WriteChromeTrace(*t, *sink).ok());
  EXPECT_TRUE(Json::accept(out));
  // A producer's invalid name is sanitized on output too.
  Tracer tr;
  tr.Record(tr.Track(0, Stream::kCompute), tr.Intern("x\x80y"), 0, 1);
  out.clear();
  auto sink2 = StringSink(&out);
  ASSERT_TRUE(WriteChromeTrace(tr.trace(), *sink2).ok());
  EXPECT_TRUE(Json::accept(out));
}

TEST(ChromeReader, MissingFileIsBadInput) {
  auto t = ReadChromeTrace("/nonexistent/trace.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(t.error().message.find("/nonexistent/trace.json"), std::string::npos);
}

TEST(ChromeReader, UnbalancedBeginEndAndDanglingFlowsAreWarnings) {
  ReadStats st;
  auto t = Read(R"([{"ph":"E","pid":0,"tid":0,"ts":1},{"ph":"B","pid":0,"tid":0,"ts":2,"name":"x"},
                    {"ph":"s","id":1,"pid":0,"tid":0,"ts":2}])", &st);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->slices().size(), 0u);
  EXPECT_EQ(st.warnings.size(), 3u);
}

}  // namespace
}  // namespace parallax::traces

// Trace I/O and recording speed and footprint: the numbers docs/traces.md reports.
//   bench_traces --benchmark_filter=TenMillion   # bytes per slice for 10M slices
//   bench_traces --benchmark_filter=Read         # import MB/s (JSON bytes parsed per second)
//   PARALLAX_BENCH_TRACE=f.json.gz bench_traces --benchmark_filter=OpenTraceFile  # open a file
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/inflate_whole.h"
#include "traces/tracer.h"

namespace parallax::traces {
namespace {

// The real Kineto traces of the tests' data (tests/data/traces/kineto).
const std::filesystem::path kKineto = std::filesystem::path(PARALLAX_TEST_DATA_DIR) / "traces/kineto";

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A simulator-like trace: `ranks` ranks, per micro-batch and layer a compute op with flops and a
// TP all-reduce with bytes, every slice with its op identity.
void RecordTraining(Tracer& tr, int64_t slices, int64_t ranks) {
  std::vector<TrackId> compute, tp;
  for (int64_t r = 0; r < ranks; ++r) {
    compute.push_back(tr.Track(r, Stream::kCompute));
    tp.push_back(tr.Track(r, Stream::kTpComm));
  }
  const OpKind ops[] = {OpKind::kQkv, OpKind::kAttnCore, OpKind::kAttnOut, OpKind::kFc1, OpKind::kAct, OpKind::kFc2};
  OpIdentity id;
  int64_t t = 0;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t rank = i % ranks;
    id.rank = rank;
    id.step = i / 1'000'000;
    id.microbatch = (i / 1000) % 64;
    id.layer = (i / ranks) % 96;
    id.stage = 0;
    if (i % 4 == 3) {
      id.op = OpKind::kTpAllReduce;
      id.phase = Phase::kFwd;
      tr.Record(tp[static_cast<size_t>(rank)], tr.OpName(id.op), t, 800, id, SliceArgs::Comm(16 << 20, 8));
    } else {
      id.op = ops[i % 6];
      id.phase = (i / 7) % 2 == 0 ? Phase::kFwd : Phase::kBwd;
      tr.Record(compute[static_cast<size_t>(rank)], tr.OpName(id.op), t, 1200, id, SliceArgs::Compute(2.5e12));
    }
    if (rank == ranks - 1) t += 2000;
  }
}

void BM_TracerRecord(benchmark::State& state) {
  const int64_t n = state.range(0);
  for (auto _ : state) {
    Tracer tr("predicted");
    tr.Reserve(static_cast<size_t>(n));
    RecordTraining(tr, n, 8);
    benchmark::DoNotOptimize(tr.trace().slices().size());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TracerRecord)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// Footprint of 10 million slices, each with identity and numeric args (the worst case).
void BM_TenMillionSlices(benchmark::State& state) {
  constexpr int64_t kSlices = 10'000'000;
  for (auto _ : state) {
    const int64_t rss0 = RssBytes();
    Tracer tr("predicted");
    RecordTraining(tr, kSlices, 64);
    const int64_t rss1 = RssBytes();
    const auto bytes = static_cast<double>(tr.trace().MemoryBytes());
    state.counters["slices"] = static_cast<double>(tr.trace().slices().size());
    state.counters["bytes_per_slice"] = bytes / kSlices;
    state.counters["total_MB"] = bytes / 1e6;
    state.counters["rss_bytes_per_slice"] = static_cast<double>(rss1 - rss0) / kSlices;
  }
  state.SetItemsProcessed(state.iterations() * kSlices);
}
BENCHMARK(BM_TenMillionSlices)->Iterations(1)->Unit(benchmark::kMillisecond);

std::string WrittenTrace(int64_t slices, bool gzip) {
  Tracer tr("predicted");
  RecordTraining(tr, slices, 8);
  std::string out;
  std::unique_ptr<ByteSink> sink = StringSink(&out);
  if (gzip) sink = GzipSink(std::move(sink), 6);
  if (!WriteChromeTrace(tr.trace(), *sink).ok()) std::abort();
  return out;
}

void BM_WriteChrome(benchmark::State& state) {
  Tracer tr("predicted");
  RecordTraining(tr, state.range(0), 8);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out;
    std::unique_ptr<ByteSink> sink = StringSink(&out);
    if (state.range(1) != 0) sink = GzipSink(std::move(sink), 6);
    if (!WriteChromeTrace(tr.trace(), *sink).ok()) state.SkipWithError("write failed");
    bytes = out.size();
  }
  state.counters["bytes_per_slice_on_disk"] = static_cast<double>(bytes) / static_cast<double>(state.range(0));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  if (state.range(1) == 0) state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_WriteChrome)->Args({1'000'000, 0})->Args({1'000'000, 1})->Unit(benchmark::kMillisecond);

// Import speed of our own format from memory (plain JSON): JSON bytes parsed per second.
void BM_ReadOwnJson(benchmark::State& state) {
  const std::string text = WrittenTrace(state.range(0), false);
  for (auto _ : state) {
    auto t = ReadChromeTraceFromMemory(text);
    if (!t.ok()) state.SkipWithError(t.error().message.c_str());
    benchmark::DoNotOptimize(t.ok());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReadOwnJson)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

std::string Decompressed(const std::filesystem::path& p) {
  auto src = OpenTraceSource(p.string());
  if (!src.ok()) return {};
  std::string out;
  char buf[1 << 16];
  for (;;) {
    auto got = (*src)->Read(buf, sizeof(buf));
    if (!got.ok() || *got == 0) break;
    out.append(buf, *got);
  }
  return out;
}

// Import speed of a real PyTorch profiler trace (35 MB of JSON, 109k events) from memory.
void BM_ReadKinetoJson(benchmark::State& state) {
  const std::string text = Decompressed(kKineto / "trace_diff__control__control.json.gz");
  if (text.empty()) {
    state.SkipWithError("Kineto trace not found");
    return;
  }
  for (auto _ : state) {
    auto t = ReadChromeTraceFromMemory(text);
    if (!t.ok()) state.SkipWithError(t.error().message.c_str());
    benchmark::DoNotOptimize(t.ok());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ReadKinetoJson)->Unit(benchmark::kMillisecond);

// The same trace end to end from its .json.gz file (inflate + parse); MB/s of JSON.
void BM_ReadKinetoGzipFile(benchmark::State& state) {
  const auto path = kKineto / "trace_diff__control__control.json.gz";
  int64_t json_bytes = 0;
  for (auto _ : state) {
    ReadStats st;
    auto t = ReadChromeTrace(path.string(), {}, &st);
    if (!t.ok()) {
      state.SkipWithError(t.error().message.c_str());
      return;
    }
    json_bytes = st.json_bytes;
  }
  state.SetBytesProcessed(state.iterations() * json_bytes);
}
BENCHMARK(BM_ReadKinetoGzipFile)->Unit(benchmark::kMillisecond);

//! CPU seconds of the whole process (every thread, user + system).
double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// Opening a trace file as parallax-gui does (ReadChromeTrace with the default options: mapped and
// scanned on every core when plain, inflated whole then scanned so when gzip). The file is
// $PARALLAX_BENCH_TRACE (bench/bench_gui_open.sh --ours writes the gpt3-175b one). Wall time of
// the read, not of freeing the trace; cpu_s counts every thread, which is what a load costs when
// other jobs hold the cores.
void BM_OpenTraceFile(benchmark::State& state) {
  const char* path = std::getenv("PARALLAX_BENCH_TRACE");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set PARALLAX_BENCH_TRACE to a trace file");
    return;
  }
  ReadOptions options;
  options.threads = static_cast<int>(state.range(0));
  size_t slices = 0;
  ReadStats st;
  std::optional<Trace> open;  // freed outside the timing: the GUI keeps what it opened
  double cpu_s = 0;
  for (auto _ : state) {
    const double cpu0 = ProcessCpuSeconds();
    auto t = ReadChromeTrace(path, options, &st);
    cpu_s += ProcessCpuSeconds() - cpu0;
    if (!t.ok()) {
      state.SkipWithError(t.error().message.c_str());
      return;
    }
    slices = t->slices().size();
    state.PauseTiming();
    open.reset();
    open = std::move(*t);
    state.ResumeTiming();
  }
  cpu_s /= static_cast<double>(state.iterations());
  state.counters["slices"] = static_cast<double>(slices);
  state.counters["slices_per_s"] =
      benchmark::Counter(static_cast<double>(slices), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cpu_s"] = cpu_s;
  state.counters["json_MB"] = static_cast<double>(st.json_bytes) / 1e6;
}
// Inflating $PARALLAX_BENCH_TRACE (a .json.gz) alone: Arg 0 libdeflate into one buffer (what
// the reader does), Arg 1 zlib streamed through a 64 KiB buffer (the fallback). CPU seconds of the
// calling thread; MB/s of JSON.
void BM_InflateTraceFile(benchmark::State& state) {
  const char* path = std::getenv("PARALLAX_BENCH_TRACE");
  std::ifstream in(path != nullptr ? path : "", std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (gz.size() < 2 || static_cast<unsigned char>(gz[0]) != 0x1f) {
    state.SkipWithError("set PARALLAX_BENCH_TRACE to a .json.gz file");
    return;
  }
  size_t json_bytes = 0;
  for (auto _ : state) {
    if (state.range(0) == 0) {
      const auto json = InflateWhole(gz, gz.size() * 1100);
      if (!json) state.SkipWithError("libdeflate failed");
      json_bytes = json ? json->size : 0;
    } else {
      auto src = OpenMemoryTraceSource(gz, "bench");
      std::vector<char> buf(1 << 16);
      json_bytes = 0;
      for (;;) {
        auto got = src->Read(buf.data(), buf.size());
        if (!got.ok() || *got == 0) break;
        json_bytes += *got;
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json_bytes));
}
BENCHMARK(BM_InflateTraceFile)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

// Arg: reader threads (0: one per idle core, as the GUI; 1: the calling thread alone; 2: two
// scanning threads beside it, whatever the load).
BENCHMARK(BM_OpenTraceFile)->Arg(0)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parallax::traces

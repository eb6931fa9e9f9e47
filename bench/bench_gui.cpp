// GUI speed: timeline index build, level-of-detail frames (index walk only, and painted with
// QPainter into a 1920x1080 image) on a 10-million-slice trace, plus the trace generator that
// `parallax-gui --benchmark` is measured on (docs/gui.md "Speed"):
//   bench_gui --write-trace /tmp/parallax_10m.json [--slices N]   # writes the trace, exits
//   bench_gui [--benchmark_filter=...]                            # Google Benchmark runs
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "gui/core/timeline_index.h"
#include "gui/views/timeline_view.h"
#include "traces/chrome_writer.h"
#include "traces/tracer.h"

namespace parallax::gui {

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

namespace {

//! A training-like trace: 8 ranks; on each rank's compute stream a "layer" slice enclosing six
//! ops (qkv .. fc2, with FLOPs) and on its tp-comm stream an all-reduce after the attention and
//! the MLP (with bytes); every op with its identity. Ops last 0.3-2.4 us: at full zoom-out every
//! row is sub-pixel work, at 1 us/px the ops are a few pixels wide.
}  // namespace

traces::Trace MakeTrace(int64_t slices) {
  traces::Tracer tr("measured");
  tr.Reserve(static_cast<size_t>(slices));
  constexpr int64_t kRanks = 8;
  std::vector<traces::TrackId> compute, tp;
  for (int64_t r = 0; r < kRanks; ++r) {
    compute.push_back(tr.Track(r, traces::Stream::kCompute));
    tp.push_back(tr.Track(r, traces::Stream::kTpComm));
  }
  const OpKind ops[] = {OpKind::kQkv, OpKind::kAttnCore, OpKind::kAttnOut,
                        OpKind::kFc1, OpKind::kAct,      OpKind::kFc2};
  const int64_t dur[] = {1200, 900, 600, 2400, 300, 2400};
  const traces::StringId layer_name = tr.Intern("layer");
  // One layer per rank = 1 layer slice + 6 ops + 2 all-reduces = 9 slices.
  const int64_t layers = slices / (9 * kRanks);
  int64_t t = 0;
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t r = 0; r < kRanks; ++r) {
      OpIdentity id;
      id.rank = r;
      id.step = l / 10000;
      id.microbatch = static_cast<int>((l / 96) % 64);
      id.layer = static_cast<int>(l % 96);
      id.stage = 0;
      int64_t s = t + 100 * r;
      const int64_t layer_start = s;
      std::vector<std::pair<int64_t, int64_t>> spans;
      for (int k = 0; k < 6; ++k) {
        spans.emplace_back(s, dur[k]);
        s += dur[k] + (k == 2 || k == 5 ? 700 : 50);
      }
      tr.Record(compute[static_cast<size_t>(r)], layer_name, layer_start, s - layer_start);
      for (int k = 0; k < 6; ++k) {
        id.op = ops[k];
        tr.Record(compute[static_cast<size_t>(r)], tr.OpName(id.op),
                  spans[static_cast<size_t>(k)].first, spans[static_cast<size_t>(k)].second, id,
                  traces::SliceArgs::Compute(2.5e9 * static_cast<double>(dur[k])));
      }
      id.op = OpKind::kTpAllReduce;
      id.phase = Phase::kFwd;
      for (int k : {2, 5}) {
        const int64_t at =
            spans[static_cast<size_t>(k)].first + spans[static_cast<size_t>(k)].second + 10;
        tr.Record(tp[static_cast<size_t>(r)], tr.OpName(id.op), at, 650, id,
                  traces::SliceArgs::Comm(16 << 20, 8));
      }
    }
    t += 10000;
  }
  return tr.Take();
}

namespace {

struct Fixture {
  traces::Trace trace;
  std::unique_ptr<TimelineIndex> index;
};

Fixture& TenMillion() {
  static Fixture f = [] {
    Fixture x{MakeTrace(10'000'000), nullptr};
    x.index = std::make_unique<TimelineIndex>(*TimelineIndex::Build(x.trace));
    return x;
  }();
  return f;
}

void BM_BuildIndex(benchmark::State& state) {
  const Fixture& f = TenMillion();
  size_t bytes = 0;
  for (auto _ : state) {
    auto ix = TimelineIndex::Build(f.trace);
    bytes = ix->MemoryBytes();
    benchmark::DoNotOptimize(ix);
  }
  const double n = static_cast<double>(f.trace.slices().size());
  state.counters["slices"] = n;
  state.counters["slices_per_s"] =
      benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["index_bytes_per_slice"] = static_cast<double>(bytes) / n;
  state.counters["trace_bytes_per_slice"] = static_cast<double>(f.trace.MemoryBytes()) / n;
}
BENCHMARK(BM_BuildIndex)->Unit(benchmark::kMillisecond)->Iterations(3);

//! The index walk alone for every row of a 1920-px frame at ns_per_px = state.range(0) (0: fit
//! all).
void BM_VisitFrame(benchmark::State& state) {
  const Fixture& f = TenMillion();
  const double span = static_cast<double>(f.index->last_ns() - f.index->first_ns());
  const double npp = state.range(0) == 0 ? span / 1920 : static_cast<double>(state.range(0));
  int64_t boxes = 0, frame = 0;
  for (auto _ : state) {
    const auto t0 = f.index->first_ns() + static_cast<int64_t>((frame++ % 37) * span / 40);
    const int64_t t1 = t0 + static_cast<int64_t>(npp * 1920);
    boxes = 0;
    for (size_t r = 0; r < f.index->rows().size(); ++r) {
      f.index->Visit(f.trace, r, t0, t1, npp, [&](const DrawBox&) { ++boxes; });
    }
  }
  state.counters["boxes_per_frame"] = static_cast<double>(boxes);
}
BENCHMARK(BM_VisitFrame)->Arg(0)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

//! A painted 1920x1080 frame (what the widget and --benchmark do).
void BM_PaintFrame(benchmark::State& state) {
  const Fixture& f = TenMillion();
  TimelineView view;
  view.resize(1920, 1080);
  view.SetTrace(&f.trace, f.index.get());
  const double span = static_cast<double>(f.index->last_ns() - f.index->first_ns());
  QImage img(1920, 1080, QImage::Format_ARGB32_Premultiplied);
  int64_t frame = 0;
  for (auto _ : state) {
    if (state.range(0) > 0) {
      view.axis() = TimeAxis(
          static_cast<double>(f.index->first_ns()) + static_cast<double>(frame++ % 37) * span / 40,
          static_cast<double>(state.range(0)));
    }
    QPainter p(&img);
    view.Paint(p, img.size());
  }
}
BENCHMARK(BM_PaintFrame)->Arg(0)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace parallax::gui

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--write-trace") == 0 && i + 1 < argc) {
      int64_t slices = 10'000'000;
      for (int j = 1; j + 1 < argc; ++j) {
        if (std::strcmp(argv[j], "--slices") == 0) slices = std::atoll(argv[j + 1]);
      }
      const int64_t rss0 = parallax::gui::RssBytes();
      auto t = parallax::gui::MakeTrace(slices);
      std::fprintf(stderr, "%zu slices, %.1f bytes per slice in memory\n", t.slices().size(),
                   static_cast<double>(parallax::gui::RssBytes() - rss0) /
                       static_cast<double>(t.slices().size()));
      if (auto st = parallax::traces::WriteChromeTrace(t, argv[i + 1]); !st) {
        std::fprintf(stderr, "bench_gui: %s\n", st.error().message.c_str());
        return 1;
      }
      std::printf("wrote %s\n", argv[i + 1]);
      return 0;
    }
  }
  if (!qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

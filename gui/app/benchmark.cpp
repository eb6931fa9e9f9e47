#include "gui/app/benchmark.h"

#include <unistd.h>

#include <QImage>
#include <QPainter>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "gui/core/document.h"
#include "gui/views/timeline_view.h"
#include "traces/stats.h"

namespace parallax::gui {
namespace {

int64_t ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Result<std::string> RunBenchmark(const std::string& path, int threads) {
  const int64_t rss0 = ResidentBytes();
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  auto doc = LoadDocument(path, nullptr, threads);
  if (!doc) return doc.error();
  const auto t1 = std::chrono::steady_clock::now();
  // CPU time beside wall time: on a shared machine the wall clock also counts other jobs.
  const double load_cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const int64_t rss1 = ResidentBytes();
  if (!doc->trace) return BadInput(path + ": not a trace (the benchmark renders timelines)");
  const size_t slices = doc->trace->slices().size();

  TimelineView view;
  view.resize(1920, 1080);
  view.SetTrace(doc->trace.get(), doc->index.get());
  QImage img(1920, 1080, QImage::Format_ARGB32_Premultiplied);
  auto frame = [&] {
    const auto a = std::chrono::steady_clock::now();
    QPainter p(&img);
    view.Paint(p, img.size());
    p.end();
    return Ms(a, std::chrono::steady_clock::now());
  };
  const double first = frame();  // first paint after the load
  std::vector<double> ms;
  ms.reserve(20 + 40 + 30);
  for (int i = 0; i < 20; ++i) ms.push_back(frame());  // full zoom-out
  const int64_t span = doc->index->last_ns() - doc->index->first_ns();
  for (int i = 0; i < 40; ++i) {  // 1 us per pixel at 40 places across the trace
    view.axis() = TimeAxis(static_cast<double>(doc->index->first_ns()) + static_cast<double>(span) / 40 * i, 1000.0);
    ms.push_back(frame());
  }
  for (double npp : {1e4, 1e5, 1e6}) {  // and the zooms between
    for (int i = 0; i < 10; ++i) {
      view.axis() = TimeAxis(static_cast<double>(doc->index->first_ns()) + static_cast<double>(span) / 10 * i, npp);
      ms.push_back(frame());
    }
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) {
    return ms[std::min(ms.size() - 1,
                       static_cast<size_t>(q / 100.0 * static_cast<double>(ms.size())))];
  };
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "{\"slices\": %zu, \"load_s\": %.3f, \"load_cpu_s\": %.3f, \"threads\": %d, "
      "\"first_frame_ms\": %.2f, \"frame_ms_p50\": %.2f, \"frame_ms_p99\": %.2f, "
      "\"bytes_per_slice\": %.1f}",
      slices, std::chrono::duration<double>(t1 - t0).count(), load_cpu_s,
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
      first, pct(50), pct(99),
      slices ? static_cast<double>(rss1 - rss0) / static_cast<double>(slices) : 0.0);
  return std::string(buf);
}

}  // namespace parallax::gui

#include "gui/core/document.h"

#include <cstdio>
#include <fstream>
#include <regex>

#include "model/json_io.h"
#include "planner/sim/simulator.h"
#include "traces/byte_stream.h"
#include "traces/chrome_reader.h"
#include "traces/kineto.h"

namespace parallax::gui {
namespace {

int64_t FileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  return f ? static_cast<int64_t>(f.tellg()) : -1;
}

}  // namespace

const char* ToString(DocumentKind k) {
  switch (k) {
    case DocumentKind::kTrace:
      return "trace";
    case DocumentKind::kPlan:
      return "plan";
    case DocumentKind::kCandidates:
      return "candidates";
  }
  return "?";
}

Result<DocumentKind> SniffKind(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return BadInput(path + ": cannot open");
  std::string head(4096, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  if (head.empty()) return BadInput(path + ": empty file");
  if (head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f &&
      static_cast<uint8_t>(head[1]) == 0x8b) {
    return DocumentKind::kTrace;
  }
  // JSON writers that sort keys (nlohmann) put "candidates" first and "kind" far behind it.
  static const std::regex candidates_first(R"re(^\s*\{\s*"candidates"\s*:)re");
  if (std::regex_search(head, candidates_first)) return DocumentKind::kCandidates;
  static const std::regex kind(R"re("kind"\s*:\s*"([a-z]+)")re");
  std::smatch m;
  if (std::regex_search(head, m, kind)) {
    if (m[1] == "plan") return DocumentKind::kPlan;
    if (m[1] == "candidates") return DocumentKind::kCandidates;
    if (m[1] != "trace")
      return BadInput(path + ": /kind: \"" + m[1].str() +
                      "\" is not a trace, plan or candidates file");
  }
  return DocumentKind::kTrace;
}

Document DocumentFromTrace(std::unique_ptr<traces::Trace> trace, std::string path) {
  Document d;
  d.path = std::move(path);
  d.kind = DocumentKind::kTrace;
  d.index = std::make_unique<TimelineIndex>(*TimelineIndex::Build(*trace));
  d.trace = std::move(trace);
  return d;
}

Result<std::unique_ptr<traces::Trace>> SimulatePlan(const Plan& plan) {
  PX_TRY(ValidateLayout(plan.layout, plan.model, plan.cluster));
  planner::SimOptions so;
  so.record_trace = true;
  so.all_ranks = plan.layout.world_size() <= 64;
  PX_ASSIGN(auto sim, planner::Simulate(plan, nullptr, so));
  if (!sim.trace) return Error{"simulation recorded no trace", ErrorKind::kInternal};
  return std::make_unique<traces::Trace>(std::move(*sim.trace));
}

Result<Document> LoadDocument(const std::string& path, LoadProgress* progress, int reader_threads) {
  PX_ASSIGN(const DocumentKind kind, SniffKind(path));
  Document doc;
  doc.path = path;
  doc.kind = kind;
  if (kind == DocumentKind::kCandidates) {
    PX_ASSIGN(doc.candidates, LoadCandidates(path));
  } else if (kind == DocumentKind::kPlan) {
    PX_ASSIGN(const Json j, LoadJsonFile(path));
    PX_ASSIGN(Plan plan, PlanFromJson(j, path));
    auto trace = SimulatePlan(plan);
    if (!trace) return Error{path + ": " + trace.error().message, trace.error().kind};
    doc.plan = std::move(plan);
    doc.trace = std::move(*trace);
  } else {
    // The reader maps a large plain file and scans it on every core; gzip is streamed.
    const int64_t file_bytes = FileBytes(path);
    traces::ReadOptions ro;
    ro.origin = path;
    ro.threads = reader_threads;
    if (progress) {
      ro.progress = [progress, file_bytes](int64_t done, int64_t total) {
        if (total < 0) total = file_bytes;  // a stream reports compressed bytes read
        if (total > 0) {
          // Reading is ~90% of a load; indexing the rest.
          progress->fraction.store(0.9 * static_cast<double>(done) / static_cast<double>(total),
                                   std::memory_order_relaxed);
        }
        return !progress->cancel.load(std::memory_order_relaxed);
      };
    }
    auto t = traces::ReadChromeTrace(path, ro);
    if (!t) {
      if (progress && progress->cancel.load()) return Error{"cancelled", ErrorKind::kIo};
      return t.error();
    }
    doc.trace = std::make_unique<traces::Trace>(std::move(*t));
    doc.trace->metadata.source = path;
  }
  if (doc.trace) {
    auto ix = TimelineIndex::Build(*doc.trace, progress ? &progress->cancel : nullptr);
    if (!ix) return Error{"cancelled", ErrorKind::kIo};
    doc.index = std::make_unique<TimelineIndex>(std::move(*ix));
  }
  if (progress) progress->fraction.store(1.0);
  return doc;
}

}  // namespace parallax::gui

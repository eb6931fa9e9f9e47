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

//! Reports how far into the file the reader is and stops it when cancelled.
class ProgressSource final : public traces::ByteSource {
 public:
  ProgressSource(std::unique_ptr<traces::ByteSource> inner, traces::ByteSource* raw,
                 int64_t file_bytes, LoadProgress* progress)
      : inner_(std::move(inner)), raw_(raw), file_bytes_(file_bytes), progress_(progress) {}
  Result<size_t> Read(char* buf, size_t n) override {
    if (progress_) {
      if (progress_->cancel.load(std::memory_order_relaxed))
        return Error{"cancelled", ErrorKind::kIo};
      if (file_bytes_ > 0) {
        // Reading is ~90% of a load; indexing the rest.
        progress_->fraction.store(
            0.9 * static_cast<double>(raw_->raw_offset()) / static_cast<double>(file_bytes_),
            std::memory_order_relaxed);
      }
    }
    return inner_->Read(buf, n);
  }
  int64_t raw_offset() const override { return inner_->raw_offset(); }

 private:
  std::unique_ptr<traces::ByteSource> inner_;
  traces::ByteSource* raw_;
  int64_t file_bytes_;
  LoadProgress* progress_;
};

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
  if (Status st = ValidateLayout(plan.layout, plan.model, plan.cluster); !st) return st.error();
  planner::SimOptions so;
  so.record_trace = true;
  so.all_ranks = plan.layout.world_size() <= 64;
  auto sim = planner::Simulate(plan, nullptr, so);
  if (!sim) return sim.error();
  if (!sim->trace) return Error{"simulation recorded no trace", ErrorKind::kInternal};
  return std::make_unique<traces::Trace>(std::move(*sim->trace));
}

Result<Document> LoadDocument(const std::string& path, LoadProgress* progress) {
  auto kind = SniffKind(path);
  if (!kind) return kind.error();
  Document doc;
  doc.path = path;
  doc.kind = *kind;
  if (*kind == DocumentKind::kCandidates) {
    auto c = LoadCandidates(path);
    if (!c) return c.error();
    doc.candidates = std::move(*c);
  } else if (*kind == DocumentKind::kPlan) {
    auto j = LoadJsonFile(path);
    if (!j) return j.error();
    auto plan = PlanFromJson(*j, path);
    if (!plan) return plan.error();
    auto trace = SimulatePlan(*plan);
    if (!trace) return Error{path + ": " + trace.error().message, trace.error().kind};
    doc.plan = std::move(*plan);
    doc.trace = std::move(*trace);
  } else {
    auto raw = traces::OpenFileSource(path);
    if (!raw) return raw.error();
    traces::ByteSource* raw_ptr = raw->get();
    const bool gz = [&] {
      std::ifstream f(path, std::ios::binary);
      char m[2] = {0, 0};
      f.read(m, 2);
      return static_cast<uint8_t>(m[0]) == 0x1f && static_cast<uint8_t>(m[1]) == 0x8b;
    }();
    std::unique_ptr<traces::ByteSource> src =
        gz ? traces::GzipSource(std::move(*raw), path) : std::move(*raw);
    ProgressSource ps(std::move(src), raw_ptr, FileBytes(path), progress);
    traces::ReadOptions ro;
    ro.origin = path;
    auto t = traces::ReadChromeTrace(ps, ro);
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

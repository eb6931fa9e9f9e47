#pragma once
// A file opened in the viewer: a trace (ours, Kineto, plain or gzip), a plan (simulated into its
// predicted trace) or a candidates file (plan explorer). Loading reports progress and can be
// cancelled from another thread; the timeline index is built as part of the load, so the UI
// thread only swaps in a finished Document.

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "gui/core/candidates.h"
#include "gui/core/timeline_index.h"
#include "model/plan.h"
#include "model/result.h"
#include "traces/trace.h"

namespace parallax::gui {

enum class DocumentKind { kTrace, kPlan, kCandidates };
const char* ToString(DocumentKind k);

//! Shared between the loading thread and the UI: progress in [0, 1], cancel request.
struct LoadProgress {
  std::atomic<double> fraction{0};
  std::atomic<bool> cancel{false};
};

struct Document {
  std::string path;
  DocumentKind kind = DocumentKind::kTrace;
  std::unique_ptr<traces::Trace> trace;    //!< traces and plans (the predicted trace)
  std::unique_ptr<TimelineIndex> index;    //!< with `trace`
  std::optional<Plan> plan;                //!< plans
  std::optional<CandidateSet> candidates;  //!< candidates files
};

//! What a file holds, from its first bytes: gzip or Chrome JSON -> trace; "kind" plan/candidates.
Result<DocumentKind> SniffKind(const std::string& path);
//! Loads and indexes a file. Errors name the file (bad input: kBadInput); a cancelled load
//! returns an error whose message is "cancelled". `reader_threads`: threads that scan a large
//! trace (traces::ReadOptions::threads; 0: one per core).
Result<Document> LoadDocument(const std::string& path, LoadProgress* progress = nullptr,
                              int reader_threads = 0);
//! Wraps an in-memory trace (a simulated plan, a compare display) with its index.
Document DocumentFromTrace(std::unique_ptr<traces::Trace> trace, std::string path);
//! Simulates a plan into its predicted trace (every rank for worlds up to 64 ranks).
Result<std::unique_ptr<traces::Trace>> SimulatePlan(const Plan& plan);

}  // namespace parallax::gui

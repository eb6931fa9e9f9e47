#pragma once
// Layout search (DESIGN.md "planner"): every dp x tp x cp x pp factorization of the GPU count (tp
// inside a node and dividing heads / kv heads / ffn; cp splitting the sequence into 2 cp chunks,
// where the implementation runs context parallelism; pp up to the layer count, uneven splits
// costed), ZeRO 0-3, micro-batch sizes, GPipe / 1F1B / interleaved with virtual stages,
// recompute none / selective / full, sequence parallel on/off, the global batch given or
// searched over a range. Memory pruning first, then the closed-form step time, on all cores;
// the closed form's top_k layouts are then simulated and ranked by the simulator's tokens per
// second (the predicted step time users see, model/step_time.h).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/plan.h"
#include "planner/estimate/prediction.h"
#include "planner/search/constraints.h"

namespace parallax::planner {

struct SearchOptions {
  int64_t top_k = 10;
  int threads = 0;  //!< 0: std::thread::hardware_concurrency()
  Constraints fix;
  const CostDb* db = nullptr;
  //! What runs the plans (model/implementation.h); the default is our executor.
  ImplementationProfile implementation = DefaultImplementation();
  //! Global batches (sequences) to try when the TrainingSpec gives none: powers of two whose
  //! tokens fall in [min_batch_tokens, max_batch_tokens] (GPT-3 trained with 0.5M-3.2M tokens).
  int64_t min_batch_tokens = 512 * 1024;
  int64_t max_batch_tokens = 4 * 1024 * 1024;
  //! Called from the search threads with (layouts done, layouts total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
  //! Keep every evaluated layout in SearchResult::candidates (`parallax plan --candidates`).
  bool record_candidates = false;
};

//! One layout the search looked at: its prediction, or why it was rejected.
struct EvaluatedLayout {
  Layout layout;                       //!< dimensions beyond the rejecting check keep their defaults
  std::string rejected;                //!< empty: evaluated; else a SearchResult::rejected reason
  int64_t peak_memory_bytes = 0;       //!< evaluated and out_of_memory layouts; 0 otherwise
  std::optional<Prediction> prediction;  //!< evaluated layouts only
};

struct RankedPlan {
  Layout layout;
  Prediction prediction;
};

struct SearchResult {
  std::vector<RankedPlan> plans;           //!< best first
  std::map<std::string, int64_t> rejected;  //!< reason -> count
  int64_t searched = 0;                    //!< layouts considered (accepted + rejected)
  double search_time_s = 0;
  //! When nothing fits: the smallest (peak - device memory) over the layouts that failed on memory.
  int64_t smallest_shortfall_bytes = 0;
  Layout smallest_shortfall_layout;
  //! Every layout considered, in enumeration order, when SearchOptions::record_candidates.
  std::vector<EvaluatedLayout> candidates;
};

//! Searches layouts of `model` on `cluster`. Errors: bad input only (e.g. an impossible --fix);
//! an empty `plans` means nothing fits (see `rejected`, `smallest_shortfall_bytes`).
Result<SearchResult> Search(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                            const SearchOptions& options);

}  // namespace parallax::planner

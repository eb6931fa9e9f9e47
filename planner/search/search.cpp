#include "planner/search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <thread>

#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/memory/memory_model.h"

namespace parallax::planner {
namespace {

struct Candidate {
  Layout layout;
};

struct Rejections {
  std::map<std::string, int64_t> counts;
  std::vector<EvaluatedLayout>* record = nullptr;  //!< set when candidates are recorded
  void Add(const std::string& why, const Layout& l) {
    ++counts[why];
    if (record) record->push_back({l, why, 0, std::nullopt});
  }
};

std::vector<int64_t> GlobalBatches(const ModelSpec& m, const TrainingSpec& t, const SearchOptions& o) {
  if (o.fix.global_batch) return {*o.fix.global_batch};
  if (t.global_batch > 0) return {t.global_batch};
  const int64_t seq = t.seq_len > 0 ? t.seq_len : m.seq_len;
  std::vector<int64_t> out;
  for (int64_t b = 1; b * seq <= o.max_batch_tokens; b *= 2) {
    if (b * seq >= o.min_batch_tokens) out.push_back(b);
  }
  if (out.empty()) out.push_back(std::max<int64_t>(1, o.min_batch_tokens / seq));
  return out;
}

//! Every layout the space holds, with the divisibility rejections counted on the way.
std::vector<Candidate> Enumerate(const ModelSpec& m, const ClusterSpec& c, const TrainingSpec& t,
                                 const SearchOptions& o, Rejections& rej, int64_t& searched) {
  std::vector<Candidate> out;
  const int64_t world = c.total_gpus();
  const int64_t seq = t.seq_len > 0 ? t.seq_len : m.seq_len;
  const auto batches = GlobalBatches(m, t, o);
  // A fixed dimension is enumerated at exactly its value, whatever the default grid holds.
  const std::vector<int64_t> micro_batches =
      o.fix.micro_batch ? std::vector<int64_t>{*o.fix.micro_batch} : std::vector<int64_t>{1, 2, 4, 8, 16, 32};
  // Tensor parallelism across nodes (tp a multiple of gpus_per_node above it) runs and `simulate`
  // predicts it, but the search does not enumerate it: counted as a rejection.
  for (int64_t tp = 2 * c.gpus_per_node; tp <= world; tp += c.gpus_per_node) {
    if (world % tp != 0 || tp % c.gpus_per_node != 0 || (o.fix.tp && *o.fix.tp != tp)) continue;
    if (m.heads % tp != 0 || m.kv_heads % tp != 0 || m.ffn_hidden % tp != 0) continue;
    ++searched;
    Layout l;
    l.tp = tp;
    rej.Add("tp_spans_nodes", l);
  }
  for (int64_t tp = 1; tp <= c.gpus_per_node; ++tp) {
    if (c.gpus_per_node % tp != 0 || world % tp != 0) continue;
    if (o.fix.tp && *o.fix.tp != tp) continue;
    if (m.heads % tp != 0 || m.kv_heads % tp != 0 || m.ffn_hidden % tp != 0) {
      ++searched;
      Layout l;
      l.tp = tp;
      rej.Add("tp_does_not_divide_heads", l);
      continue;
    }
    for (int64_t pp = 1; pp <= world / tp; ++pp) {
      if ((world / tp) % pp != 0) continue;
      if (o.fix.pp && *o.fix.pp != pp) continue;
      if (pp > m.layers) {
        ++searched;
        Layout l;
        l.tp = tp;
        l.pp = pp;
        rej.Add("pp_exceeds_layers", l);
        continue;
      }
      const int64_t dp = world / (tp * pp);
      if (o.fix.dp && *o.fix.dp != dp) continue;
      for (int64_t gb : batches) {
        for (int64_t mb : micro_batches) {
          if (o.fix.micro_batch && *o.fix.micro_batch != mb) continue;
          if (gb % (dp * mb) != 0) {
            ++searched;
            Layout l;
            l.dp = dp;
            l.tp = tp;
            l.pp = pp;
            l.micro_batch = mb;
            l.global_batch = gb;
            rej.Add("global_batch_not_divisible", l);
            continue;
          }
          const int64_t micro = gb / (dp * mb);
          struct Sched {
            ScheduleKind kind;
            int64_t v;
          };
          std::vector<Sched> scheds;
          if (pp == 1) {
            scheds.push_back({ScheduleKind::kOneFOneB, 1});
          } else {
            scheds.push_back({ScheduleKind::kGpipe, 1});
            scheds.push_back({ScheduleKind::kOneFOneB, 1});
            const int64_t v_first = o.fix.virtual_stages ? *o.fix.virtual_stages : 2;
            const int64_t v_last = o.fix.virtual_stages ? *o.fix.virtual_stages : m.layers / pp;
            for (int64_t v = v_first; v <= v_last; ++v) {
              if (o.fix.schedule && *o.fix.schedule != ScheduleKind::kInterleaved) break;
              if (m.layers % (pp * v) != 0) continue;
              if (micro % pp != 0) {
                ++searched;
                Layout l;
                l.dp = dp;
                l.tp = tp;
                l.pp = pp;
                l.micro_batch = mb;
                l.global_batch = gb;
                l.schedule = ScheduleKind::kInterleaved;
                l.virtual_stages = v;
                rej.Add("interleaved_microbatches_not_multiple_of_pp", l);
                continue;
              }
              scheds.push_back({ScheduleKind::kInterleaved, v});
            }
          }
          for (const Sched& s : scheds) {
            for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
              for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                  Layout l;
                  l.dp = dp;
                  l.tp = tp;
                  l.pp = pp;
                  l.zero_stage = zero;
                  l.micro_batch = mb;
                  l.global_batch = gb;
                  l.recompute = rc;
                  l.schedule = s.kind;
                  l.virtual_stages = s.v;
                  l.sequence_parallel = sp == 1;
                  if (!o.fix.Admits(l)) continue;
                  ++searched;
                  if (zero > MaxZeroStage(o.implementation, pp)) {
                    // The implementation cannot run this stage (its max_zero_stage facts).
                    rej.Add("zero_stage_beyond_implementation", l);
                    continue;
                  }
                  if (l.sequence_parallel && seq % tp != 0) {
                    rej.Add("sequence_parallel_needs_tp_dividing_seq_len", l);
                    continue;
                  }
                  out.push_back({l});
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

//! Peak memory over the pipeline ranks that can hold it: rank 0 (embedding, most micro-batches in
//! flight), the first rank with an extra layer (uneven splits), the last (LM head).
int64_t FastPeakMemory(const Plan& plan) {
  const int64_t p = plan.layout.pp;
  const int64_t stages = p * plan.layout.virtual_stages;
  const int64_t extra = plan.model.layers % stages;
  int64_t peak = EstimateRankMemory(plan, 0).total;
  if (p > 1) peak = std::max(peak, EstimateRankMemory(plan, p - 1).total);
  if (extra > 0 && p > 2) peak = std::max(peak, EstimateRankMemory(plan, std::max<int64_t>(p - extra, 0)).total);
  return peak;
}

struct Scored {
  Layout layout;
  double tokens_per_s = 0;
};

}  // namespace

Result<SearchResult> Search(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
                            const SearchOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult result;
  Rejections rej;
  if (options.record_candidates) rej.record = &result.candidates;
  const auto candidates = Enumerate(model, cluster, training, options, rej, result.searched);
  const int threads = std::max(1, options.threads > 0 ? options.threads
                                                      : static_cast<int>(std::thread::hardware_concurrency()));
  const int64_t seq = training.seq_len > 0 ? training.seq_len : model.seq_len;
  const int64_t device_bytes = cluster.device.memory_bytes();

  std::mutex mu;
  std::vector<Scored> best;  // merged top candidates
  int64_t oom = 0;
  int64_t shortfall = std::numeric_limits<int64_t>::max();
  Layout shortfall_layout;
  std::atomic<int64_t> done{0};
  std::vector<std::pair<int64_t, EvaluatedLayout>> evaluated;  // (candidate index, result)
  const int64_t total = static_cast<int64_t>(candidates.size());
  const size_t keep = static_cast<size_t>(std::max<int64_t>(options.top_k, 1));

  auto worker = [&](int tid) {
    CostContext ctx(cluster, training.precision, options.db, &options.implementation);
    Plan plan;
    plan.model = model;
    plan.cluster = cluster;
    plan.training = training;
    plan.implementation = options.implementation;
    std::vector<Scored> local;
    int64_t local_oom = 0, local_short = std::numeric_limits<int64_t>::max();
    Layout local_short_layout;
    std::vector<std::pair<int64_t, EvaluatedLayout>> local_evaluated;
    for (int64_t i = tid; i < total; i += threads) {
      plan.layout = candidates[static_cast<size_t>(i)].layout;
      plan.training.global_batch = plan.layout.global_batch;
      const int64_t peak = FastPeakMemory(plan);
      if (peak > device_bytes) {
        ++local_oom;
        if (peak - device_bytes < local_short) {
          local_short = peak - device_bytes;
          local_short_layout = plan.layout;
        }
        if (options.record_candidates) local_evaluated.push_back({i, {plan.layout, "out_of_memory", peak, std::nullopt}});
      } else {
        const PlanCosts pc = CostPlan(ctx, plan);
        const StepTime st = EstimateStepTime(plan, pc);
        const double tps = static_cast<double>(plan.layout.global_batch * seq) / st.step_time_s;
        local.push_back({plan.layout, tps});
        if (options.record_candidates) {
          local_evaluated.push_back(
              {i, {plan.layout, "", peak, FinishPrediction(plan, st.step_time_s, st.breakdown)}});
        }
        if (local.size() > 4 * keep) {
          std::nth_element(local.begin(), local.begin() + static_cast<std::ptrdiff_t>(keep), local.end(),
                           [](const Scored& a, const Scored& b) { return a.tokens_per_s > b.tokens_per_s; });
          local.resize(keep);
        }
      }
      const int64_t d = ++done;
      if (options.progress && (d % 4096 == 0 || d == total)) options.progress(d, total);
    }
    std::lock_guard<std::mutex> lock(mu);
    best.insert(best.end(), local.begin(), local.end());
    for (auto& e : local_evaluated) evaluated.push_back(std::move(e));
    oom += local_oom;
    if (local_short < shortfall) {
      shortfall = local_short;
      shortfall_layout = local_short_layout;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& t : pool) t.join();

  if (oom > 0) rej.counts["out_of_memory"] = oom;
  std::sort(evaluated.begin(), evaluated.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& e : evaluated) result.candidates.push_back(std::move(e.second));
  std::sort(best.begin(), best.end(), [](const Scored& a, const Scored& b) { return a.tokens_per_s > b.tokens_per_s; });
  if (best.size() > keep) best.resize(keep);
  Plan plan;
  plan.model = model;
  plan.cluster = cluster;
  plan.training = training;
  plan.implementation = options.implementation;
  CostContext ctx(cluster, training.precision, options.db, &options.implementation);
  for (const Scored& s : best) {
    plan.layout = s.layout;
    plan.training.global_batch = s.layout.global_batch;
    const StepTime st = EstimateStepTime(plan, CostPlan(ctx, plan));
    result.plans.push_back({s.layout, FinishPrediction(plan, st.step_time_s, st.breakdown)});
  }
  result.rejected = rej.counts;
  if (shortfall != std::numeric_limits<int64_t>::max()) {
    result.smallest_shortfall_bytes = shortfall;
    result.smallest_shortfall_layout = shortfall_layout;
  }
  result.search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace parallax::planner

#include "planner/search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "model/rank_groups.h"
#include "model/stage_split.h"
#include "planner/cost/plan_costs.h"
#include "planner/estimate/step_estimate.h"
#include "planner/estimate/sync_modes.h"
#include "planner/memory/peak_memory.h"
#include "planner/sim/simulator.h"

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

bool TpDividesHeads(const ModelSpec& m, int64_t tp) {
  return m.heads % tp == 0 && m.kv_heads % tp == 0 && m.ffn_hidden % tp == 0;
}

//! The layout space walked in enumeration order: the candidates, and each rejection counted
//! where the walk meets it.
struct LayoutWalk {
  const ModelSpec& m;
  const SearchOptions& o;
  int64_t seq = 0;
  std::vector<int64_t> batches;
  std::vector<int64_t> micro_batches;
  Rejections& rej;
  int64_t& searched;
  std::vector<Candidate> out;

  //! A layout the space holds that a check rejects (`l` carries the dimensions chosen so far).
  void Reject(const std::string& why, const Layout& l) {
    ++searched;
    rej.Add(why, l);
  }
};

struct Sched {
  ScheduleKind kind;
  int64_t v;
};

//! The schedules of pipeline `l` (dp, tp, pp and batch chosen) with `micro` micro-batches: GPipe,
//! 1F1B and every interleaved depth that splits the layers (model/stage_split.h).
std::vector<Sched> Schedules(LayoutWalk& w, const Layout& l, int64_t micro) {
  if (l.pp == 1) return {{ScheduleKind::kOneFOneB, 1}};
  std::vector<Sched> scheds{{ScheduleKind::kGpipe, 1}, {ScheduleKind::kOneFOneB, 1}};
  const int64_t v_first = w.o.fix.virtual_stages ? *w.o.fix.virtual_stages : 2;
  const int64_t v_last = w.o.fix.virtual_stages ? *w.o.fix.virtual_stages : w.m.layers / l.pp;
  for (int64_t v = v_first; v <= v_last; ++v) {
    if (w.o.fix.schedule && *w.o.fix.schedule != ScheduleKind::kInterleaved) break;
    Layout split = l;
    split.schedule = ScheduleKind::kInterleaved;
    split.virtual_stages = v;
    if (!StageSplitProblem(split, w.m.layers).empty()) continue;
    if (micro % l.pp != 0) {
      Layout rejected = l;
      rejected.schedule = ScheduleKind::kInterleaved;
      rejected.virtual_stages = v;
      w.Reject("interleaved_microbatches_not_multiple_of_pp", rejected);
      continue;
    }
    scheds.push_back({ScheduleKind::kInterleaved, v});
  }
  return scheds;
}

//! The expert layouts (ep, etp) of `l` for an MoE model, each a candidate; `l` itself for a dense one.
//! ep: the divisors of the expert count; etp: 1 or tp (Megatron-Core's default and the folded form
//! of the published MoE recipes). Expert groups that do not tile a stage's tp x dp ranks are counted.
void AddExpertVariants(LayoutWalk& w, const Layout& l) {
  if (!w.m.moe()) {
    ++w.searched;
    w.out.push_back({l});
    return;
  }
  if (l.tp > 1 && !l.sequence_parallel) {
    w.Reject("moe_tp_needs_sequence_parallel", l);
    return;
  }
  for (int64_t ep = 1; ep <= w.m.experts; ++ep) {
    if (w.m.experts % ep != 0 || (w.o.fix.ep && *w.o.fix.ep != ep)) continue;
    const std::vector<int64_t> etps = l.tp == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, l.tp};
    for (int64_t etp : etps) {
      if (w.o.fix.etp && *w.o.fix.etp != etp) continue;
      Layout e = l;
      e.ep = ep;
      e.etp = etp;
      if (w.m.moe_ffn_hidden % etp != 0 || (l.tp * l.dp) % (ep * etp) != 0) {
        w.Reject("expert_groups_do_not_tile_the_stage", e);
        continue;
      }
      ++w.searched;
      w.out.push_back({e});
    }
  }
}

//! The recompute settings searched: none, selective (the attention core), full, and for an MoE model
//! also selective recompute of the norms and the experts' activation (--recompute-modules layernorm
//! moe_act, the Megatron-MoE model zoo's Qwen3 and Megatron-Bridge's gpt-oss H100 recipes), which
//! frees the largest MoE activations for almost no compute. --fix recompute_modules=... searches
//! that set alone.
std::vector<std::pair<Recompute, uint32_t>> RecomputeVariants(const LayoutWalk& w) {
  if (w.o.fix.recompute_modules) return {{Recompute::kSelective, *w.o.fix.recompute_modules}};
  std::vector<std::pair<Recompute, uint32_t>> out{{Recompute::kNone, 0}, {Recompute::kSelective, 0}};
  if (w.m.moe()) out.emplace_back(Recompute::kSelective, kRecomputeLayernorm | kRecomputeMoeAct);
  out.emplace_back(Recompute::kFull, 0);
  return out;
}

//! Every ZeRO stage, recompute and sequence-parallel variant of `base` under schedule `s`.
void AddVariants(LayoutWalk& w, const Layout& base, const Sched& s) {
  for (int64_t zero = 0; zero <= (DenseReductionRanks(base) > 1 ? 3 : 0); ++zero) {
    for (const auto& [rc, modules] : RecomputeVariants(w)) {
      for (int sp = 0; sp <= (base.tp > 1 ? 1 : 0); ++sp) {
        Layout l = base;
        l.zero_stage = zero;
        l.recompute = rc;
        l.recompute_modules = modules;
        l.schedule = s.kind;
        l.virtual_stages = s.v;
        l.sequence_parallel = sp == 1;
        if (w.o.fix.routing) l.routing = *w.o.fix.routing;
        l.sync = w.o.fix.sync;
        Layout probe = l;  // the expert dimensions are chosen below (AddExpertVariants)
        if (w.o.fix.ep) probe.ep = *w.o.fix.ep;
        if (w.o.fix.etp) probe.etp = *w.o.fix.etp;
        if (!w.o.fix.Admits(probe)) continue;
        if (!ValidateSyncMode(l.sync, l.dp, l.tp, l.pp, l.zero_stage)) {
          w.Reject("sync_mode_does_not_combine", l);
          continue;
        }
        if (zero > MaxZeroStage(w.o.implementation, l.pp)) {
          // The implementation cannot run this stage (its max_zero_stage facts).
          w.Reject("zero_stage_beyond_implementation", l);
          continue;
        }
        if (l.sequence_parallel && w.seq % (l.tp * l.cp) != 0) {
          w.Reject("sequence_parallel_needs_tp_dividing_seq_len", l);
          continue;
        }
        AddExpertVariants(w, l);
      }
    }
  }
}

//! Every global batch and micro-batch size of pipeline `base` (dp, tp, pp chosen).
void WalkBatches(LayoutWalk& w, const Layout& base) {
  for (int64_t gb : w.batches) {
    for (int64_t mb : w.micro_batches) {
      if (w.o.fix.micro_batch && *w.o.fix.micro_batch != mb) continue;
      Layout l = base;
      l.micro_batch = mb;
      l.global_batch = gb;
      if (gb % (l.dp * mb) != 0) {
        w.Reject("global_batch_not_divisible", l);
        continue;
      }
      for (const Sched& s : Schedules(w, l, gb / (l.dp * mb))) AddVariants(w, l, s);
    }
  }
}

//! Every pipeline depth of tensor-parallel width `tp` and context-parallel width `cp` over `world`
//! devices, dp taking the rest.
void WalkPipelines(LayoutWalk& w, int64_t world, int64_t tp, int64_t cp) {
  const int64_t rest = world / (tp * cp);
  for (int64_t pp = 1; pp <= rest; ++pp) {
    if (rest % pp != 0) continue;
    if (w.o.fix.pp && *w.o.fix.pp != pp) continue;
    Layout l;
    l.tp = tp;
    l.cp = cp;
    l.pp = pp;
    if (pp > w.m.layers) {
      w.Reject("pp_exceeds_layers", l);
      continue;
    }
    if (w.o.fix.first_stage_layers || w.o.fix.last_stage_layers) {
      l.first_stage_layers = w.o.fix.first_stage_layers.value_or(0);
      l.last_stage_layers = w.o.fix.last_stage_layers.value_or(0);
      if (!StageSplitProblem(l, w.m.layers).empty()) {
        w.Reject("pp_does_not_split_layers", l);
        continue;
      }
    } else if (StageSplitOf(w.m.layers, pp) == StageSplit::kNone) {
      // No virtual depth splits them by the default rules (pp * v divides layers (+ 2) only where pp
      // does): the first and last ranks take fewer layers (model/stage_split.h), or none fits.
      const auto split = SearchedExplicitSplit(w.m.layers, pp);
      if (!split) {
        w.Reject("pp_does_not_split_layers", l);
        continue;
      }
      l.first_stage_layers = split->first;
      l.last_stage_layers = split->second;
    }
    l.dp = rest / pp;
    if (w.o.fix.dp && *w.o.fix.dp != l.dp) continue;
    WalkBatches(w, l);
  }
}

//! Every context-parallel width of tensor-parallel width `tp`: the divisors of world / tp that the
//! sequence and the implementation admit (cp 1 only when its cp_comm_type is none, unless --fix
//! asks for more: then counted as a rejection).
void WalkContextParallel(LayoutWalk& w, int64_t world, int64_t tp) {
  const bool runs_cp = w.o.implementation.cp_comm_type.value != CpCommType::kNone;
  for (int64_t cp = 1; cp <= world / tp; ++cp) {
    if ((world / tp) % cp != 0 || (w.o.fix.cp && *w.o.fix.cp != cp)) continue;
    if (cp > 1 && !runs_cp && !w.o.fix.cp) break;
    Layout l;
    l.tp = tp;
    l.cp = cp;
    if (!ContextParallelProblem(l, w.seq).empty()) {
      w.Reject("cp_needs_seq_len_divisible_by_2cp", l);
      continue;
    }
    if (!CpCommTypeProblem(l, w.m, w.o.implementation).empty()) {
      const bool heads = w.o.implementation.cp_comm_type.value == CpCommType::kA2a;
      w.Reject(heads ? "cp_a2a_needs_tp_cp_dividing_heads" : "cp_beyond_implementation", l);
      continue;
    }
    WalkPipelines(w, world, tp, cp);
  }
}

//! Every layout the space holds, with the divisibility rejections counted on the way.
std::vector<Candidate> Enumerate(const ModelSpec& m, const ClusterSpec& c, const TrainingSpec& t,
                                 const SearchOptions& o, Rejections& rej, int64_t& searched) {
  // Dedicated parameter servers take their ranks before the workers are laid out.
  const int64_t world = c.total_gpus() - o.fix.sync.dedicated_servers();
  // A fixed dimension is enumerated at exactly its value, whatever the default grid holds.
  LayoutWalk w{.m = m,
               .o = o,
               .seq = t.seq_len > 0 ? t.seq_len : m.seq_len,
               .batches = GlobalBatches(m, t, o),
               .micro_batches = o.fix.micro_batch ? std::vector<int64_t>{*o.fix.micro_batch}
                                                  : std::vector<int64_t>{1, 2, 4, 8, 16, 32},
               .rej = rej,
               .searched = searched,
               .out = {}};
  if (o.fix.tp) {
    // A pinned tp the walk below would never reach is counted with its reason, not skipped unseen.
    const int64_t tp = *o.fix.tp;
    const bool tiles = TpTilesDomains(tp, c);
    Layout l;
    l.tp = tp;
    if (world % tp != 0 || !tiles) {
      w.Reject("tp_does_not_tile_the_nodes", l);
      return {};
    }
    if (!TpDividesHeads(m, tp)) {
      w.Reject("tp_does_not_divide_heads", l);
      return {};
    }
  }
  // Tensor parallelism across NVLink domains (tp a multiple of the domain above it) runs and
  // `simulate` predicts it, but the search does not enumerate it: counted as a rejection.
  const int64_t domain = c.domain_size();
  for (int64_t tp = 2 * domain; tp <= world; tp += domain) {
    if (world % tp != 0 || tp % domain != 0 || (o.fix.tp && *o.fix.tp != tp)) continue;
    if (!TpDividesHeads(m, tp)) continue;
    Layout l;
    l.tp = tp;
    w.Reject("tp_spans_nodes", l);
  }
  for (int64_t tp = 1; tp <= domain; ++tp) {
    if (domain % tp != 0 || world % tp != 0) continue;
    if (o.fix.tp && *o.fix.tp != tp) continue;
    if (!TpDividesHeads(m, tp)) {
      Layout l;
      l.tp = tp;
      w.Reject("tp_does_not_divide_heads", l);
      continue;
    }
    WalkContextParallel(w, world, tp);
  }
  return std::move(w.out);
}

//! The plan every candidate shares; the search sets its layout and global batch.
Plan BasePlan(const ModelSpec& model, const ClusterSpec& cluster, const TrainingSpec& training,
              const SearchOptions& options) {
  Plan plan;
  plan.model = model;
  plan.cluster = cluster;
  plan.training = training;
  plan.implementation = options.implementation;
  return plan;
}

struct Scored {
  Layout layout;
  double tokens_per_s = 0;
  int64_t index = 0;  //!< in the enumeration: breaks ties, so the ranking does not depend on threads
};

//! Faster first; equal speeds in enumeration order.
bool Ranks(const Scored& a, const Scored& b) {
  return a.tokens_per_s != b.tokens_per_s ? a.tokens_per_s > b.tokens_per_s : a.index < b.index;
}

//! The closed form's top layouts (best first) priced and re-ranked by the simulator, whose step
//! time is the one `plan`, `simulate` and the report show (model/step_time.h); ties keep the
//! closed form's order.
std::vector<RankedPlan> SimulateTop(const std::vector<Scored>& top, const Plan& base, const CostDb* db, int threads) {
  std::vector<RankedPlan> out(top.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    Plan plan = base;
    for (size_t i = next++; i < top.size(); i = next++) {
      plan.layout = top[i].layout;
      plan.training.global_batch = top[i].layout.global_batch;
      out[i].layout = top[i].layout;
      if (auto sim = Simulate(plan, db)) {
        out[i].prediction = sim->prediction;
        if (!plan.layout.sync.is_default() || !plan.cluster.stragglers.empty()) {
          // The simulator runs the all-reduce family without stragglers; the mode's exchange and
          // waits come from its estimate (planner/estimate/sync_modes.h) on the simulated step.
          CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
          const StepTime st = WithSyncMode(plan, CostPlan(ctx, plan),
                                           StepTime{sim->prediction.step_time_s, sim->prediction.breakdown}, db);
          out[i].prediction = FinishPrediction(plan, st.step_time_s, st.breakdown);
        }
      } else {  // the search validated the layout: not expected, but the closed form still holds
        CostContext ctx(plan.cluster, plan.training.precision, db, &plan.implementation);
        const PlanCosts pc = CostPlan(ctx, plan);
        const StepTime st = WithSyncMode(plan, pc, EstimateStepTime(plan, pc), db);
        out[i].prediction = FinishPrediction(plan, st.step_time_s, st.breakdown);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(top.size())); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::stable_sort(out.begin(), out.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.prediction.tokens_per_s > b.prediction.tokens_per_s;
  });
  return out;
}

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
  int64_t shortfall_index = 0;
  std::atomic<int64_t> done{0};
  std::vector<std::pair<int64_t, EvaluatedLayout>> evaluated;  // (candidate index, result)
  const int64_t total = static_cast<int64_t>(candidates.size());
  const size_t keep = static_cast<size_t>(std::max<int64_t>(options.top_k, 1));

  auto worker = [&](int tid) {
    CostContext ctx(cluster, training.precision, options.db, &options.implementation);
    Plan plan = BasePlan(model, cluster, training, options);
    std::vector<Scored> local;
    int64_t local_oom = 0, local_short = std::numeric_limits<int64_t>::max();
    Layout local_short_layout;
    int64_t local_short_index = 0;
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
          local_short_index = i;
        }
        if (options.record_candidates) local_evaluated.push_back({i, {plan.layout, "out_of_memory", peak, std::nullopt}});
      } else {
        const PlanCosts pc = CostPlan(ctx, plan);
        const StepTime st = WithSyncMode(plan, pc, EstimateStepTime(plan, pc), options.db);
        const double tps = static_cast<double>(plan.layout.global_batch * seq) / st.step_time_s;
        local.push_back({plan.layout, tps, i});
        if (options.record_candidates) {
          local_evaluated.push_back(
              {i, {plan.layout, "", peak, FinishPrediction(plan, st.step_time_s, st.breakdown)}});
        }
        if (local.size() > 4 * keep) {
          std::nth_element(local.begin(), local.begin() + static_cast<std::ptrdiff_t>(keep), local.end(), Ranks);
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
    if (local_short < shortfall || (local_short == shortfall && local_short_index < shortfall_index)) {
      shortfall = local_short;
      shortfall_layout = local_short_layout;
      shortfall_index = local_short_index;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& t : pool) t.join();

  if (oom > 0) rej.counts["out_of_memory"] = oom;
  std::sort(evaluated.begin(), evaluated.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& e : evaluated) result.candidates.push_back(std::move(e.second));
  std::sort(best.begin(), best.end(), Ranks);
  if (best.size() > keep) best.resize(keep);
  result.plans = SimulateTop(best, BasePlan(model, cluster, training, options), options.db, threads);
  result.rejected = rej.counts;
  if (shortfall != std::numeric_limits<int64_t>::max()) {
    result.smallest_shortfall_bytes = shortfall;
    result.smallest_shortfall_layout = shortfall_layout;
  }
  result.search_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace parallax::planner

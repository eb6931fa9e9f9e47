#include "planner/estimate/sync_modes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <tuple>

#include "model/compression_kernels.h"
#include "model/counting.h"
#include "planner/cost/collective.h"
#include "planner/cost/compute.h"
#include "planner/cost/noise.h"
#include "planner/cost/placement.h"
#include "planner/estimate/prediction.h"

namespace parallax::planner {
namespace {

constexpr uint64_t kSeed = 41;
//! Iterations simulated per worker: enough for stable means, bounded for large W.
int64_t SimulatedIterations(int64_t workers) { return std::clamp<int64_t>(200000 / std::max<int64_t>(workers, 1), 20, 400); }

//! Seeded draws of one worker iteration's time: its work times a lognormal jitter (median 1), plus
//! the calibrated system noise over that work (NoiseModel::Draw: a detour less its mean, which the
//! costed ops already carry), so that synchronizations wait for the latest worker as measured.
class IterationDraw {
 public:
  IterationDraw(double sigma, const NoiseModel& noise) : sigma_(sigma), noise_(noise), rng_(kSeed) {}
  double operator()(double work_s) {
    const double jitter = sigma_ > 0 ? std::exp(sigma_ * normal_(rng_)) : 1.0;
    return std::max(0.0, work_s * jitter + noise_.Draw(work_s, uniform_(rng_)));
  }

 private:
  double sigma_;
  const NoiseModel& noise_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_;
  std::uniform_real_distribution<double> uniform_;
};

//! Each data-parallel replica's fixed slowdown: its slowest rank's.
std::vector<double> ReplicaFactors(const Plan& plan) {
  const Layout& l = plan.layout;
  std::vector<double> f(static_cast<size_t>(l.dp), 1.0);
  for (int64_t d = 0; d < l.dp; ++d) {
    for (int64_t t = 0; t < l.tp; ++t) {
      for (int64_t c = 0; c < l.cp; ++c) {
        for (int64_t p = 0; p < l.pp; ++p) {
          f[static_cast<size_t>(d)] = std::max(
              f[static_cast<size_t>(d)], plan.cluster.stragglers.FactorOf(GlobalRank(l, t, c, d, p), plan.cluster.gpus_per_node));
        }
      }
    }
  }
  return f;
}

//! What one worker iteration and its exchange cost.
struct IterationCosts {
  double compute_s = 0;
  double exchange_s = 0;  //!< synchronous modes: after the slowest (or W-B-th) worker
  double push_s = 0;      //!< async/ssp: a worker's own push and pull
  double serve_s = 0;     //!< async/ssp: one push at one server shard
  //! Compression: each worker's kernels on its own gradient, after its compute (and lag), before
  //! the exchange (KernelRun::own); priced at the in-step share, as compute_s.
  double own_s = 0;
  //! Synchronous PS: when each worker restarts after the exchange (empty: every worker at once).
  std::vector<double> restart_s;
};

//! The (rows, cols) of every weight matrix of one model replica (per TP rank) for PowerSGD: the
//! word embedding, learned positions (not split over TP), the layers' four, an untied LM head.
std::vector<std::pair<double, double>> Matrices(const ModelSpec& m, int64_t tp) {
  const double h = static_cast<double>(m.hidden), t = static_cast<double>(tp);
  const double ffn = static_cast<double>(m.ffn_hidden) * (m.mlp == MlpKind::kSwiglu ? 2.0 : 1.0);
  std::vector<std::pair<double, double>> out{{static_cast<double>(m.vocab) / t, h}};
  if (m.position == PositionKind::kLearned) out.push_back({static_cast<double>(m.seq_len), h});
  if (!m.tie_embeddings) out.push_back({static_cast<double>(m.vocab) / t, h});
  for (int64_t i = 0; i < m.layers; ++i) {
    out.push_back({h, (h + 2.0 * static_cast<double>(m.kv_dim())) / t});
    out.push_back({h / t, h});
    out.push_back({h, ffn / t});
    out.push_back({static_cast<double>(m.ffn_hidden) / t, h});
  }
  return out;
}

//! One call of compression kernel `k` on `units`: its calibrated family where the CostDb has one
//! (ComputeModel::MemoryBound: interpolated in log bytes, as every kernel curve), else its bytes at
//! the device's streaming bandwidth (calibrate sets hbm_GBps to its measured copy rate) and
//! PowerSGD's products at the fp32 peak, as this estimate charged them before calibrate timed them.
double KernelCallTime(const ComputeModel& compute, const DeviceSpec& d, CompressionKernel k, double units) {
  const double bytes = units * BytesPerUnit(k);
  if (compute.HasKernelFamily(KernelFamily(k))) return compute.MemoryBound(KernelFamily(k), bytes);
  if (FlopsPerUnit(k) > 0) return units * FlopsPerUnit(k) / (std::max(d.peak_tflops.fp32, 1e-3) * 1e12);
  return bytes / (std::max(d.hbm_GBps, 1.0) * 1e9);
}

//! Compression's host kernels and its exchanges over the data-parallel group per iteration, as the
//! executor runs them (model/compression_kernels.h CompressionStepOf): the kernels on a worker's own
//! gradient into c.own_s, the exchanges on the host plane (Communicator::HostAllGather /
//! HostAllReduce, priced with its calibrated curves where there are some) and the kernels after the
//! first exchange into c.exchange_s.
void PriceCompression(const Plan& plan, const CollectiveModel& cm, const PlacedGroup& g, double params,
                      const CostDb* db, IterationCosts& c) {
  const CompressionStep step =
      CompressionStepOf(plan.layout.sync, params, plan.layout.dp, Matrices(plan.model, plan.layout.tp));
  ComputeModel compute(plan.cluster.device, DType::kFp32, db);
  compute.set_time_share(plan.layout.ComputeShareOn(plan.cluster));
  for (const KernelRun& k : step.kernels) {
    (k.own ? c.own_s : c.exchange_s) +=
        static_cast<double>(k.calls) * KernelCallTime(compute, plan.cluster.device, k.kernel, k.units);
  }
  for (const HostExchange& x : step.exchanges) c.exchange_s += static_cast<double>(x.calls) * cm.HostTime(x.op, x.bytes, g);
}

//! How the workers of one node share its CPUs (ClusterSpec::SlowestCoreShare): the workers are the
//! node's busy ranks (Layout::BusyRanksPerNode), a data-parallel replica's ranks at a time.
struct CoreSharing {
  const ClusterSpec& cluster;
  int64_t per_node = 1;         //!< busy ranks per node (Layout::BusyRanksPerNode)
  int64_t ranks_per_worker = 1;  //!< a data-parallel replica's ranks (tp x cp x pp)
  //! The share the estimate's compute carries: every worker of a node computing, in step.
  double InStep() const { return cluster.SlowestCoreShare(per_node); }
  //! A worker's slowdown `f` (a straggler: model/reliability.h) and the share of its CPU do not
  //! compound in an unsynchronised iteration: the executor's injected straggler sleeps, leaving its
  //! CPU to the others (docs/classic_modes.md), so it takes max(f, share) times its unshared compute.
  static double Slowdown(double f, double share) { return std::max(f, share); }
  //! Each of `n` workers' CPU: per node, its workers in a seeded random order, spread evenly over
  //! the node's WorkerCpus() CPUs (ids unique over the nodes). Without sharing, a CPU (or a GPU) each.
  std::vector<size_t> SpreadOverCpus(size_t n) const {
    std::vector<size_t> cpu(n), order;
    std::iota(cpu.begin(), cpu.end(), size_t{0});
    if (InStep() <= 1) return cpu;
    std::mt19937_64 rng(kSeed + 2);
    const auto per = static_cast<size_t>(WorkersPerNode()), cpus = static_cast<size_t>(WorkerCpus());
    for (size_t first = 0; first < n; first += per) {
      order.resize(std::min(n, first + per) - first);
      std::iota(order.begin(), order.end(), first);
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t p = 0; p < order.size(); ++p) cpu[order[p]] = first + p % cpus;
    }
    return cpu;
  }
  //! Workers per node and the CPUs they have, in replicas.
  int64_t WorkersPerNode() const { return std::max<int64_t>(1, per_node / ranks_per_worker); }
  int64_t WorkerCpus() const { return std::max<int64_t>(1, cluster.cpus_per_node / ranks_per_worker); }
};

//! Worker iterations on their nodes' CPUs, event by event. An iteration is the worker's compute,
//! then an injected straggler's lag of f - 1 times its elapsed compute (the executor's straggler
//! sleeps after its backward), then its own work before the exchange (`own_s`: compression's kernels
//! on its own gradient). Without sharing (GPUs, or CPUs enough) that takes compute x f + own.
//! Where a node's workers outnumber its CPUs (docs/classic_modes.md "Ranks that outnumber the
//! CPUs"): a worker that starts an iteration, or wakes from its lag, takes the CPU of its node with
//! the fewest workers computing (ties at random; workers waking together in a random order) and keeps
//! it until it leaves (the operating system does not move a running rank: 3 ranks on 2 CPUs step at
//! the pace of the CPU holding two, not at 1.5x); the m workers computing on one CPU advance in
//! turn, each at 1/m. A straggler's lag leaves the CPU to the others, so it compounds with the
//! sharing only when it shared a CPU; a worker without lag goes on (with its own work, or its next
//! iteration) on the same CPU.
class WorkerTimeline {
 public:
  WorkerTimeline(const CoreSharing& sharing, double compute_s, double own_s = 0)
      : sharing_(sharing), compute_s_(compute_s), own_s_(own_s), rng_(kSeed + 1) {}
  //! Worker w starts at start[w] and runs `iterations` iterations back to back; finish[w]: when its
  //! last one ends.
  void Run(const std::vector<double>& start, const std::vector<double>& f, int64_t iterations, IterationDraw& draw,
           std::vector<double>& finish) {
    const size_t n = f.size();
    finish.resize(n);
    if (sharing_.InStep() <= 1) {
      for (size_t w = 0; w < n; ++w) {
        finish[w] = start[w];
        for (int64_t i = 0; i < iterations; ++i) finish[w] += draw(compute_s_ * f[w]) + own_s_;
      }
      return;
    }
    Shared(start, f, iterations, draw, finish);
  }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();
  enum class Phase { kCompute, kOwn };

  void Shared(const std::vector<double>& start, const std::vector<double>& f, int64_t iterations, IterationDraw& draw,
              std::vector<double>& finish) {
    const size_t n = f.size(), per = static_cast<size_t>(sharing_.WorkersPerNode());
    const size_t cpus = static_cast<size_t>(sharing_.WorkerCpus());
    const double alone_s = compute_s_ / sharing_.InStep(), own_alone_s = own_s_ / sharing_.InStep();
    left_.assign(n, iterations);
    work_.assign(n, 0.0);
    began_.assign(n, 0.0);
    wake_ = start;
    cpu_.assign(n, kNone);
    phase_.assign(n, Phase::kCompute);
    computing_.assign((n + per - 1) / per * cpus, 0);
    double now = 0;
    const auto place = [&](size_t w) {
      // The least busy CPU of the worker's node, ties at random.
      const size_t first = w / per * cpus;
      size_t best = first, ties = 0;
      for (size_t k = first; k < first + cpus; ++k) {
        if (computing_[k] < computing_[best]) {
          best = k;
          ties = 1;
        } else if (computing_[k] == computing_[best] && std::uniform_int_distribution<size_t>(0, ties++)(rng_) == 0) {
          best = k;
        }
      }
      cpu_[w] = best;
      ++computing_[best];
    };
    const auto begin = [&](size_t w, Phase phase) {  // on the CPU it holds
      phase_[w] = phase;
      began_[w] = now;
      work_[w] = phase == Phase::kCompute ? draw(alone_s) : own_alone_s;
      wake_[w] = kNever;
    };
    const auto leave = [&](size_t w, double wake) {
      --computing_[cpu_[w]];
      cpu_[w] = kNone;
      wake_[w] = wake;
    };
    // Workers waking at the same time take their CPUs in a random order.
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), size_t{0});
    std::shuffle(order_.begin(), order_.end(), rng_);
    for (;;) {
      size_t next = kNone;
      double at = kNever;
      for (size_t w : order_) {
        const double t = cpu_[w] != kNone ? now + work_[w] * static_cast<double>(computing_[cpu_[w]]) : wake_[w];
        if (t < at) {
          at = t;
          next = w;
        }
      }
      if (next == kNone) break;
      for (size_t w = 0; w < n; ++w) {
        if (cpu_[w] != kNone) work_[w] -= (at - now) / static_cast<double>(computing_[cpu_[w]]);
      }
      now = at;
      const size_t w = next;
      if (cpu_[w] == kNone) {  // wakes: takes a CPU
        place(w);
        begin(w, phase_[w]);
        continue;
      }
      const double lag = phase_[w] == Phase::kCompute ? (f[w] - 1) * (now - began_[w]) : 0;
      // After the lag, the worker's own work where it has some (on the CPU it wakes to, or the one
      // it holds); else its iteration ends when the lag does, and the next one starts then.
      const Phase next_phase = phase_[w] == Phase::kCompute && own_alone_s > 0 ? Phase::kOwn : Phase::kCompute;
      if (next_phase == Phase::kCompute && --left_[w] == 0) {
        finish[w] = now + lag;
        leave(w, kNever);
      } else if (lag > 0) {
        phase_[w] = next_phase;
        leave(w, now + lag);
      } else {
        begin(w, next_phase);
      }
    }
  }

  const CoreSharing& sharing_;
  double compute_s_, own_s_;
  std::mt19937_64 rng_;
  std::vector<int64_t> left_, computing_;
  std::vector<double> work_, began_, wake_;
  std::vector<size_t> cpu_, order_;
  std::vector<Phase> phase_;
};

//! One worker iteration's compute from the all-reduce estimate: its step without the exposed DP
//! time (which holds the step's grad-norm synchronization and the wait there for the latest rank).
double IterationCompute(const StepTime& ar) { return ar.step_time_s - ar.breakdown.dp_comm_s; }

//! The all-reduce's exposed DP time without the calibrated wait for the latest rank: the classic
//! modes' event simulations draw that wait themselves (IterationDraw).
double AllReduceExchange(const PlanCosts& pc, const StepTime& ar) {
  return std::max(0.0, ar.breakdown.dp_comm_s - pc.clip_sync_noise_s);
}

IterationCosts CostsOf(const Plan& plan, const PlanCosts& pc, const StepTime& ar, const CostDb* db) {
  const SyncMode& s = plan.layout.sync;
  const RankCost& r0 = pc.ranks[0];
  const double params = static_cast<double>(r0.params), grad = params * 4;
  const double w = static_cast<double>(plan.layout.dp), servers = static_cast<double>(std::max<int64_t>(s.servers, 1));
  const CollectiveModel cm(plan.cluster, db, plan.implementation.dp_algorithm.value);
  const PlacedGroup dp = PlaceGroup(plan.layout, plan.cluster, GroupKind::kDp);
  // One message between two ranks, across nodes when the job spans them (the calibrated send/recv
  // curve where there is one).
  const PlacedGroup pair = PlaceRanks(plan.cluster, 0, 2, plan.cluster.nodes > 1 ? plan.cluster.gpus_per_node : 1);
  // Messages go through the host mailbox: its calibrated curve where there is one (HostTime).
  const auto p2p = [&](double bytes) { return cm.HostTime(CollectiveKind::kSendRecv, bytes, pair); };
  IterationCosts c;
  c.compute_s = IterationCompute(ar);
  if (s.uses_servers()) {
    // Workers no longer run the optimizer: each server updates its shard.
    c.compute_s -= r0.optimizer_s;
    const double opt = r0.optimizer_s / servers, shard = grad / servers;
    // A worker's link carries its whole gradient out and the weights in; each server's carries
    // every worker's push and pull of its shard (incast). The sends overlap: one latency each way.
    const double own = 2 * p2p(grad), server_link = 2 * p2p(w * shard);
    const double links = s.colocated ? own + server_link : std::max(own, server_link);
    c.push_s = own;
    c.serve_s = 2 * p2p(shard) + opt;
    c.exchange_s = links + opt;  // async/ssp report push_s; their events price the rest
    if (s.kind == SyncKind::kPs) {
      // Synchronous: the pushes in (half the links' traffic), the update, then each server answers
      // the workers one after another in worker order (ShardServer::FinishSyncStep), so worker v
      // restarts after v + 1 answers (and no sooner than its own link brings every shard in), a
      // colocated host after its last answer.
      c.exchange_s = links / 2 + opt;
      const double answer = p2p(shard);
      c.restart_s.resize(static_cast<size_t>(plan.layout.dp));
      for (size_t v = 0; v < c.restart_s.size(); ++v) {
        const bool host = s.colocated && static_cast<double>(v) < servers;
        c.restart_s[v] = std::max(own / 2, static_cast<double>(host ? c.restart_s.size() : v + 1) * answer);
      }
    }
  } else if (s.kind == SyncKind::kBackup) {
    // The executor's coordinator: the W-B gradients in, the weights out to W-1 workers.
    c.exchange_s = (2 * w - static_cast<double>(s.backup_workers) - 1) * p2p(grad);
  } else if (s.kind == SyncKind::kLocal) {
    // The executor's average (RunLocalSgd): the weights and both Adam moments, each summed in
    // doubles over the host plane, every H iterations.
    c.exchange_s = 3 * cm.HostTime(CollectiveKind::kAllReduce, params * 8, dp) / static_cast<double>(s.local_steps);
  } else if (s.compression != CompressionKind::kNone) {
    PriceCompression(plan, cm, dp, params, db, c);
  } else {
    c.exchange_s = AllReduceExchange(pc, ar);
  }
  return c;
}

//! Mean seconds per synchronous step: the k-th worker to finish (k = W: the slowest) plus the
//! exchange. Worker w restarts restart[w] after the exchange ends (a server's answers in turn).
double OrderStatisticSteps(const std::vector<double>& f, const std::vector<double>& restart, IterationDraw& draw,
                           WorkerTimeline& timeline, double exchange_s, size_t k, int64_t steps) {
  std::vector<double> t;
  double sum = 0;
  for (int64_t i = 0; i < steps; ++i) {
    timeline.Run(restart, f, 1, draw, t);
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(k - 1), t.end());
    sum += t[k - 1] + exchange_s;
  }
  return sum / static_cast<double>(steps);
}

//! Local SGD: each period of H iterations, every worker starting together after the average, ends
//! when the slowest worker finishes its H; between averages each runs on at its own pace.
double LocalSteps(const std::vector<double>& f, IterationDraw& draw, WorkerTimeline& timeline, double exchange_s,
                  int64_t h, int64_t steps) {
  double sum = 0;
  const int64_t periods = std::max<int64_t>(1, steps / h);
  const std::vector<double> together(f.size(), 0.0);
  std::vector<double> t;
  for (int64_t i = 0; i < periods; ++i) {
    timeline.Run(together, f, h, draw, t);
    sum += *std::max_element(t.begin(), t.end()) / static_cast<double>(h) + exchange_s;
  }
  return sum / static_cast<double>(periods);
}

struct StaleRun {
  double seconds_per_round = 0;  //!< wall time per W iterations
  std::vector<int64_t> staleness;
};

//! Async (bound = infinity) and SSP: workers push to a server queue served in arrival order; a
//! worker starts its next iteration with the weights the server answers, and under SSP only while
//! its clock is at most `bound` ahead of the slowest. Staleness = updates between pull and push.
//! Colocated shards (`hosts` > 0) are served by workers 0..hosts-1 between their own iterations
//! only: a push waits while a host computes. Throughput: the time until W * iters gradients are
//! applied, whoever pushed them (a fast worker contributes more under async).
StaleRun SimulateStale(const std::vector<double>& f, IterationDraw& draw, const IterationCosts& c, int64_t bound,
                       size_t hosts, int64_t iters, const CoreSharing& sharing) {
  const size_t n = f.size();
  if (n == 0) return {};
  using Arrival = std::pair<double, size_t>;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> queue;
  std::vector<int64_t> clock(n, 0), pulled(n, 0);
  std::vector<double> started(n, 0), busy_until(n, 0);  //!< each worker's current compute
  std::vector<size_t> waiting;
  int64_t version = 0;
  double server_free = 0, end = 0;
  StaleRun run;
  // Unshared compute: an iteration runs at the share of its CPU, the workers on that CPU (sharing's
  // spread, kept for the run) computing when it starts, those starting with it included.
  const double alone_s = c.compute_s / sharing.InStep();
  const std::vector<size_t> cpu = sharing.SpreadOverCpus(n);
  auto start = [&](const std::vector<size_t>& ws, double t) {
    for (size_t w : ws) {
      pulled[w] = version;
      started[w] = t;
      busy_until[w] = std::numeric_limits<double>::infinity();  // starting: counts as computing
    }
    std::vector<double> until(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) {
      int64_t on_cpu = 0;
      for (size_t v = 0; v < n; ++v) on_cpu += cpu[v] == cpu[ws[i]] && t < busy_until[v] ? 1 : 0;
      until[i] = t + draw(alone_s * CoreSharing::Slowdown(f[ws[i]], static_cast<double>(on_cpu)));
    }
    for (size_t i = 0; i < ws.size(); ++i) {
      busy_until[ws[i]] = until[i];
      queue.push({until[i] + c.push_s / 2, ws[i]});
    }
  };
  std::vector<size_t> everyone(n);
  std::iota(everyone.begin(), everyone.end(), size_t{0});
  start(everyone, 0);
  const auto total = static_cast<int64_t>(n) * iters;
  while (!queue.empty() && version < total) {
    const auto [arrival, w] = queue.top();
    queue.pop();
    double begin = std::max(server_free, arrival);
    for (size_t h = 0; h < std::min(hosts, n); ++h) {
      if (started[h] <= begin && begin < busy_until[h]) begin = busy_until[h];
    }
    server_free = begin + c.serve_s;
    const auto stale = static_cast<size_t>(version - pulled[w]);
    if (run.staleness.size() <= stale) run.staleness.resize(stale + 1, 0);
    ++run.staleness[stale];
    ++version;
    ++clock[w];
    busy_until[w] = 0;
    end = std::max(end, server_free + c.push_s / 2);
    waiting.push_back(w);
    const int64_t slowest = *std::min_element(clock.begin(), clock.end());
    std::vector<size_t> still, go;
    for (size_t v : waiting) (clock[v] - slowest <= bound ? go : still).push_back(v);
    start(go, server_free + c.push_s / 2);
    waiting = std::move(still);
  }
  run.seconds_per_round = end / static_cast<double>(iters);
  return run;
}

}  // namespace

ModeEstimate EstimateSyncMode(const Plan& plan, const PlanCosts& pc, const StepTime& allreduce, const CostDb* db) {
  const SyncMode& s = plan.layout.sync;
  const IterationCosts c = CostsOf(plan, pc, allreduce, db);
  const std::vector<double> f = ReplicaFactors(plan);
  const Layout& l = plan.layout;
  const CoreSharing sharing{plan.cluster, l.BusyRanksPerNode(plan.cluster.gpus_per_node), l.tp * l.cp * l.pp};
  const double sigma = plan.cluster.stragglers.jitter_sigma;
  const NoiseModel noise = db != nullptr ? NoiseModel(db->noise, db->run_op_times) : NoiseModel();
  const int64_t steps = SimulatedIterations(plan.layout.dp);
  ModeEstimate e;
  e.compute_s = c.compute_s;
  e.exchange_s = c.exchange_s;
  IterationDraw ar_draw(sigma, noise);
  WorkerTimeline ar_timeline(sharing, IterationCompute(allreduce));
  const std::vector<double> together(f.size(), 0.0);
  e.allreduce_step_time_s =
      OrderStatisticSteps(f, together, ar_draw, ar_timeline, AllReduceExchange(pc, allreduce), f.size(), steps);
  IterationDraw draw(sigma, noise);
  WorkerTimeline timeline(sharing, c.compute_s, c.own_s);
  if (s.is_stale()) {
    const int64_t bound = s.kind == SyncKind::kSsp ? s.staleness : std::numeric_limits<int64_t>::max() / 2;
    const StaleRun run =
        SimulateStale(f, draw, c, bound, s.colocated ? static_cast<size_t>(s.servers) : 0, steps, sharing);
    e.step_time_s = run.seconds_per_round;
    e.exchange_s = c.push_s;
    int64_t total = 0;
    for (int64_t k : run.staleness) total += k;
    for (size_t k = 0; k < run.staleness.size(); ++k) {
      const double p = static_cast<double>(run.staleness[k]) / static_cast<double>(std::max<int64_t>(total, 1));
      e.staleness.push_back(p);
      e.mean_staleness += p * static_cast<double>(k);
    }
  } else if (s.kind == SyncKind::kLocal) {
    e.step_time_s = LocalSteps(f, draw, timeline, c.exchange_s, s.local_steps, steps);
  } else {
    const size_t k = f.size() - static_cast<size_t>(s.kind == SyncKind::kBackup ? s.backup_workers : 0);
    e.step_time_s = OrderStatisticSteps(f, c.restart_s.empty() ? together : c.restart_s, draw, timeline,
                                        c.exchange_s, k, steps);
  }
  if (!s.is_stale()) e.exchange_s += c.own_s;  // compression's own kernels count as its exchange
  e.wait_s = std::max(0.0, e.step_time_s - c.compute_s - (s.is_stale() ? 0.0 : e.exchange_s));
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
  e.tokens_per_s = static_cast<double>(plan.layout.global_batch * seq) / e.step_time_s;
  return e;
}

StepTime WithSyncMode(const Plan& plan, const PlanCosts& pc, const StepTime& allreduce, const CostDb* db) {
  if (plan.layout.sync.is_default() && plan.cluster.stragglers.empty()) return allreduce;
  const ModeEstimate e = EstimateSyncMode(plan, pc, allreduce, db);
  StepTime st = allreduce;
  // The change lands in the bubble (waits) so the breakdown still sums to the step.
  st.breakdown.bubble_s = std::max(0.0, st.breakdown.bubble_s + e.step_time_s - st.step_time_s);
  st.step_time_s = e.step_time_s;
  return st;
}

Json ModeEstimateToJson(const ModeEstimate& e) {
  Json j{{"step_time_s", e.step_time_s},
         {"allreduce_step_time_s", e.allreduce_step_time_s},
         {"compute_s", e.compute_s},
         {"exchange_s", e.exchange_s},
         {"wait_s", e.wait_s},
         {"tokens_per_s", e.tokens_per_s}};
  if (!e.staleness.empty()) {
    j["staleness_distribution"] = e.staleness;
    j["mean_staleness"] = e.mean_staleness;
  }
  return j;
}

Goodput EstimateGoodput(const Plan& plan, double step_time_s, double tokens_per_step) {
  const FailureSpec& fs = plan.cluster.failures;
  Goodput g;
  const int64_t gpus = plan.layout.job_ranks();
  g.job_mtbf_s = fs.JobMtbfSeconds(gpus, plan.cluster.gpus_per_node);
  // Weights and Adam state (16 B per parameter in mixed precision, 12 in fp32) per GPU at 2 GB/s.
  const double params_per_gpu = static_cast<double>(CountModel(plan.model).params_total) / static_cast<double>(plan.layout.tp * plan.layout.pp);
  g.checkpoint_write_s = fs.checkpoint_write_s > 0 ? fs.checkpoint_write_s : params_per_gpu * 16 / 2e9;
  g.checkpoint_restore_s = fs.checkpoint_restore_s;
  const double m = g.job_mtbf_s, d = g.checkpoint_write_s;
  if (!std::isfinite(m)) {
    g.interval_s = std::numeric_limits<double>::infinity();
    g.effective_tokens_per_s = tokens_per_step / step_time_s;
    return g;
  }
  g.interval_s = d < m / 2 ? std::sqrt(2 * d * m) - d : m;
  // Per interval: tau useful, delta written; per failure: the restore and half an interval redone.
  const double lost = (g.checkpoint_restore_s + (g.interval_s + d) / 2) / m;
  g.goodput = std::max(0.0, g.interval_s / (g.interval_s + d) * (1 - lost));
  g.effective_tokens_per_s = g.goodput * tokens_per_step / step_time_s;
  return g;
}

Json GoodputToJson(const Goodput& g) {
  return Json{{"job_mtbf_s", g.job_mtbf_s},         {"checkpoint_write_s", g.checkpoint_write_s},
              {"checkpoint_restore_s", g.checkpoint_restore_s}, {"checkpoint_interval_s", g.interval_s},
              {"goodput", g.goodput},               {"effective_tokens_per_s", g.effective_tokens_per_s}};
}

}  // namespace parallax::planner

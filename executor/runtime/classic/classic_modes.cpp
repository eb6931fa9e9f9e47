#include "executor/runtime/classic/classic_modes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "executor/mailbox.h"
#include "executor/runtime/classic/compression.h"
#include "executor/runtime/classic/exchange_trace.h"
#include "executor/runtime/classic/flat_model.h"
#include "executor/runtime/classic/shard_server.h"
#include "executor/runtime/classic/worker_data.h"
#include "executor/runtime/collective_status.h"
#include "executor/runtime/optimizer.h"

namespace parallax::executor {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kStalenessBuckets = 64;  //!< staleness >= 63 is counted in the last bucket

//! One worker iteration, as every rank gathers it (doubles: one all-gather moves them).
struct Record {
  double step = -1;  //!< the step it ran (-1: none)
  double loss = 0;
  double end_s = 0;       //!< since the job's common start
  double duration_s = 0;  //!< the iteration's wall time, exchange included
  double grad_norm = 0;
};

//! What one rank of a classic-mode job works with.
struct Job {
  const Plan* plan = nullptr;
  Backend* be = nullptr;
  Communicator* world = nullptr;
  Mailbox* mb = nullptr;
  const TrainingRunOptions* o = nullptr;
  SyncMode mode;
  int64_t workers = 1, steps = 1;
  int rank = 0;
  InjectSlow slow;
  Clock::time_point t0;
  std::vector<Record> records;
  std::vector<int64_t> staleness;
  int64_t dropped = 0;
  ExchangeTrace trace;  //!< on with `run --trace`

  int ServerRank(int64_t s) const { return static_cast<int>(mode.colocated ? s : workers + s); }
  double Since(Clock::time_point t) const { return std::chrono::duration<double>(Clock::now() - t).count(); }
  //! A slice of this worker's exchange lane until the returned span ends.
  ExchangeSpan Span(ExchangeName name, int64_t bytes = -1) {
    return {&trace, ExchangeLane::kWorker, rank, name, bytes};
  }
};

// ---- worker iterations ------------------------------------------------------------------------

//! One step with the mode's exchange; an injected straggler sleeps after its backward passes;
//! `after` (local SGD's average) counts in the iteration's time.
Status TimedStep(Job& j, Trainer& t, const GradientHook& exchange, const std::function<Status()>& after = {}) {
  const auto start = Clock::now();
  GradientHook hook = [&](Trainer& tr) -> Result<bool> {
    PX_TRY(j.slow.SleepAfterBackward(j.rank, start, *j.be));
    if (!exchange) return true;
    return exchange(tr);
  };
  const int64_t step = t.step();
  PX_ASSIGN(const StepResult r, t.Step(hook));
  if (after) PX_TRY(after());
  if (step < j.steps) {
    j.records[static_cast<size_t>(step)] = {static_cast<double>(step), r.loss, j.Since(j.t0), j.Since(start),
                                            r.grad_norm};
  }
  return {};
}

ExchangeName CompressionSliceName(CompressionKind k) {
  switch (k) {
    case CompressionKind::kBf16: return ExchangeName::kBf16;
    case CompressionKind::kInt8: return ExchangeName::kInt8;
    case CompressionKind::kTopK: return ExchangeName::kTopK;
    case CompressionKind::kPowerSgd: return ExchangeName::kPowerSgd;
    default: return ExchangeName::kAllReduce;
  }
}

Status RunCompressed(Job& j, Trainer& t) {
  const FlatModel flat(t.model().groups());
  GradientCompressor c(j.mode, flat.params(), flat.size());
  std::vector<float> g;
  const GradientHook exchange = [&](Trainer&) -> Result<bool> {
    {
      ExchangeSpan read = j.Span(ExchangeName::kReadGrads);
      flat.ReadGrads(*j.be, &g);
    }
    {
      ExchangeSpan reduce = j.Span(CompressionSliceName(j.mode.compression));
      PX_TRY(c.MeanOverWorkers(*j.world, &g));
      reduce.set_bytes(c.wire_bytes());
    }
    flat.WriteGrads(*j.be, g);
    return true;
  };
  for (int64_t i = 0; i < j.steps; ++i) PX_TRY(TimedStep(j, t, exchange));
  return {};
}

Status RunLocalSgd(Job& j, Trainer& t) {
  const FlatModel flat(t.model().groups());
  std::vector<float> w;
  std::vector<double> d;
  bool average = false;
  // The weights and the Adam moments, so every worker restarts from one state.
  const auto average_models = [&]() -> Status {
    if (!average) return {};
    ExchangeSpan span = j.Span(ExchangeName::kAverage, 3 * flat.size() * 4);
    for (FlatModel::Part part : {FlatModel::Part::kWeights, FlatModel::Part::kAdamM, FlatModel::Part::kAdamV}) {
      flat.Read(*j.be, part, &w);
      d.assign(w.begin(), w.end());
      PX_TRY(j.world->HostAllReduce(d.data(), static_cast<int64_t>(d.size()), ReduceOp::kSum));
      for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(d[k] / static_cast<double>(j.workers));
      flat.Write(*j.be, part, w);
    }
    return {};
  };
  for (int64_t i = 0; i < j.steps; ++i) {
    average = (i + 1) % j.mode.local_steps == 0;
    PX_TRY(TimedStep(j, t, {}, average_models));
  }
  return {};
}

// ---- parameter servers ------------------------------------------------------------------------

//! Waits for a message, serving the colocated shard (if any) meanwhile so no rank waits on itself.
Status Await(Job& j, int peer, int tag, ShardServer* serve, std::vector<char>* msg) {
  if (serve == nullptr) return ReceiveMessage(*j.mb, peer, tag, msg);
  const auto start = Clock::now();
  for (;;) {
    int source = -1;
    PX_ASSIGN(const bool ready, j.mb->Poll(peer, tag, &source, nullptr));
    if (ready) return ReceiveMessage(*j.mb, peer, tag, msg);
    PX_TRY(serve->Serve(false));
    if (j.Since(start) > kMailboxWaitS) {
      return Error{"classic mode: rank " + std::to_string(j.rank) + " got no answer from rank " + std::to_string(peer),
                   ErrorKind::kInternal};
    }
    std::this_thread::yield();
  }
}

//! Worker 0 sends each server its range's parameters and initial weights; the server builds its shard.
Status SendShards(Job& j, const FlatModel& flat) {
  std::vector<float> w;
  flat.ReadWeights(*j.be, &w);
  for (int64_t s = 0; s < j.mode.servers; ++s) {
    const int64_t lo = ShardBegin(flat.size(), s, j.mode.servers), hi = ShardBegin(flat.size(), s + 1, j.mode.servers);
    std::vector<int64_t> head{hi - lo};
    for (const FlatParam& p : ParamsInRange(flat.params(), lo, hi)) {
      head.insert(head.end(), {p.offset, p.rows, p.cols, p.decay ? 1 : 0});
    }
    std::vector<char> msg(8 + head.size() * 8 + static_cast<size_t>(hi - lo) * 4);
    const int64_t words = static_cast<int64_t>(head.size());
    std::memcpy(msg.data(), &words, 8);
    std::memcpy(msg.data() + 8, head.data(), head.size() * 8);
    std::memcpy(msg.data() + 8 + head.size() * 8, w.data() + lo, static_cast<size_t>(hi - lo) * 4);
    PX_TRY(j.mb->Post(j.ServerRank(s), kTagInit, msg.data(), static_cast<int64_t>(msg.size())));
  }
  return {};
}

Result<std::unique_ptr<ShardServer>> ReceiveShard(Job& j, int64_t shard, Communicator* servers) {
  std::vector<char> msg;
  PX_TRY(ReceiveMessage(*j.mb, 0, kTagInit, &msg));
  int64_t words = 0;
  std::memcpy(&words, msg.data(), 8);
  std::vector<int64_t> head(static_cast<size_t>(words));
  std::memcpy(head.data(), msg.data() + 8, head.size() * 8);
  std::vector<FlatParam> params;
  for (size_t k = 1; k + 3 < head.size(); k += 4) {
    params.push_back({.offset = head[k], .rows = head[k + 1], .cols = head[k + 2], .decay = head[k + 3] != 0});
  }
  std::vector<float> w(static_cast<size_t>(head[0]));
  std::memcpy(w.data(), msg.data() + 8 + head.size() * 8, w.size() * 4);
  PX_ASSIGN(auto opt, ShardOptimizer::Create(*j.be, w, std::move(params), j.plan->training));
  const ServerSetup setup{.mode = j.mode,
                          .shard = shard,
                          .workers = j.workers,
                          .steps = j.steps,
                          .grad_clip = j.plan->training.grad_clip,
                          .servers = servers,
                          .trace = &j.trace};
  return std::make_unique<ShardServer>(*j.mb, setup, std::move(opt));
}

Status RunPsWorker(Job& j, Trainer& t, ShardServer* colocated) {
  const FlatModel flat(t.model().groups());
  const int64_t n = flat.size(), shards = j.mode.servers;
  std::vector<double> version(static_cast<size_t>(shards), 0);
  std::vector<float> g, w(static_cast<size_t>(n));
  std::vector<char> msg;
  const GradientHook exchange = [&](Trainer& tr) -> Result<bool> {
    {
      ExchangeSpan read = j.Span(ExchangeName::kReadGrads);
      flat.ReadGrads(*j.be, &g);
    }
    const double clip = ClipScale(std::sqrt(SumSquares(g)), j.plan->training.grad_clip);
    for (int64_t s = 0; s < shards; ++s) {
      const int64_t lo = ShardBegin(n, s, shards), hi = ShardBegin(n, s + 1, shards);
      ExchangeSpan push = j.Span(ExchangeName::kPush, (hi - lo) * 4);
      const PushHeader h{.version = version[static_cast<size_t>(s)], .iteration = static_cast<double>(tr.step()),
                         .clip_scale = clip, .kind = 0};
      msg.resize(sizeof(h) + static_cast<size_t>(hi - lo) * 4);
      std::memcpy(msg.data(), &h, sizeof(h));
      std::memcpy(msg.data() + sizeof(h), g.data() + lo, static_cast<size_t>(hi - lo) * 4);
      push.FlowOut({FlowKind::kPush, j.rank, s, tr.step()});
      PX_TRY(j.mb->Post(j.ServerRank(s), kTagPush, msg.data(), static_cast<int64_t>(msg.size())));
    }
    for (int64_t s = 0; s < shards; ++s) {
      ExchangeSpan pull = j.Span(ExchangeName::kPull, (ShardBegin(n, s + 1, shards) - ShardBegin(n, s, shards)) * 4);
      PX_TRY(Await(j, j.ServerRank(s), kTagWeights, colocated, &msg));
      pull.FlowIn({FlowKind::kPull, s, j.rank, tr.step()});
      PushHeader h;
      std::memcpy(&h, msg.data(), sizeof(h));
      version[static_cast<size_t>(s)] = h.version;
      std::memcpy(w.data() + ShardBegin(n, s, shards), msg.data() + sizeof(h), msg.size() - sizeof(h));
    }
    ExchangeSpan write = j.Span(ExchangeName::kWriteWeights);
    flat.WriteWeights(*j.be, w);
    return false;
  };
  for (int64_t i = 0; i < j.steps; ++i) PX_TRY(TimedStep(j, t, exchange));
  return {};
}

// ---- backup workers -----------------------------------------------------------------------------

//! Worker 0 coordinates: each step it takes the first W-B gradients of that step (its own counts
//! when it finishes before the W-B-th arrives), updates, and sends everyone the new weights.
Status RunBackupCoordinator(Job& j, Trainer& t) {
  const FlatModel flat(t.model().groups());
  const auto n = static_cast<size_t>(flat.size());
  const int64_t need = j.workers - j.mode.backup_workers;
  int64_t finished = 0, chosen = 0;
  std::vector<float> sum(n), own, w;
  std::vector<char> msg;
  // The next gradient (or a worker's last message) into msg.
  auto receive = [&]() -> Status {
    int src = 0;
    PX_TRY(AwaitMessage(*j.mb, kAnySource, kTagGrad, &src, nullptr));
    ExchangeSpan span = j.Span(ExchangeName::kReceive);
    PX_TRY(ReceiveMessage(*j.mb, kAnySource, kTagGrad, &msg, &src));
    PushHeader h;
    std::memcpy(&h, msg.data(), sizeof(h));
    if (h.kind == 0) span.FlowIn({FlowKind::kPush, src, 0, static_cast<int64_t>(h.iteration)});
    return {};
  };
  auto take = [&](int64_t step) {
    PushHeader h;
    std::memcpy(&h, msg.data(), sizeof(h));
    if (h.kind == 1) {
      ++finished;
    } else if (static_cast<int64_t>(h.iteration) < step || chosen >= need) {
      ++j.dropped;
    } else {
      const auto* g = reinterpret_cast<const float*>(msg.data() + sizeof(h));
      for (size_t k = 0; k < n; ++k) sum[k] += g[k];
      ++chosen;
    }
  };
  const GradientHook exchange = [&](Trainer& tr) -> Result<bool> {
    ExchangeSpan gather = j.Span(ExchangeName::kGather);
    std::fill(sum.begin(), sum.end(), 0.0f);
    chosen = 0;
    for (int src = 0; chosen < need;) {
      PX_ASSIGN(const bool ready, j.mb->Poll(kAnySource, kTagGrad, &src, nullptr));
      if (!ready) break;
      PX_TRY(receive());
      take(tr.step());
    }
    flat.ReadGrads(*j.be, &own);
    if (chosen < need) {
      for (size_t k = 0; k < n; ++k) sum[k] += own[k];
      ++chosen;
    } else {
      ++j.dropped;
    }
    while (chosen < need) {
      PX_TRY(receive());
      take(tr.step());
    }
    for (float& x : sum) x /= static_cast<float>(need);
    flat.WriteGrads(*j.be, sum);
    return true;
  };
  for (int64_t i = 0; i < j.steps; ++i) {
    PX_TRY(TimedStep(j, t, exchange));
    ExchangeSpan broadcast = j.Span(ExchangeName::kBroadcast, static_cast<int64_t>(n * 4));
    flat.ReadWeights(*j.be, &w);
    const PushHeader h{.version = static_cast<double>(t.step()), .iteration = 0, .clip_scale = 1, .kind = 0};
    msg.resize(sizeof(h) + n * 4);
    std::memcpy(msg.data(), &h, sizeof(h));
    std::memcpy(msg.data() + sizeof(h), w.data(), n * 4);
    for (int r = 1; r < j.workers; ++r) {
      broadcast.FlowOut({FlowKind::kPull, 0, r, t.step()});
      PX_TRY(j.mb->Post(r, kTagModel, msg.data(), static_cast<int64_t>(msg.size())));
    }
  }
  // Late gradients still travelling: take them until every worker said it is done.
  while (finished < j.workers - 1) {
    PX_TRY(receive());
    take(j.steps);
  }
  return {};
}

Status RunBackupWorker(Job& j, Trainer& t) {
  const FlatModel flat(t.model().groups());
  const auto n = static_cast<size_t>(flat.size());
  std::vector<float> g;
  std::vector<char> msg;
  int64_t next = 0;
  const GradientHook exchange = [&](Trainer& tr) -> Result<bool> {
    {
      ExchangeSpan push = j.Span(ExchangeName::kPush, static_cast<int64_t>(n * 4));
      flat.ReadGrads(*j.be, &g);
      const PushHeader h{.version = 0, .iteration = static_cast<double>(tr.step()), .clip_scale = 1, .kind = 0};
      msg.resize(sizeof(h) + n * 4);
      std::memcpy(msg.data(), &h, sizeof(h));
      std::memcpy(msg.data() + sizeof(h), g.data(), n * 4);
      push.FlowOut({FlowKind::kPush, j.rank, 0, tr.step()});
      PX_TRY(j.mb->Post(0, kTagGrad, msg.data(), static_cast<int64_t>(msg.size())));
    }
    // The newest weights the coordinator has sent (a late worker skips the steps it missed).
    ExchangeSpan pull = j.Span(ExchangeName::kPull, static_cast<int64_t>(n * 4));
    PushHeader got;
    int src = 0;
    for (bool first = true;; first = false) {
      PX_ASSIGN(const bool ready, j.mb->Poll(0, kTagModel, &src, nullptr));
      if (!ready && !first) break;
      PX_TRY(ReceiveMessage(*j.mb, 0, kTagModel, &msg));
      std::memcpy(&got, msg.data(), sizeof(got));
      pull.FlowIn({FlowKind::kPull, 0, j.rank, static_cast<int64_t>(got.version)});
    }
    next = static_cast<int64_t>(got.version);
    std::vector<float> w(n);
    std::memcpy(w.data(), msg.data() + sizeof(got), n * 4);
    flat.WriteWeights(*j.be, w);
    return false;
  };
  while (t.step() < j.steps) {
    PX_TRY(TimedStep(j, t, exchange));
    t.set_step(next);
  }
  const PushHeader done{.version = 0, .iteration = 0, .clip_scale = 1, .kind = 1};
  return j.mb->Post(0, kTagGrad, &done, sizeof(done));
}

// ---- roles and the report ----------------------------------------------------------------------

//! A worker's own replica: dp=1 over its share of the global batch, reading its own samples.
Result<std::unique_ptr<Trainer>> MakeWorker(Job& j, Communicator& self, const TrainerOptions& topt) {
  Plan local = *j.plan;
  local.layout.dp = 1;
  local.layout.global_batch = j.plan->layout.global_batch / j.workers;
  local.layout.sync = SyncMode{};
  local.training.global_batch = local.layout.global_batch;
  PX_ASSIGN(auto t, Trainer::Create(local, *j.be, self, topt));
  const int64_t seq = local.training.seq_len > 0 ? local.training.seq_len : local.model.seq_len;
  PX_ASSIGN(auto base, DataSource::Create(topt.data, local.model.vocab, seq));
  t->set_data(WorkerData(std::move(base), j.mode.data, j.rank, j.workers, j.plan->layout.global_batch,
                         local.model.vocab));
  return t;
}

//! This rank's part of the job: a worker's mode loop (and its colocated shard), or a dedicated server.
Status RunRole(Job& j, Trainer* t, Communicator* servers) {
  const bool worker = j.rank < j.workers;
  std::unique_ptr<ShardServer> shard;
  if (j.mode.uses_servers()) {
    if (j.rank == 0) PX_TRY(SendShards(j, FlatModel(t->model().groups())));
    const int64_t s = j.mode.colocated ? j.rank : j.rank - j.workers;
    if (s >= 0 && s < j.mode.servers) {
      PX_ASSIGN(shard, ReceiveShard(j, s, servers));
    }
  }
  if (!worker) {
    while (!shard->done()) PX_TRY(shard->Serve(true));
  } else if (j.mode.uses_servers()) {
    PX_TRY(RunPsWorker(j, *t, shard.get()));
    while (shard && !shard->done()) PX_TRY(shard->Serve(true));
  } else if (j.mode.kind == SyncKind::kBackup) {
    PX_TRY(j.rank == 0 ? RunBackupCoordinator(j, *t) : RunBackupWorker(j, *t));
  } else if (j.mode.kind == SyncKind::kLocal) {
    PX_TRY(RunLocalSgd(j, *t));
  } else {
    PX_TRY(RunCompressed(j, *t));
  }
  if (shard) j.staleness = shard->staleness();
  return j.mb->Flush();
}

//! Every rank's records and counters, combined: per step the mean over the workers that ran it.
Status Summarise(Job& j, TrainingReport* report) {
  const auto n = static_cast<size_t>(j.steps);
  std::vector<Record> all(n * static_cast<size_t>(j.world->size()));
  PX_TRY(j.world->HostAllGather(j.records.data(), all.data(), static_cast<int64_t>(n * sizeof(Record))));
  std::vector<double> counters(kStalenessBuckets + 1, 0.0);
  for (size_t k = 0; k < j.staleness.size(); ++k) counters[std::min(k, kStalenessBuckets - 1)] += j.staleness[k];
  counters[kStalenessBuckets] = static_cast<double>(j.dropped);
  PX_TRY(j.world->HostAllReduce(counters.data(), static_cast<int64_t>(counters.size()), ReduceOp::kSum));
  // Wall clock of step i: when its workers finished it on average; for backup workers when the
  // first did (the step is the coordinator's, a late worker's copy of it does not delay it). Never
  // earlier than the step before.
  const bool first_wins = j.mode.kind == SyncKind::kBackup;
  double clock = 0;
  for (size_t i = 0; i < n; ++i) {
    double loss = 0, time = 0, norm = 0, end_sum = 0, end_min = 1e300;
    int runs = 0;
    for (const Record& r : all) {
      if (r.step != static_cast<double>(i)) continue;
      loss += r.loss;
      time += r.duration_s;
      norm += r.grad_norm;
      end_sum += r.end_s;
      end_min = std::min(end_min, r.end_s);
      ++runs;
    }
    const double k = std::max(runs, 1);
    report->losses.push_back(loss / k);
    report->step_times_s.push_back(time / k);
    report->grad_norms.push_back(norm / k);
    report->skipped.push_back(false);
    clock = std::max(clock, runs == 0 ? clock : first_wins ? end_min : end_sum / k);
    report->wall_clock_s.push_back(clock);
  }
  size_t last = 0;
  for (size_t k = 0; k < kStalenessBuckets; ++k) {
    if (counters[k] > 0) last = k + 1;
  }
  for (size_t k = 0; k < last; ++k) report->staleness_histogram.push_back(static_cast<int64_t>(counters[k]));
  report->dropped_gradients = static_cast<int64_t>(counters[kStalenessBuckets]);
  return {};
}

}  // namespace

Status InjectSlow::SleepAfterBackward(int64_t r, std::chrono::steady_clock::time_point start, Backend& backend) const {
  if (!applies_to(r)) return {};
  const Event computed = backend.RecordEvent(StreamKind::kCompute);
  const Status synced = backend.SynchronizeEvent(computed);
  const Event one[] = {computed};
  backend.ReleaseEvents(one);
  PX_TRY(synced);
  const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
  std::this_thread::sleep_for((factor - 1) * spent);
  return {};
}

Result<InjectSlow> ParseInjectSlow(const std::string& spec) {
  InjectSlow s;
  if (spec.empty()) return s;
  long long rank = -1;
  double factor = 0;
  int used = 0;
  if (std::sscanf(spec.c_str(), "rank=%lld,factor=%lf%n", &rank, &factor, &used) != 2 ||
      used != static_cast<int>(spec.size()) || rank < 0 || !(factor >= 1)) {
    return BadInput("--inject-slow \"" + spec + "\": expected rank=R,factor=F with R >= 0 and F >= 1");
  }
  s.rank = rank;
  s.factor = factor;
  return s;
}

Status ValidateClassicExecution(const Plan& plan, int64_t world_size) {
  const Layout& l = plan.layout;
  const std::string mode = "sync=" + SyncToString(l.sync) + ",compression=" + CompressionToString(l.sync);
  if (l.tp != 1 || l.pp != 1 || l.zero_stage != 0) {
    return BadInput("plan: the executor runs " + mode + " with tp=1, pp=1, zero=0 (one whole replica per worker)");
  }
  if (plan.training.precision != Precision::kFp32) {
    return BadInput("plan: the executor runs " + mode + " in fp32 (got " + ToString(plan.training.precision) + ")");
  }
  if (Status st = ValidateLayout(l, plan.model, plan.cluster, world_size); !st) {
    return BadInput(st.error().message + " (start the job with mpirun -np " + std::to_string(l.job_ranks()) + ")");
  }
  return {};
}

Result<TrainingReport> RunClassicModes(const Plan& plan, Backend& backend, Communicator& world,
                                       const TrainingRunOptions& o, TrainingReport base, const StartCallback& on_start,
                                       const StepCallback& on_step, bool* step_failed) {
  PX_TRY(ValidateClassicExecution(plan, world.size()));
  if (!o.checkpoint_dir.empty()) {
    return BadInput("run: --checkpoint-dir is not supported with sync=" + SyncToString(plan.layout.sync) + " yet");
  }
  const bool tracing = !o.trace_path.empty();
  Job j;
  j.plan = &plan;
  j.be = &backend;
  j.world = &world;
  j.o = &o;
  j.mode = plan.layout.sync;
  j.workers = plan.layout.dp;
  j.steps = o.steps;
  j.rank = world.rank();
  PX_ASSIGN(j.slow, ParseInjectSlow(o.inject_slow));
  j.records.assign(static_cast<size_t>(o.steps), Record{});
  PX_ASSIGN(auto mailbox, world.OpenMailbox());
  j.mb = mailbox.get();
  // Groups: each rank alone (a worker's replica), and the servers together (synchronous clipping).
  PX_ASSIGN(auto self, world.Split({j.rank}));
  std::vector<int> servers, others;
  for (int r = 0; r < world.size(); ++r) {
    const int64_t s = j.mode.colocated ? r : r - j.workers;
    (j.mode.uses_servers() && s >= 0 && s < j.mode.servers ? servers : others).push_back(r);
  }
  const bool serving = std::find(servers.begin(), servers.end(), j.rank) != servers.end();
  PX_ASSIGN(auto server_comm, world.Split(serving ? servers : others));
  std::unique_ptr<Trainer> trainer;
  if (j.rank < j.workers) {
    TrainerOptions topt = o.trainer;
    topt.init_threads = base.host_threads.threads;
    topt.record_ops = topt.record_ops || tracing;
    auto made = MakeWorker(j, *self, topt);
    if (Status agreed = AgreeOnStatus(world, made ? Status() : Status(made.error())); !agreed) return agreed.error();
    trainer = std::move(*made);
    trainer->recorder().set_rank(j.rank);
    if (on_start && j.rank == 0) on_start(*trainer);
  } else {
    PX_TRY(AgreeOnStatus(world, Status()));
  }
  // One time origin for the job: the ops' recorder and the exchange lanes start after one barrier
  // (on idle streams, so the epoch event is stamped when it is recorded).
  if (tracing) PX_TRY(backend.Synchronize());
  PX_TRY(world.Barrier());
  if (tracing && trainer) trainer->recorder().set_epoch(backend.RecordEvent(StreamKind::kCompute));
  j.t0 = Clock::now();
  if (tracing) j.trace.Start(j.t0);
  if (Status st = RunRole(j, trainer.get(), serving ? server_comm.get() : nullptr); !st) {
    *step_failed = true;
    return st.error();
  }
  PX_TRY(Summarise(j, &base));
  if (tracing) {
    const auto gather = [&](traces::Tracer* tracer) -> Status {
      const OpRecorder none(&backend, j.rank);  // a dedicated server runs no ops
      PX_TRY((trainer ? trainer->recorder() : none).GatherInto(world, tracer));
      return j.trace.GatherInto(world, tracer);
    };
    PX_TRY(WriteMeasuredTrace(plan, backend, world, o.trace_path, gather));
  }
  base.first_step = 0;
  base.data_description = trainer ? trainer->data().Describe() : "";
  double peak = static_cast<double>(backend.memory().peak_bytes);
  PX_TRY(world.HostAllReduce(&peak, 1, ReduceOp::kMax));
  base.peak_memory_bytes = static_cast<int64_t>(peak);
  if (on_step) {
    for (size_t i = 0; i < base.losses.size(); ++i) {
      StepResult r;
      r.step = static_cast<int64_t>(i);
      r.loss = base.losses[i];
      r.step_time_s = base.step_times_s[i];
      r.grad_norm = base.grad_norms[i];
      on_step(r);
    }
  }
  return base;
}

}  // namespace parallax::executor

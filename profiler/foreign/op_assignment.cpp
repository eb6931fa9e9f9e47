#include "profiler/foreign/op_assignment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "traces/tracer.h"

namespace parallax::profiler {
namespace {

struct PlanOp {
  size_t slice = 0;
  OpIdentity id;
  traces::Stream stream = traces::Stream::kCompute;
  int64_t predicted_ns = 0;
};

//! The rank's predicted ops with identities, compute and communication apart, by start.
std::pair<std::vector<PlanOp>, std::vector<PlanOp>> PlanOps(const traces::Trace& predicted, int64_t rank) {
  std::vector<PlanOp> compute, comm;
  for (size_t i = 0; i < predicted.slices().size(); ++i) {
    const traces::Slice& s = predicted.slice(i);
    const traces::Track& tr = predicted.track(s.track);
    auto id = predicted.identity(s);
    if (!id || tr.rank != rank) continue;
    PlanOp op{i, *id, tr.stream, s.dur_ns};
    (traces::IsCommStream(tr.stream) ? comm : compute).push_back(op);
  }
  auto by_start = [&](const PlanOp& a, const PlanOp& b) {
    return predicted.slice(a.slice).start_ns < predicted.slice(b.slice).start_ns;
  };
  std::stable_sort(compute.begin(), compute.end(), by_start);
  std::stable_sort(comm.begin(), comm.end(), by_start);
  return {compute, comm};
}

bool PhaseFits(Phase unit, Phase op) { return unit == op || (unit == Phase::kBwd && op == Phase::kRecompute); }

bool Candidate(const AttributedUnit& u, const PlanOp& op) {
  const auto& ops = u.rule->ops;
  return std::find(ops.begin(), ops.end(), op.id.op) != ops.end() && (u.comm || PhaseFits(u.phase, op.id.phase));
}

//! First op in [from, from + kAssignLookahead] that `u` can be.
std::optional<size_t> FindOp(const AttributedUnit& u, const std::vector<PlanOp>& ops, size_t from) {
  for (size_t j = from; j < ops.size() && j <= from + kAssignLookahead; ++j) {
    if (Candidate(u, ops[j])) return j;
  }
  return std::nullopt;
}

struct OpWork {
  int64_t first_ns = -1;
  int64_t work_ns = 0;
  int64_t nested = 0;
  int64_t units = 0;
};

//! Recorded host events that start before `t` (the profiler's bookkeeping so far).
class EventsBefore {
 public:
  explicit EventsBefore(const KinetoEvents& ev) {
    for (const auto& e : ev.events) {
      if (e.cat.empty() || e.cat == "cpu_op" || e.cat == "user_annotation") ts_.push_back(e.ts_ns);
    }
  }
  int64_t operator()(int64_t t) const {
    return static_cast<int64_t>(std::lower_bound(ts_.begin(), ts_.end(), t) - ts_.begin());
  }

 private:
  std::vector<int64_t> ts_;  // sorted: events are
};

//! Where the profiler's step annotations ("ProfilerStep#N": torch.profiler's step(), in both trace
//! forms) start, ascending; empty when the trace has none.
std::vector<int64_t> StepMarks(const KinetoEvents& ev) {
  std::vector<int64_t> marks;
  for (const auto& e : ev.events) {
    if (PatternMatches(kProfilerStepPattern, e.name)) marks.push_back(e.ts_ns);
  }
  std::sort(marks.begin(), marks.end());
  return marks;
}

class Assigner {
 public:
  Assigner(const KinetoEvents& ev, const Attribution& a, const traces::Trace& predicted, int64_t rank)
      : ev_(ev), a_(a), predicted_(predicted), rank_(rank), marks_(StepMarks(ev)) {
    std::tie(compute_, comm_) = PlanOps(predicted, rank);
    work_.emplace_back(compute_.size());
  }

  void Run() {
    destinations_.assign(a_.units.size(), "unattributed");
    size_t mark = 0;
    for (size_t i = 0; i < a_.units.size(); ++i) {
      const AttributedUnit& u = a_.units[i];
      // A step annotation starts the plan's op list again: the units after it are the next step's,
      // whatever the ones before it matched (an op the step skipped cannot shift the next one).
      for (; mark < marks_.size() && u.start_ns >= marks_[mark]; ++mark) {
        if (started_) NextStep();
      }
      FamilyTime& f = families_[std::string(FamilyOf(u))];
      f.time_s += static_cast<double>(u.dur_ns) * 1e-9;
      ++f.units;
      const PlanOp* op = u.comm ? AssignComm(u) : AssignCompute(u);
      if (op != nullptr) {
        const bool glue = u.rule == nullptr || u.rule->ops.empty();
        destinations_[i] = std::string(glue ? "glue of " : "") + ToString(op->id.op) + " " + ToString(op->id.phase);
        f.attributed_s += static_cast<double>(u.dur_ns) * 1e-9;
        ++assigned_;
      } else {
        UnattributedTime& t = unattributed_[ev_.events[u.event].name];
        t.time_s += static_cast<double>(u.dur_ns) * 1e-9;
        ++t.count;
      }
    }
  }

  const std::vector<PlanOp>& ComputeOps() const { return compute_; }
  //! Per profiled step, per plan op.
  const std::vector<std::vector<OpWork>>& Work() const { return work_; }
  //! (plan op, unit, step)
  const std::vector<std::tuple<const PlanOp*, const AttributedUnit*, int64_t>>& CommPairs() const { return comm_pairs_; }
  std::map<std::string, FamilyTime>& Families() { return families_; }
  std::map<std::string, UnattributedTime>& Unattributed() { return unattributed_; }
  int64_t Assigned() const { return assigned_; }
  //! Per unit: the plan op it went to ("qkv fwd", "glue of qkv fwd") or "unattributed".
  const std::vector<std::string>& Destinations() const { return destinations_; }

 private:
  const PlanOp* AssignCompute(const AttributedUnit& u) {
    const bool glue = u.rule == nullptr || u.rule->ops.empty();
    if (glue) {
      if (!started_) return nullptr;
      Add(current_, u);
      return &compute_[current_];
    }
    auto j = FindOp(u, compute_, started_ ? current_ : 0);
    if (!j && marks_.empty() && started_ && current_ + kAssignLookahead + 1 >= compute_.size()) {
      // Without step annotations: the plan's last ops are done, so a unit that starts the op list
      // again starts the next step.
      j = FindOp(u, compute_, 0);
      if (j) {
        work_.emplace_back(compute_.size());
        comm_next_ = 0;
      }
    }
    if (!j) return nullptr;
    current_ = *j;
    started_ = true;
    Add(current_, u);
    return &compute_[current_];
  }

  const PlanOp* AssignComm(const AttributedUnit& u) {
    if (u.rule == nullptr || u.rule->ops.empty()) return nullptr;
    auto j = FindOp(u, comm_, comm_next_);
    if (!j) return nullptr;
    comm_pairs_.emplace_back(&comm_[*j], &u, static_cast<int64_t>(work_.size()) - 1);
    comm_next_ = *j + 1;
    return &comm_[*j];
  }

  void NextStep() {
    work_.emplace_back(compute_.size());
    current_ = 0;
    comm_next_ = 0;
    started_ = false;
  }

  void Add(size_t j, const AttributedUnit& u) {
    OpWork& w = work_.back()[j];
    if (w.first_ns < 0) w.first_ns = u.start_ns;
    w.work_ns += u.dur_ns;
    w.nested += u.nested_events;
    ++w.units;
  }

  const KinetoEvents& ev_;
  const Attribution& a_;
  const traces::Trace& predicted_;
  int64_t rank_;
  std::vector<int64_t> marks_;  //!< StepMarks
  std::vector<PlanOp> compute_, comm_;
  std::vector<std::vector<OpWork>> work_;
  std::vector<std::tuple<const PlanOp*, const AttributedUnit*, int64_t>> comm_pairs_;
  std::map<std::string, FamilyTime> families_;
  std::map<std::string, UnattributedTime> unattributed_;
  std::vector<std::string> destinations_;
  size_t current_ = 0, comm_next_ = 0;
  bool started_ = false;
  int64_t assigned_ = 0;
};

struct LineCheck {
  int64_t matched = 0, out = 0;
  std::string examples;  //!< the first few out of line: "qkv bwd layer 2 x7.3"
};

//! Ops whose measured work over their prediction is more than kOutOfLineRatio from the median ratio
//! of their own kind and phase (every layer and step): a framework's kernels may cost what ours do
//! not, but the instances of one op must agree with each other when the order put the right units
//! on them.
LineCheck OutOfLine(const Assigner& as) {
  std::map<std::pair<OpKind, Phase>, std::vector<std::pair<double, const PlanOp*>>> groups;
  for (const auto& step : as.Work()) {
    for (size_t j = 0; j < as.ComputeOps().size(); ++j) {
      const OpWork& w = step[j];
      const PlanOp& op = as.ComputeOps()[j];
      if (w.units > 0 && op.predicted_ns > 0) {
        groups[{op.id.op, op.id.phase}].emplace_back(
            static_cast<double>(w.work_ns) / static_cast<double>(op.predicted_ns), &op);
      }
    }
  }
  LineCheck c;
  for (const auto& [key, ratios] : groups) {
    c.matched += static_cast<int64_t>(ratios.size());
    std::vector<double> sorted;
    for (const auto& [r, op] : ratios) sorted.push_back(r);
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    const double med = sorted[sorted.size() / 2];
    for (const auto& [r, op] : ratios) {
      if (r <= med * kOutOfLineRatio && r * kOutOfLineRatio >= med) continue;
      if (c.out++ < 3) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%s %s layer %lld x%.2g", c.examples.empty() ? "" : ", ", ToString(op->id.op),
                      ToString(op->id.phase), static_cast<long long>(op->id.layer), r / med);
        c.examples += buf;
      }
    }
  }
  return c;
}

class MeasuredBuilder {
 public:
  MeasuredBuilder(const KinetoEvents& ev, const Attribution& a, int64_t rank)
      : ev_(ev), a_(a), rank_(rank), before_(ev), host_(!a.device_trace), c_ns_(a.overhead_per_event_s * 1e9) {}

  //! Timeline position of recorded time `ts` once the profiler's bookkeeping before it is removed.
  int64_t Shift(int64_t ts) const {
    return host_ ? ts - std::llround(c_ns_ * static_cast<double>(before_(ts))) : ts;
  }

  void Ops(const Assigner& as) {
    // A framework's collectives run beside its compute (NCCL kernels on their stream, gloo on its
    // own thread), never polled by the compute thread between ops.
    t_.metadata().comm_progress = "device";
    const traces::TrackId compute = t_.Track(rank_, traces::Stream::kCompute);
    for (size_t step = 0; step < as.Work().size(); ++step) {
      for (size_t j = 0; j < as.ComputeOps().size(); ++j) {
        const OpWork& w = as.Work()[step][j];
        if (w.units == 0) continue;
        OpIdentity id = as.ComputeOps()[j].id;
        id.step = static_cast<int64_t>(step);
        const int64_t nested_ns = std::llround(c_ns_ * static_cast<double>(w.nested));
        const int64_t dur = host_ ? std::max<int64_t>(0, w.work_ns - nested_ns) : w.work_ns;
        t_.Record(compute, t_.OpName(id.op), Shift(w.first_ns), dur, id);
      }
    }
    for (const auto& [op, u, step] : as.CommPairs()) {
      OpIdentity id = op->id;
      id.rank = rank_;
      id.step = step;
      const traces::SliceArgs args = traces::SliceArgs::Comm(u->bytes, u->group_size);
      t_.Record(t_.Track(rank_, op->stream), t_.OpName(id.op), Shift(u->start_ns), u->dur_ns, id, args);
    }
  }

  //! The framework's own units on tracks of their own (one per recorded thread or stream), named
  //! by kernel or op, their category the plan op they went to: the attribution made visible beside
  //! the ops (`trace diff`, the GUI). No identities: refine and the diff align the ops only.
  void Units(const std::vector<std::string>& where) {
    std::map<std::pair<int64_t, int64_t>, traces::TrackId> tracks;
    for (size_t i = 0; i < a_.units.size(); ++i) {
      const AttributedUnit& u = a_.units[i];
      const KinetoEvent& e = ev_.events[u.event];
      auto it = tracks.find({e.pid, e.tid});
      if (it == tracks.end()) {
        const auto n = static_cast<int64_t>(tracks.size());
        const std::string name = std::string(a_.device_trace ? "framework kernels " : "framework ops ") +
                                 std::to_string(e.tid);
        it = tracks.emplace(std::make_pair(e.pid, e.tid),
                            t_.CustomTrack(rank_, 100 + n, name, rank_, traces::Stream::kOther)).first;
      }
      traces::SliceSpec sp;
      sp.track = it->second;
      sp.name = t_.Intern(e.name);
      sp.start_ns = Shift(u.start_ns);
      const int64_t nested_ns = std::llround(c_ns_ * static_cast<double>(u.nested_events));
      sp.dur_ns = host_ ? std::max<int64_t>(0, u.dur_ns - nested_ns) : u.dur_ns;
      sp.category = t_.Intern(where[i]);
      t_.Record(sp);
    }
  }

  double RemovedS() const {
    return host_ ? c_ns_ * static_cast<double>(before_(a_.last_ns) - before_(a_.first_ns)) * 1e-9 : 0;
  }
  traces::Trace Take() { return t_.Take(); }

 private:
  const KinetoEvents& ev_;
  const Attribution& a_;
  int64_t rank_;
  EventsBefore before_;
  bool host_;
  double c_ns_;
  traces::Tracer t_{"measured"};
};

//! What the trace's units are, for a refusal: " (its device kernels' time: gemm 41%, glue 30%,
//! ...)".
std::string FamilyShares(Assigner& as, const std::string& units) {
  std::vector<std::pair<double, std::string>> by_time;
  double total = 0;
  for (const auto& [name, f] : as.Families()) {
    by_time.emplace_back(f.time_s, name);
    total += f.time_s;
  }
  std::sort(by_time.rbegin(), by_time.rend());
  std::string out = " (its " + units + "' time:";
  for (size_t i = 0; i < by_time.size() && i < 5; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %s %.0f%%", i == 0 ? "" : ",", by_time[i].second.c_str(),
                  total > 0 ? 100 * by_time[i].first / total : 0.0);
    out += buf;
  }
  return out + ")";
}

//! A trace without one backward unit is of inference (or of a forward pass only), or its kernels
//! reach no host op that would say which are backward: say which.
std::string NoBackward(const Attribution& a) {
  const bool bwd = std::any_of(a.units.begin(), a.units.end(),
                               [](const AttributedUnit& u) { return u.phase == Phase::kBwd; });
  if (bwd) return "";
  if (a.device_trace && a.launched_units == 0) {
    return " Its kernels reach no host op (no runtime call has their correlation id): the profiler "
           "recorded the device only; record the CPU too (torch.profiler activities CPU and CUDA).";
  }
  return " It has no backward op: a trace of inference or of a forward pass, where refine "
         "needs a training step.";
}

//! The traced rank has no op in the plan: say which ranks the plan has and what the trace says.
Error NotAPlanRank(const KinetoEvents& ev, const traces::Trace& predicted, int64_t rank,
                   const std::string& file) {
  int64_t ranks = 0;
  for (const traces::Track& t : predicted.tracks()) ranks = std::max(ranks, t.rank + 1);
  std::string msg = file + ": it is a trace of rank " + std::to_string(rank) +
                    (ev.rank >= 0 ? " (its distributedInfo" : " (no distributedInfo: rank 0");
  if (ev.world_size > 0) msg += ", of " + std::to_string(ev.world_size);
  return BadInput(msg + "), but the plan predicts no op on that rank (it has " +
                  std::to_string(ranks) + " ranks): plan the layout of the traced job");
}

}  // namespace

Result<AssignedTrace> AssignToPlan(const KinetoEvents& ev, const Attribution& a, const traces::Trace& predicted,
                                   int64_t rank, const std::string& file) {
  Assigner as(ev, a, predicted, rank);
  if (as.ComputeOps().empty()) return NotAPlanRank(ev, predicted, rank, file);
  as.Run();
  AssignedTrace out;
  ForeignReport& r = out.report;
  r.form = ev.array_form ? "array" : "kineto";
  r.units = a.device_trace ? "device kernels" : "host ops";
  r.rank = rank;
  r.unit_count = static_cast<int64_t>(a.units.size());
  r.assigned = as.Assigned();
  r.steps = static_cast<int64_t>(as.Work().size());
  const double span_s = static_cast<double>(a.last_ns - a.first_ns) * 1e-9;
  r.step_s = span_s / static_cast<double>(r.steps);
  const LineCheck line = OutOfLine(as);
  r.ops_matched = line.matched;
  r.ops_out_of_line = line.out;
  r.plan_ops = static_cast<int64_t>(as.ComputeOps().size());
  if (r.ops_matched == 0) {
    return BadInput(file + ": none of its " + std::to_string(r.unit_count) + " " + r.units +
                    " maps onto the plan's ops" + FamilyShares(as, r.units) +
                    ": is it a trace of this model and implementation?" + NoBackward(a));
  }
  if (static_cast<double>(r.ops_matched) <
      kMinOpCoverage * static_cast<double>(r.plan_ops * r.steps)) {
    return BadInput(
        file + ": its " + r.units + " give time to only " + std::to_string(r.ops_matched) +
        " of the " + std::to_string(r.plan_ops * r.steps) + " ops the plan runs in " +
        std::to_string(r.steps) + " step(s) on rank " + std::to_string(rank) +
        FamilyShares(as, r.units) +
        ": is it a trace of this model (its layers) and implementation?" + NoBackward(a));
  }
  if (static_cast<double>(r.ops_out_of_line) > kMaxOutOfLineShare * static_cast<double>(r.ops_matched)) {
    return BadInput(file + ": " + std::to_string(r.ops_out_of_line) + " of " + std::to_string(r.ops_matched) +
                    " ops took a time out of line with the other instances of their op (measured over predicted " +
                    std::to_string(static_cast<int>(kOutOfLineRatio)) + "x from their median; " + line.examples +
                    "): the trace does not follow the plan's op order");
  }
  for (auto& [name, f] : as.Families()) {
    f.family = name;
    f.time_s /= static_cast<double>(r.steps);
    f.attributed_s /= static_cast<double>(r.steps);
    r.attributed_s += f.attributed_s;
    if (name == "glue") r.glue_s = f.attributed_s;
    r.families.push_back(f);
  }
  double units_s = 0;
  for (const auto& f : r.families) units_s += f.time_s;
  if (r.attributed_s < kMinExplainedShare * units_s) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": only %.0f%% of its %s' time lands on the plan's ops",
                  100 * r.attributed_s / units_s, r.units.c_str());
    return BadInput(file + buf + FamilyShares(as, r.units) +
                    ": is it a trace of this model and implementation?");
  }
  for (auto& [name, u] : as.Unattributed()) {
    u.name = name;
    u.time_s /= static_cast<double>(r.steps);
    u.share_of_step = r.step_s > 0 ? u.time_s / r.step_s : 0;
    r.unattributed.push_back(u);
  }
  std::sort(r.families.begin(), r.families.end(), [](const auto& x, const auto& y) { return x.time_s > y.time_s; });
  std::sort(r.unattributed.begin(), r.unattributed.end(), [](const auto& x, const auto& y) { return x.time_s > y.time_s; });
  r.overhead_per_event_s = a.device_trace ? 0 : a.overhead_per_event_s;
  r.overhead_pairs = a.overhead_pairs;
  r.recorded_events = a.recorded_events;
  MeasuredBuilder mb(ev, a, rank);
  mb.Ops(as);
  out.measured = mb.Take();
  MeasuredBuilder vb(ev, a, rank);
  vb.Ops(as);
  vb.Units(as.Destinations());
  out.attributed = vb.Take();
  out.attributed.metadata.kind = "imported";
  out.attributed.metadata.source = file;
  r.overhead_removed_s = mb.RemovedS() / static_cast<double>(r.steps);
  out.measured.metadata.source = file;
  return out;
}

}  // namespace parallax::profiler

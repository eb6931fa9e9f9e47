#include "executor/runtime/pipeline_runner.h"

#include <map>
#include <memory>

#include "executor/runtime/grad_sync.h"
#include "executor/runtime/tp_ops.h"
#include "model/schedule.h"

namespace parallax::executor {
namespace {

struct MicrobatchState {
  std::vector<LayerCache> layers;
  EmbeddingCache embedding;
  HeadCache head;
};

// Acquires ZeRO-3 parameters for the lifetime of the guard.
class Acquired {
 public:
  Acquired(RuntimeContext& ctx, std::vector<ParamGroup*> groups, int64_t layer) : groups_(std::move(groups)) {
    std::erase(groups_, nullptr);
    for (ParamGroup* g : groups_) {
      if (status_ = g->Acquire(ctx, layer); !status_) return;
      ++held_;
    }
  }
  ~Acquired() {
    for (size_t i = 0; i < held_; ++i) groups_[i]->Release();
  }
  Acquired(const Acquired&) = delete;
  Acquired& operator=(const Acquired&) = delete;
  const Status& Outcome() const { return status_; }

 private:
  std::vector<ParamGroup*> groups_;
  size_t held_ = 0;
  Status status_;
};

Status SyncGroup(RuntimeContext& ctx, ParamGroup& g, bool last_backward) {
  if (ctx.layout.zero_stage >= 2) return FlushMicrobatchGrads(ctx, g);
  if (last_backward) return StartGradSync(ctx, g);
  return {};
}

// A message between neighbouring pipeline ranks: its tensor, peer, tag and the identity it is
// recorded under.
struct Message {
  Tensor t;
  int peer = 0;
  int tag = 0;
  OpRecorder::Where where;
};

// Issues `sends` and `recvs` as one group on the pp stream, one recorded slice per message.
Status Exchange(RuntimeContext& ctx, std::vector<Message>& sends, std::vector<Message*>& recvs) {
  if (sends.empty() && recvs.empty()) return {};
  Communicator& pp = *ctx.groups->pp;
  Stream& s = ctx.backend->stream(StreamKind::kPpComm);
  PX_TRY(ctx.AfterCompute(StreamKind::kPpComm));
  std::vector<std::unique_ptr<OpRecorder::Scope>> scopes;
  auto scope = [&](OpKind op, const Message& m) {
    scopes.push_back(std::make_unique<OpRecorder::Scope>(
        ctx.rec, ctx.rec->IdentityAt(op, m.where.microbatch, m.where.stage, -1, m.where.phase), -1, m.t.bytes(), 2));
  };
  for (const Message& m : sends) scope(OpKind::kPpSend, m);
  for (const Message* m : recvs) scope(OpKind::kPpRecv, *m);
  pp.GroupStart();
  Status st;
  for (const Message& m : sends) {
    if (st) st = pp.Send(m.t.ptr(), m.t.numel(), m.peer, m.tag, s);
  }
  for (Message* m : recvs) {
    if (st) st = pp.Recv(m->t.ptr(), m->t.numel(), m->peer, m->tag, s);
  }
  Status end = pp.GroupEnd();
  scopes.clear();
  PX_TRY(st);
  return end;
}

// The schedule cut into exchange rounds: after each round its outgoing tensors travel in one group
// with the incoming tensors of the next round. Interleaved schedules pair each steady-state forward
// with the backward after it (Megatron-LM's send_forward_backward_recv_forward_backward); the
// others (and interleaved with m == pp, which has no steady state) exchange after every op
// (send_forward_recv_backward, send_backward_recv_forward). Both are
// deadlock-free with unbuffered sends (checked for pp <= 8, v <= 4 by a schedule simulation).
std::vector<std::vector<size_t>> ExchangeRounds(const std::vector<PipeOp>& ops, bool pair_steady_state) {
  std::vector<std::vector<size_t>> rounds;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (pair_steady_state && ops[i].kind == PipeOpKind::kForward && i + 1 < ops.size() &&
        ops[i + 1].kind == PipeOpKind::kBackward) {
      rounds.push_back({i, i + 1});
      ++i;
    } else {
      rounds.push_back({i});
    }
  }
  return rounds;
}

// One step of the pipeline on this rank: the schedule's ops in exchange rounds. Before each round
// the previous round's outgoing tensors are sent in one group with the round's incoming ones.
class PipelineStep {
 public:
  PipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step);
  Status Run();

 private:
  OpRecorder::Where Place(const PipeOp& op) const;
  //! This rank's samples of micro-batch `mb` into inputs_ and targets_.
  void LoadBatch(int64_t mb);
  //! Sends the outgoing tensors with the receives of round `next_round` (none past the last).
  Status ExchangeBefore(size_t next_round);
  Status Forward(size_t i);
  Status Backward(size_t i);

  RuntimeContext& ctx_;
  ShardedModel& model_;
  const DataSource& data_;
  const Layout& layout_;
  int64_t step_;
  int64_t microbatches_;
  int64_t stages_;  //!< model stages: pp * virtual_stages
  int prev_, next_;  //!< neighbouring pipeline ranks
  std::vector<PipeOp> ops_;
  std::vector<std::vector<size_t>> rounds_;
  //! The incoming tensor each op needs (none for the first stage's forward and the last stage's backward).
  std::vector<Message> incoming_;
  std::vector<bool> needs_;
  std::vector<Message> outgoing_;
  std::vector<Tensor> in_flight_;  //!< sent, possibly not yet received by the peer
  std::map<std::pair<int64_t, int64_t>, MicrobatchState> states_;  //!< (chunk, microbatch)
  std::vector<int64_t> backward_done_;  //!< per chunk
  std::vector<int32_t> inputs_, targets_;
};

PipelineStep::PipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step)
    : ctx_(ctx),
      model_(model),
      data_(data),
      layout_(ctx.layout),
      step_(step),
      microbatches_(layout_.num_microbatches()),
      stages_(layout_.pp * layout_.virtual_stages),
      backward_done_(static_cast<size_t>(layout_.virtual_stages), 0) {
  const Layout& l = layout_;
  const int64_t pp_idx = ctx.groups->coords.pp_idx;
  prev_ = static_cast<int>((pp_idx - 1 + l.pp) % l.pp);
  next_ = static_cast<int>((pp_idx + 1) % l.pp);
  ops_ = PipelineOrder(l.schedule, l.pp, pp_idx, microbatches_, l.virtual_stages);
  // Interleaved with m == pp is all warm-up and cool-down: no steady state to pair.
  rounds_ = ExchangeRounds(ops_, l.schedule == ScheduleKind::kInterleaved && microbatches_ > l.pp);
  incoming_.resize(ops_.size());
  needs_.assign(ops_.size(), false);
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Chunk& ch = model_.chunks()[static_cast<size_t>(ops_[i].chunk)];
    const bool fwd = ops_[i].kind == PipeOpKind::kForward;
    if (fwd ? ch.first : ch.last) continue;
    needs_[i] = true;
    incoming_[i].peer = fwd ? prev_ : next_;
    incoming_[i].tag = PipelineTag(ops_[i].microbatch, stages_, ch.stage, !fwd);
    incoming_[i].where = Place(ops_[i]);
  }
}

OpRecorder::Where PipelineStep::Place(const PipeOp& op) const {
  const Chunk& ch = model_.chunks()[static_cast<size_t>(op.chunk)];
  return OpRecorder::Where{op.microbatch, ch.stage, op.kind == PipeOpKind::kForward ? Phase::kFwd : Phase::kBwd};
}

void PipelineStep::LoadBatch(int64_t mb) {
  const Layout& l = layout_;
  data_.Batch(FirstSample(step_, l.global_batch, l.dp, ctx_.groups->coords.dp_idx, l.micro_batch, mb), l.micro_batch,
              &inputs_, &targets_);
  KeepCpRows(ctx_.seq, l.micro_batch, ctx_.cp, ctx_.cp_idx, &inputs_);
  KeepCpRows(ctx_.seq, l.micro_batch, ctx_.cp, ctx_.cp_idx, &targets_);
}

Status PipelineStep::ExchangeBefore(size_t next_round) {
  std::vector<Message*> recvs;
  if (next_round < rounds_.size()) {
    for (size_t i : rounds_[next_round]) {
      if (!needs_[i]) continue;
      PX_ASSIGN(incoming_[i].t, ctx_.Act(ctx_.local_tokens * ctx_.model.hidden));
      recvs.push_back(&incoming_[i]);
    }
  }
  PX_TRY(Exchange(ctx_, outgoing_, recvs));
  for (Message& msg : outgoing_) in_flight_.push_back(std::move(msg.t));
  outgoing_.clear();
  return {};
}

Status PipelineStep::Run() {
  PX_TRY(ExchangeBefore(0));
  for (size_t r = 0; r < rounds_.size(); ++r) {
    bool receives = false;
    for (size_t i : rounds_[r]) receives = receives || needs_[i];
    if (receives) {
      // The round's inputs have arrived; so has everything sent before them.
      PX_TRY(ctx_.ComputeAfter(StreamKind::kPpComm));
      in_flight_.clear();
    }
    for (size_t i : rounds_[r]) {
      ctx_.rec->set_where(Place(ops_[i]));
      PX_TRY(ops_[i].kind == PipeOpKind::kForward ? Forward(i) : Backward(i));
    }
    PX_TRY(ExchangeBefore(r + 1));
  }
  // The last sends must be delivered before their buffers go away.
  return ctx_.backend->SynchronizeEvent(ctx_.Mark(StreamKind::kPpComm));
}

Status PipelineStep::Forward(size_t i) {
  const PipeOp& op = ops_[i];
  Chunk& ch = model_.chunks()[static_cast<size_t>(op.chunk)];
  MicrobatchState& st = states_[{op.chunk, op.microbatch}];
  Tensor x;
  if (ch.first) {
    LoadBatch(op.microbatch);
    Acquired a(ctx_, {model_.words(), model_.positions()}, -1);
    PX_TRY(a.Outcome());
    PX_ASSIGN(x, model_.embedding()->Forward(ctx_, inputs_, st.embedding));
  } else {
    x = std::move(incoming_[i].t);
  }
  st.layers.resize(ch.layers.size());
  for (size_t j = 0; j < ch.layers.size(); ++j) {
    Acquired a(ctx_, {&ch.layers[j].group(), ch.layers[j].experts()}, ch.layers[j].layer());
    PX_TRY(a.Outcome());
    // ZeRO-3: the next layer's gather overlaps this layer's compute.
    if (j + 1 < ch.layers.size()) PX_TRY(ch.layers[j + 1].group().Prefetch(ctx_, ch.layers[j + 1].layer()));
    PX_ASSIGN(x, ch.layers[j].Forward(ctx_, std::move(x), st.layers[j]));
  }
  if (ch.last) {
    LoadBatch(op.microbatch);
    Acquired a(ctx_, {model_.head_group(), model_.lm_group()}, -1);
    PX_TRY(a.Outcome());
    return model_.head()->Forward(ctx_, std::move(x), targets_, st.head);
  }
  outgoing_.push_back({std::move(x), next_, PipelineTag(op.microbatch, stages_, ch.stage + 1, false), Place(op)});
  return {};
}

Status PipelineStep::Backward(size_t i) {
  const PipeOp& op = ops_[i];
  Chunk& ch = model_.chunks()[static_cast<size_t>(op.chunk)];
  MicrobatchState& st = states_[{op.chunk, op.microbatch}];
  const bool last_backward = ++backward_done_[static_cast<size_t>(op.chunk)] == microbatches_;
  Tensor dx;
  if (ch.last) {
    Acquired a(ctx_, {model_.head_group(), model_.lm_group()}, -1);
    PX_TRY(a.Outcome());
    PX_ASSIGN(dx, model_.head()->Backward(ctx_, st.head));
  } else {
    dx = std::move(incoming_[i].t);
  }
  for (size_t j = ch.layers.size(); j-- > 0;) {
    TransformerLayer& layer = ch.layers[j];
    {
      Acquired a(ctx_, {&layer.group(), layer.experts()}, layer.layer());
      PX_TRY(a.Outcome());
      if (j > 0) PX_TRY(ch.layers[j - 1].group().Prefetch(ctx_, ch.layers[j - 1].layer()));
      PX_ASSIGN(dx, layer.Backward(ctx_, st.layers[j], std::move(dx)));
    }
    PX_TRY(SyncGroup(ctx_, layer.group(), last_backward));
    if (layer.experts() != nullptr) PX_TRY(SyncGroup(ctx_, *layer.experts(), last_backward));
  }
  if (ch.first) {
    Acquired a(ctx_, {model_.words(), model_.positions()}, -1);
    PX_TRY(a.Outcome());
    PX_TRY(model_.embedding()->Backward(ctx_, st.embedding, std::move(dx)));
  } else {
    outgoing_.push_back({std::move(dx), prev_, PipelineTag(op.microbatch, stages_, ch.stage - 1, true), Place(op)});
  }
  for (ParamGroup* g : ch.other_groups) PX_TRY(SyncGroup(ctx_, *g, last_backward));
  states_.erase({op.chunk, op.microbatch});
  return {};
}

}  // namespace

int PipelineTag(int64_t microbatch, int64_t stages, int64_t stage, bool backward) {
  return static_cast<int>(((microbatch * stages + stage) * 2 + (backward ? 1 : 0)) % 32767);
}

Status RunPipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step) {
  PipelineStep pipeline(ctx, model, data, step);
  return pipeline.Run();
}

}  // namespace parallax::executor

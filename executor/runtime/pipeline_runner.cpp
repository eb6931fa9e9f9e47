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

}  // namespace

int PipelineTag(int64_t microbatch, int64_t stages, int64_t stage, bool backward) {
  return static_cast<int>(((microbatch * stages + stage) * 2 + (backward ? 1 : 0)) % 32767);
}

Status RunPipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step) {
  const Layout& l = ctx.layout;
  const int64_t m = l.num_microbatches();
  const int64_t pp_idx = ctx.groups->coords.pp_idx;
  const int64_t stages = l.pp * l.virtual_stages;
  const int prev = static_cast<int>((pp_idx - 1 + l.pp) % l.pp), next = static_cast<int>((pp_idx + 1) % l.pp);
  std::map<std::pair<int64_t, int64_t>, MicrobatchState> states;  // (chunk, microbatch)
  std::vector<int64_t> backward_done(static_cast<size_t>(l.virtual_stages), 0);
  std::vector<int32_t> inputs, targets;
  auto batch_of = [&](int64_t mb) {
    data.Batch(FirstSample(step, l.global_batch, l.dp, ctx.groups->coords.dp_idx, l.micro_batch, mb), l.micro_batch,
               &inputs, &targets);
  };
  const int64_t act_elems = ctx.local_tokens * ctx.model.hidden;

  const std::vector<PipeOp> ops = PipelineOrder(l.schedule, l.pp, pp_idx, m, l.virtual_stages);
  // Interleaved with m == pp is all warm-up and cool-down: no steady state to pair.
  const auto rounds = ExchangeRounds(ops, l.schedule == ScheduleKind::kInterleaved && m > l.pp);
  auto place = [&](const PipeOp& op) {
    const Chunk& ch = model.chunks()[static_cast<size_t>(op.chunk)];
    return OpRecorder::Where{op.microbatch, ch.stage, op.kind == PipeOpKind::kForward ? Phase::kFwd : Phase::kBwd};
  };
  // The incoming tensor an op needs (none for the first stage's forward and the last stage's backward).
  std::vector<Message> incoming(ops.size());
  std::vector<bool> needs(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Chunk& ch = model.chunks()[static_cast<size_t>(ops[i].chunk)];
    const bool fwd = ops[i].kind == PipeOpKind::kForward;
    if (fwd ? ch.first : ch.last) continue;
    needs[i] = true;
    incoming[i].peer = fwd ? prev : next;
    incoming[i].tag = PipelineTag(ops[i].microbatch, stages, ch.stage, !fwd);
    incoming[i].where = place(ops[i]);
  }
  std::vector<Message> outgoing;
  std::vector<Tensor> in_flight;  // sent, possibly not yet received by the peer
  auto exchange = [&](size_t next_round) -> Status {
    std::vector<Message*> recvs;
    if (next_round < rounds.size()) {
      for (size_t i : rounds[next_round]) {
        if (!needs[i]) continue;
        PX_ASSIGN(incoming[i].t, ctx.Act(act_elems));
        recvs.push_back(&incoming[i]);
      }
    }
    PX_TRY(Exchange(ctx, outgoing, recvs));
    for (Message& msg : outgoing) in_flight.push_back(std::move(msg.t));
    outgoing.clear();
    return {};
  };

  PX_TRY(exchange(0));
  for (size_t r = 0; r < rounds.size(); ++r) {
    bool receives = false;
    for (size_t i : rounds[r]) receives = receives || needs[i];
    if (receives) {
      // The round's inputs have arrived; so has everything sent before them.
      PX_TRY(ctx.ComputeAfter(StreamKind::kPpComm));
      in_flight.clear();
    }
    for (size_t i : rounds[r]) {
      const PipeOp& op = ops[i];
      Chunk& ch = model.chunks()[static_cast<size_t>(op.chunk)];
      MicrobatchState& st = states[{op.chunk, op.microbatch}];
      const bool fwd = op.kind == PipeOpKind::kForward;
      ctx.rec->set_where(place(op));
      if (fwd) {
        Tensor x;
        if (ch.first) {
          batch_of(op.microbatch);
          Acquired a(ctx, {model.words(), model.positions()}, -1);
          PX_TRY(a.Outcome());
          PX_ASSIGN(x, model.embedding()->Forward(ctx, inputs, st.embedding));
        } else {
          x = std::move(incoming[i].t);
        }
        st.layers.resize(ch.layers.size());
        for (size_t j = 0; j < ch.layers.size(); ++j) {
          Acquired a(ctx, {&ch.layers[j].group()}, ch.layers[j].layer());
          PX_TRY(a.Outcome());
          // ZeRO-3: the next layer's gather overlaps this layer's compute.
          if (j + 1 < ch.layers.size()) PX_TRY(ch.layers[j + 1].group().Prefetch(ctx, ch.layers[j + 1].layer()));
          PX_ASSIGN(x, ch.layers[j].Forward(ctx, std::move(x), st.layers[j]));
        }
        if (ch.last) {
          batch_of(op.microbatch);
          Acquired a(ctx, {model.head_group(), model.lm_group()}, -1);
          PX_TRY(a.Outcome());
          PX_TRY(model.head()->Forward(ctx, std::move(x), targets, st.head));
        } else {
          outgoing.push_back({std::move(x), next, PipelineTag(op.microbatch, stages, ch.stage + 1, false), place(op)});
        }
        continue;
      }

      const bool last_backward = ++backward_done[static_cast<size_t>(op.chunk)] == m;
      Tensor dx;
      if (ch.last) {
        Acquired a(ctx, {model.head_group(), model.lm_group()}, -1);
        PX_TRY(a.Outcome());
        PX_ASSIGN(dx, model.head()->Backward(ctx, st.head));
      } else {
        dx = std::move(incoming[i].t);
      }
      for (size_t j = ch.layers.size(); j-- > 0;) {
        TransformerLayer& layer = ch.layers[j];
        {
          Acquired a(ctx, {&layer.group()}, layer.layer());
          PX_TRY(a.Outcome());
          if (j > 0) PX_TRY(ch.layers[j - 1].group().Prefetch(ctx, ch.layers[j - 1].layer()));
          PX_ASSIGN(dx, layer.Backward(ctx, st.layers[j], std::move(dx)));
        }
        PX_TRY(SyncGroup(ctx, layer.group(), last_backward));
      }
      if (ch.first) {
        Acquired a(ctx, {model.words(), model.positions()}, -1);
        PX_TRY(a.Outcome());
        PX_TRY(model.embedding()->Backward(ctx, st.embedding, std::move(dx)));
      } else {
        outgoing.push_back({std::move(dx), prev, PipelineTag(op.microbatch, stages, ch.stage - 1, true), place(op)});
      }
      for (ParamGroup* g : ch.other_groups) PX_TRY(SyncGroup(ctx, *g, last_backward));
      states.erase({op.chunk, op.microbatch});
    }
    PX_TRY(exchange(r + 1));
  }
  // The last sends must be delivered before their buffers go away.
  return ctx.backend->SynchronizeEvent(ctx.Mark(StreamKind::kPpComm));
}

}  // namespace parallax::executor

#include "executor/runtime/pipeline_runner.h"

#include <map>

#include "executor/runtime/grad_sync.h"
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
      if (status_ = g->Acquire(ctx.dp_comm(), *ctx.rec, layer); !status_) return;
      ++held_;
    }
  }
  ~Acquired() {
    for (size_t i = 0; i < held_; ++i) groups_[i]->Release();
  }
  Acquired(const Acquired&) = delete;
  Acquired& operator=(const Acquired&) = delete;
  const Status& status() const { return status_; }

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

}  // namespace

int PipelineTag(int64_t microbatch, int64_t stages, int64_t stage, bool backward) {
  return static_cast<int>(((microbatch * stages + stage) * 2 + (backward ? 1 : 0)) % 32767);
}

Result<double> RunPipelineStep(RuntimeContext& ctx, ShardedModel& model, const DataSource& data, int64_t step) {
  const Layout& l = ctx.layout;
  const int64_t m = l.num_microbatches();
  const int64_t pp_idx = ctx.groups->coords.pp_idx;
  const int64_t stages = l.pp * l.virtual_stages;
  const int64_t H = ctx.model.hidden;
  const int prev = static_cast<int>((pp_idx - 1 + l.pp) % l.pp), next = static_cast<int>((pp_idx + 1) % l.pp);
  Communicator& pp = *ctx.groups->pp;
  std::map<std::pair<int64_t, int64_t>, MicrobatchState> states;  // (chunk, microbatch)
  std::vector<int64_t> backward_done(static_cast<size_t>(l.virtual_stages), 0);
  double loss = 0;
  std::vector<int32_t> inputs, targets;
  auto batch_of = [&](int64_t mb) {
    data.Batch(FirstSample(step, l.global_batch, l.dp, ctx.groups->coords.dp_idx, l.micro_batch, mb), l.micro_batch,
               &inputs, &targets);
  };
  const int64_t act_floats = ctx.local_tokens * H;

  for (const PipeOp& op : PipelineOrder(l.schedule, l.pp, pp_idx, m, l.virtual_stages)) {
    Chunk& ch = model.chunks()[static_cast<size_t>(op.chunk)];
    MicrobatchState& st = states[{op.chunk, op.microbatch}];
    const bool fwd = op.kind == PipeOpKind::kForward;
    ctx.rec->set_where({op.microbatch, ch.stage, fwd ? Phase::kFwd : Phase::kBwd});
    if (fwd) {
      Buffer x;
      if (ch.first) {
        batch_of(op.microbatch);
        Acquired a(ctx, {model.words(), model.positions()}, -1);
        if (!a.status()) return a.status().error();
        auto e = model.embedding()->Forward(ctx, inputs, st.embedding);
        if (!e) return e.error();
        x = std::move(e).value();
      } else {
        x = ctx.backend->AllocateFloats(act_floats, MemoryKind::kActivations);
        auto s = ctx.rec->Op(OpKind::kPpRecv, -1, -1, act_floats * 4, 2);
        if (Status r = pp.Recv(x.f32(), act_floats, prev, PipelineTag(op.microbatch, stages, ch.stage, false)); !r) {
          return r.error();
        }
      }
      st.layers.resize(ch.layers.size());
      for (size_t i = 0; i < ch.layers.size(); ++i) {
        Acquired a(ctx, {&ch.layers[i].group()}, ch.layers[i].layer());
        if (!a.status()) return a.status().error();
        auto y = ch.layers[i].Forward(ctx, std::move(x), st.layers[i]);
        if (!y) return y.error();
        x = std::move(y).value();
      }
      if (ch.last) {
        batch_of(op.microbatch);
        Acquired a(ctx, {model.head_group(), model.lm_group()}, -1);
        if (!a.status()) return a.status().error();
        auto lsum = model.head()->Forward(ctx, std::move(x), targets, st.head);
        if (!lsum) return lsum.error();
        loss += *lsum;
      } else {
        auto s = ctx.rec->Op(OpKind::kPpSend, -1, -1, act_floats * 4, 2);
        if (Status r = pp.Send(x.f32(), act_floats, next, PipelineTag(op.microbatch, stages, ch.stage + 1, false));
            !r) {
          return r.error();
        }
      }
      continue;
    }

    const bool last_backward = ++backward_done[static_cast<size_t>(op.chunk)] == m;
    Buffer dx;
    if (ch.last) {
      Acquired a(ctx, {model.head_group(), model.lm_group()}, -1);
      if (!a.status()) return a.status().error();
      auto d = model.head()->Backward(ctx, st.head);
      if (!d) return d.error();
      dx = std::move(d).value();
    } else {
      dx = ctx.backend->AllocateFloats(act_floats, MemoryKind::kActivations);
      auto s = ctx.rec->Op(OpKind::kPpRecv, -1, -1, act_floats * 4, 2);
      if (Status r = pp.Recv(dx.f32(), act_floats, next, PipelineTag(op.microbatch, stages, ch.stage, true)); !r) {
        return r.error();
      }
    }
    for (size_t i = ch.layers.size(); i-- > 0;) {
      TransformerLayer& layer = ch.layers[i];
      {
        Acquired a(ctx, {&layer.group()}, layer.layer());
        if (!a.status()) return a.status().error();
        auto d = layer.Backward(ctx, st.layers[i], std::move(dx));
        if (!d) return d.error();
        dx = std::move(d).value();
      }
      if (Status s = SyncGroup(ctx, layer.group(), last_backward); !s) return s.error();
    }
    if (ch.first) {
      Acquired a(ctx, {model.words(), model.positions()}, -1);
      if (!a.status()) return a.status().error();
      if (Status s = model.embedding()->Backward(ctx, st.embedding, std::move(dx)); !s) return s.error();
    } else {
      auto s = ctx.rec->Op(OpKind::kPpSend, -1, -1, act_floats * 4, 2);
      if (Status r = pp.Send(dx.f32(), act_floats, prev, PipelineTag(op.microbatch, stages, ch.stage - 1, true)); !r) {
        return r.error();
      }
    }
    for (ParamGroup* g : ch.other_groups) {
      if (Status s = SyncGroup(ctx, *g, last_backward); !s) return s.error();
    }
    states.erase({op.chunk, op.microbatch});
  }
  if (Status s = pp.FlushSends(); !s) return s.error();
  return loss;
}

}  // namespace parallax::executor

#include "executor/runtime/trainer.h"

#include <algorithm>
#include <limits>
#include <thread>

#include "executor/runtime/checkpoint.h"
#include "executor/runtime/fp8_linear.h"
#include "executor/runtime/grad_sync.h"
#include "executor/runtime/moe_layer.h"
#include "executor/runtime/optimizer.h"
#include "executor/runtime/pipeline_runner.h"

namespace parallax::executor {

Status ValidateForExecution(const Plan& plan, int64_t world_size) {
  const Layout& l = plan.layout;
  const ModelSpec& m = plan.model;
  auto s = [](int64_t v) { return std::to_string(v); };
  if (Status st = ValidateLayout(l, m, plan.cluster, world_size); !st) {
    std::string msg = st.error().message;
    if (l.world_size() != world_size) msg += " (start the job with mpirun -np " + s(l.world_size()) + ")";
    return BadInput(msg);
  }
  if (m.vocab % l.tp != 0) return BadInput("plan: tp=" + s(l.tp) + " does not divide vocab=" + s(m.vocab));
  const int64_t stages = l.pp * l.virtual_stages;
  if (m.layers < stages) {
    return BadInput("plan: " + s(m.layers) + " layers cannot fill pp*virtual_stages=" + s(stages) + " stages");
  }
  const int64_t seq = plan.training.seq_len > 0 ? plan.training.seq_len : m.seq_len;
  if (seq > m.seq_len) return BadInput("training seq_len=" + s(seq) + " exceeds the model's seq_len=" + s(m.seq_len));
  if (const std::string cp = ContextParallelProblem(l, seq); !cp.empty()) return BadInput("plan: " + cp);
  if (l.sequence_parallel && l.tp > 1 && (seq / l.cp * l.micro_batch) % l.tp != 0) {
    return BadInput("plan: sequence_parallel needs tp=" + s(l.tp) + " to divide the tokens of a micro-batch on a cp " +
                    "rank (" + s(seq / l.cp * l.micro_batch) + ")");
  }
  if (const std::string moe = MoeExecutionProblem(plan, seq); !moe.empty()) return BadInput(moe);
  if (l.recompute == Recompute::kSelective && l.selective_modules() != kRecomputeCoreAttn) {
    return BadInput("plan: recompute_modules=" + RecomputeModulesToString(l.selective_modules()) +
                    ": the executor's selective recompute reruns the attention core only (core_attn); `parallax "
                    "plan` and `simulate` price the other modules");
  }
  if (m.mla() && (m.bias || m.v_head_dim > m.head_dim())) {
    return BadInput(std::string("model: the executor runs multi-head latent attention ") +
                    (m.bias ? "without biases" : "with v_head_dim <= qk_nope_head_dim + qk_rope_head_dim") +
                    " (its values are padded to the query width)");
  }
  if (m.mla() && m.position == PositionKind::kRotary && m.qk_rope_head_dim % 2 != 0) {
    return BadInput("model: rotary positions need an even qk_rope_head_dim");
  }
  if (m.head_dim() % 2 != 0 && m.position == PositionKind::kRotary) {
    return BadInput("model: rotary positions need an even head dimension");
  }
  return {};
}

Result<std::unique_ptr<Trainer>> Trainer::Create(const Plan& plan, Backend& backend, Communicator& world,
                                                 const TrainerOptions& options) {
  PX_TRY(ValidateForExecution(plan, world.size()));
  if (!backend.SupportsPrecision(plan.training.precision)) {
    return BadInput(std::string("plan: precision ") + ToString(plan.training.precision) + " is not supported by the " +
                    backend.name() + " backend");
  }
  auto t = std::unique_ptr<Trainer>(new Trainer(backend, world.rank()));
  t->options_ = options;
  PX_ASSIGN(t->groups_, CreateProcessGroups(plan.layout, world, plan.model.tie_embeddings, plan.model.moe()));
  RuntimeContext& c = t->ctx_;
  c.backend = &backend;
  c.groups = &t->groups_;
  c.rec = &t->rec_;
  c.model = plan.model;
  c.training = plan.training;
  c.layout = plan.layout;
  // ZeRO partitions over the dp x cp group: with one rank in it there is nothing to shard, gather
  // or reduce-scatter, so every stage runs as stage 0 (as the planner prices it: its ZeRO
  // collectives and passes need dp x cp > 1).
  if (c.layout.dp * c.layout.cp == 1) c.layout.zero_stage = 0;
  c.seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
  c.batch = plan.layout.micro_batch;
  c.cp = plan.layout.cp;
  c.cp_idx = t->groups_.coords.cp_idx;
  c.local_seq = c.seq / c.cp;
  c.tokens = c.local_seq * c.batch;
  c.tp = plan.layout.tp;
  c.sp = plan.layout.sequence_parallel && c.tp > 1;
  c.local_tokens = c.sp ? c.tokens / c.tp : c.tokens;
  c.loss_scale = static_cast<float>(1.0 / static_cast<double>(plan.layout.global_batch * c.seq));
  c.aux_loss_weight = static_cast<double>(c.batch) / static_cast<double>(plan.layout.global_batch);
  switch (plan.training.precision) {
    case Precision::kFp32: c.compute = DType::kF32; break;
    case Precision::kBf16: c.compute = DType::kBf16; break;
    case Precision::kFp16: c.compute = DType::kF16; break;
    case Precision::kFp8: c.compute = DType::kBf16; break;  // refused above by backends without FP8 GEMMs
  }
  c.fp8 = plan.training.precision == Precision::kFp8;
  c.grad_reduce = options.grad_reduce;
  c.init_threads = options.init_threads > 0 ? options.init_threads
                                            : std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (plan.training.precision == Precision::kFp16) {
    c.scaler.enabled = true;
    c.scaler.scale = options.initial_loss_scale;
    c.scaler.window = options.loss_scale_window;
  }
  t->rec_.set_enabled(options.record_ops);
  {
    // The FLOPs and bytes the recorder tags ops with: the one op catalogue, as the planner prices
    // this layout (our executor's implementation profile).
    OpShapeKey key;
    key.micro_batch = c.batch;
    key.seq_len = c.local_seq;  // the tokens this rank runs (cp: its two chunks)
    key.tp = c.tp;
    key.sequence_parallel = c.sp;
    key.recompute = plan.layout.recompute;
    key.element_bytes = plan.training.precision == Precision::kFp32 ? 4 : 2;
    key.fp8_linear = plan.training.precision == Precision::kFp8;
    key.ep = plan.layout.ep;
    key.etp = plan.layout.expert_tp();
    std::vector<int> kinds;
    if (plan.model.moe()) {
      for (int64_t i = 0; i < plan.model.layers; ++i) kinds.push_back(LayerKindOf(plan.model, i));
    }
    t->rec_.set_catalogue(BuildOpCatalogue(plan.model, key, DefaultImplementation()), std::move(kinds));
  }
  PX_ASSIGN(t->data_, DataSource::Create(options.data, plan.model.vocab, c.seq));
  PX_ASSIGN(t->model_, ShardedModel::Build(c));
  // Common time origin for every rank's op timestamps.
  PX_TRY(world.Barrier());
  t->rec_.set_epoch(backend.RecordEvent(StreamKind::kCompute));
  return t;
}

Result<double> Trainer::ComputeGradients() {
  Backend& be = *ctx_.backend;
  rec_.set_step(step_);
  {
    // The step's gradient accumulators start from zero (full buffers under ZeRO 0/1, shards under 2/3).
    int64_t n = 0;
    for (ParamGroup* g : model_->groups()) n += g->grads().numel();
    auto s = rec_.OpAt(OpKind::kGradZero, -1, -1, -1, Phase::kOptim, 4 * n);
    for (ParamGroup* g : model_->groups()) be.Fill(g->grads().ptr(), g->grads().numel(), 0.0f);
  }
  PX_ASSIGN(ctx_.loss_sum, be.AllocateZeroed(1, DType::kF64, MemoryKind::kWorkspace));
  ctx_.aux_loss_sum = 0;
  PX_TRY(RunPipelineStep(ctx_, *model_, *data_, step_));
  if (ctx_.model.moe()) {
    // Every rank's shares of every micro-batch's auxiliary losses: their mean over micro-batches.
    PX_TRY(groups_.world->HostAllReduce(&ctx_.aux_loss_sum, 1, ReduceOp::kSum));
    aux_loss_ = ctx_.aux_loss_sum * ctx_.aux_loss_weight;
  }
  ParamGroup* tied = groups_.embedding ? model_->tied_pair() : nullptr;
  PX_TRY(FinishGradSync(ctx_, model_->groups(), tied));
  // Every last-stage TP rank 0 holds its replica's micro-batch losses: one readback per step.
  const bool owner = groups_.coords.pp_idx == ctx_.layout.pp - 1 && groups_.coords.tp_idx == 0;
  double loss = 0;
  if (owner) be.CopyToHost(&loss, DType::kF64, ctx_.loss_sum.ptr(), 1);
  ctx_.loss_sum.Reset();
  PX_TRY(groups_.world->HostAllReduce(&loss, 1, ReduceOp::kSum));
  if (step_ == options_.inject_overflow_step) {
    const float inf = std::numeric_limits<float>::infinity();
    ParamGroup* g = model_->groups().front();
    be.CopyToDevice(g->grads().ptr(), &inf, DType::kF32, 1);
  }
  return loss / static_cast<double>(ctx_.layout.global_batch * ctx_.seq);
}

Result<StepResult> Trainer::Step(const GradientHook& hook) {
  Backend& be = *ctx_.backend;
  const Event begin = be.RecordEvent(StreamKind::kCompute);
  PX_ASSIGN(auto loss, ComputeGradients());
  bool optimize = true;
  if (hook) {
    PX_ASSIGN(optimize, hook(*this));
  }
  // The next step's FP8 scales from this step's amaxes (delayed scaling).
  if (ctx_.fp8) PX_TRY(Fp8EndStep(ctx_, model_->groups()));
  OptimizerResult opt;
  if (optimize) {
    PX_ASSIGN(opt, OptimizerStep(ctx_, model_->groups(), step_ + 1));
  }
  PX_TRY(ctx_.EndStep());
  const Event end = be.RecordEvent(StreamKind::kCompute);
  const Event both[] = {begin, end};
  auto times = be.EventTimesNs(begin, both);
  be.ReleaseEvents(both);
  if (!times) return times.error();
  PX_TRY(rec_.Resolve());
  double seconds = static_cast<double>((*times)[1]) * 1e-9;
  PX_TRY(groups_.world->HostAllReduce(&seconds, 1, ReduceOp::kMax));

  StepResult r;
  r.step = step_;
  r.loss = loss;
  r.aux_loss = aux_loss_;
  r.step_time_s = seconds;
  r.grad_norm = opt.grad_norm;
  r.skipped = opt.skipped;
  r.loss_scale = ctx_.scaler.scale;
  ++step_;
  return r;
}

Status Trainer::SaveCheckpoint(const std::string& dir) {
  return executor::SaveCheckpoint(ctx_, model_->groups(), dir, step_);
}

Status Trainer::LoadCheckpoint(const std::string& dir) {
  PX_ASSIGN(step_, executor::LoadCheckpoint(ctx_, model_->groups(), dir));
  return {};
}

}  // namespace parallax::executor

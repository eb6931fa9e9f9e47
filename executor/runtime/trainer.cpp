#include "executor/runtime/trainer.h"

#include <algorithm>

#include "executor/runtime/checkpoint.h"
#include "executor/runtime/grad_sync.h"
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
  if (l.sequence_parallel && l.tp > 1 && (seq * l.micro_batch) % l.tp != 0) {
    return BadInput("plan: sequence_parallel needs tp=" + s(l.tp) + " to divide seq_len=" + s(seq));
  }
  if (m.head_dim() % 2 != 0 && m.position == PositionKind::kRotary) {
    return BadInput("model: rotary positions need an even head dimension");
  }
  return {};
}

Result<std::unique_ptr<Trainer>> Trainer::Create(const Plan& plan, Backend& backend, Communicator& world,
                                                 const TrainerOptions& options) {
  if (Status s = ValidateForExecution(plan, world.size()); !s) return s.error();
  auto t = std::unique_ptr<Trainer>(new Trainer(backend, world.rank()));
  auto groups = CreateProcessGroups(plan.layout, world, plan.model.tie_embeddings);
  if (!groups) return groups.error();
  t->groups_ = std::move(groups).value();
  RuntimeContext& c = t->ctx_;
  c.backend = &backend;
  c.groups = &t->groups_;
  c.rec = &t->rec_;
  c.model = plan.model;
  c.training = plan.training;
  c.layout = plan.layout;
  c.seq = plan.training.seq_len > 0 ? plan.training.seq_len : plan.model.seq_len;
  c.batch = plan.layout.micro_batch;
  c.tokens = c.seq * c.batch;
  c.tp = plan.layout.tp;
  c.sp = plan.layout.sequence_parallel && c.tp > 1;
  c.local_tokens = c.sp ? c.tokens / c.tp : c.tokens;
  c.loss_scale = static_cast<float>(1.0 / static_cast<double>(plan.layout.global_batch * c.seq));
  t->rec_.set_enabled(options.record_ops);
  auto data = DataSource::Create(options.data, plan.model.vocab, c.seq);
  if (!data) return data.error();
  t->data_ = std::move(data).value();
  t->model_ = ShardedModel::Build(c);
  // Common time origin for every rank's op timestamps.
  if (Status s = world.Barrier(); !s) return s.error();
  t->rec_.set_epoch(backend.RecordEvent().ns);
  return t;
}

Result<double> Trainer::ComputeGradients() {
  rec_.set_step(step_);
  for (ParamGroup* g : model_->groups()) ctx_.backend->Fill(g->grads_storage(), g->grads_storage_size(), 0.0f);
  auto local_loss = RunPipelineStep(ctx_, *model_, *data_, step_);
  if (!local_loss) return local_loss.error();
  ParamGroup* tied = groups_.embedding ? model_->tied_pair() : nullptr;
  if (Status s = FinishGradSync(ctx_, model_->groups(), tied); !s) return s.error();
  // Every last-stage TP rank 0 holds its replica's micro-batch losses.
  const bool owner = groups_.coords.pp_idx == ctx_.layout.pp - 1 && groups_.coords.tp_idx == 0;
  double loss = owner ? *local_loss : 0.0;
  if (Status s = groups_.world->AllReduce(&loss, 1, ReduceOp::kSum); !s) return s.error();
  return loss / static_cast<double>(ctx_.layout.global_batch * ctx_.seq);
}

Result<StepResult> Trainer::Step() {
  Backend& be = *ctx_.backend;
  const Event begin = be.RecordEvent();
  auto loss = ComputeGradients();
  if (!loss) return loss.error();
  auto opt = OptimizerStep(ctx_, model_->groups(), step_ + 1);
  if (!opt) return opt.error();
  be.Synchronize();
  double seconds = be.ElapsedSeconds(begin, be.RecordEvent());
  if (Status s = groups_.world->AllReduce(&seconds, 1, ReduceOp::kMax); !s) return s.error();

  StepResult r;
  r.step = step_;
  r.loss = *loss;
  r.step_time_s = seconds;
  r.grad_norm = opt->grad_norm;
  ++step_;
  return r;
}

Status Trainer::SaveCheckpoint(const std::string& dir) {
  return executor::SaveCheckpoint(ctx_, model_->groups(), dir, step_);
}

Status Trainer::LoadCheckpoint(const std::string& dir) {
  auto step = executor::LoadCheckpoint(ctx_, model_->groups(), dir);
  if (!step) return step.error();
  step_ = *step;
  return {};
}

}  // namespace parallax::executor

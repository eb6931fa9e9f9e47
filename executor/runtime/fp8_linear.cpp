#include "executor/runtime/fp8_linear.h"

#include "executor/runtime/context.h"
#include "executor/runtime/param_group.h"
#include "executor/runtime/transformer_layer.h"

namespace parallax::executor {

Result<Fp8Scales::Set> Fp8Scales::MakeSet(Backend& be, int64_t count, Fp8Format f, const DelayedScaling& recipe) {
  Set s;
  s.count = count;
  s.format = f;
  PX_ASSIGN(s.history, be.AllocateZeroed(recipe.amax_history_len * count, DType::kF32, MemoryKind::kWorkspace));
  PX_ASSIGN(s.scale, be.Allocate(count, DType::kF32, MemoryKind::kWorkspace));
  PX_ASSIGN(s.scale_inv, be.Allocate(count, DType::kF32, MemoryKind::kWorkspace));
  be.Fill(s.scale.ptr(), count, 1.0f);
  be.Fill(s.scale_inv.ptr(), count, 1.0f);
  return s;
}

Result<std::unique_ptr<Fp8Scales>> Fp8Scales::Create(Backend& be, int64_t slots, const DelayedScaling& recipe) {
  auto s = std::unique_ptr<Fp8Scales>(new Fp8Scales());
  s->recipe_ = recipe;
  PX_ASSIGN(s->forward_, MakeSet(be, 2 * slots, Fp8Format::kE4M3, recipe));
  PX_ASSIGN(s->backward_, MakeSet(be, slots, Fp8Format::kE5M2, recipe));
  return s;
}

Fp8Linear Fp8Scales::Linear(int64_t slot) const {
  const int64_t x = 2 * slot, w = 2 * slot + 1;
  return Fp8Linear{.x_scale = forward_.scale.at(x), .x_scale_inv = forward_.scale_inv.at(x),
                   .x_amax = forward_.history.at(x), .w_scale = forward_.scale.at(w),
                   .w_scale_inv = forward_.scale_inv.at(w), .w_amax = forward_.history.at(w),
                   .dy_scale = backward_.scale.at(slot), .dy_scale_inv = backward_.scale_inv.at(slot),
                   .dy_amax = backward_.history.at(slot)};
}

Status Fp8Scales::Reduce(RuntimeContext& ctx, Set& s) {
  // Max is associative: over tp, then over dp x cp, is over the whole stage.
  for (Communicator* comm : {ctx.groups->tp.get(), &ctx.groups->DpCp()}) {
    if (comm == nullptr || comm->size() == 1) continue;
    PX_TRY(ctx.AfterCompute(StreamKind::kDpComm));
    PX_TRY(comm->AllReduce(s.history.ptr(), s.count, ReduceOp::kMax, ctx.backend->stream(StreamKind::kDpComm)));
    PX_TRY(ctx.ComputeAfter(StreamKind::kDpComm));
  }
  return {};
}

Status Fp8Scales::EndStep(RuntimeContext& ctx) {
  for (Set* s : {&forward_, &backward_}) {
    PX_TRY(Reduce(ctx, *s));
    ctx.backend->Fp8ScaleUpdate({.amax_history = s->history.ptr(), .scale = s->scale.ptr(),
                                 .scale_inv = s->scale_inv.ptr(), .count = s->count, .format = s->format,
                                 .recipe = recipe_});
  }
  return {};
}

namespace {

// `x` cast to `t` with `scale` (amax optional) into a fresh tensor; empty (and the backend failed)
// when memory is refused.
Tensor Cast(Backend& be, DevPtr x, int64_t n, DType t, DevPtr scale, DevPtr amax) {
  auto y = be.Allocate(n, t, MemoryKind::kActivations);
  if (!y) {
    be.Fail(y.error());
    return Tensor();
  }
  be.Fp8Cast({.x = x, .scale = scale, .y = y->ptr(), .amax = amax, .n = n});
  return std::move(y).value();
}

}  // namespace

void Fp8LinearForward(Backend& be, const LinearArgs& a) {
  const Fp8Linear& f = a.fp8;
  const Tensor x = Cast(be, a.x, a.rows * a.k, DType::kE4M3, f.x_scale, f.x_amax);
  const Tensor w = Cast(be, a.w, a.n * a.k, DType::kE4M3, f.w_scale, f.w_amax);
  if (x.empty() || w.empty()) return;
  be.Fp8Gemm({.ta = Trans::kNo, .tb = Trans::kYes, .m = a.rows, .n = a.n, .k = a.k, .a = x.ptr(), .b = w.ptr(),
              .c = a.y, .a_scale_inv = f.x_scale_inv, .b_scale_inv = f.w_scale_inv, .lda = a.k, .ldb = a.k,
              .ldc = a.n});
}

void Fp8LinearBackward(Backend& be, const LinearBackwardArgs& a) {
  const Fp8Linear& f = a.fp8;
  const Tensor dy = Cast(be, a.dy, a.rows * a.n, DType::kE5M2, f.dy_scale, f.dy_amax);
  const Tensor x = Cast(be, a.x, a.rows * a.k, DType::kE4M3, f.x_scale, DevPtr{});
  if (dy.empty() || x.empty()) return;
  be.Fp8Gemm({.ta = Trans::kYes, .m = a.n, .n = a.k, .k = a.rows, .beta = 1.0f, .a = dy.ptr(), .b = x.ptr(),
              .c = a.dw, .a_scale_inv = f.dy_scale_inv, .b_scale_inv = f.x_scale_inv, .lda = a.n, .ldb = a.k,
              .ldc = a.k});
  if (!a.dx) return;
  const Tensor w = Cast(be, a.w, a.n * a.k, DType::kE4M3, f.w_scale, DevPtr{});
  if (w.empty()) return;
  be.Fp8Gemm({.m = a.rows, .n = a.k, .k = a.n, .beta = a.accumulate_dx ? 1.0f : 0.0f, .a = dy.ptr(), .b = w.ptr(),
              .c = a.dx, .a_scale_inv = f.dy_scale_inv, .b_scale_inv = f.w_scale_inv, .lda = a.n, .ldb = a.k,
              .ldc = a.k});
}

Status Fp8EndStep(RuntimeContext& ctx, const std::vector<ParamGroup*>& groups) {
  for (ParamGroup* g : groups) {
    if (g->fp8() != nullptr) PX_TRY(g->fp8()->EndStep(ctx));
  }
  return {};
}

}  // namespace parallax::executor

#include "executor/runtime/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "executor/all_to_all.h"
#include "executor/runtime/tp_ops.h"
#include "executor/runtime/transformer_layer.h"

namespace parallax::executor {
namespace {

int64_t LocalExperts(const RuntimeContext& ctx) { return ctx.model.experts / ctx.layout.ep; }
int64_t EpIndex(const RuntimeContext& ctx) { return ctx.groups->ep->rank(); }

std::vector<int64_t> Offsets(const std::vector<int64_t>& rows) {
  std::vector<int64_t> out(rows.size() + 1, 0);
  std::partial_sum(rows.begin(), rows.end(), out.begin() + 1);
  return out;
}

//! Rows of `send` (blocks of send_rows[r] rows for ep rank r, in rank order) exchanged over the ep
//! group into `recv` (blocks of recv_rows[r] rows from rank r): one grouped send + receive on the ep
//! stream, recorded as `op`; this rank's own block is a copy on the compute stream.
Result<Tensor> ExchangeRows(RuntimeContext& ctx, OpKind op, int64_t layer, Tensor send,
                            const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                            int64_t cols) {
  Communicator& ep = *ctx.groups->ep;
  if (ep.size() == 1) return send;
  const std::vector<int64_t> so = Offsets(send_rows), ro = Offsets(recv_rows);
  PX_ASSIGN(Tensor recv, ctx.Act(std::max<int64_t>(1, ro.back() * cols)));
  const auto me = static_cast<size_t>(ep.rank());
  ctx.backend->Copy({.dst = recv.at(ro[me] * cols), .src = send.at(so[me] * cols), .n = send_rows[me] * cols});
  std::vector<int64_t> send_counts(send_rows), recv_counts(recv_rows);
  for (int64_t& n : send_counts) n *= cols;
  for (int64_t& n : recv_counts) n *= cols;
  const int64_t bytes = (so.back() - send_rows[me]) * cols * SizeOf(ctx.compute);
  PX_TRY(RunCollective(ctx, op, layer, bytes, ep.size(), [&](Stream& s) {
    return GroupedAllToAll(ep, send.ptr(), send_counts, recv.ptr(), recv_counts, 0, s);
  }));
  return recv;
}

//! out[i] = table[index[i]] for n rows of `cols`.
Result<Tensor> GatherRows(RuntimeContext& ctx, const Tensor& index, DevPtr table, int64_t table_rows, int64_t n,
                          int64_t cols) {
  PX_ASSIGN(Tensor out, ctx.Act(std::max<int64_t>(1, n * cols)));
  ctx.backend->EmbeddingForward(
      {.index = index.ptr(), .table = table, .out = out.ptr(), .n = n, .table_rows = table_rows, .hidden = cols});
  return out;
}

//! The permutation into expert order (by expert, then token) and the send/receive plan over ep.
Status PlanDispatch(RuntimeContext& ctx, MoeCache& c) {
  const Routing& r = c.routing;
  const int64_t k = r.topk, n = r.tokens * k, E = r.experts;
  std::vector<int32_t> perm(static_cast<size_t>(n)), unperm(static_cast<size_t>(n)), inv(static_cast<size_t>(n));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return r.expert[static_cast<size_t>(a)] < r.expert[static_cast<size_t>(b)];
  });
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ts = order[static_cast<size_t>(i)];
    perm[static_cast<size_t>(i)] = static_cast<int32_t>(ts / k);
    unperm[static_cast<size_t>(ts)] = static_cast<int32_t>(i);
    inv[static_cast<size_t>(i)] = static_cast<int32_t>(ts);
  }
  PX_ASSIGN(c.perm, ctx.Indices(perm));
  PX_ASSIGN(c.unperm, ctx.Indices(unperm));
  PX_ASSIGN(c.unperm_inv, ctx.Indices(inv));
  Communicator& ep = *ctx.groups->ep;
  const int64_t ranks = ep.size(), local = LocalExperts(ctx), me = EpIndex(ctx);
  std::vector<int64_t> mine(static_cast<size_t>(E)), all(static_cast<size_t>(E * ranks));
  for (int64_t e = 0; e < E; ++e) mine[static_cast<size_t>(e)] = static_cast<int64_t>(r.counts[static_cast<size_t>(e)]);
  PX_TRY(ep.HostAllGather(mine.data(), all.data(), E * static_cast<int64_t>(sizeof(int64_t))));
  c.send_rows.assign(static_cast<size_t>(ranks), 0);
  c.recv_rows.assign(static_cast<size_t>(ranks), 0);
  c.chunk_rows.assign(static_cast<size_t>(ranks * local), 0);
  for (int64_t e = 0; e < E; ++e) c.send_rows[static_cast<size_t>(e / local)] += mine[static_cast<size_t>(e)];
  for (int64_t s = 0; s < ranks; ++s) {
    for (int64_t j = 0; j < local; ++j) {
      const int64_t rows = all[static_cast<size_t>(s * E + me * local + j)];
      c.chunk_rows[static_cast<size_t>(s * local + j)] = rows;
      c.recv_rows[static_cast<size_t>(s)] += rows;
    }
  }
  return {};
}

//! Routes c.x: the router GEMM, top-k and probabilities on the host, the counts over tp x cp, this
//! rank's auxiliary loss share.
Status Route(RuntimeContext& ctx, const MoeParams& p, int64_t rows, MoeCache& c) {
  const ModelSpec& m = ctx.model;
  const int64_t E = m.experts, k = m.experts_per_token;
  auto s = ctx.rec->Op(OpKind::kRouter, p.layer);
  PX_ASSIGN(Tensor logits, ctx.Act(rows * E));
  LinearForward(*ctx.backend, {.x = c.x.ptr(), .w = p.group->param(static_cast<size_t>(p.router)), .y = logits.ptr(), .rows = rows, .n = E, .k = m.hidden});
  std::vector<float> host(static_cast<size_t>(rows * E));
  ctx.backend->CopyToHost(host.data(), DType::kF32, logits.ptr(), rows * E);
  c.routing = RouteTopK(host, rows, E, k);
  c.group_counts = c.routing.counts;
  if (ctx.tp > 1) PX_TRY(ctx.tp_comm().HostAllReduce(c.group_counts.data(), E, ReduceOp::kSum));
  if (ctx.cp > 1) PX_TRY(ctx.groups->cp->HostAllReduce(c.group_counts.data(), E, ReduceOp::kSum));
  if (ctx.rec->where().phase != Phase::kRecompute) {
    ctx.aux_loss_sum += AuxLossShare(c.routing, c.group_counts, ctx.batch * ctx.seq, kMoeAuxLossCoeff);
  }
  PX_ASSIGN(c.probs, ctx.Act(rows * k));
  ctx.backend->CopyToDevice(c.probs.ptr(), c.routing.prob.data(), DType::kF32, rows * k);
  return {};
}

//! The local experts' weights: fc1_gate, fc1_up, fc2 of local expert j.
DevPtr Weight(const MoeParams& p, int64_t j, int w) { return p.experts->param(static_cast<size_t>(3 * j + w)); }
DevPtr WeightGrad(const MoeParams& p, int64_t j, int w) { return p.experts->grad(static_cast<size_t>(3 * j + w)); }

//! Runs `body(j, first_row, rows)` over the received chunks (source rank, then local expert).
template <class Body>
void ForEachChunk(const MoeCache& c, int64_t local, Body body) {
  int64_t row = 0;
  for (size_t i = 0; i < c.chunk_rows.size(); ++i) {
    const int64_t n = c.chunk_rows[i];
    if (n > 0) body(static_cast<int64_t>(i) % local, row, n);
    row += n;
  }
}

Result<Tensor> ExpertsForward(RuntimeContext& ctx, const MoeParams& p, MoeCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, F = ctx.model.moe_ffn_hidden, local = LocalExperts(ctx);
  const int64_t R = std::accumulate(c.recv_rows.begin(), c.recv_rows.end(), int64_t{0});
  const int64_t cells = std::max<int64_t>(1, R * F);
  PX_ASSIGN(c.gate, ctx.Act(cells));
  PX_ASSIGN(c.up, ctx.Act(cells));
  PX_ASSIGN(c.act, ctx.Act(cells));
  PX_ASSIGN(Tensor y, ctx.Act(std::max<int64_t>(1, R * H)));
  {
    auto s = ctx.rec->Op(OpKind::kExpertFc1, p.layer);
    ForEachChunk(c, local, [&](int64_t j, int64_t r0, int64_t n) {
      LinearForward(be, {.x = c.xe.at(r0 * H), .w = Weight(p, j, 0), .y = c.gate.at(r0 * F), .rows = n, .n = F, .k = H});
      LinearForward(be, {.x = c.xe.at(r0 * H), .w = Weight(p, j, 1), .y = c.up.at(r0 * F), .rows = n, .n = F, .k = H});
    });
  }
  {
    auto s = ctx.rec->Op(OpKind::kExpertAct, p.layer);
    be.SwigluForward({.gate = c.gate.ptr(), .up = c.up.ptr(), .y = c.act.ptr(), .n = R * F});
  }
  auto s = ctx.rec->Op(OpKind::kExpertFc2, p.layer);
  ForEachChunk(c, local, [&](int64_t j, int64_t r0, int64_t n) {
    LinearForward(be, {.x = c.act.at(r0 * F), .w = Weight(p, j, 2), .y = y.at(r0 * H), .rows = n, .n = H, .k = F});
  });
  return y;
}

//! d(expert inputs) [R, H] from d(expert outputs); expert weight gradients +=.
Result<Tensor> ExpertsBackward(RuntimeContext& ctx, const MoeParams& p, MoeCache& c, const Tensor& dy) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, F = ctx.model.moe_ffn_hidden, local = LocalExperts(ctx);
  const int64_t R = std::accumulate(c.recv_rows.begin(), c.recv_rows.end(), int64_t{0});
  const int64_t cells = std::max<int64_t>(1, R * F);
  PX_ASSIGN(Tensor dact, ctx.Act(cells));
  {
    auto s = ctx.rec->Op(OpKind::kExpertFc2, p.layer);
    ForEachChunk(c, local, [&](int64_t j, int64_t r0, int64_t n) {
      LinearBackward(be, {.dy = dy.at(r0 * H), .x = c.act.at(r0 * F), .w = Weight(p, j, 2), .dw = WeightGrad(p, j, 2),
                          .dx = dact.at(r0 * F), .rows = n, .n = H, .k = F});
    });
  }
  PX_ASSIGN(Tensor dgate, ctx.Act(cells));
  PX_ASSIGN(Tensor dup, ctx.Act(cells));
  {
    auto s = ctx.rec->Op(OpKind::kExpertAct, p.layer);
    be.SwigluBackward({.gate = c.gate.ptr(), .up = c.up.ptr(), .dy = dact.ptr(), .dgate = dgate.ptr(),
                       .dup = dup.ptr(), .n = R * F});
  }
  dact.Reset();
  PX_ASSIGN(Tensor dx, ctx.Act(std::max<int64_t>(1, R * H)));
  auto s = ctx.rec->Op(OpKind::kExpertFc1, p.layer);
  ForEachChunk(c, local, [&](int64_t j, int64_t r0, int64_t n) {
    LinearBackward(be, {.dy = dgate.at(r0 * F), .x = c.xe.at(r0 * H), .w = Weight(p, j, 0), .dw = WeightGrad(p, j, 0),
                        .dx = dx.at(r0 * H), .rows = n, .n = F, .k = H});
    LinearBackward(be, {.dy = dup.at(r0 * F), .x = c.xe.at(r0 * H), .w = Weight(p, j, 1), .dw = WeightGrad(p, j, 1),
                        .dx = dx.at(r0 * H), .rows = n, .n = F, .k = H, .accumulate_dx = true});
  });
  return dx;
}

}  // namespace

std::string MoeExecutionProblem(const Plan& plan, int64_t seq) {
  const ModelSpec& m = plan.model;
  const Layout& l = plan.layout;
  // Multi-token prediction modules (dense or MoE models): priced and counted by the planner
  // (model/param_groups.h), not built by the executor.
  if (m.mtp_layers > 0) return "model: the executor does not run multi-token prediction (mtp_layers) yet";
  if (!m.moe()) return "";
  auto s = [](int64_t v) { return std::to_string(v); };
  const std::string no = "model: the executor's mixture-of-experts layers do not run ";
  if (m.router != RouterKind::kSoftmax || m.router_groups > 1) return no + "a sigmoid or group-limited router yet";
  if (m.bias) return no + "biases yet (bias: false)";
  if (m.mlp != MlpKind::kSwiglu) return no + "GELU experts yet (mlp: swiglu)";
  if (plan.training.precision == Precision::kFp8) return no + "in fp8 yet";
  if (l.expert_tp() != 1) {
    return "plan: the executor holds each expert whole (etp=1); etp=" + s(l.expert_tp()) +
           " (etp defaults to tp) is not run yet";
  }
  if ((seq / l.cp * l.micro_batch) % l.tp != 0) {
    return "plan: MoE layers route tokens / tp per TP rank: tp=" + s(l.tp) + " must divide the tokens of a " +
           "micro-batch on a cp rank (" + s(seq / l.cp * l.micro_batch) + ")";
  }
  return "";
}

std::vector<ParamSpec> ExpertParamSpecs(const ModelSpec& m, int64_t layer, int64_t ep, int64_t ep_idx) {
  std::vector<ParamSpec> out;
  const int64_t local = m.experts / ep, h = m.hidden, f = m.moe_ffn_hidden;
  const float std_out = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  for (int64_t j = 0; j < local; ++j) {
    const std::string prefix = "layer" + std::to_string(layer) + ".expert" + std::to_string(ep_idx * local + j) + ".";
    for (const auto& [name, rows, cols, sd] : {std::tuple{"fc1_gate", f, h, 0.02f}, std::tuple{"fc1_up", f, h, 0.02f},
                                                std::tuple{"fc2", h, f, std_out}}) {
      ParamSpec p;
      p.name = prefix + name;
      p.rows = rows;
      p.cols = cols;
      p.std = sd;
      p.weight_decay = true;
      out.push_back(p);
    }
  }
  return out;
}

Status MoeForward(RuntimeContext& ctx, const MoeParams& p, DevPtr x, int64_t rows, DevPtr y, MoeCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, k = ctx.model.experts_per_token;
  PX_ASSIGN(c.x, ctx.Act(rows * H));
  be.Copy({.dst = c.x.ptr(), .src = x, .n = rows * H});
  PX_TRY(Route(ctx, p, rows, c));
  Tensor sent;
  {
    auto s = ctx.rec->Op(OpKind::kPermute, p.layer);
    PX_TRY(PlanDispatch(ctx, c));
    PX_ASSIGN(sent, GatherRows(ctx, c.perm, c.x.ptr(), rows, rows * k, H));
  }
  PX_ASSIGN(c.xe, ExchangeRows(ctx, OpKind::kMoeDispatch, p.layer, std::move(sent), c.send_rows, c.recv_rows, H));
  PX_ASSIGN(Tensor ye, ExpertsForward(ctx, p, c));
  PX_ASSIGN(Tensor back, ExchangeRows(ctx, OpKind::kMoeCombine, p.layer, std::move(ye), c.recv_rows, c.send_rows, H));
  auto s = ctx.rec->Op(OpKind::kUnpermute, p.layer);
  PX_ASSIGN(c.ytok, GatherRows(ctx, c.unperm, back.ptr(), rows * k, rows * k, H));
  // y[t] += probs[t] (1 x k) . ytok[t] (k x H), one small GEMM per token.
  be.Gemm({.m = 1, .n = H, .k = k, .beta = 1.0f, .a = c.probs.ptr(), .b = c.ytok.ptr(), .c = y, .lda = k, .ldb = H,
           .ldc = H, .batch = rows, .stride_a = k, .stride_b = k * H, .stride_c = H});
  return {};
}

Status MoeBackward(RuntimeContext& ctx, const MoeParams& p, DevPtr dy, DevPtr dx, MoeCache& c) {
  Backend& be = *ctx.backend;
  const int64_t H = ctx.model.hidden, k = ctx.model.experts_per_token, rows = c.routing.tokens;
  PX_TRY(p.experts->EnsureGrads(ctx));
  PX_ASSIGN(Tensor dprob, ctx.F32(rows * k));
  Tensor dsent;
  {
    auto s = ctx.rec->Op(OpKind::kUnpermute, p.layer);
    // dprob[t] (k x 1) = ytok[t] (k x H) . dy[t]^T; dytok[t] (k x H) = probs[t]^T (k x 1) . dy[t] (1 x H).
    be.Gemm({.tb = Trans::kYes, .m = k, .n = 1, .k = H, .a = c.ytok.ptr(), .b = dy, .c = dprob.ptr(), .lda = H,
             .ldb = H, .ldc = 1, .batch = rows, .stride_a = k * H, .stride_b = H, .stride_c = k});
    PX_ASSIGN(Tensor dytok, ctx.Act(rows * k * H));
    be.Gemm({.ta = Trans::kYes, .m = k, .n = H, .k = 1, .a = c.probs.ptr(), .b = dy, .c = dytok.ptr(), .lda = k,
             .ldb = H, .ldc = H, .batch = rows, .stride_a = k, .stride_b = H, .stride_c = k * H});
    c.ytok.Reset();
    PX_ASSIGN(dsent, GatherRows(ctx, c.unperm_inv, dytok.ptr(), rows * k, rows * k, H));
  }
  PX_ASSIGN(Tensor dye, ExchangeRows(ctx, OpKind::kMoeCombine, p.layer, std::move(dsent), c.send_rows, c.recv_rows, H));
  PX_ASSIGN(Tensor dxe, ExpertsBackward(ctx, p, c, dye));
  dye.Reset();
  c.xe.Reset();
  PX_ASSIGN(Tensor dback, ExchangeRows(ctx, OpKind::kMoeDispatch, p.layer, std::move(dxe), c.recv_rows, c.send_rows, H));
  {
    auto s = ctx.rec->Op(OpKind::kPermute, p.layer);
    PX_ASSIGN(Tensor dxtok, GatherRows(ctx, c.unperm, dback.ptr(), rows * k, rows * k, H));
    PX_ASSIGN(Tensor ones, ctx.Act(k));
    be.Fill(ones.ptr(), k, 1.0f);
    // dx[t] += sum over its k slots: ones (1 x k) . dxtok[t] (k x H).
    be.Gemm({.m = 1, .n = H, .k = k, .beta = 1.0f, .a = ones.ptr(), .b = dxtok.ptr(), .c = dx, .lda = k, .ldb = H,
             .ldc = H, .batch = rows, .stride_b = k * H, .stride_c = H});
  }
  auto s = ctx.rec->Op(OpKind::kRouter, p.layer);
  std::vector<float> dprob_host(static_cast<size_t>(rows * k));
  be.CopyToHost(dprob_host.data(), DType::kF32, dprob.ptr(), rows * k);
  const double aux_weight = ctx.aux_loss_weight * (ctx.scaler.enabled ? ctx.scaler.scale : 1.0);
  const std::vector<float> dlogits = RouterLogitGrad(c.routing, dprob_host, c.group_counts, ctx.batch * ctx.seq,
                                                     kMoeAuxLossCoeff, aux_weight);
  const int64_t E = ctx.model.experts;
  PX_ASSIGN(Tensor dl, ctx.Act(rows * E));
  be.CopyToDevice(dl.ptr(), dlogits.data(), DType::kF32, rows * E);
  const auto router = static_cast<size_t>(p.router);
  LinearBackward(be, {.dy = dl.ptr(), .x = c.x.ptr(), .w = p.group->param(router), .dw = p.group->grad(router), .dx = dx, .rows = rows,
                      .n = E, .k = ctx.model.hidden, .accumulate_dx = true});
  return {};
}

}  // namespace parallax::executor

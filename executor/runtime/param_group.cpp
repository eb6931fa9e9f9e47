#include "executor/runtime/param_group.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "executor/runtime/context.h"
#include "executor/runtime/param_init.h"
#include "executor/runtime/tp_ops.h"

namespace parallax::executor {

ZeroConfig ZeroConfigFor(const RuntimeContext& ctx, const ParamGroupDef& def) {
  const RankGroup g = RankGroupOf(def.reduced_over);
  return {.stage = ctx.layout.zero_stage,
          .dp = ShapeOf(ctx.layout, g).size,
          .dp_idx = IndexInGroup(ctx.layout, ctx.groups->coords, g),
          .group = def.reduced_over};
}

Communicator& ReductionComm(const RuntimeContext& ctx, ReductionGroup g) {
  switch (g) {
    case ReductionGroup::kDpCp: return ctx.groups->DpCp();
    case ReductionGroup::kExpertDp: return *ctx.groups->expert_dp;
  }
  return ctx.groups->DpCp();
}

ParamGroup::ParamGroup(std::string name, std::vector<ParamSpec> params, int64_t tp, int64_t tp_idx)
    : name_(std::move(name)), specs_(std::move(params)) {
  int64_t offset = 0;
  for (ParamSpec& p : specs_) {
    p.local_rows = p.rows;
    p.local_cols = p.cols;
    p.row0 = p.col0 = 0;
    if (p.shard == ShardDim::kRows) {
      p.local_rows = p.rows / tp;
      p.row0 = tp_idx * p.local_rows;
    } else if (p.shard == ShardDim::kCols) {
      p.local_cols = p.cols / tp;
      p.col0 = tp_idx * p.local_cols;
    }
    p.offset = offset;
    offset += p.numel();
  }
  size_ = offset;
}

Status ParamGroup::Materialize(Backend& backend, const ZeroConfig& zero, int64_t seed, DType compute,
                               int64_t threads) {
  backend_ = &backend;
  zero_ = zero;
  compute_ = compute;
  padded_ = (size_ + zero.dp - 1) / zero.dp * zero.dp;
  if (padded_ == 0) padded_ = zero.dp;
  PX_ASSIGN(values_, backend.AllocateZeroed(params_storage_size(), compute, MemoryKind::kWeights));
  PX_ASSIGN(grads_, backend.AllocateZeroed(grads_storage_size(), DType::kF32, MemoryKind::kGradients));
  if (compute != DType::kF32) {
    PX_ASSIGN(main_, backend.AllocateZeroed(opt_size(), DType::kF32, MemoryKind::kOptimizer));
  }
  PX_ASSIGN(m_, backend.AllocateZeroed(opt_size(), DType::kF32, MemoryKind::kOptimizer));
  PX_ASSIGN(v_, backend.AllocateZeroed(opt_size(), DType::kF32, MemoryKind::kOptimizer));
  // Initialise the elements this rank stores, each from its global index.
  const int64_t begin = zero.stage == 3 ? shard_begin() : 0;
  const int64_t end = zero.stage == 3 ? shard_begin() + shard_size() : padded_;
  std::vector<float> host(static_cast<size_t>(end - begin), 0.0f);
  // Element [lo, hi) of every parameter: each value depends on its global index alone, so the
  // split over threads never changes a weight. One core makes about 22M values a second (45 ns
  // each on the 2-core build VM, 2026-11-27): a GPT-1.3B alone took about a minute before its first
  // step on the H100 machine, and more than the 60 s the GPU checks allow with a trace.
  auto fill = [&](int64_t from, int64_t to) {
    for (const ParamSpec& p : specs_) {
      const int64_t lo = std::max({begin, from, p.offset}), hi = std::min({end, to, p.offset + p.numel()});
      if (lo >= hi) continue;
      const uint64_t key = ParamKey(seed, p.name);
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t local = i - p.offset;
        const int64_t r = p.row0 + local / p.local_cols, c = p.col0 + local % p.local_cols;
        float value = 0;
        switch (p.init) {
          case InitKind::kNormal: value = NormalAt(key, r * p.cols + c, p.std); break;
          case InitKind::kOnes: value = 1.0f; break;
          case InitKind::kZeros: value = 0.0f; break;
        }
        host[static_cast<size_t>(i - begin)] = value;
      }
    }
  };
  constexpr int64_t kChunk = int64_t{1} << 20;  // values a thread takes at a time
  const int64_t chunks = (end - begin + kChunk - 1) / kChunk;
  const int64_t workers = std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, chunks));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t k = next++; k < chunks; k = next++) fill(begin + k * kChunk, std::min(end, begin + (k + 1) * kChunk));
  };
  {
    std::vector<std::jthread> pool;
    pool.reserve(static_cast<size_t>(workers - 1));
    for (int64_t w = 1; w < workers; ++w) pool.emplace_back(work);
    work();
  }
  backend.CopyToDevice(values_.ptr(), host.data(), DType::kF32, end - begin);
  if (!main_.empty()) {
    backend.CopyToDevice(main_.ptr(), host.data() + (opt_begin() - begin), DType::kF32, opt_size());
  }
  return {};
}

void ParamGroup::CopyShard(RuntimeContext& ctx, DevPtr dst, int64_t trace_layer) {
  auto s = ctx.rec->Op(OpKind::kShardCopy, trace_layer, -1, 2 * shard_size() * SizeOf(compute_));
  backend_->Copy({.dst = dst, .src = values_.ptr(), .n = shard_size()});
}

Status ParamGroup::Acquire(RuntimeContext& ctx, int64_t trace_layer) {
  if (zero_.stage != 3) return {};
  if (acquired_++ > 0) return {};
  if (prefetched_) {
    prefetched_ = false;
    return backend_->WaitEvent(StreamKind::kCompute, prefetch_done_);
  }
  return Gather(ctx, trace_layer, /*compute_waits=*/true);
}

Status ParamGroup::Gather(RuntimeContext& ctx, int64_t trace_layer, bool compute_waits) {
  PX_ASSIGN(gathered_, backend_->Allocate(padded_, compute_, MemoryKind::kWeights));
  const DevPtr mine = gathered_.at(shard_begin());
  CopyShard(ctx, mine, trace_layer);
  Communicator& comm = ReductionComm(ctx, zero_.group);
  return RunCollective(
      ctx, OpKind::kDpAllGather, trace_layer, padded_ * SizeOf(compute_), static_cast<int32_t>(zero_.dp),
      [&](Stream& s) { return comm.AllGather(mine, gathered_.ptr(), shard_size(), s); }, compute_waits);
}

Status ParamGroup::Prefetch(RuntimeContext& ctx, int64_t trace_layer) {
  if (zero_.stage != 3 || acquired_ > 0 || prefetched_) return {};
  PX_TRY(Gather(ctx, trace_layer, /*compute_waits=*/false));
  prefetch_done_ = ctx.Mark(StreamKind::kDpComm);
  prefetched_ = true;
  return {};
}

void ParamGroup::Release() {
  if (zero_.stage != 3) return;
  if (--acquired_ == 0) gathered_.Reset();
}

DevPtr ParamGroup::param(size_t i) const {
  if (zero_.stage != 3) return values_.at(specs_[i].offset);
  if (gathered_.empty()) {
    std::fprintf(stderr, "parallax: internal error: ZeRO-3 group %s used without Acquire\n", name_.c_str());
    std::abort();
  }
  return gathered_.at(specs_[i].offset);
}

Status ParamGroup::EnsureGrads(RuntimeContext& ctx) {
  if (zero_.stage >= 2 && grad_temp_.empty()) {
    PX_ASSIGN(grad_temp_, backend_->Allocate(padded_, DType::kF32, MemoryKind::kGradients));
    auto s = ctx.rec->Op(OpKind::kGradZero, layer, -1, 4 * padded_);
    backend_->Fill(grad_temp_.ptr(), padded_, 0.0f);
  }
  return {};
}

DevPtr ParamGroup::grad(size_t i) const {
  if (zero_.stage < 2) return grads_.at(specs_[i].offset);
  if (grad_temp_.empty()) {
    std::fprintf(stderr, "parallax: internal error: ZeRO-%d group %s: gradient used before EnsureGrads\n",
                 static_cast<int>(zero_.stage), name_.c_str());
    std::abort();
  }
  return grad_temp_.at(specs_[i].offset);
}

}  // namespace parallax::executor

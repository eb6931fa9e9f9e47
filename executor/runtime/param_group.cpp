#include "executor/runtime/param_group.h"

#include <cstdio>
#include <cstdlib>

#include "executor/runtime/param_init.h"

namespace parallax::executor {

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

void ParamGroup::Materialize(Backend& backend, const ZeroConfig& zero, int64_t seed) {
  backend_ = &backend;
  zero_ = zero;
  padded_ = (size_ + zero.dp - 1) / zero.dp * zero.dp;
  if (padded_ == 0) padded_ = zero.dp;
  values_ = backend.AllocateFloats(params_storage_size(), MemoryKind::kWeights);
  grads_ = backend.AllocateFloats(grads_storage_size(), MemoryKind::kGradients);
  m_ = backend.AllocateFloats(opt_size(), MemoryKind::kOptimizer);
  v_ = backend.AllocateFloats(opt_size(), MemoryKind::kOptimizer);
  // Initialise the elements this rank stores, each from its global index.
  const int64_t begin = zero.stage == 3 ? shard_begin() : 0;
  const int64_t end = zero.stage == 3 ? shard_begin() + shard_size() : padded_;
  std::vector<float> host(static_cast<size_t>(end - begin), 0.0f);
  for (const ParamSpec& p : specs_) {
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel());
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
  backend.Copy(values_.f32(), host.data(), end - begin);
}

Status ParamGroup::Acquire(Communicator& dp, OpRecorder& rec, int64_t trace_layer) {
  if (zero_.stage != 3) return {};
  if (acquired_++ > 0) return {};
  gathered_ = backend_->AllocateFloats(padded_, MemoryKind::kWeights);
  float* mine = gathered_.f32() + shard_begin();
  backend_->Copy(mine, values_.f32(), shard_size());
  auto scope = rec.Op(OpKind::kDpAllGather, trace_layer, -1, padded_ * 4, static_cast<int32_t>(zero_.dp));
  return dp.AllGather(mine, gathered_.f32(), shard_size());
}

void ParamGroup::Release() {
  if (zero_.stage != 3) return;
  if (--acquired_ == 0) gathered_.Reset();
}

float* ParamGroup::param(size_t i) const {
  if (zero_.stage != 3) return values_.f32() + specs_[i].offset;
  if (gathered_.empty()) {
    std::fprintf(stderr, "parallax: internal error: ZeRO-3 group %s used without Acquire\n", name_.c_str());
    std::abort();
  }
  return gathered_.f32() + specs_[i].offset;
}

float* ParamGroup::grad(size_t i) {
  if (zero_.stage < 2) return grads_.f32() + specs_[i].offset;
  if (grad_temp_.empty()) grad_temp_ = backend_->AllocateFloats(padded_, MemoryKind::kGradients);
  return grad_temp_.f32() + specs_[i].offset;
}

}  // namespace parallax::executor

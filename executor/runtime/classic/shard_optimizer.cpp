#include "executor/runtime/classic/shard_optimizer.h"

namespace parallax::executor {

Result<std::unique_ptr<ShardOptimizer>> ShardOptimizer::Create(Backend& be, const std::vector<float>& weights,
                                                               std::vector<FlatParam> params, const TrainingSpec& t) {
  auto o = std::unique_ptr<ShardOptimizer>(new ShardOptimizer(be, std::move(params), t));
  const auto n = static_cast<int64_t>(weights.size());
  PX_ASSIGN(o->weights_, be.Allocate(n, DType::kF32, MemoryKind::kWeights));
  PX_ASSIGN(o->grads_, be.AllocateZeroed(n, DType::kF32, MemoryKind::kGradients));
  PX_ASSIGN(o->m_, be.AllocateZeroed(n, DType::kF32, MemoryKind::kOptimizer));
  PX_ASSIGN(o->v_, be.AllocateZeroed(n, DType::kF32, MemoryKind::kOptimizer));
  be.CopyToDevice(o->weights_.ptr(), weights.data(), DType::kF32, n);
  return o;
}

void ShardOptimizer::Apply(const std::vector<float>& grad, double grad_scale, double lr_scale) {
  be_->CopyToDevice(grads_.ptr(), grad.data(), DType::kF32, size());
  std::vector<AdamWTensor> tensors;
  for (const FlatParam& p : params_) {
    AdamWTensor a;
    a.main = weights_.at(p.offset);
    a.grad = grads_.at(p.offset);
    a.m = m_.at(p.offset);
    a.v = v_.at(p.offset);
    a.n = p.numel();
    a.decay = p.decay;
    tensors.push_back(a);
  }
  AdamWParams a;
  a.lr = training_.lr * lr_scale;
  a.beta1 = training_.adam_beta1;
  a.beta2 = training_.adam_beta2;
  a.eps = training_.adam_eps;
  a.weight_decay = training_.weight_decay;
  a.step = ++updates_;
  a.grad_scale = grad_scale;
  be_->MultiTensorAdamW(tensors, a);
}

void ShardOptimizer::ReadWeights(std::vector<float>* out) const {
  out->resize(static_cast<size_t>(size()));
  be_->CopyToHost(out->data(), DType::kF32, weights_.ptr(), size());
}

double SumSquares(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return s;
}

}  // namespace parallax::executor

#pragma once
// AdamW over one range of the flat model held in backend memory: a parameter server's shard, or
// the whole model of a backup-worker coordinator. Runs the backend's own multi-tensor AdamW, so a
// synchronous parameter server updates exactly as the all-reduce path's optimizer does.

#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/classic/flat_model.h"
#include "model/training_spec.h"

namespace parallax::executor {

class ShardOptimizer {
 public:
  //! `params`: the parameters inside the range, offsets relative to its start.
  static Result<std::unique_ptr<ShardOptimizer>> Create(Backend& be, const std::vector<float>& weights,
                                                        std::vector<FlatParam> params, const TrainingSpec& t);
  int64_t size() const { return weights_.numel(); }
  int64_t updates() const { return updates_; }
  //! One AdamW step with `grad` (host, size()) times `grad_scale` (clipping), at the learning rate
  //! times `lr_scale`.
  void Apply(const std::vector<float>& grad, double grad_scale, double lr_scale = 1.0);
  void ReadWeights(std::vector<float>* out) const;

 private:
  ShardOptimizer(Backend& be, std::vector<FlatParam> params, const TrainingSpec& t)
      : be_(&be), params_(std::move(params)), training_(t) {}
  Backend* be_;
  std::vector<FlatParam> params_;
  TrainingSpec training_;
  Tensor weights_, grads_, m_, v_;
  int64_t updates_ = 0;
};

//! Sum of squares of a host vector, in double.
double SumSquares(const std::vector<float>& v);

}  // namespace parallax::executor

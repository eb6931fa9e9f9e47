#include "executor/runtime/classic/worker_data.h"

#include <string>
#include <vector>

namespace parallax::executor {
namespace {

class MappedData final : public DataSource {
 public:
  MappedData(std::unique_ptr<DataSource> base, FederatedRule rule, int64_t worker, int64_t workers,
             int64_t global_batch, int64_t vocab)
      : DataSource(base->seq()),
        base_(std::move(base)),
        rule_(rule),
        worker_(worker),
        workers_(workers),
        global_batch_(global_batch),
        local_batch_(global_batch / workers),
        vocab_(vocab) {}

  void Sample(int64_t index, int32_t* out) const override {
    const int64_t step = index / local_batch_, r = index % local_batch_;
    if (rule_ == FederatedRule::kContiguous) {
      base_->Sample((worker_ << 20) + index, out);
      return;
    }
    const int64_t iid = step * global_batch_ + worker_ * local_batch_ + r;
    if (rule_ == FederatedRule::kIid) {
      base_->Sample(iid, out);
      return;
    }
    const int64_t lo = worker_ * vocab_ / workers_, hi = (worker_ + 1) * vocab_ / workers_;
    const int64_t tries = 4 * workers_;
    for (int64_t k = 0; k < tries; ++k) {
      base_->Sample(iid * tries + k, out);
      if (out[1] >= lo && out[1] < hi) return;
    }
    base_->Sample(iid * tries, out);
  }

  std::string Describe() const override {
    return base_->Describe() + ", worker " + std::to_string(worker_) + " of " + std::to_string(workers_) +
           (rule_ == FederatedRule::kIid ? "" : std::string(", federated:") + ToString(rule_));
  }

 private:
  std::unique_ptr<DataSource> base_;
  FederatedRule rule_;
  int64_t worker_, workers_, global_batch_, local_batch_, vocab_;
};

}  // namespace

std::unique_ptr<DataSource> WorkerData(std::unique_ptr<DataSource> base, FederatedRule rule, int64_t worker,
                                       int64_t workers, int64_t global_batch, int64_t vocab) {
  return std::make_unique<MappedData>(std::move(base), rule, worker, workers, global_batch, vocab);
}

}  // namespace parallax::executor

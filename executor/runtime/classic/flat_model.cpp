#include "executor/runtime/classic/flat_model.h"

#include <algorithm>

namespace parallax::executor {

FlatModel::FlatModel(std::vector<ParamGroup*> groups) : groups_(std::move(groups)) {
  for (ParamGroup* g : groups_) {
    group_offset_.push_back(size_);
    for (const ParamSpec& p : g->params()) {
      params_.push_back({.offset = size_ + p.offset, .rows = p.local_rows, .cols = p.local_cols, .decay = p.weight_decay});
    }
    size_ += g->padded();
  }
}

DevPtr FlatModel::BufferOf(ParamGroup& g, Part part) {
  switch (part) {
    case Part::kWeights: return g.values().ptr();
    case Part::kGrads: return g.grads().ptr();
    case Part::kAdamM: return g.adam_m().ptr();
    case Part::kAdamV: return g.adam_v().ptr();
  }
  return g.values().ptr();
}

void FlatModel::Read(Backend& be, Part part, std::vector<float>* out) const {
  out->resize(static_cast<size_t>(size_));
  for (size_t i = 0; i < groups_.size(); ++i) {
    be.CopyToHost(out->data() + group_offset_[i], DType::kF32, BufferOf(*groups_[i], part), groups_[i]->padded());
  }
}

void FlatModel::Write(Backend& be, Part part, const std::vector<float>& in) const {
  for (size_t i = 0; i < groups_.size(); ++i) {
    be.CopyToDevice(BufferOf(*groups_[i], part), in.data() + group_offset_[i], DType::kF32, groups_[i]->padded());
  }
}

std::vector<FlatParam> ParamsInRange(const std::vector<FlatParam>& params, int64_t lo, int64_t hi) {
  std::vector<FlatParam> out;
  for (const FlatParam& p : params) {
    const int64_t b = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel());
    if (b >= e) continue;
    out.push_back({.offset = b - lo, .rows = 1, .cols = e - b, .decay = p.decay});
  }
  return out;
}

}  // namespace parallax::executor

#pragma once
// One worker's whole model as one flat fp32 vector (the groups' padded buffers end to end), the
// unit the classic modes push, pull, compress and average. Needs tp = pp = 1, ZeRO 0 and fp32
// (ValidateClassicExecution), where every group holds its full parameters and gradients.

#include <cstdint>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/param_group.h"

namespace parallax::executor {

//! One parameter in the flat vector.
struct FlatParam {
  int64_t offset = 0;
  int64_t rows = 1;
  int64_t cols = 1;
  bool decay = false;
  int64_t numel() const { return rows * cols; }
};

class FlatModel {
 public:
  explicit FlatModel(std::vector<ParamGroup*> groups);
  int64_t size() const { return size_; }
  const std::vector<FlatParam>& params() const { return params_; }

  //! Which of each group's buffers (all full-size under ZeRO 0).
  enum class Part { kWeights, kGrads, kAdamM, kAdamV };
  void Read(Backend& be, Part part, std::vector<float>* out) const;
  void Write(Backend& be, Part part, const std::vector<float>& in) const;
  void ReadGrads(Backend& be, std::vector<float>* out) const { Read(be, Part::kGrads, out); }
  void WriteGrads(Backend& be, const std::vector<float>& in) const { Write(be, Part::kGrads, in); }
  void ReadWeights(Backend& be, std::vector<float>* out) const { Read(be, Part::kWeights, out); }
  void WriteWeights(Backend& be, const std::vector<float>& in) const { Write(be, Part::kWeights, in); }

 private:
  static DevPtr BufferOf(ParamGroup& g, Part part);
  std::vector<ParamGroup*> groups_;
  std::vector<int64_t> group_offset_;
  std::vector<FlatParam> params_;
  int64_t size_ = 0;
};

//! The parameters (clipped to [lo, hi), offsets relative to lo) that fall in a range of the flat vector.
std::vector<FlatParam> ParamsInRange(const std::vector<FlatParam>& params, int64_t lo, int64_t hi);

}  // namespace parallax::executor

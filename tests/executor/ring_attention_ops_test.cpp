// Ring attention's building blocks on every backend compiled in (issue 36; the GPU check of
// context parallelism, scripts/gpu_checks.sh step cp_attention): one causal attention split into
// key blocks, each block run alone (its causal offset), the partial results merged with the
// log-sum-exp rule (Backend::AttentionMerge), and the backward of each block from the merged out
// and lse summed, equal the unsplit kernel forward and backward. Multi-rank ring attention is
// checked on the CPU backend by the layout suite (layouts_mpi_test, label mpi).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "executor/backend_registry.h"
#include "tests/executor/train_helpers.h"

namespace parallax::executor {
namespace {

using Vec = std::vector<float>;

class RingAttentionOps : public ::testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  void SetUp() override {
    auto b = CreateBackend(std::get<0>(GetParam()));
    ASSERT_TRUE(b) << b.error().message;
    be_ = std::move(b).value();
    dt_ = std::get<1>(GetParam());
  }
  Tensor Dev(const Vec& v, DType t) {
    auto x = be_->Allocate(static_cast<int64_t>(v.size()), t, MemoryKind::kWorkspace);
    EXPECT_TRUE(x);
    be_->CopyToDevice(x->ptr(), v.data(), DType::kF32, static_cast<int64_t>(v.size()));
    return std::move(x).value();
  }
  Tensor Zeros(int64_t n, DType t) { return Dev(Vec(static_cast<size_t>(n), 0.0f), t); }
  Vec Host(const Tensor& t) {
    Vec f(static_cast<size_t>(t.numel()));
    EXPECT_TRUE(be_->Synchronize());
    be_->CopyToHost(f.data(), DType::kF32, t.ptr(), t.numel());
    return f;
  }
  //! Largest |got - want| relative to the largest |want| (each output as a whole).
  static double RelDiff(const Vec& got, const Vec& want) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isinf(want[i]) && got[i] == want[i]) continue;
      err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
      ref = std::max(ref, std::abs(static_cast<double>(want[i])));
    }
    return err / std::max(ref, 1e-30);
  }
  double Tolerance() const { return dt_ == DType::kF32 ? 1e-5 : 2e-2; }

  //! Splits the keys of a causal attention of `s` at `cuts` (key positions) and checks the merged
  //! forward and the summed backward against the unsplit kernel.
  void CheckSplit(const AttentionShape& s, const std::vector<int64_t>& cuts);

  std::unique_ptr<Backend> be_;
  DType dt_ = DType::kF32;
};

void RingAttentionOps::CheckSplit(const AttentionShape& s, const std::vector<int64_t>& cuts) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](int64_t n) {
    Vec v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  };
  const int64_t qn = s.q_elements(), kn = s.kv_elements(), stats = s.stats_floats();
  const int64_t kv_row = s.batch * s.kv_heads * s.head_dim;  // elements of one key position
  Tensor Q = Dev(random(qn), dt_), K = Dev(random(kn), dt_), V = Dev(random(kn), dt_),
         DO = Dev(random(qn), dt_);
  // The unsplit kernel.
  Tensor O = Zeros(qn, dt_), L = Zeros(stats, DType::kF32);
  be_->AttentionForward(
      {.shape = s, .q = Q.ptr(), .k = K.ptr(), .v = V.ptr(), .out = O.ptr(), .lse = L.ptr()});
  Tensor DQ = Zeros(qn, dt_), DK = Zeros(kn, dt_), DV = Zeros(kn, dt_);
  be_->AttentionBackward({.shape = s,
                          .q = Q.ptr(),
                          .k = K.ptr(),
                          .v = V.ptr(),
                          .out = O.ptr(),
                          .lse = L.ptr(),
                          .dout = DO.ptr(),
                          .dq = DQ.ptr(),
                          .dk = DK.ptr(),
                          .dv = DV.ptr()});
  // Key blocks [bounds[j], bounds[j + 1]).
  std::vector<int64_t> bounds{0};
  for (int64_t c : cuts) bounds.push_back(c);
  bounds.push_back(s.seq);
  auto block_shape = [&](size_t j) {
    AttentionShape b = s;
    b.kv_seq = bounds[j + 1] - bounds[j];
    b.causal_offset = -bounds[j];  // queries start at 0, this block's keys at bounds[j]
    return b;
  };
  Tensor MO = Zeros(qn, dt_), ML = Zeros(stats, DType::kF32), PO = Zeros(qn, dt_),
         PL = Zeros(stats, DType::kF32);
  be_->Fill(ML.ptr(), stats, -std::numeric_limits<float>::infinity());
  for (size_t j = 0; j + 1 < bounds.size(); ++j) {
    const int64_t k0 = bounds[j] * kv_row;
    be_->AttentionForward({.shape = block_shape(j),
                           .q = Q.ptr(),
                           .k = K.at(k0),
                           .v = V.at(k0),
                           .out = PO.ptr(),
                           .lse = PL.ptr()});
    be_->AttentionMerge({.out = MO.ptr(),
                         .lse = ML.ptr(),
                         .block_out = PO.ptr(),
                         .block_lse = PL.ptr(),
                         .rows = s.seq * s.batch,
                         .heads = s.heads,
                         .head_dim = s.head_dim});
  }
  EXPECT_LT(RelDiff(Host(MO), Host(O)), Tolerance()) << "merged out, " << be_->name();
  EXPECT_LT(RelDiff(Host(ML), Host(L)), 1e-5) << "merged lse, " << be_->name();
  // Backward per block from the merged statistics; dq summed, dk and dv each block's own rows.
  Tensor SQ = Zeros(qn, dt_), PQ = Zeros(qn, dt_), SK = Zeros(kn, dt_), SV = Zeros(kn, dt_);
  for (size_t j = 0; j + 1 < bounds.size(); ++j) {
    const int64_t k0 = bounds[j] * kv_row;
    be_->AttentionBackward({.shape = block_shape(j),
                            .q = Q.ptr(),
                            .k = K.at(k0),
                            .v = V.at(k0),
                            .out = MO.ptr(),
                            .lse = ML.ptr(),
                            .dout = DO.ptr(),
                            .dq = PQ.ptr(),
                            .dk = SK.at(k0),
                            .dv = SV.at(k0)});
    be_->Axpy({.y = SQ.ptr(), .x = PQ.ptr(), .n = qn});
  }
  EXPECT_LT(RelDiff(Host(SQ), Host(DQ)), Tolerance()) << "summed dq, " << be_->name();
  EXPECT_LT(RelDiff(Host(SK), Host(DK)), Tolerance()) << "block dk, " << be_->name();
  EXPECT_LT(RelDiff(Host(SV), Host(DV)), Tolerance()) << "block dv, " << be_->name();
}

TEST_P(RingAttentionOps, TwoKeyBlocksMergeToTheUnsplitAttention) {
  CheckSplit(AttentionShape{.batch = 2, .seq = 16, .heads = 4, .kv_heads = 2, .head_dim = 8}, {8});
}

// Unequal blocks, one of them past every query of the first rows (those rows see none of it).
TEST_P(RingAttentionOps, ThreeUnequalKeyBlocksMergeToTheUnsplitAttention) {
  CheckSplit(AttentionShape{.batch = 2, .seq = 40, .heads = 4, .kv_heads = 2, .head_dim = 64},
             {5, 23});
}

using testing::UsableBackends;

INSTANTIATE_TEST_SUITE_P(Seam, RingAttentionOps,
                         ::testing::Combine(::testing::ValuesIn(UsableBackends()),
                                            ::testing::Values(DType::kF32, DType::kBf16)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) + "_" +
                                  ToString(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace parallax::executor

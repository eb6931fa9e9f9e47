#include "executor/runtime/classic/compression.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "executor/runtime/classic/compression_kernels.h"

namespace parallax::executor {
namespace {

//! Sums (as double) over the members, then divides by their count.
Status MeanInPlace(Communicator& comm, std::vector<double>* v) {
  PX_TRY(comm.HostAllReduce(v->data(), static_cast<int64_t>(v->size()), ReduceOp::kSum));
  for (double& x : *v) x /= comm.size();
  return {};
}

}  // namespace

GradientCompressor::GradientCompressor(const SyncMode& mode, std::vector<FlatParam> params, int64_t size)
    : mode_(mode), params_(std::move(params)), error_(static_cast<size_t>(size), 0.0f), q_(params_.size()) {}

void GradientCompressor::Ran(CompressionKernel k, double units) { units_[static_cast<size_t>(k)] += units; }

Status GradientCompressor::MeanOverWorkers(Communicator& comm, std::vector<float>* g) {
  if (mode_.compression == CompressionKind::kBf16) return Bf16(comm, g);
  // Error feedback: compress what this worker owes, gradient plus the residue of earlier steps.
  AddErrorFeedback(g->data(), error_.data(), static_cast<int64_t>(g->size()));
  Ran(CompressionKernel::kErrorFeedback, static_cast<double>(g->size()));
  switch (mode_.compression) {
    case CompressionKind::kInt8: return Int8(comm, g);
    case CompressionKind::kTopK: return TopK(comm, g);
    case CompressionKind::kPowerSgd: return PowerSgd(comm, g);
    default: break;
  }
  std::vector<double> d(g->begin(), g->end());
  PX_TRY(MeanInPlace(comm, &d));
  std::copy(d.begin(), d.end(), g->begin());
  wire_bytes_ = static_cast<int64_t>(g->size()) * 4;
  return {};
}

template <typename AddMember>
void GradientCompressor::AverageMembers(int members, int64_t n, float* g, const AddMember& add) {
  ZeroForSum(g, n);
  for (int r = 0; r < members; ++r) add(r);
  DivideByMembers(g, n, members);
  Ran(CompressionKernel::kAverage, static_cast<double>(n));
}

Status GradientCompressor::Bf16(Communicator& comm, std::vector<float>* g) {
  const auto n = static_cast<int64_t>(g->size());
  bf16_mine_.resize(g->size());
  EncodeBf16(g->data(), bf16_mine_.data(), n);
  Ran(CompressionKernel::kBf16Encode, static_cast<double>(n));
  bf16_all_.resize(g->size() * static_cast<size_t>(comm.size()));
  PX_TRY(comm.HostAllGather(bf16_mine_.data(), bf16_all_.data(), n * 2));
  AverageMembers(comm.size(), n, g->data(), [&](int r) {
    AccumulateBf16(bf16_all_.data() + static_cast<size_t>(r) * static_cast<size_t>(n), g->data(), n);
    Ran(CompressionKernel::kBf16Accumulate, static_cast<double>(n));
  });
  wire_bytes_ = n * 2;
  return {};
}

Status GradientCompressor::Int8(Communicator& comm, std::vector<float>* g) {
  // Message: per parameter a float scale, then one int8 per element.
  const auto n = static_cast<int64_t>(g->size());
  const size_t scale_bytes = params_.size() * 4;
  const int64_t bytes = static_cast<int64_t>(scale_bytes) + n;
  bytes_mine_.assign(static_cast<size_t>(bytes), 0);
  EncodeInt8(params_, g->data(), reinterpret_cast<float*>(bytes_mine_.data()),
             reinterpret_cast<int8_t*>(bytes_mine_.data() + scale_bytes), error_.data());
  Ran(CompressionKernel::kInt8Encode, static_cast<double>(n));
  bytes_all_.resize(static_cast<size_t>(bytes * comm.size()));
  PX_TRY(comm.HostAllGather(bytes_mine_.data(), bytes_all_.data(), bytes));
  AverageMembers(comm.size(), n, g->data(), [&](int r) {
    const char* base = bytes_all_.data() + static_cast<size_t>(r) * static_cast<size_t>(bytes);
    AccumulateInt8(params_, reinterpret_cast<const float*>(base), reinterpret_cast<const int8_t*>(base + scale_bytes),
                   g->data());
    Ran(CompressionKernel::kInt8Accumulate, static_cast<double>(n));
  });
  wire_bytes_ = bytes;
  return {};
}

Status GradientCompressor::TopK(Communicator& comm, std::vector<float>* g) {
  const auto n = static_cast<int64_t>(g->size());
  const int64_t k = TopKCount(mode_.topk_fraction, n);
  topk_mine_.resize(static_cast<size_t>(k));
  SelectTopK(g->data(), n, k, &topk_index_, topk_mine_.data(), &error_);
  Ran(CompressionKernel::kTopKSelect, static_cast<double>(n));
  topk_all_.resize(topk_mine_.size() * static_cast<size_t>(comm.size()));
  PX_TRY(comm.HostAllGather(topk_mine_.data(), topk_all_.data(), k * static_cast<int64_t>(sizeof(TopKPair))));
  AverageMembers(comm.size(), n, g->data(), [&](int r) {
    AccumulatePairs(topk_all_.data() + static_cast<size_t>(r) * static_cast<size_t>(k), k, g->data());
    Ran(CompressionKernel::kTopKAccumulate, static_cast<double>(k));
  });
  wire_bytes_ = k * static_cast<int64_t>(sizeof(TopKPair));
  return {};
}

Status GradientCompressor::PowerSgd(Communicator& comm, std::vector<float>* g) {
  wire_bytes_ = 0;
  // Vectors (and what is not a parameter: padding) travel dense, in one all-reduce.
  const auto n = static_cast<int64_t>(g->size());
  SplitDense(params_, g->data(), n, &in_matrix_, &dense_);
  PX_TRY(MeanInPlace(comm, &dense_));
  wire_bytes_ += static_cast<int64_t>(dense_.size()) * 4;
  MergeDense(in_matrix_, dense_, g->data(), error_.data());
  Ran(CompressionKernel::kPowerSgdSplit, static_cast<double>(n));
  for (size_t k = 0; k < params_.size(); ++k) {
    if (params_[k].rows > 1 && params_[k].cols > 1) PX_TRY(PowerSgdMatrix(comm, params_[k], k, g));
  }
  return {};
}

Status GradientCompressor::PowerSgdMatrix(Communicator& comm, const FlatParam& p, size_t index,
                                          std::vector<float>* g) {
  const int64_t m = p.rows, n = p.cols, r = std::min({mode_.powersgd_rank, m, n});
  float* mat = g->data() + p.offset;
  std::vector<double>& q = q_[index];
  if (q.empty()) {
    // The same start on every worker: a seed from the parameter's place in the model.
    std::mt19937_64 rng(1000003ULL * static_cast<uint64_t>(index) + 17);
    std::normal_distribution<double> normal;
    q.resize(static_cast<size_t>(n * r));
    for (double& x : q) x = normal(rng);
  }
  const auto products = static_cast<double>(m * n * r);
  std::vector<double> pm(static_cast<size_t>(m * r));
  PowerSgdP(mat, m, n, r, q.data(), pm.data());
  PX_TRY(MeanInPlace(comm, &pm));
  Orthonormalise(pm.data(), m, r);
  Ran(CompressionKernel::kPowerSgdOrthonormalise, static_cast<double>(m * r * r));
  PowerSgdQ(mat, m, n, r, pm.data(), q.data());
  PX_TRY(MeanInPlace(comm, &q));
  wire_bytes_ += (m + n) * r * 4;
  PowerSgdApproximate(mat, m, n, r, pm.data(), q.data(), error_.data() + p.offset);
  Ran(CompressionKernel::kPowerSgdProduct, 3 * products);
  return {};
}

}  // namespace parallax::executor

#include "executor/runtime/classic/compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "executor/dtype.h"

namespace parallax::executor {
namespace {

//! Sums (as double) over the members, then divides by their count.
Status MeanInPlace(Communicator& comm, std::vector<double>* v) {
  PX_TRY(comm.HostAllReduce(v->data(), static_cast<int64_t>(v->size()), ReduceOp::kSum));
  for (double& x : *v) x /= comm.size();
  return {};
}

//! Gram-Schmidt on the columns of the rows x r matrix `p` (row-major); a column that vanishes is zeroed.
void Orthonormalise(std::vector<double>* p, int64_t rows, int64_t r) {
  for (int64_t c = 0; c < r; ++c) {
    for (int64_t prev = 0; prev < c; ++prev) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += (*p)[i * r + c] * (*p)[i * r + prev];
      for (int64_t i = 0; i < rows; ++i) (*p)[i * r + c] -= dot * (*p)[i * r + prev];
    }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += (*p)[i * r + c] * (*p)[i * r + c];
    norm = std::sqrt(norm);
    const double inv = norm > 1e-30 ? 1.0 / norm : 0.0;
    for (int64_t i = 0; i < rows; ++i) (*p)[i * r + c] *= inv;
  }
}

}  // namespace

GradientCompressor::GradientCompressor(const SyncMode& mode, std::vector<FlatParam> params, int64_t size)
    : mode_(mode), params_(std::move(params)), error_(static_cast<size_t>(size), 0.0f), q_(params_.size()) {}

Status GradientCompressor::MeanOverWorkers(Communicator& comm, std::vector<float>* g) {
  if (mode_.compression == CompressionKind::kBf16) return Bf16(comm, g);
  // Error feedback: compress what this worker owes, gradient plus the residue of earlier steps.
  for (size_t i = 0; i < g->size(); ++i) (*g)[i] += error_[i];
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

Status GradientCompressor::Bf16(Communicator& comm, std::vector<float>* g) {
  const auto n = static_cast<int64_t>(g->size());
  std::vector<uint16_t>& mine = bf16_mine_;
  mine.resize(g->size());
  for (size_t i = 0; i < g->size(); ++i) mine[i] = FloatToBf16((*g)[i]);
  std::vector<uint16_t>& all = bf16_all_;
  all.resize(g->size() * static_cast<size_t>(comm.size()));
  PX_TRY(comm.HostAllGather(mine.data(), all.data(), n * 2));
  std::fill(g->begin(), g->end(), 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    for (int64_t i = 0; i < n; ++i) (*g)[i] += Bf16ToFloat(all[static_cast<size_t>(r * n + i)]);
  }
  for (float& x : *g) x /= static_cast<float>(comm.size());
  wire_bytes_ = n * 2;
  return {};
}

Status GradientCompressor::Int8(Communicator& comm, std::vector<float>* g) {
  // Message: per parameter a float scale, then one int8 per element.
  const auto n = static_cast<int64_t>(g->size());
  const int64_t bytes = static_cast<int64_t>(params_.size()) * 4 + n;
  std::vector<char>& mine = bytes_mine_;
  mine.assign(static_cast<size_t>(bytes), 0);
  auto* scales = reinterpret_cast<float*>(mine.data());
  auto* q = reinterpret_cast<int8_t*>(mine.data() + params_.size() * 4);
  for (size_t k = 0; k < params_.size(); ++k) {
    const FlatParam& p = params_[k];
    float amax = 0;
    for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) amax = std::max(amax, std::fabs((*g)[i]));
    const float scale = amax > 0 ? amax / 127.0f : 1.0f;
    scales[k] = scale;
    for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) {
      const auto v = static_cast<int8_t>(std::lround((*g)[i] / scale));
      q[i] = v;
      error_[i] = (*g)[i] - static_cast<float>(v) * scale;
    }
  }
  std::vector<char>& all = bytes_all_;
  all.resize(static_cast<size_t>(bytes * comm.size()));
  PX_TRY(comm.HostAllGather(mine.data(), all.data(), bytes));
  std::fill(g->begin(), g->end(), 0.0f);
  for (int r = 0; r < comm.size(); ++r) {
    const char* base = all.data() + static_cast<size_t>(r) * static_cast<size_t>(bytes);
    const auto* rs = reinterpret_cast<const float*>(base);
    const auto* rq = reinterpret_cast<const int8_t*>(base + params_.size() * 4);
    for (size_t k = 0; k < params_.size(); ++k) {
      for (int64_t i = params_[k].offset; i < params_[k].offset + params_[k].numel(); ++i) {
        (*g)[i] += static_cast<float>(rq[i]) * rs[k];
      }
    }
  }
  for (float& x : *g) x /= static_cast<float>(comm.size());
  wire_bytes_ = bytes;
  return {};
}

Status GradientCompressor::TopK(Communicator& comm, std::vector<float>* g) {
  const auto n = static_cast<int64_t>(g->size());
  const auto k = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(mode_.topk_fraction * static_cast<double>(n))), 1, n);
  std::vector<int32_t>& idx = topk_index_;
  idx.resize(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  if (k < n) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(),
                     [&](int32_t a, int32_t b) { return std::fabs((*g)[a]) > std::fabs((*g)[b]); });
    idx.resize(static_cast<size_t>(k));
  }
  struct Pair {
    int32_t index;
    float value;
  };
  std::vector<Pair> mine(static_cast<size_t>(k));
  error_ = *g;
  for (int64_t i = 0; i < k; ++i) {
    const int32_t j = idx[static_cast<size_t>(i)];
    mine[static_cast<size_t>(i)] = {j, (*g)[j]};
    error_[static_cast<size_t>(j)] = 0;
  }
  std::vector<Pair> all(mine.size() * static_cast<size_t>(comm.size()));
  PX_TRY(comm.HostAllGather(mine.data(), all.data(), k * static_cast<int64_t>(sizeof(Pair))));
  std::fill(g->begin(), g->end(), 0.0f);
  for (const Pair& p : all) (*g)[static_cast<size_t>(p.index)] += p.value;
  for (float& x : *g) x /= static_cast<float>(comm.size());
  wire_bytes_ = k * static_cast<int64_t>(sizeof(Pair));
  return {};
}

Status GradientCompressor::PowerSgd(Communicator& comm, std::vector<float>* g) {
  wire_bytes_ = 0;
  // Vectors (and what is not a parameter: padding) travel dense, in one all-reduce.
  std::vector<char> in_matrix(g->size(), 0);
  for (const FlatParam& p : params_) {
    if (p.rows > 1 && p.cols > 1) std::fill_n(in_matrix.begin() + p.offset, p.numel(), 1);
  }
  std::vector<double> dense;
  for (size_t i = 0; i < g->size(); ++i) {
    if (!in_matrix[i]) dense.push_back((*g)[i]);
  }
  PX_TRY(MeanInPlace(comm, &dense));
  wire_bytes_ += static_cast<int64_t>(dense.size()) * 4;
  size_t next = 0;
  for (size_t i = 0; i < g->size(); ++i) {
    if (!in_matrix[i]) {
      (*g)[i] = static_cast<float>(dense[next++]);
      error_[i] = 0;
    }
  }
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
  std::vector<double> pm(static_cast<size_t>(m * r), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = mat[i * n + j];
      for (int64_t c = 0; c < r; ++c) pm[i * r + c] += a * q[j * r + c];
    }
  }
  PX_TRY(MeanInPlace(comm, &pm));
  Orthonormalise(&pm, m, r);
  std::fill(q.begin(), q.end(), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = mat[i * n + j];
      for (int64_t c = 0; c < r; ++c) q[j * r + c] += a * pm[i * r + c];
    }
  }
  PX_TRY(MeanInPlace(comm, &q));
  wire_bytes_ += (m + n) * r * 4;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double approx = 0;
      for (int64_t c = 0; c < r; ++c) approx += pm[i * r + c] * q[j * r + c];
      error_[static_cast<size_t>(p.offset + i * n + j)] = mat[i * n + j] - static_cast<float>(approx);
      mat[i * n + j] = static_cast<float>(approx);
    }
  }
  return {};
}

}  // namespace parallax::executor

#include "executor/runtime/classic/compression_kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "executor/dtype.h"

namespace parallax::executor {

void AddErrorFeedback(float* g, const float* error, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] += error[i];
}

void EncodeBf16(const float* g, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(g[i]);
}

void AccumulateBf16(const uint16_t* part, float* sum, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] += Bf16ToFloat(part[i]);
}

void EncodeInt8(const std::vector<FlatParam>& params, const float* g, float* scales, int8_t* q, float* error) {
  for (size_t k = 0; k < params.size(); ++k) {
    const FlatParam& p = params[k];
    float amax = 0;
    for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) amax = std::max(amax, std::fabs(g[i]));
    const float scale = amax > 0 ? amax / 127.0f : 1.0f;
    scales[k] = scale;
    for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) {
      const auto v = static_cast<int8_t>(std::lround(g[i] / scale));
      q[i] = v;
      error[i] = g[i] - static_cast<float>(v) * scale;
    }
  }
}

void AccumulateInt8(const std::vector<FlatParam>& params, const float* scales, const int8_t* q, float* sum) {
  for (size_t k = 0; k < params.size(); ++k) {
    for (int64_t i = params[k].offset; i < params[k].offset + params[k].numel(); ++i) {
      sum[i] += static_cast<float>(q[i]) * scales[k];
    }
  }
}

void SelectTopK(const float* g, int64_t n, int64_t k, std::vector<int32_t>* index, TopKPair* out,
                std::vector<float>* error) {
  std::vector<int32_t>& idx = *index;
  idx.resize(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  if (k < n) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(),
                     [g](int32_t a, int32_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  }
  error->assign(g, g + n);
  for (int64_t i = 0; i < k; ++i) {
    const int32_t j = idx[static_cast<size_t>(i)];
    out[i] = {j, g[j]};
    (*error)[static_cast<size_t>(j)] = 0;
  }
}

void AccumulatePairs(const TopKPair* pairs, int64_t k, float* sum) {
  for (int64_t i = 0; i < k; ++i) sum[pairs[i].index] += pairs[i].value;
}

void ZeroForSum(float* sum, int64_t n) { std::fill(sum, sum + n, 0.0f); }

void DivideByMembers(float* sum, int64_t n, int members) {
  const auto m = static_cast<float>(members);
  for (int64_t i = 0; i < n; ++i) sum[i] /= m;
}

void SplitDense(const std::vector<FlatParam>& params, const float* g, int64_t n, std::vector<char>* in_matrix,
                std::vector<double>* dense) {
  in_matrix->assign(static_cast<size_t>(n), 0);
  for (const FlatParam& p : params) {
    if (p.rows > 1 && p.cols > 1) std::fill_n(in_matrix->begin() + p.offset, p.numel(), 1);
  }
  dense->clear();
  for (int64_t i = 0; i < n; ++i) {
    if (!(*in_matrix)[static_cast<size_t>(i)]) dense->push_back(g[i]);
  }
}

void MergeDense(const std::vector<char>& in_matrix, const std::vector<double>& dense, float* g, float* error) {
  size_t next = 0;
  for (size_t i = 0; i < in_matrix.size(); ++i) {
    if (!in_matrix[i]) {
      g[i] = static_cast<float>(dense[next++]);
      error[i] = 0;
    }
  }
}

void PowerSgdP(const float* mat, int64_t m, int64_t n, int64_t r, const double* q, double* p) {
  std::fill(p, p + m * r, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = mat[i * n + j];
      for (int64_t c = 0; c < r; ++c) p[i * r + c] += a * q[j * r + c];
    }
  }
}

void PowerSgdQ(const float* mat, int64_t m, int64_t n, int64_t r, const double* p, double* q) {
  std::fill(q, q + n * r, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = mat[i * n + j];
      for (int64_t c = 0; c < r; ++c) q[j * r + c] += a * p[i * r + c];
    }
  }
}

void PowerSgdApproximate(float* mat, int64_t m, int64_t n, int64_t r, const double* p, const double* q, float* error) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double approx = 0;
      for (int64_t c = 0; c < r; ++c) approx += p[i * r + c] * q[j * r + c];
      error[i * n + j] = mat[i * n + j] - static_cast<float>(approx);
      mat[i * n + j] = static_cast<float>(approx);
    }
  }
}

void Orthonormalise(double* p, int64_t rows, int64_t r) {
  for (int64_t c = 0; c < r; ++c) {
    for (int64_t prev = 0; prev < c; ++prev) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += p[i * r + c] * p[i * r + prev];
      for (int64_t i = 0; i < rows; ++i) p[i * r + c] -= dot * p[i * r + prev];
    }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += p[i * r + c] * p[i * r + c];
    norm = std::sqrt(norm);
    const double inv = norm > 1e-30 ? 1.0 / norm : 0.0;
    for (int64_t i = 0; i < rows; ++i) p[i * r + c] *= inv;
  }
}

}  // namespace parallax::executor

#pragma once
// The host kernels of gradient compression (model/compression_kernels.h lists which run per step,
// on how many elements): what GradientCompressor runs between its exchanges, and what `calibrate`
// times (profiler/calibrate/compression_probe.h). One function, or one pair timed together, per
// CompressionKernel; none allocates once its output buffers have their size.

#include <cstdint>
#include <vector>

#include "executor/runtime/classic/flat_model.h"

namespace parallax::executor {

//! kErrorFeedback: g[i] += error[i].
void AddErrorFeedback(float* g, const float* error, int64_t n);

//! kBf16Encode: out[i] = bf16(g[i]).
void EncodeBf16(const float* g, uint16_t* out, int64_t n);
//! kBf16Accumulate: sum[i] += float(part[i]).
void AccumulateBf16(const uint16_t* part, float* sum, int64_t n);

//! kInt8Encode: per parameter a scale max|g|/127 (1 when 0), q = round(g / scale) and the residue
//! error = g - q scale.
void EncodeInt8(const std::vector<FlatParam>& params, const float* g, float* scales, int8_t* q, float* error);
//! kInt8Accumulate: sum[i] += q[i] * the scale of i's parameter.
void AccumulateInt8(const std::vector<FlatParam>& params, const float* scales, const int8_t* q, float* sum);

struct TopKPair {
  int32_t index;
  float value;
};
//! kTopKSelect: the k largest |g| (ties in nth_element's order) into `out`, k entries; `error`
//! becomes g with those entries zeroed. `index` is scratch of n entries.
void SelectTopK(const float* g, int64_t n, int64_t k, std::vector<int32_t>* index, TopKPair* out,
                std::vector<float>* error);
//! kTopKAccumulate: sum[p.index] += p.value for the k pairs.
void AccumulatePairs(const TopKPair* pairs, int64_t k, float* sum);

//! kAverage, the part before the members are added: sum = 0.
void ZeroForSum(float* sum, int64_t n);
//! kAverage, the part after: sum /= members.
void DivideByMembers(float* sum, int64_t n, int members);

//! kPowerSgdSplit, before the dense all-reduce: which entries lie in a factorised matrix (rows and
//! cols > 1), and the others, in order, as doubles.
void SplitDense(const std::vector<FlatParam>& params, const float* g, int64_t n, std::vector<char>* in_matrix,
                std::vector<double>* dense);
//! kPowerSgdSplit, after it: the reduced entries back into g, their residue 0.
void MergeDense(const std::vector<char>& in_matrix, const std::vector<double>& dense, float* g, float* error);

//! kPowerSgdProduct: p[m x r] = mat[m x n] q[n x r] (row-major).
void PowerSgdP(const float* mat, int64_t m, int64_t n, int64_t r, const double* q, double* p);
//! kPowerSgdProduct: q[n x r] = mat^T p.
void PowerSgdQ(const float* mat, int64_t m, int64_t n, int64_t r, const double* p, double* q);
//! kPowerSgdProduct: mat ~ p q^T, error = mat - p q^T (before mat is overwritten).
void PowerSgdApproximate(float* mat, int64_t m, int64_t n, int64_t r, const double* p, const double* q, float* error);
//! kPowerSgdOrthonormalise: Gram-Schmidt on the columns of the rows x r matrix p (row-major); a
//! column that vanishes is zeroed.
void Orthonormalise(double* p, int64_t rows, int64_t r);

}  // namespace parallax::executor

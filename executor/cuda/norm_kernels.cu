// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019): one block per row for the
// statistics and the input gradient; the parameter gradients are column sums over rows in a fixed
// order (deterministic, no atomics). Formulas as executor/cpu/vector_kernels.cpp.
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

int RowThreads(int64_t cols) { return cols >= 1024 ? 512 : (cols >= 256 ? 256 : 128); }

__global__ void LayerNormForwardKernel(KPtr x, KPtr gamma, KPtr beta, KPtr y, KPtr mean, KPtr rstd, int64_t cols,
                                       float eps) {
  const int64_t row = blockIdx.x, base = row * cols;
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += Load(x, base + c);
  const float mu = BlockSum(s) / static_cast<float>(cols);
  float q = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = Load(x, base + c) - mu;
    q = fmaf(d, d, q);
  }
  const float var = BlockSum(q) / static_cast<float>(cols);
  const float rs = static_cast<float>(1.0 / sqrt(static_cast<double>(var) + static_cast<double>(eps)));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float b = beta.p != nullptr ? Load(beta, c) : 0.0f;
    Store(y, base + c, fmaf(Load(x, base + c) - mu, Load(gamma, c) * rs, b));
  }
  if (threadIdx.x == 0) {
    Store(mean, row, mu);
    Store(rstd, row, rs);
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma (mean(g) = 0 for RMSNorm).
template <bool kRms>
__global__ void NormInputGradKernel(KPtr dy, KPtr x, KPtr gamma, KPtr mean, KPtr rstd, KPtr dx, int64_t cols) {
  const int64_t row = blockIdx.x, base = row * cols;
  const float mu = kRms ? 0.0f : Load(mean, row), rs = Load(rstd, row);
  float sg = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = Load(dy, base + c) * Load(gamma, c);
    sg += g;
    sgx = fmaf(g, (Load(x, base + c) - mu) * rs, sgx);
  }
  const float mg = kRms ? 0.0f : BlockSum(sg) / static_cast<float>(cols);
  const float mgx = BlockSum(sgx) / static_cast<float>(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (Load(x, base + c) - mu) * rs;
    const float g = Load(dy, base + c) * Load(gamma, c);
    Store(dx, base + c, rs * fmaf(-xhat, mgx, g - mg));
  }
}

// dgamma[c] += sum_r dy xhat, dbeta[c] += sum_r dy over rows [y * rows_per_chunk, ...) for
// blockIdx.y = y; blockDim (32, 8) as ColumnSumsKernel. With partials (pg: chunks x cols, pb after
// it) the chunk sums land there for LaunchAddColumnPartials; without, they are added directly.
template <bool kRms>
__global__ void NormParamGradKernel(KPtr dy, KPtr x, KPtr mean, KPtr rstd, KPtr dgamma, KPtr dbeta, float* partials,
                                    int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  __shared__ float pg[8][33], pb[8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float sg = 0, sb = 0;
  if (c < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const float d = Load(dy, r * cols + c);
      const float xhat = (Load(x, r * cols + c) - (kRms ? 0.0f : Load(mean, r))) * Load(rstd, r);
      sg = fmaf(d, xhat, sg);
      sb += d;
    }
  }
  pg[threadIdx.y][threadIdx.x] = sg;
  pb[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float tg = 0, tb = 0;
    for (int j = 0; j < 8; ++j) {
      tg += pg[j][threadIdx.x];
      tb += pb[j][threadIdx.x];
    }
    if (partials != nullptr) {
      const int64_t chunks = gridDim.y;
      partials[static_cast<int64_t>(blockIdx.y) * cols + c] = tg;
      partials[(chunks + blockIdx.y) * cols + c] = tb;
    } else {
      Store(dgamma, c, Load(dgamma, c) + tg);
      if (dbeta.p != nullptr) Store(dbeta, c, Load(dbeta, c) + tb);
    }
  }
}

__global__ void RmsNormForwardKernel(KPtr x, KPtr gamma, KPtr y, KPtr rstd, int64_t cols, float eps) {
  const int64_t row = blockIdx.x, base = row * cols;
  float q = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = Load(x, base + c);
    q = fmaf(v, v, q);
  }
  const float ms = BlockSum(q) / static_cast<float>(cols);
  const float rs = static_cast<float>(1.0 / sqrt(static_cast<double>(ms) + static_cast<double>(eps)));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) Store(y, base + c, Load(x, base + c) * rs * Load(gamma, c));
  if (threadIdx.x == 0) Store(rstd, row, rs);
}

template <bool kRms>
cudaError_t ParamGrads(KPtr dy, KPtr x, KPtr mean, KPtr rstd, KPtr dgamma, KPtr dbeta, int64_t rows, int64_t cols,
                       float* partials, cudaStream_t s) {
  const int64_t chunks = ColumnChunks(rows, cols);
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
  NormParamGradKernel<kRms><<<grid, dim3(32, 8), 0, s>>>(dy, x, mean, rstd, dgamma, dbeta,
                                                         chunks > 1 ? partials : nullptr, rows, cols, per_chunk);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || chunks == 1) return e;
  if (cudaError_t e = LaunchAddColumnPartials(partials, chunks, cols, dgamma, s); e != cudaSuccess) return e;
  if (dbeta.p == nullptr) return cudaSuccess;
  return LaunchAddColumnPartials(partials + chunks * cols, chunks, cols, dbeta, s);
}

}  // namespace

cudaError_t LaunchLayerNormForward(KPtr x, KPtr gamma, KPtr beta, KPtr y, KPtr mean, KPtr rstd, int64_t rows,
                                   int64_t cols, float eps, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  LayerNormForwardKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, s>>>(x, gamma, beta, y, mean, rstd, cols,
                                                                                  eps);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackward(KPtr dy, KPtr x, KPtr gamma, KPtr mean, KPtr rstd, KPtr dx, KPtr dgamma,
                                    KPtr dbeta, int64_t rows, int64_t cols, float* partials, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  // Parameter gradients first: dx may alias dy.
  if (dgamma.p != nullptr) {
    if (cudaError_t e = ParamGrads<false>(dy, x, mean, rstd, dgamma, dbeta, rows, cols, partials, s); e != cudaSuccess) {
      return e;
    }
  }
  NormInputGradKernel<false><<<static_cast<unsigned>(rows), RowThreads(cols), 0, s>>>(dy, x, gamma, mean, rstd, dx,
                                                                                       cols);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNormForward(KPtr x, KPtr gamma, KPtr y, KPtr rstd, int64_t rows, int64_t cols, float eps,
                                 cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  RmsNormForwardKernel<<<static_cast<unsigned>(rows), RowThreads(cols), 0, s>>>(x, gamma, y, rstd, cols, eps);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNormBackward(KPtr dy, KPtr x, KPtr gamma, KPtr rstd, KPtr dx, KPtr dgamma, int64_t rows,
                                  int64_t cols, float* partials, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (dgamma.p != nullptr) {
    if (cudaError_t e = ParamGrads<true>(dy, x, KPtr{}, rstd, dgamma, KPtr{}, rows, cols, partials, s);
        e != cudaSuccess) {
      return e;
    }
  }
  NormInputGradKernel<true><<<static_cast<unsigned>(rows), RowThreads(cols), 0, s>>>(dy, x, gamma, KPtr{}, rstd, dx,
                                                                                      cols);
  return cudaGetLastError();
}

}  // namespace parallax::executor::gpu

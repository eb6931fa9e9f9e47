// Causal grouped-query attention, forward and backward, tiled as FlashAttention-2 (Dao 2023,
// algorithms 1 and 2): a block holds a tile of 32 query rows (or 32 key rows) in shared memory and
// streams the other side through it in tiles of 32, with the online softmax (running max and sum)
// in registers, so the S x S score matrix never exists in memory. Only tiles on or below the
// diagonal are visited.
//
// Backward = three launches, all deterministic (no atomics):
//   1. the forward kernel in "statistics" mode writes, per query row, lse = max + log(sum) and
//      delta = dO . O (O recomputed, never stored),
//   2. one block per (key tile, kv head) accumulates dK and dV over every query head of its group
//      and every query tile at or below the diagonal, P = exp(s - lse) recomputed,
//   3. one block per (query tile, head) accumulates dQ over the key tiles.
// dS = P (dP - delta) scale with dP = dO V^T, as the CPU backend's blocked kernel.
//
// Thread layout: 128 threads, 4 per tile row; a thread owns columns sub, sub + 4, ... of its row
// (head dimension) and of the score tile. Arithmetic is fp32 FMA on CUDA cores: correctness first;
// tensor-core (mma.sync / wgmma) tiles are the next step (docs/cuda.md).
#include <cmath>

#include "executor/cuda/device_common.cuh"

namespace parallax::executor::gpu {
namespace {

constexpr int kTile = 32;          // query rows and key rows per tile
constexpr int kAttnThreads = 128;  // 4 threads per tile row
constexpr int kPerRow = kTile / 4; // score columns per thread

struct AttnArgs {
  AttnDims d;
  KPtr q, k, v;
  KPtr out;     // forward output (may be null in statistics mode)
  KPtr probs;   // optional normalised probabilities
  KPtr dout;    // statistics mode: dO for delta
  float* lse;   // optional [B*H*S]
  float* delta; // optional [B*H*S]
  KPtr dq, dk, dv;
  float scale;
};

struct Geometry {
  int64_t S, D, H, Hkv, ld_q, ld_kv;
  __device__ explicit Geometry(const AttnDims& d)
      : S(d.seq), D(d.head_dim), H(d.heads), Hkv(d.kv_heads), ld_q(d.batch * d.heads * d.head_dim),
        ld_kv(d.batch * d.kv_heads * d.head_dim) {}
  __device__ int64_t QOff(int64_t b, int64_t h) const { return b * H * D + h * D; }
  __device__ int64_t KvOff(int64_t b, int64_t kvh) const { return b * Hkv * D + kvh * D; }
};

// Rows [row0, row0 + kTile) of a [S*B, heads*D] tensor (one head) into shared memory (pitch D + 1),
// zeros past the sequence end.
__device__ void LoadTile(float* dst, const KPtr& src, int64_t off, int64_t ld, int64_t row0, int64_t S, int64_t D) {
  const int64_t pitch = D + 1;
  for (int64_t idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
    const int64_t r = idx / D, c = idx % D;
    dst[r * pitch + c] = row0 + r < S ? Load(src, off + (row0 + r) * ld + c) : 0.0f;
  }
}

__device__ __forceinline__ float GroupMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float GroupSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Forward: grid (B*H, query tiles). Shared: Q, K, V tiles (pitch D+1) and the P tile.
template <int kMaxD>
__global__ void __launch_bounds__(kAttnThreads) AttentionForwardKernel(const AttnArgs a) {
  constexpr int kCols = kMaxD / 4;
  extern __shared__ float smem[];
  const Geometry g(a.d);
  const int64_t D = g.D, S = g.S, pitch = D + 1;
  float* Qs = smem;
  float* Ks = Qs + kTile * pitch;
  float* Vs = Ks + kTile * pitch;
  float* Ps = Vs + kTile * pitch;  // [kTile][kTile + 1]
  const int64_t bh = blockIdx.x, b = bh / g.H, h = bh % g.H, kvh = h / (g.H / g.Hkv);
  const int64_t q_off = g.QOff(b, h), kv_off = g.KvOff(b, kvh);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int r = threadIdx.x / 4, sub = threadIdx.x % 4;
  const int64_t i = q0 + r;
  const bool row_ok = i < S;

  LoadTile(Qs, a.q, q_off, g.ld_q, q0, S, D);
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int64_t last_key = (q0 + kTile < S ? q0 + kTile : S) - 1;
  const int64_t tiles = last_key / kTile + 1;
  for (int64_t jt = 0; jt < tiles; ++jt) {
    const int64_t k0 = jt * kTile;
    __syncthreads();
    LoadTile(Ks, a.k, kv_off, g.ld_kv, k0, S, D);
    LoadTile(Vs, a.v, kv_off, g.ld_kv, k0, S, D);
    __syncthreads();
    float s[kPerRow];
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) s[jj] = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
      const float qd = Qs[r * pitch + d];
#pragma unroll
      for (int jj = 0; jj < kPerRow; ++jj) s[jj] = fmaf(qd, Ks[(sub + 4 * jj) * pitch + d], s[jj]);
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) {
      const int64_t j = k0 + sub + 4 * jj;
      s[jj] = (row_ok && j <= i) ? a.scale * s[jj] : -INFINITY;
      tile_max = fmaxf(tile_max, s[jj]);
    }
    const float m_new = fmaxf(m, GroupMax(tile_max));
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = expf(m - m_use);
    float tile_sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) {
      const float p = expf(s[jj] - m_use);
      tile_sum += p;
      Ps[r * (kTile + 1) + sub + 4 * jj] = p;
    }
    l = l * alpha + GroupSum(tile_sum);
    m = m_new;
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[c] *= alpha;
    for (int c = 0; c < kTile; ++c) {
      const float p = Ps[r * (kTile + 1) + c];
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) {
        const int64_t d = sub + 4 * cc;
        if (d < D) acc[cc] = fmaf(p, Vs[c * pitch + d], acc[cc]);
      }
    }
    __syncwarp();
  }

  const float m_use = m == -INFINITY ? 0.0f : m;
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  float dot = 0.0f;
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc) {
    const int64_t d = sub + 4 * cc;
    if (!row_ok || d >= D) continue;
    const float o = acc[cc] * inv_l;
    const int64_t at = q_off + i * g.ld_q + d;
    if (a.out.p != nullptr) Store(a.out, at, o);
    if (a.dout.p != nullptr) dot = fmaf(Load(a.dout, at), o, dot);
  }
  dot = GroupSum(dot);
  if (row_ok && sub == 0) {
    if (a.lse != nullptr) a.lse[bh * S + i] = m_use + logf(l);
    if (a.delta != nullptr) a.delta[bh * S + i] = dot;
  }
  if (a.probs.p == nullptr) return;

  // Kept probabilities: a second sweep writes every row in full (zeros above the diagonal).
  const int64_t all_tiles = (S + kTile - 1) / kTile;
  for (int64_t jt = 0; jt < all_tiles; ++jt) {
    const int64_t k0 = jt * kTile;
    const bool needed = jt < tiles;  // tiles past the diagonal of this query tile are all zero
    __syncthreads();
    if (needed) LoadTile(Ks, a.k, kv_off, g.ld_kv, k0, S, D);
    __syncthreads();
    float s[kPerRow];
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) s[jj] = 0.0f;
    if (needed) {
      for (int64_t d = 0; d < D; ++d) {
        const float qd = Qs[r * pitch + d];
#pragma unroll
        for (int jj = 0; jj < kPerRow; ++jj) s[jj] = fmaf(qd, Ks[(sub + 4 * jj) * pitch + d], s[jj]);
      }
    }
    if (!row_ok) continue;
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) {
      const int64_t j = k0 + sub + 4 * jj;
      if (j >= S) continue;
      const float p = (needed && j <= i) ? expf(a.scale * s[jj] - m_use) * inv_l : 0.0f;
      Store(a.probs, (bh * S + i) * S + j, p);
    }
  }
}

// dK, dV: grid (B*Hkv, key tiles). Shared: K, V, Q, dO tiles, the P^T and dS^T tiles, lse, delta.
template <int kMaxD>
__global__ void __launch_bounds__(kAttnThreads) AttentionBackwardKvKernel(const AttnArgs a) {
  constexpr int kCols = kMaxD / 4;
  extern __shared__ float smem[];
  const Geometry g(a.d);
  const int64_t D = g.D, S = g.S, pitch = D + 1;
  float* Ks = smem;
  float* Vs = Ks + kTile * pitch;
  float* Qs = Vs + kTile * pitch;
  float* dOs = Qs + kTile * pitch;
  float* Pt = dOs + kTile * pitch;       // [kTile key][kTile + 1 query]
  float* dSt = Pt + kTile * (kTile + 1);
  float* lse_s = dSt + kTile * (kTile + 1);
  float* delta_s = lse_s + kTile;
  const int64_t bk = blockIdx.x, b = bk / g.Hkv, kvh = bk % g.Hkv, group = g.H / g.Hkv;
  const int64_t kv_off = g.KvOff(b, kvh);
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int c = threadIdx.x / 4, sub = threadIdx.x % 4;
  const int64_t j = k0 + c;

  LoadTile(Ks, a.k, kv_off, g.ld_kv, k0, S, D);
  LoadTile(Vs, a.v, kv_off, g.ld_kv, k0, S, D);
  float dk[kCols], dv[kCols];
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc) dk[cc] = dv[cc] = 0.0f;
  const int64_t q_tiles = (S + kTile - 1) / kTile;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    const int64_t q_off = g.QOff(b, h), bh = b * g.H + h;
    for (int64_t qt = k0 / kTile; qt < q_tiles; ++qt) {
      const int64_t q0 = qt * kTile;
      __syncthreads();
      LoadTile(Qs, a.q, q_off, g.ld_q, q0, S, D);
      LoadTile(dOs, a.dout, q_off, g.ld_q, q0, S, D);
      for (int rr = threadIdx.x; rr < kTile; rr += blockDim.x) {
        lse_s[rr] = q0 + rr < S ? a.lse[bh * S + q0 + rr] : 0.0f;
        delta_s[rr] = q0 + rr < S ? a.delta[bh * S + q0 + rr] : 0.0f;
      }
      __syncthreads();
      float s[kPerRow], dp[kPerRow];
#pragma unroll
      for (int jj = 0; jj < kPerRow; ++jj) s[jj] = dp[jj] = 0.0f;
      for (int64_t d = 0; d < D; ++d) {
        const float kd = Ks[c * pitch + d], vd = Vs[c * pitch + d];
#pragma unroll
        for (int jj = 0; jj < kPerRow; ++jj) {
          const int64_t rr = sub + 4 * jj;
          s[jj] = fmaf(Qs[rr * pitch + d], kd, s[jj]);
          dp[jj] = fmaf(dOs[rr * pitch + d], vd, dp[jj]);
        }
      }
#pragma unroll
      for (int jj = 0; jj < kPerRow; ++jj) {
        const int rr = sub + 4 * jj;
        const int64_t i = q0 + rr;
        const bool ok = i < S && j <= i;
        const float p = ok ? expf(a.scale * s[jj] - lse_s[rr]) : 0.0f;
        Pt[c * (kTile + 1) + rr] = p;
        dSt[c * (kTile + 1) + rr] = p * (dp[jj] - delta_s[rr]) * a.scale;
      }
      __syncwarp();
      for (int rr = 0; rr < kTile; ++rr) {
        const float p = Pt[c * (kTile + 1) + rr], ds = dSt[c * (kTile + 1) + rr];
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) {
          const int64_t d = sub + 4 * cc;
          if (d < D) {
            dv[cc] = fmaf(p, dOs[rr * pitch + d], dv[cc]);
            dk[cc] = fmaf(ds, Qs[rr * pitch + d], dk[cc]);
          }
        }
      }
    }
  }
  if (j >= S) return;
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc) {
    const int64_t d = sub + 4 * cc;
    if (d >= D) continue;
    Store(a.dk, kv_off + j * g.ld_kv + d, dk[cc]);
    Store(a.dv, kv_off + j * g.ld_kv + d, dv[cc]);
  }
}

// dQ: grid (B*H, query tiles). Shared: Q, dO, K, V tiles and the dS tile.
template <int kMaxD>
__global__ void __launch_bounds__(kAttnThreads) AttentionBackwardQKernel(const AttnArgs a) {
  constexpr int kCols = kMaxD / 4;
  extern __shared__ float smem[];
  const Geometry g(a.d);
  const int64_t D = g.D, S = g.S, pitch = D + 1;
  float* Qs = smem;
  float* dOs = Qs + kTile * pitch;
  float* Ks = dOs + kTile * pitch;
  float* Vs = Ks + kTile * pitch;
  float* dSs = Vs + kTile * pitch;  // [kTile query][kTile + 1 key]
  const int64_t bh = blockIdx.x, b = bh / g.H, h = bh % g.H, kvh = h / (g.H / g.Hkv);
  const int64_t q_off = g.QOff(b, h), kv_off = g.KvOff(b, kvh);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int r = threadIdx.x / 4, sub = threadIdx.x % 4;
  const int64_t i = q0 + r;
  const bool row_ok = i < S;
  const float lse = row_ok ? a.lse[bh * S + i] : 0.0f, delta = row_ok ? a.delta[bh * S + i] : 0.0f;

  LoadTile(Qs, a.q, q_off, g.ld_q, q0, S, D);
  LoadTile(dOs, a.dout, q_off, g.ld_q, q0, S, D);
  float dq[kCols];
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc) dq[cc] = 0.0f;
  const int64_t last_key = (q0 + kTile < S ? q0 + kTile : S) - 1;
  const int64_t tiles = last_key / kTile + 1;
  for (int64_t jt = 0; jt < tiles; ++jt) {
    const int64_t k0 = jt * kTile;
    __syncthreads();
    LoadTile(Ks, a.k, kv_off, g.ld_kv, k0, S, D);
    LoadTile(Vs, a.v, kv_off, g.ld_kv, k0, S, D);
    __syncthreads();
    float s[kPerRow], dp[kPerRow];
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) s[jj] = dp[jj] = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
      const float qd = Qs[r * pitch + d], dod = dOs[r * pitch + d];
#pragma unroll
      for (int jj = 0; jj < kPerRow; ++jj) {
        const int64_t c = sub + 4 * jj;
        s[jj] = fmaf(qd, Ks[c * pitch + d], s[jj]);
        dp[jj] = fmaf(dod, Vs[c * pitch + d], dp[jj]);
      }
    }
#pragma unroll
    for (int jj = 0; jj < kPerRow; ++jj) {
      const int c = sub + 4 * jj;
      const bool ok = row_ok && k0 + c <= i;
      const float p = ok ? expf(a.scale * s[jj] - lse) : 0.0f;
      dSs[r * (kTile + 1) + c] = p * (dp[jj] - delta) * a.scale;
    }
    __syncwarp();
    for (int c = 0; c < kTile; ++c) {
      const float ds = dSs[r * (kTile + 1) + c];
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) {
        const int64_t d = sub + 4 * cc;
        if (d < D) dq[cc] = fmaf(ds, Ks[c * pitch + d], dq[cc]);
      }
    }
    __syncwarp();
  }
  if (!row_ok) return;
#pragma unroll
  for (int cc = 0; cc < kCols; ++cc) {
    const int64_t d = sub + 4 * cc;
    if (d < D) Store(a.dq, q_off + i * g.ld_q + d, dq[cc]);
  }
}

size_t ForwardSmem(int64_t D) { return sizeof(float) * (3 * kTile * (D + 1) + kTile * (kTile + 1)); }
size_t BackwardKvSmem(int64_t D) {
  return sizeof(float) * (4 * kTile * (D + 1) + 2 * kTile * (kTile + 1) + 2 * kTile);
}
size_t BackwardQSmem(int64_t D) { return sizeof(float) * (4 * kTile * (D + 1) + kTile * (kTile + 1)); }

template <class Kernel>
cudaError_t Launch(Kernel kernel, dim3 grid, size_t smem, const AttnArgs& a, cudaStream_t s) {
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      e != cudaSuccess) {
    return e;
  }
  kernel<<<grid, kAttnThreads, smem, s>>>(a);
  return cudaGetLastError();
}

template <int kMaxD>
cudaError_t Forward(const AttnArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(a.d.batch * a.d.heads), static_cast<unsigned>((a.d.seq + kTile - 1) / kTile));
  return Launch(AttentionForwardKernel<kMaxD>, grid, ForwardSmem(a.d.head_dim), a, s);
}

template <int kMaxD>
cudaError_t Backward(const AttnArgs& a, cudaStream_t s) {
  const unsigned tiles = static_cast<unsigned>((a.d.seq + kTile - 1) / kTile);
  if (cudaError_t e = Forward<kMaxD>(a, s); e != cudaSuccess) return e;  // lse and delta
  const dim3 kv_grid(static_cast<unsigned>(a.d.batch * a.d.kv_heads), tiles);
  if (cudaError_t e = Launch(AttentionBackwardKvKernel<kMaxD>, kv_grid, BackwardKvSmem(a.d.head_dim), a, s);
      e != cudaSuccess) {
    return e;
  }
  const dim3 q_grid(static_cast<unsigned>(a.d.batch * a.d.heads), tiles);
  return Launch(AttentionBackwardQKernel<kMaxD>, q_grid, BackwardQSmem(a.d.head_dim), a, s);
}

bool Valid(const AttnDims& d) {
  return d.head_dim >= 1 && d.head_dim <= kMaxAttentionHeadDim && d.kv_heads >= 1 && d.heads % d.kv_heads == 0 &&
         d.seq >= 1 && d.batch >= 1;
}

}  // namespace

cudaError_t LaunchAttentionForward(const AttnDims& d, KPtr q, KPtr k, KPtr v, KPtr out, KPtr probs, cudaStream_t s) {
  if (!Valid(d)) return cudaErrorInvalidValue;
  AttnArgs a{};
  a.d = d;
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.probs = probs;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));  // the CPU backend's ScaleOf
  if (d.head_dim <= 64) return Forward<64>(a, s);
  if (d.head_dim <= 128) return Forward<128>(a, s);
  return Forward<256>(a, s);
}

cudaError_t LaunchAttentionBackward(const AttnDims& d, KPtr q, KPtr k, KPtr v, KPtr dout, KPtr dq, KPtr dk, KPtr dv,
                                    float* scratch, cudaStream_t s) {
  if (!Valid(d)) return cudaErrorInvalidValue;
  AttnArgs a{};
  a.d = d;
  a.q = q;
  a.k = k;
  a.v = v;
  a.dout = dout;
  a.lse = scratch;
  a.delta = scratch + d.batch * d.heads * d.seq;
  a.dq = dq;
  a.dk = dk;
  a.dv = dv;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  if (d.head_dim <= 64) return Backward<64>(a, s);
  if (d.head_dim <= 128) return Backward<128>(a, s);
  return Backward<256>(a, s);
}

}  // namespace parallax::executor::gpu

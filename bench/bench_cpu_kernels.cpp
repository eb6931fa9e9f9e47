// CPU kernel micro-benchmarks (issue 15): each kernel of the CPU backend at the peer model's
// shapes (4 layers x 256 hidden, seq 128, micro-batch 8: 1024 tokens, ffn 1024, 4 heads of 64),
// against
//   - `scalar`: the previous kernels (plain loops over std::tanh / std::exp, one scalar loop per
//     attention score), kept here verbatim as the baseline;
//   - `handwritten` (activations only): a portable loop with an inline Cephes-style exp that GCC
//     vectorises itself, cloned for AVX-512/AVX2/baseline with target_clones; what a hand-written
//     loop without a SIMD library gets;
//   - the backend's kernel (Highway, run-time dispatch; attention through cblas_sgemm).
// Counters: ns per element (or per score), and GB/s of the arrays each kernel must touch.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/fused_kernels.h"
#include "executor/cpu/kernel_threads.h"
#include "executor/cpu/vector_kernels.h"

namespace parallax::executor {
namespace {

using Vec = std::vector<float>;
constexpr int64_t kTokens = 1024, kHidden = 256, kFfn = 1024;
constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluCoef = 0.044715f;

Vec Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

void Report(benchmark::State& state, int64_t elements, int64_t bytes_per_iter) {
  state.SetItemsProcessed(state.iterations() * elements);
  state.SetBytesProcessed(state.iterations() * bytes_per_iter);
  state.counters["ns_per_elem"] = benchmark::Counter(static_cast<double>(elements) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

// ---- the previous kernels (baseline) ----------------------------------------------------------

void ScalarGelu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluCoef * v * v * v)));
  }
}

void ScalarGeluGrad(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kGeluCoef * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

void ScalarLayerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                     int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mu = 0;
    for (int64_t c = 0; c < cols; ++c) mu += xr[c];
    mu /= static_cast<double>(cols);
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= static_cast<double>(cols);
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mu);
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = rs;
  }
}

void ScalarLayerNormGrad(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                         float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mean[r]) * rstd[r];
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta[c] += dyr[c];
    }
    const float mg = static_cast<float>(sum_g / static_cast<double>(cols));
    const float mgx = static_cast<float>(sum_gx / static_cast<double>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mean[r]) * rstd[r];
      dxr[c] = rstd[r] * (dyr[c] * gamma[c] - mg - xhat * mgx);
    }
  }
}

void ScalarCrossEntropy(const float* logits, int64_t rows, int64_t cols, const int32_t* targets, float* row_max,
                        float* sum_exp, float* dlogits) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * cols;
    row_max[r] = *std::max_element(l, l + cols);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(l[c] - row_max[r]));
    sum_exp[r] = static_cast<float>(s);
    float* d = dlogits + r * cols;
    const float inv = 1.0f / sum_exp[r];
    for (int64_t c = 0; c < cols; ++c) d[c] = std::exp(l[c] - row_max[r]) * inv;
    d[targets[r]] -= 1.0f;
  }
}

void ScalarAdamW(float* param, const float* grad, float* m, float* v, int64_t n, const vec::AdamWScalars& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_scale;
    m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    param[i] = param[i] * s.decay - s.step_size * m[i] / (std::sqrt(v[i]) * s.inv_sqrt_bc2 + s.eps);
  }
}

// One scalar loop per score (the previous attention forward).
void ScalarAttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                            float* probs) {
  const int64_t d = s.head_dim, q_row = s.heads * d, kv_row = s.kv_heads * d, group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        float* p = probs + ((b * s.heads + h) * s.seq + i) * s.seq;
        const float* qi = q + (i * s.batch + b) * q_row + h * d;
        float mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const float* kj = k + (j * s.batch + b) * kv_row + (h / group) * d;
          float dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += qi[e] * kj[e];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = 0; j <= i; ++j) p[j] /= sum;
        for (int64_t j = i + 1; j < s.seq; ++j) p[j] = 0;
        float* oi = out + (i * s.batch + b) * q_row + h * d;
        std::fill(oi, oi + d, 0.0f);
        for (int64_t j = 0; j <= i; ++j) {
          const float* vj = v + (j * s.batch + b) * kv_row + (h / group) * d;
          for (int64_t e = 0; e < d; ++e) oi[e] += p[j] * vj[e];
        }
      }
    }
  }
}

// ---- hand-written vectorisable loops -----------------------------------------------------------

// exp(x) for x in [-88, 88]: Cody-Waite reduction by ln 2 and Cephes' expf polynomial (about 1 ulp).
[[gnu::always_inline]] inline float ExpPoly(float x) {
  x = x > 88.0f ? 88.0f : x;
  x = x < -88.0f ? -88.0f : x;
  // Round to nearest by adding and subtracting 1.5 * 2^23 (no libm call, so GCC can vectorise).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void HandGelu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float two_u = 2.0f * kSqrt2OverPi * v * (1.0f + kGeluCoef * v * v);
    y[i] = v / (1.0f + ExpPoly(-two_u));
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void HandGeluGrad(const float* x, const float* dy,
                                                                                 float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float two_u = 2.0f * kSqrt2OverPi * v * (1.0f + kGeluCoef * v * v);
    const float e = ExpPoly(-two_u);
    const float s = 1.0f / (1.0f + e);
    const float d2u = 2.0f * kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * v * v);
    dx[i] = dy[i] * (s + v * s * (e * s) * d2u);
  }
}

// ---- benchmarks ---------------------------------------------------------------------------------

template <void (*F)(const float*, float*, int64_t)>
void Gelu(benchmark::State& state) {
  const int64_t n = kTokens * kFfn;
  const Vec x = Random(n, 1, 2.0f);
  Vec y(static_cast<size_t>(n));
  for (auto _ : state) {
    F(x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  Report(state, n, 2 * n * 4);
}
void BackendGelu(const float* x, float* y, int64_t n) { vec::Gelu(x, y, n); }
BENCHMARK(Gelu<ScalarGelu>)->Name("Gelu/scalar")->Unit(benchmark::kMillisecond);
BENCHMARK(Gelu<HandGelu>)->Name("Gelu/handwritten")->Unit(benchmark::kMillisecond);
BENCHMARK(Gelu<BackendGelu>)->Name("Gelu/highway")->Unit(benchmark::kMillisecond);

template <void (*F)(const float*, const float*, float*, int64_t)>
void GeluGrad(benchmark::State& state) {
  const int64_t n = kTokens * kFfn;
  const Vec x = Random(n, 1, 2.0f), dy = Random(n, 2);
  Vec dx(static_cast<size_t>(n));
  for (auto _ : state) {
    F(x.data(), dy.data(), dx.data(), n);
    benchmark::DoNotOptimize(dx.data());
  }
  Report(state, n, 3 * n * 4);
}
void BackendGeluGrad(const float* x, const float* dy, float* dx, int64_t n) { vec::GeluGrad(x, dy, dx, n); }
BENCHMARK(GeluGrad<ScalarGeluGrad>)->Name("GeluGrad/scalar")->Unit(benchmark::kMillisecond);
BENCHMARK(GeluGrad<HandGeluGrad>)->Name("GeluGrad/handwritten")->Unit(benchmark::kMillisecond);
BENCHMARK(GeluGrad<BackendGeluGrad>)->Name("GeluGrad/highway")->Unit(benchmark::kMillisecond);

void BiasGelu(benchmark::State& state) {
  const int64_t n = kTokens * kFfn;
  const Vec x0 = Random(n, 1, 2.0f), bias = Random(kFfn, 3);
  Vec x = x0, y(static_cast<size_t>(n));
  CpuBackend be;
  for (auto _ : state) {
    if (state.range(0)) {
      BiasGeluForward(x.data(), bias.data(), y.data(), kTokens, kFfn);
    } else {
      be.AddBias(x.data(), bias.data(), kTokens, kFfn);
      be.GeluForward(x.data(), y.data(), n);
    }
    benchmark::DoNotOptimize(y.data());
    state.PauseTiming();
    x = x0;
    state.ResumeTiming();
  }
  Report(state, n, 3 * n * 4);
}
BENCHMARK(BiasGelu)->ArgName("fused")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BiasGeluGrad(benchmark::State& state) {
  const int64_t n = kTokens * kFfn;
  const Vec x = Random(n, 1, 2.0f), dy = Random(n, 2);
  Vec dx(static_cast<size_t>(n)), db(static_cast<size_t>(kFfn));
  CpuBackend be;
  for (auto _ : state) {
    if (state.range(0)) {
      BiasGeluBackward(x.data(), dy.data(), dx.data(), db.data(), kTokens, kFfn);
    } else {
      be.GeluBackward(x.data(), dy.data(), dx.data(), n);
      be.BiasBackward(dx.data(), db.data(), kTokens, kFfn);
    }
    benchmark::DoNotOptimize(dx.data());
    benchmark::DoNotOptimize(db.data());
  }
  Report(state, n, 3 * n * 4);
}
BENCHMARK(BiasGeluGrad)->ArgName("fused")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void LayerNorm(benchmark::State& state) {
  const bool scalar = state.range(0) == 0;
  const Vec x = Random(kTokens * kHidden, 1), gamma = Random(kHidden, 2), beta = Random(kHidden, 3);
  const Vec dy = Random(kTokens * kHidden, 4);
  Vec y(x.size()), dx(x.size()), mean(kTokens), rstd(kTokens), dgamma(kHidden), dbeta(kHidden);
  CpuBackend be;
  for (auto _ : state) {
    if (scalar) {
      ScalarLayerNorm(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), kTokens, kHidden, 1e-5f);
      ScalarLayerNormGrad(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
                          dbeta.data(), kTokens, kHidden);
    } else {
      be.LayerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), kTokens, kHidden,
                          1e-5f);
      be.LayerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
                           dbeta.data(), kTokens, kHidden);
    }
    benchmark::DoNotOptimize(dx.data());
  }
  Report(state, kTokens * kHidden, 6 * kTokens * kHidden * 4);
}
BENCHMARK(LayerNorm)->ArgName("highway")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void CrossEntropy(benchmark::State& state) {
  const bool scalar = state.range(0) == 0;
  const int64_t vocab = state.range(1);
  const Vec logits = Random(kTokens * vocab, 1, 3.0f);
  std::vector<int32_t> targets(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) targets[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7919) % vocab);
  Vec mx(kTokens), sum(kTokens), tl(kTokens), d(logits.size());
  CpuBackend be;
  for (auto _ : state) {
    if (scalar) {
      ScalarCrossEntropy(logits.data(), kTokens, vocab, targets.data(), mx.data(), sum.data(), d.data());
    } else {
      be.RowMax(logits.data(), kTokens, vocab, mx.data());
      be.CrossEntropyStats(logits.data(), kTokens, vocab, mx.data(), targets.data(), 0, sum.data(), tl.data());
      be.CrossEntropyBackward(logits.data(), kTokens, vocab, mx.data(), sum.data(), targets.data(), 0, 1.0f, d.data());
    }
    benchmark::DoNotOptimize(d.data());
  }
  Report(state, kTokens * vocab, 4 * kTokens * vocab * 4);
}
BENCHMARK(CrossEntropy)->ArgNames({"highway", "vocab"})->ArgsProduct({{0, 1}, {256, 8192}})->Unit(benchmark::kMillisecond);

void AdamW(benchmark::State& state) {
  const bool scalar = state.range(0) == 0;
  const int64_t n = 3'300'000;  // the peer model's parameters
  Vec p = Random(n, 1), g = Random(n, 2), m = Random(n, 3, 0.01f), v = Random(n, 4, 0.01f);
  for (auto& x : v) x = x * x;
  const vec::AdamWScalars s{0.9f, 0.95f, 3e-4f, 1.0f, 1e-8f, 1.0f - 3e-5f, 1.0f};
  for (auto _ : state) {
    if (scalar) {
      ScalarAdamW(p.data(), g.data(), m.data(), v.data(), n, s);
    } else {
      vec::AdamW(p.data(), g.data(), m.data(), v.data(), n, s);
    }
    benchmark::DoNotOptimize(p.data());
  }
  Report(state, n, 7 * n * 4);
}
BENCHMARK(AdamW)->ArgName("highway")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Attention of one micro-batch of the peer model (8 sequences x 128, 4 heads of 64).
void Attention(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));  // 0 scalar forward, 1 blocked forward, 2 blocked backward
  const AttentionShape s{8, 128, 4, 4, 64};
  const int64_t qn = s.seq * s.batch * s.heads * s.head_dim;
  const Vec q = Random(qn, 1), k = Random(qn, 2), v = Random(qn, 3), dout = Random(qn, 4);
  Vec out(static_cast<size_t>(qn)), probs(static_cast<size_t>(s.batch * s.heads * s.seq * s.seq));
  Vec lse(static_cast<size_t>(s.stats_floats())), dq(out.size()), dk(out.size()), dv(out.size());
  CpuBackend be;
  be.AttentionForward(s, q.data(), k.data(), v.data(), out.data(), lse.data());
  for (auto _ : state) {
    if (mode == 0) {
      ScalarAttentionForward(s, q.data(), k.data(), v.data(), out.data(), probs.data());
    } else if (mode == 1) {
      be.AttentionForward(s, q.data(), k.data(), v.data(), out.data(), lse.data());
    } else {
      be.AttentionBackward(s, {.q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(), .lse = lse.data(),
                               .dout = dout.data(), .dq = dq.data(), .dk = dk.data(), .dv = dv.data()});
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(dq.data());
  }
  // Useful (causal) FLOPs: forward 2 GEMMs of S(S+1)/2 x D each; backward 4 (plus the recomputed
  // scores, not counted).
  const double causal = static_cast<double>(s.batch * s.heads) * static_cast<double>(s.seq * (s.seq + 1)) / 2 *
                        static_cast<double>(s.head_dim);
  state.counters["GFLOPs"] = benchmark::Counter((mode == 2 ? 8.0 : 4.0) * causal * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(Attention)->ArgName("mode")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// The rank's intra-op threads, two ways, on every core of the machine (wall time):
//   pool 0: as before the kernel pool: OpenBLAS's own threads for GEMMs, our kernels on the calling
//           thread;
//   pool 1: as `parallax run` does now: OpenBLAS single-threaded, GEMMs split by blocks of rows and
//           our kernels by chunks across the kernel pool (executor/cpu/kernel_threads.h).
// op 0 GELU forward (1M elements), 1 LayerNorm forward (1024 x 256), 2 attention forward + backward
// of one peer micro-batch (8 x 128 tokens, 4 heads of 64), 3 the peer's fc1 GEMM (1024 x 1024 x 256),
// 4 its weight gradient (256 x 1024 x 1024, A transposed).
void KernelThreads(benchmark::State& state) {
  const int op = static_cast<int>(state.range(0));
  const bool pool = state.range(1) != 0;
  const int threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  CpuBackend be;  // first: it makes OpenBLAS single-threaded
  openblas_set_num_threads(pool ? 1 : threads);
  SetKernelThreads(pool ? threads : 1);
  const AttentionShape s{8, 128, 4, 4, 64};
  const int64_t n = op == 0   ? kTokens * kFfn
                    : op == 1 ? kTokens * kHidden
                    : op == 2 ? s.seq * s.batch * s.heads * s.head_dim
                              : kTokens * kFfn;
  const Vec x = Random(n, 1), k = Random(n, 2), v = Random(n, 3), dout = Random(n, 4);
  const Vec gamma = Random(kHidden, 5), beta = Random(kHidden, 6);
  Vec y(x.size()), mean(kTokens), rstd(kTokens), lse(op == 2 ? static_cast<size_t>(s.stats_floats()) : 0);
  Vec dq(x.size()), dk(x.size()), dv(x.size());
  for (auto _ : state) {
    if (op == 0) {
      be.GeluForward(x.data(), y.data(), n);
    } else if (op == 1) {
      be.LayerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), kTokens, kHidden,
                          1e-5f);
    } else if (op == 2) {
      be.AttentionForward(s, x.data(), k.data(), v.data(), y.data(), lse.data());
      be.AttentionBackward(s, {.q = x.data(), .k = k.data(), .v = v.data(), .out = y.data(), .lse = lse.data(),
                               .dout = dout.data(), .dq = dq.data(), .dk = dk.data(), .dv = dv.data()});
    } else if (op == 3) {  // [tokens x hidden] x [hidden x ffn]
      be.Gemm(Trans::kNo, Trans::kNo, kTokens, kFfn, kHidden, 1.0f, x.data(), kHidden, k.data(), kFfn, 0.0f,
              y.data(), kFfn);
    } else {  // dW = X^T dY: [hidden x tokens] x [tokens x ffn]
      be.Gemm(Trans::kYes, Trans::kNo, kHidden, kFfn, kTokens, 1.0f, x.data(), kHidden, k.data(), kFfn, 0.0f,
              y.data(), kFfn);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(dq.data());
  }
  state.counters["threads"] = static_cast<double>(threads);
  SetKernelThreads(1);
  openblas_set_num_threads(1);
}
BENCHMARK(KernelThreads)
    ->ArgNames({"op", "pool"})
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void Target(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(vec::TargetName());
  state.SetLabel(vec::TargetName());
}
BENCHMARK(Target)->Iterations(1);

}  // namespace
}  // namespace parallax::executor

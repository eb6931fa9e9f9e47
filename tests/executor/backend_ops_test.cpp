// Cross-backend op test in the style of ggml's tests/test-backend-ops.cpp: every kernel and
// collective of the seam runs on each backend this binary can create, in each dtype, on fresh
// random inputs (never zeros), and is compared with a double-precision reference written here by
// normalized mean squared error. The reference sees the inputs exactly as stored (rounded to the
// dtype), so the error measures the kernel, not the input rounding. A new backend joins by being
// compiled in: the registry hands it to this test.
//
// Without mpirun the collectives run over one rank; under `mpirun -np N` (label mpi) over N.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "executor/backend_registry.h"
#include "tests/executor/train_helpers.h"
#include "executor/launch.h"

namespace parallax::executor {
namespace {

std::unique_ptr<LaunchContext> g_launch;
std::unique_ptr<Communicator> g_world;

using Vec = std::vector<double>;

// Normalized mean squared error (ggml's NMSE): sum (a-b)^2 / sum b^2.
double Nmse(const Vec& got, const Vec& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  return ref == 0 ? err : err / ref;
}

// Largest NMSE accepted for an output stored in `t` (fp32 accumulation inside every kernel).
double Tolerance(DType t) {
  switch (t) {
    case DType::kF32: return 1e-12;  // fp32 arithmetic against a double reference: ~1e-14 seen
    case DType::kF16: return 2e-6;   // 11-bit significand: relative rounding 2^-11
    case DType::kBf16: return 1e-4;  // 8-bit significand: relative rounding 2^-8
    default: return 1e-12;
  }
}

double Round(double x, DType t) {
  const float f = static_cast<float>(x);
  switch (t) {
    case DType::kBf16: return Bf16ToFloat(FloatToBf16(f));
    case DType::kF16: return F16ToFloat(FloatToF16(f));
    default: return f;
  }
}

class OpsTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  void SetUp() override {
    auto b = CreateBackend(std::get<0>(GetParam()));
    ASSERT_TRUE(b) << b.error().message;
    be_ = std::move(b).value();
    dt_ = std::get<1>(GetParam());
    rng_.seed(static_cast<unsigned>(1234 + static_cast<int>(dt_)));
  }

  //! Fresh random values in [lo, hi] away from zero, rounded to `t`.
  Vec Random(int64_t n, DType t, double lo = -1, double hi = 1) {
    std::uniform_real_distribution<double> u(lo, hi);
    Vec v(static_cast<size_t>(n));
    for (double& x : v) {
      do {
        x = u(rng_);
      } while (std::abs(x) < 1e-3);
      x = Round(x, t);
    }
    return v;
  }
  Tensor Dev(const Vec& v, DType t) {
    auto x = be_->Allocate(static_cast<int64_t>(v.size()), t, MemoryKind::kWorkspace);
    EXPECT_TRUE(x);
    std::vector<float> f(v.begin(), v.end());
    be_->CopyToDevice(x->ptr(), f.data(), DType::kF32, static_cast<int64_t>(v.size()));
    return std::move(x).value();
  }
  Tensor Ints(const std::vector<int32_t>& v) {
    auto x = be_->Allocate(static_cast<int64_t>(v.size()), DType::kI32, MemoryKind::kWorkspace);
    EXPECT_TRUE(x);
    be_->CopyToDevice(x->ptr(), v.data(), DType::kI32, static_cast<int64_t>(v.size()));
    return std::move(x).value();
  }
  Vec Host(const Tensor& t) {
    std::vector<float> f(static_cast<size_t>(t.numel()));
    EXPECT_TRUE(be_->Synchronize());
    be_->CopyToHost(f.data(), DType::kF32, t.ptr(), t.numel());
    return Vec(f.begin(), f.end());
  }
  //! `want` is the exact result; the tolerance allows for the kernel's fp32 arithmetic and for
  //! rounding the output to `stored`.
  void Expect(const char* what, const Tensor& got, const Vec& want, DType stored) {
    const double e = Nmse(Host(got), want);
    EXPECT_LT(e, Tolerance(stored)) << what << " in " << ToString(stored) << " on " << be_->name();
    ++checked_;
  }

  //! Forward (with and without kept statistics) and backward against a double reference.
  void CheckAttentionAgainstReference(const AttentionShape& s);

  std::unique_ptr<Backend> be_;
  DType dt_ = DType::kF32;
  std::mt19937_64 rng_;
  int checked_ = 0;
};

double Gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double GeluGrad(double x) {
  const double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}
double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST_P(OpsTest, Gemm) {
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      for (DType cdt : {dt_, DType::kF32}) {
        const int64_t m = 13, n = 17, k = 19, batch = 3;
        const Vec a = Random(batch * m * k, dt_), b = Random(batch * k * n, dt_), c0 = Random(batch * m * n, cdt);
        Tensor A = Dev(a, dt_), B = Dev(b, dt_), C = Dev(c0, cdt);
        GemmArgs g;
        g.ta = ta;
        g.tb = tb;
        g.m = m;
        g.n = n;
        g.k = k;
        g.alpha = 0.5f;
        g.beta = 2.0f;
        g.a = A.ptr();
        g.lda = ta == Trans::kYes ? m : k;
        g.b = B.ptr();
        g.ldb = tb == Trans::kYes ? k : n;
        g.c = C.ptr();
        g.ldc = n;
        g.batch = batch;
        g.stride_a = m * k;
        g.stride_b = k * n;
        g.stride_c = m * n;
        be_->Gemm(g);
        Vec want(c0.size());
        for (int64_t bi = 0; bi < batch; ++bi) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double s = 0;
              for (int64_t p = 0; p < k; ++p) {
                const double av = ta == Trans::kYes ? a[bi * m * k + p * m + i] : a[bi * m * k + i * k + p];
                const double bv = tb == Trans::kYes ? b[bi * k * n + j * k + p] : b[bi * k * n + p * n + j];
                s += av * bv;
              }
              const size_t o = static_cast<size_t>(bi * m * n + i * n + j);
              want[o] = 0.5 * s + 2.0 * c0[o];
            }
          }
        }
        Expect("gemm", C, want, cdt);
      }
    }
  }
}

TEST_P(OpsTest, ElementwiseCopyFillAxpyBias) {
  const int64_t rows = 7, cols = 33, n = rows * cols;
  const Vec x = Random(n, dt_), y0 = Random(n, dt_), bias = Random(cols, dt_);
  {
    Tensor Y = Dev(y0, dt_), X = Dev(x, dt_);
    be_->Axpy({.y = Y.ptr(), .x = X.ptr(), .n = n, .alpha = -1.5f});
    Vec want(static_cast<size_t>(n));
    for (size_t i = 0; i < want.size(); ++i) want[i] = y0[i] - 1.5 * x[i];
    Expect("axpy", Y, want, dt_);
  }
  {
    Tensor Y = Dev(y0, dt_);
    be_->Fill(Y.ptr(), n, 0.375f);
    Expect("fill", Y, Vec(static_cast<size_t>(n), 0.375), dt_);
  }
  for (DType to : {DType::kF32, DType::kBf16, DType::kF16}) {
    Tensor X = Dev(x, dt_);
    auto Y = be_->Allocate(n, to, MemoryKind::kWorkspace);
    ASSERT_TRUE(Y);
    be_->Copy({.dst = Y->ptr(), .src = X.ptr(), .n = n});  // a cast when the dtypes differ
    Expect("copy/cast", *Y, x, to);
  }
  {
    Tensor Y = Dev(y0, dt_), B = Dev(bias, dt_);
    be_->AddBias({.y = Y.ptr(), .bias = B.ptr(), .rows = rows, .cols = cols});
    Vec want(y0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(r * cols + c)] += bias[static_cast<size_t>(c)];
    }
    Expect("add_bias", Y, want, dt_);
  }
  {
    const Vec db0 = Random(cols, DType::kF32);
    Tensor DY = Dev(y0, dt_), DB = Dev(db0, DType::kF32);
    be_->BiasBackward({.dy = DY.ptr(), .dbias = DB.ptr(), .rows = rows, .cols = cols});
    Vec want(db0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(c)] += y0[static_cast<size_t>(r * cols + c)];
    }
    Expect("bias_backward", DB, want, DType::kF32);
  }
}

TEST_P(OpsTest, Norms) {
  const int64_t rows = 9, cols = 48;
  const float eps = 1e-5f;
  const Vec x = Random(rows * cols, dt_, -2, 2), gamma = Random(cols, dt_, 0.5, 1.5), beta = Random(cols, dt_);
  const Vec dy = Random(rows * cols, dt_);
  // Layer norm.
  Vec y(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows)), dx(x.size());
  Vec dgamma(static_cast<size_t>(cols), 0.0), dbeta(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[static_cast<size_t>(r * cols)];
    double mu = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mu += xr[c];
    mu /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    const double rs = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
    mean[static_cast<size_t>(r)] = mu;
    rstd[static_cast<size_t>(r)] = rs;
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const double xh = (x[i] - mu) * rs;
      y[i] = xh * gamma[static_cast<size_t>(c)] + beta[static_cast<size_t>(c)];
      const double g = dy[i] * gamma[static_cast<size_t>(c)];
      sum_g += g;
      sum_gx += g * xh;
      dgamma[static_cast<size_t>(c)] += dy[i] * xh;
      dbeta[static_cast<size_t>(c)] += dy[i];
    }
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const double xh = (x[i] - mu) * rs;
      dx[i] = rs * (dy[i] * gamma[static_cast<size_t>(c)] - sum_g / cols - xh * sum_gx / cols);
    }
  }
  Tensor X = Dev(x, dt_), G = Dev(gamma, dt_), B = Dev(beta, dt_), Y = Dev(Vec(x.size(), 0.0), dt_);
  Tensor M = Dev(Vec(static_cast<size_t>(rows), 0.0), DType::kF32), R = Dev(Vec(static_cast<size_t>(rows), 0.0), DType::kF32);
  be_->LayerNormForward({.x = X.ptr(), .gamma = G.ptr(), .beta = B.ptr(), .y = Y.ptr(), .mean = M.ptr(),
                         .rstd = R.ptr(), .rows = rows, .cols = cols, .eps = eps});
  Expect("layer_norm", Y, y, dt_);
  Expect("layer_norm mean", M, mean, DType::kF32);
  Tensor DY = Dev(dy, dt_), DX = Dev(Vec(x.size(), 0.0), dt_);
  Tensor DG = Dev(Vec(static_cast<size_t>(cols), 0.0), DType::kF32), DB = Dev(Vec(static_cast<size_t>(cols), 0.0), DType::kF32);
  be_->LayerNormBackward({.dy = DY.ptr(), .x = X.ptr(), .gamma = G.ptr(), .mean = M.ptr(), .rstd = R.ptr(),
                          .dx = DX.ptr(), .dgamma = DG.ptr(), .dbeta = DB.ptr(), .rows = rows, .cols = cols});
  Expect("layer_norm dx", DX, dx, dt_);
  Expect("layer_norm dgamma", DG, dgamma, DType::kF32);
  Expect("layer_norm dbeta", DB, dbeta, DType::kF32);

  // RMS norm.
  Vec ry(x.size()), rr(static_cast<size_t>(rows)), rdx(x.size()), rdg(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < cols; ++c) ms += x[static_cast<size_t>(r * cols + c)] * x[static_cast<size_t>(r * cols + c)];
    const double rs = 1.0 / std::sqrt(ms / static_cast<double>(cols) + eps);
    rr[static_cast<size_t>(r)] = rs;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      ry[i] = x[i] * rs * gamma[static_cast<size_t>(c)];
      dot += dy[i] * gamma[static_cast<size_t>(c)] * x[i];
      rdg[static_cast<size_t>(c)] += dy[i] * x[i] * rs;
    }
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      rdx[i] = rs * dy[i] * gamma[static_cast<size_t>(c)] - x[i] * rs * rs * rs * dot / static_cast<double>(cols);
    }
  }
  Tensor RY = Dev(Vec(x.size(), 0.0), dt_), RR = Dev(Vec(static_cast<size_t>(rows), 0.0), DType::kF32);
  be_->RmsNormForward(
      {.x = X.ptr(), .gamma = G.ptr(), .y = RY.ptr(), .rstd = RR.ptr(), .rows = rows, .cols = cols, .eps = eps});
  Expect("rms_norm", RY, ry, dt_);
  Tensor RDX = Dev(Vec(x.size(), 0.0), dt_), RDG = Dev(Vec(static_cast<size_t>(cols), 0.0), DType::kF32);
  be_->RmsNormBackward({.dy = DY.ptr(), .x = X.ptr(), .gamma = G.ptr(), .rstd = RR.ptr(), .dx = RDX.ptr(),
                        .dgamma = RDG.ptr(), .rows = rows, .cols = cols});
  Expect("rms_norm dx", RDX, rdx, dt_);
  Expect("rms_norm dgamma", RDG, rdg, DType::kF32);
}

TEST_P(OpsTest, ActivationsAndRotary) {
  const int64_t n = 1000;
  const Vec x = Random(n, dt_, -4, 4), up = Random(n, dt_, -2, 2), dy = Random(n, dt_);
  Vec gy(x.size()), gdx(x.size()), sy(x.size()), sdg(x.size()), sdu(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    gy[i] = Gelu(x[i]);
    gdx[i] = dy[i] * GeluGrad(x[i]);
    const double s = Sigmoid(x[i]), silu = x[i] * s;
    sy[i] = silu * up[i];
    sdu[i] = dy[i] * silu;
    sdg[i] = dy[i] * up[i] * (s + x[i] * s * (1 - s));
  }
  Tensor X = Dev(x, dt_), U = Dev(up, dt_), DY = Dev(dy, dt_), Y = Dev(Vec(x.size(), 0.0), dt_);
  be_->GeluForward({.x = X.ptr(), .y = Y.ptr(), .n = n});
  Expect("gelu", Y, gy, dt_);
  Tensor DX = Dev(Vec(x.size(), 0.0), dt_);
  be_->GeluBackward({.x = X.ptr(), .dy = DY.ptr(), .dx = DX.ptr(), .n = n});
  Expect("gelu backward", DX, gdx, dt_);
  be_->SwigluForward({.gate = X.ptr(), .up = U.ptr(), .y = Y.ptr(), .n = n});
  Expect("swiglu", Y, sy, dt_);
  Tensor DG = Dev(Vec(x.size(), 0.0), dt_), DU = Dev(Vec(x.size(), 0.0), dt_);
  be_->SwigluBackward({.gate = X.ptr(), .up = U.ptr(), .dy = DY.ptr(), .dgate = DG.ptr(), .dup = DU.ptr(), .n = n});
  Expect("swiglu dgate", DG, sdg, dt_);
  Expect("swiglu dup", DU, sdu, dt_);

  // Rotary, rotate-half form on [S*B, heads*D], base 10000; inverse undoes it.
  const int64_t seq = 5, batch = 2, heads = 3, d = 8;
  const Vec q = Random(seq * batch * heads * d, dt_);
  Vec want(q.size());
  for (int64_t s = 0; s < seq; ++s) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const size_t base = static_cast<size_t>(((s * batch + b) * heads + h) * d);
        for (int64_t i = 0; i < d / 2; ++i) {
          const double theta = static_cast<double>(s) * std::pow(10000.0, -2.0 * static_cast<double>(i) / d);
          const double x1 = q[base + static_cast<size_t>(i)], x2 = q[base + static_cast<size_t>(i + d / 2)];
          want[base + static_cast<size_t>(i)] = x1 * std::cos(theta) - x2 * std::sin(theta);
          want[base + static_cast<size_t>(i + d / 2)] = x2 * std::cos(theta) + x1 * std::sin(theta);
        }
      }
    }
  }
  Tensor Q = Dev(q, dt_);
  be_->Rotary({.x = Q.ptr(), .seq = seq, .batch = batch, .heads = heads, .head_dim = d});
  Expect("rotary", Q, want, dt_);
  Tensor Q2 = Dev(want, DType::kF32);
  be_->Rotary({.x = Q2.ptr(), .seq = seq, .batch = batch, .heads = heads, .head_dim = d, .inverse = true});
  Expect("rotary inverse", Q2, q, DType::kF32);
}

// The fused chains (bias + GELU, residual + norm, norm backward added into the residual
// gradient) against the same double references as the unfused kernels; backends that do not
// override them run the base class's composition, which this checks too.
TEST_P(OpsTest, FusedChains) {
  // fp32 outputs computed from an intermediate stored in the compute dtype (h, dx) carry its
  // rounding, so they are held to that dtype's tolerance.
  const int64_t rows = 9, cols = 48, n = rows * cols;
  const float eps = 1e-5f;
  const Vec pre = Random(n, dt_, -3, 3), bias = Random(cols, dt_), dy = Random(n, dt_);
  {
    Vec biased(pre), y(pre.size()), dx(pre.size());
    const Vec db0 = Random(cols, DType::kF32);
    Vec db(db0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        biased[i] = Round(pre[i] + bias[static_cast<size_t>(c)], dt_);
        y[i] = Gelu(biased[i]);
        dx[i] = dy[i] * GeluGrad(biased[i]);
        db[static_cast<size_t>(c)] += dx[i];
      }
    }
    Tensor X = Dev(pre, dt_), B = Dev(bias, dt_), Y = Dev(Vec(pre.size(), 0.0), dt_);
    be_->BiasGeluForward({.x = X.ptr(), .bias = B.ptr(), .y = Y.ptr(), .rows = rows, .cols = cols});
    Expect("bias_gelu pre-activation", X, biased, dt_);
    Expect("bias_gelu", Y, y, dt_);
    Tensor DY = Dev(dy, dt_), DX = Dev(Vec(pre.size(), 0.0), dt_), DB = Dev(db0, DType::kF32);
    be_->BiasGeluBackward(
        {.x = X.ptr(), .dy = DY.ptr(), .dx = DX.ptr(), .dbias = DB.ptr(), .rows = rows, .cols = cols});
    Expect("bias_gelu dx", DX, dx, dt_);
    Expect("bias_gelu dbias", DB, db, dt_);  // summed from the stored dx
  }
  const Vec x = Random(n, dt_, -2, 2), res = Random(n, dt_, -2, 2), gamma = Random(cols, dt_, 0.5, 1.5);
  const Vec beta = Random(cols, dt_);
  for (bool with_bias : {false, true}) {
    Vec want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        want[i] = x[i] + res[i] + (with_bias ? bias[static_cast<size_t>(c)] : 0.0);
      }
    }
    Tensor X = Dev(x, dt_), R = Dev(res, dt_), B = Dev(bias, dt_), O = Dev(Vec(x.size(), 0.0), dt_);
    be_->ResidualAdd({.x = X.ptr(), .residual = R.ptr(), .bias = with_bias ? B.ptr() : DevPtr{}, .out = O.ptr(),
                      .rows = rows, .cols = cols});
    Expect(with_bias ? "residual_add+bias" : "residual_add", O, want, dt_);
  }
  for (bool rms : {false, true}) {
    for (bool with_bias : {false, true}) {
      Vec h(x.size()), y(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
      const Vec d0 = Random(n, dt_);
      Vec dres(d0), dg(static_cast<size_t>(cols), 0.0), dbeta(static_cast<size_t>(cols), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        double mu = 0, var = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c);
          h[i] = x[i] + res[i] + (with_bias ? bias[static_cast<size_t>(c)] : 0.0);
          mu += h[i];
        }
        mu = rms ? 0.0 : mu / static_cast<double>(cols);
        for (int64_t c = 0; c < cols; ++c) {
          const double d = h[static_cast<size_t>(r * cols + c)] - mu;
          var += d * d;
        }
        const double rs = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
        mean[static_cast<size_t>(r)] = mu;
        rstd[static_cast<size_t>(r)] = rs;
        double sum_g = 0, sum_gx = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c), ci = static_cast<size_t>(c);
          const double xh = (h[i] - mu) * rs, g = dy[i] * gamma[ci];
          y[i] = xh * gamma[ci] + (rms ? 0.0 : beta[ci]);
          sum_g += g;
          sum_gx += g * xh;
          dg[ci] += dy[i] * xh;
          dbeta[ci] += dy[i];
        }
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c);
          const double xh = (h[i] - mu) * rs, g = dy[i] * gamma[static_cast<size_t>(c)];
          dres[i] += rms ? rs * g - xh * rs * sum_gx / static_cast<double>(cols)
                         : rs * (g - sum_g / static_cast<double>(cols) - xh * sum_gx / static_cast<double>(cols));
        }
      }
      Tensor X = Dev(x, dt_), R = Dev(res, dt_), B = Dev(bias, dt_), G = Dev(gamma, dt_), BE = Dev(beta, dt_);
      Tensor H = Dev(Vec(x.size(), 0.0), dt_), Y = Dev(Vec(x.size(), 0.0), dt_);
      Tensor M = Dev(Vec(static_cast<size_t>(rows), 0.0), DType::kF32), RS = Dev(Vec(static_cast<size_t>(rows), 0.0), DType::kF32);
      const DevPtr bp = with_bias ? B.ptr() : DevPtr{};
      Tensor DY = Dev(dy, dt_), DR = Dev(d0, dt_);
      Tensor DG = Dev(Vec(static_cast<size_t>(cols), 0.0), DType::kF32), DB = Dev(Vec(static_cast<size_t>(cols), 0.0), DType::kF32);
      const std::string what = std::string(rms ? "residual_rms_norm" : "residual_layer_norm") + (with_bias ? "+bias" : "");
      const NormBackwardArgs back{.dy = DY.ptr(), .x = H.ptr(), .gamma = G.ptr(), .mean = M.ptr(), .rstd = RS.ptr(),
                                  .dx = DR.ptr(), .dgamma = DG.ptr(), .dbeta = DB.ptr(), .rows = rows, .cols = cols};
      if (rms) {
        be_->ResidualRmsNormForward({.x = X.ptr(), .residual = R.ptr(), .bias = bp, .gamma = G.ptr(), .h = H.ptr(),
                                     .y = Y.ptr(), .rstd = RS.ptr(), .rows = rows, .cols = cols, .eps = eps});
        be_->RmsNormBackwardAdd(back);
      } else {
        be_->ResidualLayerNormForward({.x = X.ptr(), .residual = R.ptr(), .bias = bp, .gamma = G.ptr(),
                                       .beta = BE.ptr(), .h = H.ptr(), .y = Y.ptr(), .mean = M.ptr(),
                                       .rstd = RS.ptr(), .rows = rows, .cols = cols, .eps = eps});
        Expect((what + " mean").c_str(), M, mean, dt_);
        be_->LayerNormBackwardAdd(back);
        Expect((what + " dbeta").c_str(), DB, dbeta, dt_);
      }
      Expect((what + " h").c_str(), H, h, dt_);
      Expect(what.c_str(), Y, y, dt_);
      Expect((what + " rstd").c_str(), RS, rstd, dt_);
      Expect((what + " dresidual").c_str(), DR, dres, dt_);
      Expect((what + " dgamma").c_str(), DG, dg, dt_);
    }
  }
}

// Kernels report errors one way (backend.h, "Errors"): the backend keeps the first and the next
// wait returns it. The generic norm-backward chain needs a workspace; with none to be had, the
// kernel returns as usual and the next Synchronize fails, naming the refused allocation, and stays
// failed.
TEST_P(OpsTest, AKernelThatCannotRunFailsTheNextSynchronize) {
  const int64_t rows = 4, cols = 16;
  Tensor DY = Dev(Random(rows * cols, dt_), dt_), X = Dev(Random(rows * cols, dt_), dt_);
  Tensor G = Dev(Random(cols, dt_, 0.5, 1.5), dt_), R = Dev(Random(rows, DType::kF32, 0.5, 1.5), DType::kF32);
  Tensor DX = Dev(Random(rows * cols, dt_), dt_), DG = Dev(Random(cols, DType::kF32), DType::kF32);
  ASSERT_TRUE(be_->Synchronize());
  be_->EmptyCache();
  be_->SetMemoryLimit(be_->memory().reserved_bytes);  // no room for the workspace
  be_->Backend::RmsNormBackwardAdd({.dy = DY.ptr(), .x = X.ptr(), .gamma = G.ptr(), .rstd = R.ptr(), .dx = DX.ptr(),
                                    .dgamma = DG.ptr(), .rows = rows, .cols = cols});
  be_->SetMemoryLimit(0);
  const Status first = be_->Synchronize();
  ASSERT_FALSE(first);
  EXPECT_NE(first.error().message.find("out of memory"), std::string::npos) << first.error().message;
  const Status again = be_->Synchronize();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, first.error().message);
}

void OpsTest::CheckAttentionAgainstReference(const AttentionShape& s) {
  const int64_t qn = s.q_elements(), kn = s.kv_elements();
  const Vec q = Random(qn, dt_), k = Random(kn, dt_), v = Random(kn, dt_), dout = Random(qn, dt_);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  Vec out(static_cast<size_t>(qn), 0.0), dq(static_cast<size_t>(qn), 0.0), dk(static_cast<size_t>(kn), 0.0),
      dv(static_cast<size_t>(kn), 0.0), lse(static_cast<size_t>(s.stats_floats()), 0.0);
  auto qi = [&](int64_t t, int64_t b, int64_t h, int64_t e) { return static_cast<size_t>(((t * s.batch + b) * s.heads + h) * s.head_dim + e); };
  auto ki = [&](int64_t t, int64_t b, int64_t h, int64_t e) { return static_cast<size_t>(((t * s.batch + b) * s.kv_heads + h) * s.head_dim + e); };
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kh = h / (s.heads / s.kv_heads);
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t j0 = s.FirstVisibleKey(i), n = s.VisibleKeys(i) - j0;
        ASSERT_GT(n, 0) << "every row sees a key here (the statistics' -inf is checked on the CPU)";
        Vec p(static_cast<size_t>(n));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < s.head_dim; ++e) dot += q[qi(i, b, h, e)] * k[ki(j0 + j, b, kh, e)];
          p[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (double& x : p) x /= sum;
        lse[static_cast<size_t>((i * s.batch + b) * s.heads + h)] = mx + std::log(sum);
        // forward and the softmax backward for this row
        Vec dp(p.size(), 0.0);
        double dot_pdp = 0;
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t e = 0; e < s.head_dim; ++e) {
            out[qi(i, b, h, e)] += p[static_cast<size_t>(j)] * v[ki(j0 + j, b, kh, e)];
            dv[ki(j0 + j, b, kh, e)] += p[static_cast<size_t>(j)] * dout[qi(i, b, h, e)];
            dp[static_cast<size_t>(j)] += dout[qi(i, b, h, e)] * v[ki(j0 + j, b, kh, e)];
          }
          dot_pdp += p[static_cast<size_t>(j)] * dp[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < n; ++j) {
          const double ds = p[static_cast<size_t>(j)] * (dp[static_cast<size_t>(j)] - dot_pdp) * scale;
          for (int64_t e = 0; e < s.head_dim; ++e) {
            dq[qi(i, b, h, e)] += ds * k[ki(j0 + j, b, kh, e)];
            dk[ki(j0 + j, b, kh, e)] += ds * q[qi(i, b, h, e)];
          }
        }
      }
    }
  }
  Tensor Q = Dev(q, dt_), K = Dev(k, dt_), V = Dev(v, dt_), O = Dev(Vec(out.size(), 0.0), dt_);
  Tensor L = Dev(Vec(lse.size(), 0.0), DType::kF32);
  be_->AttentionForward({.shape = s, .q = Q.ptr(), .k = K.ptr(), .v = V.ptr(), .out = O.ptr(), .lse = L.ptr()});
  Expect("attention", O, out, dt_);
  Expect("attention lse", L, lse, dt_);  // fp32, from scores of dt_ products
  Tensor O2 = Dev(Vec(out.size(), 0.0), dt_);
  be_->AttentionForward({.shape = s, .q = Q.ptr(), .k = K.ptr(), .v = V.ptr(), .out = O2.ptr()});
  Expect("attention (no statistics kept)", O2, out, dt_);
  Tensor DO = Dev(dout, dt_), DQ = Dev(Vec(dq.size(), 0.0), dt_), DK = Dev(Vec(dk.size(), 0.0), dt_),
         DV = Dev(Vec(dv.size(), 0.0), dt_);
  be_->AttentionBackward({.shape = s, .q = Q.ptr(), .k = K.ptr(), .v = V.ptr(), .out = O.ptr(), .lse = L.ptr(),
                          .dout = DO.ptr(), .dq = DQ.ptr(), .dk = DK.ptr(), .dv = DV.ptr()});
  Expect("attention dq", DQ, dq, dt_);
  Expect("attention dk", DK, dk, dt_);
  Expect("attention dv", DV, dv, dt_);
}

TEST_P(OpsTest, CausalGroupedQueryAttention) {
  CheckAttentionAgainstReference({.batch = 2, .seq = 6, .heads = 4, .kv_heads = 2, .head_dim = 8});
}

// Rows longer than a block's threads and not a multiple of any tile, a real head size, GQA.
TEST_P(OpsTest, CausalGroupedQueryAttentionLongRows) {
  CheckAttentionAgainstReference({.batch = 2, .seq = 300, .heads = 4, .kv_heads = 2, .head_dim = 64});
}

// Ring attention's blocks (backend.h AttentionShape): a query chunk against a longer key range whose
// end it reaches causally, and a fully visible key chunk of another length.
TEST_P(OpsTest, AttentionOnOneKeyBlockWithACausalOffsetOrFullyVisible) {
  CheckAttentionAgainstReference(
      {.batch = 2, .seq = 40, .heads = 4, .kv_heads = 2, .head_dim = 16, .kv_seq = 90, .causal_offset = 50});
  CheckAttentionAgainstReference(
      {.batch = 2, .seq = 40, .heads = 2, .kv_heads = 1, .head_dim = 16, .kv_seq = 24, .causal = false});
}

// Local attention (backend.h AttentionShape::window): a sliding window inside and across the
// kernels' row blocks, chunks, and a windowed ring block placed by absolute position.
TEST_P(OpsTest, LocalAttentionSlidingAndChunked) {
  CheckAttentionAgainstReference({.batch = 2, .seq = 150, .heads = 4, .kv_heads = 2, .head_dim = 16, .window = 13});
  CheckAttentionAgainstReference(
      {.batch = 1, .seq = 130, .heads = 2, .kv_heads = 1, .head_dim = 64, .window = 24, .chunked = true});
  CheckAttentionAgainstReference({.batch = 2, .seq = 40, .heads = 2, .kv_heads = 1, .head_dim = 16, .kv_seq = 40,
                                  .causal_offset = 16, .window = 50, .chunked = true, .query_start = 96});
}

TEST_P(OpsTest, EmbeddingAndVocabParallelCrossEntropy) {
  const int64_t n = 24, hidden = 16, vocab_begin = 10, rows_local = 20;
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::uniform_int_distribution<int32_t> u(0, 39);
  for (int32_t& t : idx) t = u(rng_);
  idx[0] = 12;
  idx[1] = 12;  // a repeated row: the backward must sum both
  const Vec table = Random(rows_local * hidden, dt_), base = Random(n * hidden, dt_);
  Vec fwd(static_cast<size_t>(n * hidden), 0.0), acc(base), dtab(static_cast<size_t>(rows_local * hidden), 0.0);
  const Vec dout = Random(n * hidden, dt_);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t r = idx[static_cast<size_t>(t)] - vocab_begin;
    if (r < 0 || r >= rows_local) continue;
    for (int64_t c = 0; c < hidden; ++c) {
      fwd[static_cast<size_t>(t * hidden + c)] = table[static_cast<size_t>(r * hidden + c)];
      acc[static_cast<size_t>(t * hidden + c)] += table[static_cast<size_t>(r * hidden + c)];
      dtab[static_cast<size_t>(r * hidden + c)] += dout[static_cast<size_t>(t * hidden + c)];
    }
  }
  Tensor I = Ints(idx), T = Dev(table, dt_), O = Dev(Vec(fwd.size(), 0.0), dt_), A = Dev(base, dt_);
  const EmbeddingArgs lookup{.index = I.ptr(), .table = T.ptr(), .out = O.ptr(), .n = n, .vocab_begin = vocab_begin,
                             .table_rows = rows_local, .hidden = hidden};
  be_->EmbeddingForward(lookup);
  Expect("embedding", O, fwd, dt_);
  EmbeddingArgs added = lookup;
  added.out = A.ptr();
  added.accumulate = true;
  be_->EmbeddingForward(added);
  Expect("embedding (accumulate)", A, acc, dt_);
  Tensor DO = Dev(dout, dt_), DT = Dev(Vec(dtab.size(), 0.0), DType::kF32);
  be_->EmbeddingBackward({.index = I.ptr(), .dout = DO.ptr(), .dtable = DT.ptr(), .n = n, .vocab_begin = vocab_begin,
                          .table_rows = rows_local, .hidden = hidden});
  Expect("embedding backward", DT, dtab, DType::kF32);

  // Cross-entropy over a vocabulary slice [vocab_begin, vocab_begin + cols).
  const int64_t rows = 6, cols = 20;
  const Vec logits = Random(rows * cols, dt_, -3, 3);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) targets[static_cast<size_t>(r)] = static_cast<int32_t>(vocab_begin + (r * 7) % cols);
  targets[1] = 3;  // not in this slice
  Vec mx(static_cast<size_t>(rows)), se(static_cast<size_t>(rows)), tl(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, logits[static_cast<size_t>(r * cols + c)]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(logits[static_cast<size_t>(r * cols + c)] - m);
    const int64_t t = targets[static_cast<size_t>(r)] - vocab_begin;
    mx[static_cast<size_t>(r)] = m;
    se[static_cast<size_t>(r)] = s;
    tl[static_cast<size_t>(r)] = (t >= 0 && t < cols) ? logits[static_cast<size_t>(r * cols + t)] : 0.0;
  }
  Tensor L = Dev(logits, dt_), MX = Dev(Vec(mx.size(), 0.0), DType::kF32), TG = Ints(targets);
  Tensor SE = Dev(Vec(se.size(), 0.0), DType::kF32), TL = Dev(Vec(tl.size(), 0.0), DType::kF32);
  be_->RowMax({.logits = L.ptr(), .row_max = MX.ptr(), .rows = rows, .cols = cols});
  Expect("row_max", MX, mx, DType::kF32);
  be_->CrossEntropyStats({.logits = L.ptr(), .row_max = MX.ptr(), .targets = TG.ptr(), .sum_exp = SE.ptr(),
                          .target_logit = TL.ptr(), .rows = rows, .cols = cols, .vocab_begin = vocab_begin});
  Expect("cross_entropy sum_exp", SE, se, DType::kF32);
  Expect("cross_entropy target_logit", TL, tl, DType::kF32);

  // Two vocabulary slices' statistics side by side (this one, then another with its own maxima,
  // sums and row 1's target), combined: the global max and sum of exponentials, and the loss.
  Vec stats;
  for (const Vec* v : {&mx, &se, &tl}) stats.insert(stats.end(), v->begin(), v->end());
  Vec m1(static_cast<size_t>(rows)), s1(static_cast<size_t>(rows)), t1(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    m1[static_cast<size_t>(r)] = mx[static_cast<size_t>(r)] + 0.75 * static_cast<double>(r % 3 - 1);
    s1[static_cast<size_t>(r)] = 1.0 + 0.25 * static_cast<double>(r);
  }
  t1[1] = 1.5;
  for (const Vec* v : {&m1, &s1, &t1}) stats.insert(stats.end(), v->begin(), v->end());
  Vec gmax(static_cast<size_t>(rows)), gsum(static_cast<size_t>(rows)), dl(logits.size());
  double loss = 0;
  const float scale = 0.25f;
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
    // The reference from the fp32 values the device holds.
    const double a = static_cast<float>(mx[r]), b = static_cast<float>(m1[r]);
    const double m = std::max(a, b);
    const double sum = static_cast<float>(se[r]) * std::exp(a - m) + static_cast<float>(s1[r]) * std::exp(b - m);
    gmax[r] = m;
    gsum[r] = sum;
    loss += std::log(sum) + m - static_cast<float>(tl[r]) - static_cast<float>(t1[r]);
    const int64_t t = targets[r] - vocab_begin;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = r * static_cast<size_t>(cols) + static_cast<size_t>(c);
      dl[i] = (std::exp(logits[i] - m) / sum - (c == t ? 1.0 : 0.0)) * scale;
    }
  }
  Tensor ST = Dev(stats, DType::kF32), GM = Dev(Vec(gmax.size(), 0.0), DType::kF32);
  Tensor GS = Dev(Vec(gsum.size(), 0.0), DType::kF32);
  auto LS = be_->AllocateZeroed(1, DType::kF64, MemoryKind::kWorkspace);
  ASSERT_TRUE(LS);
  const CrossEntropyCombineArgs both{
      .stats = ST.ptr(), .row_max = GM.ptr(), .sum_exp = GS.ptr(), .loss_sum = LS->ptr(), .rows = rows, .parts = 2};
  be_->CrossEntropyCombine(both);
  be_->CrossEntropyCombine(both);  // the loss accumulates
  Expect("cross_entropy combined row_max", GM, gmax, DType::kF32);
  Expect("cross_entropy combined sum_exp", GS, gsum, DType::kF32);
  Expect("cross_entropy loss", *LS, Vec{2 * loss}, DType::kF32);
  // One slice alone: its own statistics and loss.
  auto LS1 = be_->AllocateZeroed(1, DType::kF64, MemoryKind::kWorkspace);
  ASSERT_TRUE(LS1);
  double loss1 = 0;
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) loss1 += std::log(se[r]) + mx[r] - tl[r];
  be_->CrossEntropyCombine(
      {.stats = ST.ptr(), .row_max = MX.ptr(), .sum_exp = SE.ptr(), .loss_sum = LS1->ptr(), .rows = rows, .parts = 1});
  Expect("cross_entropy one slice row_max", MX, mx, DType::kF32);
  Expect("cross_entropy one slice loss", *LS1, Vec{loss1}, DType::kF32);
  Tensor DL = Dev(Vec(dl.size(), 0.0), dt_);
  be_->CrossEntropyBackward({.logits = L.ptr(), .row_max = GM.ptr(), .sum_exp = GS.ptr(), .targets = TG.ptr(),
                             .dlogits = DL.ptr(), .rows = rows, .cols = cols, .vocab_begin = vocab_begin,
                             .scale = scale});
  Expect("cross_entropy backward", DL, dl, dt_);
}

TEST_P(OpsTest, MultiTensorAdamWAndSumSquares) {
  AdamWParams p;
  p.lr = 1e-2;
  p.beta1 = 0.9;
  p.beta2 = 0.95;
  p.eps = 1e-8;
  p.weight_decay = 0.1;
  p.step = 3;
  p.grad_scale = 0.5;
  const std::vector<int64_t> sizes = {5, 130, 77};
  std::vector<Tensor> keep;
  std::vector<AdamWTensor> ts;
  std::vector<Vec> want_main, want_m, want_v;
  std::vector<Tensor*> mains, models, ms, vs;
  std::vector<DevSpan> spans;
  double want_sq = 0;
  keep.reserve(5 * sizes.size());
  for (size_t t = 0; t < sizes.size(); ++t) {
    const int64_t n = sizes[t];
    const Vec w = Random(n, DType::kF32), g = Random(n, DType::kF32), m = Random(n, DType::kF32);
    const Vec v = Random(n, DType::kF32, 0.01, 1);
    const bool decay = t != 1;
    Vec nw(w), nm(m), nv(v);
    const double bc1 = 1 - std::pow(p.beta1, 3.0), bc2 = 1 - std::pow(p.beta2, 3.0);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const double gg = g[k] * p.grad_scale;
      nm[k] = p.beta1 * m[k] + (1 - p.beta1) * gg;
      nv[k] = p.beta2 * v[k] + (1 - p.beta2) * gg * gg;
      nw[k] = w[k] * (1 - p.lr * (decay ? p.weight_decay : 0)) -
              p.lr / bc1 * nm[k] / (std::sqrt(nv[k]) / std::sqrt(bc2) + p.eps);
      want_sq += g[k] * g[k];
    }
    keep.push_back(Dev(w, DType::kF32));
    keep.push_back(Dev(g, DType::kF32));
    keep.push_back(Dev(m, DType::kF32));
    keep.push_back(Dev(v, DType::kF32));
    keep.push_back(Dev(Vec(static_cast<size_t>(n), 0.0), dt_));
    AdamWTensor a;
    a.main = keep[keep.size() - 5].ptr();
    a.grad = keep[keep.size() - 4].ptr();
    a.m = keep[keep.size() - 3].ptr();
    a.v = keep[keep.size() - 2].ptr();
    a.model = keep[keep.size() - 1].ptr();
    a.n = n;
    a.decay = decay;
    ts.push_back(a);
    spans.push_back(DevSpan{a.grad, n});
    want_main.push_back(nw);
    want_m.push_back(nm);
    want_v.push_back(nv);
  }
  auto SQ = be_->AllocateZeroed(1, DType::kF64, MemoryKind::kWorkspace);
  ASSERT_TRUE(SQ);
  be_->MultiTensorSumSquares(spans, SQ->ptr());
  Expect("multi_tensor sum_squares", *SQ, Vec{want_sq}, DType::kF32);
  be_->MultiTensorAdamW(ts, p);
  for (size_t t = 0; t < sizes.size(); ++t) {
    Expect("adamw main", keep[5 * t], want_main[t], DType::kF32);
    Expect("adamw m", keep[5 * t + 2], want_m[t], DType::kF32);
    Expect("adamw v", keep[5 * t + 3], want_v[t], DType::kF32);
    Expect("adamw model copy", keep[5 * t + 4], want_main[t], dt_);
  }
}

// Every rank regenerates every rank's input from its rank number, so each can compute the
// collective's exact result.
TEST_P(OpsTest, CollectivesOnStreams) {
  // The backend's own job communicator (CPU: MPI or one rank; CUDA: NCCL bootstrapped over MPI).
  auto connected = be_->ConnectWorld(*g_launch, 60);
  ASSERT_TRUE(connected) << connected.error().message;
  Communicator& w = **connected;
  const int n = w.size(), me = w.rank();
  const int64_t count = 257;
  auto input_of = [&](int r) {
    std::mt19937_64 g(static_cast<uint64_t>(99 + r));
    std::uniform_real_distribution<double> u(0.1, 1.0);
    Vec v(static_cast<size_t>(n * count));
    for (double& x : v) x = Round(u(g), dt_);
    return v;
  };
  std::vector<Vec> inputs;
  inputs.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) inputs.push_back(input_of(r));
  const Vec& mine = inputs[static_cast<size_t>(me)];
  Stream& s = be_->stream(StreamKind::kDpComm);
  {
    Tensor X = Dev(mine, dt_);
    ASSERT_TRUE(w.AllReduce(X.ptr(), n * count, ReduceOp::kSum, s));
    Vec want(mine.size(), 0.0);
    for (const Vec& in : inputs) {
      for (size_t i = 0; i < want.size(); ++i) want[i] += in[i];
    }
    ASSERT_TRUE(be_->WaitEvent(StreamKind::kCompute, be_->RecordEvent(StreamKind::kDpComm)));
    Expect("all_reduce", X, want, dt_);
  }
  {
    Tensor X = Dev(mine, dt_);
    ASSERT_TRUE(w.AllReduce(X.ptr(), n * count, ReduceOp::kMax, s));
    Vec want(mine.size(), -1e300);
    for (const Vec& in : inputs) {
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i], in[i]);
    }
    Expect("all_reduce max", X, want, dt_);
  }
  {
    Tensor X = Dev(mine, dt_), Y = Dev(Vec(static_cast<size_t>(count), 0.0), dt_);
    ASSERT_TRUE(w.ReduceScatter(X.ptr(), Y.ptr(), count, s));
    Vec want(static_cast<size_t>(count), 0.0);
    for (const Vec& in : inputs) {
      for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] += in[static_cast<size_t>(me * count + i)];
    }
    Expect("reduce_scatter", Y, want, dt_);
    Tensor Z = Dev(mine, dt_);  // in place: the result lands in this rank's block
    ASSERT_TRUE(w.ReduceScatter(Z.ptr(), Z.at(me * count), count, s));
    ASSERT_TRUE(be_->Synchronize());
    Vec got = Host(Z);
    EXPECT_LT(Nmse(Vec(got.begin() + me * count, got.begin() + (me + 1) * count), want), Tolerance(dt_))
        << "reduce_scatter in place";
  }
  {
    Tensor X = Dev(Vec(mine.begin(), mine.begin() + count), dt_), Y = Dev(Vec(mine.size(), 0.0), dt_);
    ASSERT_TRUE(w.AllGather(X.ptr(), Y.ptr(), count, s));
    Vec want;
    for (const Vec& in : inputs) want.insert(want.end(), in.begin(), in.begin() + count);
    Expect("all_gather", Y, want, dt_);
  }
  {
    Tensor X = Dev(mine, dt_);
    const int root = n - 1;
    ASSERT_TRUE(w.Broadcast(X.ptr(), n * count, root, s));
    Expect("broadcast", X, inputs[static_cast<size_t>(root)], dt_);
  }
  {
    // A ring exchange in one group: send to the next rank, receive from the previous one.
    Stream& pp = be_->stream(StreamKind::kPpComm);
    Tensor X = Dev(mine, dt_), Y = Dev(Vec(mine.size(), 0.0), dt_);
    const int next = (me + 1) % n, prev = (me - 1 + n) % n;
    w.GroupStart();
    ASSERT_TRUE(w.Send(X.ptr(), n * count, next, 7, pp));
    ASSERT_TRUE(w.Recv(Y.ptr(), n * count, prev, 7, pp));
    ASSERT_TRUE(w.GroupEnd());
    ASSERT_TRUE(be_->WaitEvent(StreamKind::kCompute, be_->RecordEvent(StreamKind::kPpComm)));
    Expect("send/recv group", Y, inputs[static_cast<size_t>(prev)], dt_);
  }
  if (me == 0) std::printf("collectives checked over %d rank(s) in %s on %s\n", n, ToString(dt_), be_->name().c_str());
}

using testing::UsableBackends;

INSTANTIATE_TEST_SUITE_P(Seam, OpsTest,
                         ::testing::Combine(::testing::ValuesIn(UsableBackends()),
                                            ::testing::Values(DType::kF32, DType::kBf16, DType::kF16)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) + "_" + ToString(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace parallax::executor

int main(int argc, char** argv) {
  parallax::executor::g_launch = parallax::executor::InitLaunch(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  auto world = parallax::executor::g_launch->World(60);
  if (!world) {
    std::fprintf(stderr, "%s\n", world.error().message.c_str());
    return 1;
  }
  parallax::executor::g_world = std::move(world).value();
  if (parallax::executor::g_launch->world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  double failed = rc;
  (void)parallax::executor::g_world->HostAllReduce(&failed, 1, parallax::executor::ReduceOp::kMax);
  parallax::executor::g_world.reset();
  parallax::executor::g_launch.reset();
  return failed > 0 ? 1 : 0;
}

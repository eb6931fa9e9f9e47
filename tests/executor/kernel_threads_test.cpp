// Intra-op threads of the CPU kernels (executor/cpu/kernel_threads.h): ParallelFor covers every
// index once (nested and concurrent callers included), and every kernel that uses it gives
// bit-identical results with 1 thread and with several, as the layout tests' exact-loss contract
// needs.
#include "executor/cpu/kernel_threads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "executor/cpu/cpu_backend.h"
#include "executor/cpu/fused_kernels.h"

namespace parallax::executor {
namespace {

using Vec = std::vector<float>;

Vec Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Restores one kernel thread whatever a test does (other tests in the binary expect the default).
class KernelThreadsTest : public ::testing::Test {
 protected:
  void TearDown() override { SetKernelThreads(1); }
};

TEST_F(KernelThreadsTest, EveryIndexOnceInChunksFixedByTheGrain) {
  for (const int64_t threads : {1, 2, 4, 7}) {
    SetKernelThreads(threads);
    EXPECT_EQ(KernelThreads(), threads);
    for (const int64_t n : {0, 1, 5, 1000, 4099}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::pair<int64_t, int64_t>> chunks(static_cast<size_t>((n + 63) / 64));
      ParallelFor(n, 64, [&](int64_t b, int64_t e) {
        chunks[static_cast<size_t>(b / 64)] = {b, e};
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
      for (size_t c = 0; c < chunks.size(); ++c) {  // the split does not depend on the threads
        EXPECT_EQ(chunks[c].first, static_cast<int64_t>(c) * 64);
        EXPECT_EQ(chunks[c].second, std::min<int64_t>(n, static_cast<int64_t>(c + 1) * 64));
      }
    }
  }
}

TEST_F(KernelThreadsTest, UsesTheWorkersItWasGiven) {
  SetKernelThreads(3);
  std::mutex mu;
  std::vector<std::thread::id> ids;
  // Chunks that wait a little so that idle workers are woken before the caller drains them all.
  ParallelFor(64, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::lock_guard<std::mutex> lk(mu);
    if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end()) {
      ids.push_back(std::this_thread::get_id());
    }
  });
  EXPECT_GE(ids.size(), 2u);
  EXPECT_LE(ids.size(), 3u);
}

TEST_F(KernelThreadsTest, NestedAndConcurrentCallersRunEverything) {
  SetKernelThreads(4);
  std::atomic<int64_t> sum{0};
  const auto work = [&] {
    ParallelFor(32, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        ParallelFor(16, 4,
                    [&](int64_t b2, int64_t e2) { sum.fetch_add(e2 - b2); });  // nested: inline
      }
    });
  };
  std::vector<std::thread> callers;
  callers.reserve(3);
  for (int t = 0; t < 3; ++t) callers.emplace_back(work);  // ranks as threads of one process
  work();
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(sum.load(), 4 * 32 * 16);
}

// Runs `kernel` (which fills `out` from fixed inputs) with 1 thread and with 4 and compares bytes.
void ExpectSameWithThreads(const char* what, const std::function<std::vector<Vec>()>& kernel) {
  SetKernelThreads(1);
  const std::vector<Vec> serial = kernel();
  SetKernelThreads(4);
  const std::vector<Vec> threaded = kernel();
  ASSERT_EQ(serial.size(), threaded.size());
  for (size_t i = 0; i < serial.size(); ++i) {
    ASSERT_EQ(serial[i].size(), threaded[i].size());
    EXPECT_EQ(std::memcmp(serial[i].data(), threaded[i].data(), serial[i].size() * sizeof(float)),
              0)
        << what << ": output " << i << " differs with 4 threads";
  }
}

TEST_F(KernelThreadsTest, KernelsGiveTheSameBitsWithOneThreadOrSeveral) {
  CpuBackend be;
  const int64_t rows = 300, cols = 96, n = rows * cols * 3 + 5;  // ragged: chunks end mid-row
  const Vec x = Random(static_cast<size_t>(n), 1), dy = Random(static_cast<size_t>(n), 2);
  const Vec gate = Random(static_cast<size_t>(n), 3);
  ExpectSameWithThreads("gelu", [&] {
    Vec y(x.size()), dx(x.size());
    be.GeluForward(x.data(), y.data(), n);
    be.GeluBackward(x.data(), dy.data(), dx.data(), n);
    return std::vector<Vec>{y, dx};
  });
  ExpectSameWithThreads("swiglu", [&] {
    Vec y(x.size()), dg(x.size()), du(x.size());
    be.SwigluForward(gate.data(), x.data(), y.data(), n);
    be.SwigluBackward(gate.data(), x.data(), dy.data(), dg.data(), du.data(), n);
    return std::vector<Vec>{y, dg, du};
  });
  const Vec h = Random(static_cast<size_t>(rows * cols), 4),
            res = Random(static_cast<size_t>(rows * cols), 5);
  const Vec gamma = Random(static_cast<size_t>(cols), 6),
            beta = Random(static_cast<size_t>(cols), 7);
  ExpectSameWithThreads("norms", [&] {
    Vec y(h.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    Vec y2(h.size()), rstd2(static_cast<size_t>(rows));
    be.LayerNormForward(h.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                        rows, cols, 1e-5f);
    be.RmsNormForward(h.data(), gamma.data(), y2.data(), rstd2.data(), rows, cols, 1e-5f);
    return std::vector<Vec>{y, mean, rstd, y2, rstd2};
  });
  ExpectSameWithThreads("fused chains", [&] {
    Vec xb = h, y(h.size()), out(h.size()), hh(h.size()), y2(h.size()),
        mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    BiasGeluForward(xb.data(), beta.data(), y.data(), rows, cols);
    ResidualAdd(h.data(), res.data(), beta.data(), out.data(), rows, cols);
    ResidualLayerNormForward(h.data(), res.data(), beta.data(), hh.data(), gamma.data(),
                             beta.data(), y2.data(), mean.data(), rstd.data(), rows, cols, 1e-5f);
    return std::vector<Vec>{xb, y, out, hh, y2, mean, rstd};
  });
  const int64_t vocab = 257, tokens = 40;
  const Vec logits = Random(static_cast<size_t>(tokens * vocab), 8, 3.0f);
  std::vector<int32_t> targets(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t)
    targets[static_cast<size_t>(t)] = static_cast<int32_t>((t * 37) % 300);
  ExpectSameWithThreads("embedding and loss", [&] {
    Vec emb(static_cast<size_t>(tokens * cols)), mx(static_cast<size_t>(tokens)),
        se(static_cast<size_t>(tokens)), tl(static_cast<size_t>(tokens)), dl(logits.size());
    be.EmbeddingForward(targets.data(), tokens, h.data(), 10, rows, cols, emb.data());
    be.RowMax(logits.data(), tokens, vocab, mx.data());
    be.CrossEntropyStats(logits.data(), tokens, vocab, mx.data(), targets.data(), 0, se.data(),
                         tl.data());
    be.CrossEntropyBackward(logits.data(), tokens, vocab, mx.data(), se.data(), targets.data(), 0,
                            0.25f, dl.data());
    return std::vector<Vec>{emb, mx, se, tl, dl};
  });
  ExpectSameWithThreads("adamw", [&] {
    Vec p = x, m = dy, v(x.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = gate[i] * gate[i];
    const AdamWParams ap{
        .lr = 1e-3, .weight_decay = 0.1, .step = 3};  // betas, eps, scale: defaults
    be.AdamW(p.data(), dy.data(), m.data(), v.data(), n, ap);
    return std::vector<Vec>{p, m, v};
  });
  for (const bool kept : {true, false}) {
    const AttentionShape s{.batch = 3, .seq = 150, .heads = 4, .kv_heads = 2, .head_dim = 16};  // a partial block
    const size_t qn = static_cast<size_t>(s.q_elements()), kvn = static_cast<size_t>(s.kv_elements());
    const Vec q = Random(qn, 9), k = Random(kvn, 10), v = Random(kvn, 11), dout = Random(qn, 12);
    ExpectSameWithThreads(kept ? "attention" : "attention, statistics not kept", [&] {
      Vec out(qn), lse(static_cast<size_t>(s.stats_floats())), dq(qn), dk(kvn), dv(kvn);
      be.AttentionForward(s, q.data(), k.data(), v.data(), out.data(), kept ? lse.data() : nullptr);
      if (!kept) return std::vector<Vec>{out};
      be.AttentionBackward(s, {.q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(), .lse = lse.data(),
                               .dout = dout.data(), .dq = dq.data(), .dk = dk.data(), .dv = dv.data()});
      return std::vector<Vec>{out, lse, dq, dk, dv};
    });
  }
}

// GEMMs split across the kernel threads by blocks of rows (or columns) fixed by the shape: the same
// bits with 2 threads or 4, every transpose; against one unsplit call the same sums per element
// in the same order unless OpenBLAS blocks the smaller call differently (it does for some
// shapes), so within a few roundings of a k-term sum.
TEST_F(KernelThreadsTest, GemmSplitsByShapeNotByThreads) {
  CpuBackend be;
  struct Case {
    Trans ta, tb;
    int64_t m, n, k;
  };
  const Case cases[] = {{Trans::kNo, Trans::kNo, 500, 96, 130},    // by rows, ragged last block
                        {Trans::kYes, Trans::kNo, 300, 70, 200},   // by rows, A transposed
                        {Trans::kNo, Trans::kYes, 40, 900, 128},   // few rows: by columns, B transposed
                        {Trans::kYes, Trans::kYes, 48, 520, 300}};  // by columns, both transposed
  for (const Case& c : cases) {
    const int64_t lda = c.ta == Trans::kYes ? c.m : c.k, ldb = c.tb == Trans::kYes ? c.k : c.n;
    const Vec a = Random(static_cast<size_t>(c.m * c.k), 13), b = Random(static_cast<size_t>(c.k * c.n), 14);
    const Vec c0 = Random(static_cast<size_t>(c.m * c.n), 15);
    const auto run = [&](int64_t threads) {
      SetKernelThreads(threads);
      Vec out = c0;  // beta = 0.5: accumulates into C
      be.Gemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, a.data(), lda, b.data(), ldb, 0.5f, out.data(), c.n);
      return out;
    };
    const Vec one = run(1), two = run(2), four = run(4);
    EXPECT_EQ(std::memcmp(two.data(), four.data(), two.size() * sizeof(float)), 0)
        << c.m << "x" << c.n << "x" << c.k << ": 2 and 4 threads differ";
    double worst = 0;  // absolute: a sum of k products of unit normals, rounded in another order
    for (size_t i = 0; i < one.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(one[i]) - four[i]));
    EXPECT_LT(worst, 4 * FLT_EPSILON * static_cast<double>(c.k)) << c.m << "x" << c.n << "x" << c.k;
  }
}

}  // namespace
}  // namespace parallax::executor

#pragma once
// Intra-op threads of the CPU kernels (the ones that are not BLAS calls): a small pool of worker
// threads, sized from the rank's share of its node's CPUs (executor/host_threads.h) as OpenBLAS's
// own threads are. Work is split into chunks fixed by the problem size and the grain alone, never
// by the thread count, and every kernel that uses it is elementwise or independent per row or per
// head, so a result is bit-identical with 1 thread or with N (tested in
// tests/executor/kernel_threads_test.cpp). Reductions across rows (bias and norm-weight gradients,
// sums of squares) stay on the calling thread in their fixed order.
//
// The caller runs chunks too. A call from inside a chunk, or while another thread is using the
// pool (ranks as threads of one process), runs its chunks inline. Idle workers block on a
// condition variable after a short spin (none when the ranks oversubscribe the CPUs), so they
// never take a core from a rank that needs it.

#include <cstdint>
#include <functional>

namespace parallax::executor {

//! Threads the kernels may use (workers + the caller); 1 (the default) runs everything inline.
void SetKernelThreads(int64_t threads);
int64_t KernelThreads();

//! Calls body(begin, end) over [0, n) in chunks of `grain` (the last one shorter), on up to
//! KernelThreads() threads; returns when every chunk has run. grain < 1 counts as 1.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

//! Rows per chunk so that one chunk holds about `target_elements` elements (at least one row).
inline int64_t RowGrain(int64_t cols, int64_t target_elements = 16384) {
  return cols >= target_elements ? 1 : target_elements / (cols > 0 ? cols : 1);
}

}  // namespace parallax::executor

#pragma once
// Backend: the one seam between the parallel runtime and the hardware (DESIGN.md "Executor").
// Memory with per-rank byte accounting, kernels, communicators and timing events. The runtime in
// executor/runtime/ is written once against this interface; executor/cpu/ implements it with
// BLAS + MPI, executor/cuda/ will implement it with cuBLAS + NCCL.
//
// Conventions: every matrix is row-major fp32; "tokens" are rows laid out sequence-major
// (row = position * batch + sequence, Megatron's [s, b, h]) so a sequence-parallel shard is a
// contiguous block of rows. Kernels named *Backward accumulate weight gradients (+=) and
// overwrite input gradients unless they say otherwise.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor {

class Backend;

//! What a buffer holds, for the per-rank memory breakdown (compared with the planner's model).
enum class MemoryKind { kWeights, kGradients, kOptimizer, kActivations, kWorkspace };
inline constexpr int kMemoryKinds = 5;
const char* ToString(MemoryKind k);

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  std::array<int64_t, kMemoryKinds> current_by_kind{};  //!< bytes now, by MemoryKind
  std::array<int64_t, kMemoryKinds> at_peak_by_kind{};  //!< the breakdown at the moment of the peak
};

//! Owned backend memory (device memory on an accelerator). Move-only; frees itself.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* backend, void* data, int64_t bytes, MemoryKind kind)
      : backend_(backend), data_(data), bytes_(bytes), kind_(kind) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void Reset();
  float* f32() const { return static_cast<float*>(data_); }
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  int64_t floats() const { return bytes_ / static_cast<int64_t>(sizeof(float)); }
  bool empty() const { return data_ == nullptr; }
  MemoryKind kind() const { return kind_; }

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kWorkspace;
};

//! A collective or point-to-point operation in flight.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  //! Blocks (under the communicator's watchdog) until the operation completes.
  virtual Status Wait() = 0;
};

enum class ReduceOp { kSum, kMax };

//! A group of ranks. Collectives are blocking unless named I*; every blocking wait runs under a
//! watchdog: a peer that never arrives turns into an error naming it, never a hang.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  //! World rank of member `r` (for messages that name a lost peer).
  virtual int WorldRank(int r) const = 0;

  virtual Status AllReduce(float* data, int64_t count, ReduceOp op) = 0;
  virtual Status AllReduce(double* data, int64_t count, ReduceOp op) = 0;
  //! recv[i] = sum over ranks of send[rank() * recv_count + i]; send holds size() * recv_count.
  virtual Status ReduceScatter(const float* send, float* recv, int64_t recv_count) = 0;
  //! recv = concat over ranks of their `send_count` floats. `send` may point into `recv` at this
  //! rank's block (in place).
  virtual Status AllGather(const float* send, float* recv, int64_t send_count) = 0;
  virtual Status Broadcast(float* data, int64_t count, int root) = 0;
  //! Non-blocking: the data is copied into a buffer the communicator owns, so the caller may
  //! reuse `data` at once (pipeline schedules rely on this to avoid send/recv deadlocks).
  virtual Status Send(const float* data, int64_t count, int peer, int tag) = 0;
  //! Blocking receive of exactly `count` floats from `peer` with `tag`.
  virtual Status Recv(float* data, int64_t count, int peer, int tag) = 0;
  //! Waits until every Send of this communicator has been delivered.
  virtual Status FlushSends() = 0;
  virtual Status Barrier() = 0;
  //! Starts an all-reduce (sum) in place; `data` must stay valid until Wait().
  virtual Result<std::unique_ptr<CommRequest>> IAllReduce(float* data, int64_t count) = 0;
  //! Starts a reduce-scatter (sum) with ReduceScatter's layout; both buffers must stay valid until
  //! Wait(). In place when `recv` is this rank's block of `send` (recv == send + rank() * recv_count,
  //! NCCL's convention; then the rest of `send` is undefined afterwards), which every member must
  //! then use; otherwise the buffers must not overlap.
  virtual Result<std::unique_ptr<CommRequest>> IReduceScatter(const float* send, float* recv,
                                                              int64_t recv_count) = 0;
  //! Collective over this communicator: every member passes the member list (ranks of this
  //! communicator, in the new order) of the group it joins; the groups partition the members.
  virtual Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) = 0;
  //! Ends the whole job after an unrecoverable per-rank error (MPI_Abort); no-op locally.
  virtual void Abort(int exit_code) = 0;
};

//! A point in time on the backend's compute stream.
struct Event {
  int64_t ns = 0;
};

enum class Trans { kNo, kYes };

//! Causal self-attention of one micro-batch on this rank's heads. q: [S*B, heads*D],
//! k and v: [S*B, kv_heads*D] (grouped-query: head h reads kv head h / (heads/kv_heads)).
struct AttentionShape {
  int64_t batch = 1;
  int64_t seq = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 1;
  int64_t probs_floats() const { return batch * heads * seq * seq; }
};

struct AdamWParams {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0;
  int64_t step = 1;          //!< 1-based step for bias correction
  double grad_scale = 1.0;   //!< multiplies the gradient first (global-norm clipping)
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;

  // ---- memory -----------------------------------------------------------------------------
  //! Allocates `bytes` (zeroed) and counts them against this backend's peak.
  Result<Buffer> Allocate(int64_t bytes, MemoryKind kind);
  //! Allocate for `count` floats; programmer errors (out of memory) abort with a message.
  Buffer AllocateFloats(int64_t count, MemoryKind kind);
  const MemoryStats& memory() const { return stats_; }
  void ResetPeak();

  // ---- kernels ----------------------------------------------------------------------------
  //! C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C (row-major, leading dimensions given).
  virtual void Gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) = 0;
  virtual void Fill(float* x, int64_t n, float value) = 0;
  virtual void Copy(float* dst, const float* src, int64_t n) = 0;
  //! y += alpha * x
  virtual void Axpy(float* y, const float* x, int64_t n, float alpha) = 0;
  //! Sum of squares in double.
  virtual double SumSquares(const float* x, int64_t n) = 0;
  //! y[r, :] += bias for each of `rows` rows.
  virtual void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) = 0;
  //! dbias += column sums of dy.
  virtual void BiasBackward(const float* dy, float* dbias, int64_t rows, int64_t cols) = 0;

  //! y = (x - mean) * rstd * gamma + beta per row; saves mean and rstd (`rows` each).
  virtual void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                float* rstd, int64_t rows, int64_t cols, float eps) = 0;
  //! dx = d/dx; dgamma, dbeta += (dbeta may be null for bias-free norms).
  virtual void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                                 const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                                 int64_t cols) = 0;
  //! y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps).
  virtual void RmsNormForward(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                              int64_t cols, float eps) = 0;
  virtual void RmsNormBackward(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                               float* dgamma, int64_t rows, int64_t cols) = 0;

  //! GELU, tanh approximation (Hendrycks & Gimpel 2016, eq. for GPT-2).
  virtual void GeluForward(const float* x, float* y, int64_t n) = 0;
  virtual void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) = 0;
  //! y = silu(gate) * up (Shazeer 2020).
  virtual void SwigluForward(const float* gate, const float* up, float* y, int64_t n) = 0;
  virtual void SwigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                              int64_t n) = 0;
  //! Rotary position embedding in place on [S*B, heads*D] (rotate-half form, base 10000,
  //! Su et al. 2021); `inverse` rotates by -theta, which is the backward pass.
  virtual void Rotary(float* x, int64_t seq, int64_t batch, int64_t heads, int64_t head_dim, bool inverse) = 0;

  //! Causal softmax attention. `probs` (optional, probs_floats()) keeps the softmax for backward.
  virtual void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* out,
                                float* probs) = 0;
  //! dq, dk, dv are overwritten. `probs` null: recomputed from q and k (selective recompute).
  virtual void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                 const float* probs, const float* dout, float* dq, float* dk, float* dv) = 0;

  //! out[t, :] = table[tokens[t] - vocab_begin, :] when the token is in [vocab_begin,
  //! vocab_begin + table_rows), else 0 (vocab-parallel embedding, Megatron-LM).
  virtual void EmbeddingForward(const int32_t* tokens, int64_t n, const float* table, int64_t vocab_begin,
                                int64_t table_rows, int64_t hidden, float* out) = 0;
  virtual void EmbeddingBackward(const int32_t* tokens, int64_t n, const float* dout, int64_t vocab_begin,
                                 int64_t table_rows, int64_t hidden, float* dtable) = 0;
  //! Per row: row_max = max over the local vocabulary slice.
  virtual void RowMax(const float* logits, int64_t rows, int64_t cols, float* row_max) = 0;
  //! Per row, with the global `row_max`: sum_exp = sum exp(l - max) over the local slice, and
  //! target_logit = l[target - vocab_begin] when the target is local, else 0.
  virtual void CrossEntropyStats(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                                 const int32_t* targets, int64_t vocab_begin, float* sum_exp,
                                 float* target_logit) = 0;
  //! dlogits = (softmax - onehot(target)) * scale with the global max and sum_exp.
  virtual void CrossEntropyBackward(const float* logits, int64_t rows, int64_t cols, const float* row_max,
                                    const float* sum_exp, const int32_t* targets, int64_t vocab_begin, float scale,
                                    float* dlogits) = 0;

  //! AdamW with decoupled weight decay (Loshchilov & Hutter 2019) and bias correction.
  virtual void AdamW(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) = 0;
  //! Round-to-nearest-even fp32 -> bf16 and back (bf16 as its raw 16 bits).
  virtual void CastToBf16(const float* x, uint16_t* y, int64_t n) = 0;
  virtual void CastFromBf16(const uint16_t* x, float* y, int64_t n) = 0;

  // ---- timing -----------------------------------------------------------------------------
  virtual Event RecordEvent() = 0;
  //! Seconds between two recorded events (waits for the second to complete).
  virtual double ElapsedSeconds(const Event& begin, const Event& end) = 0;
  virtual void Synchronize() = 0;

 protected:
  //! Raw allocation hooks; accounting is done by Allocate()/Buffer.
  virtual void* RawAllocate(int64_t bytes) = 0;
  virtual void RawFree(void* p) = 0;

 private:
  friend class Buffer;
  void Release(void* p, int64_t bytes, MemoryKind kind);
  MemoryStats stats_;
};

}  // namespace parallax::executor

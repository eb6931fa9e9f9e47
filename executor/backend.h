#pragma once
// Backend: the one seam between the parallel runtime and the hardware (DESIGN.md "Executor").
// Typed backend memory with a caching allocator, explicit host<->backend copies, four streams (the
// trace's tracks) ordered by events, kernels, a communicator whose collectives and grouped
// send/recv are enqueued on streams (NCCL's model), and timing events resolved once per step.
// The runtime in executor/runtime/ is written once against this interface and never dereferences
// backend memory on the host; executor/cpu/ implements it with BLAS + MPI, executor/cuda/ with
// cuBLAS + NCCL.
//
// Conventions: matrices are row-major; "tokens" are rows laid out sequence-major (row = position
// * batch + sequence, Megatron's [s, b, h]) so a sequence-parallel shard is a contiguous block of
// rows. Activations and weights are in the compute dtype (fp32, bf16 or fp16); norm statistics,
// gradients of parameters, main weights and Adam state are fp32. Kernels named *Backward
// accumulate parameter gradients (+=) and overwrite input gradients unless they say otherwise.
// Kernels run on the compute stream, in order.
//
// Arguments: a kernel with more than one pointer operand takes one argument struct (below), filled
// by name at the call site: `be.Axpy({.y = sum, .x = part, .n = n, .alpha = 1.0f})`. The structs
// cannot be filled by position (ByName), so two operands in the wrong order do not compile. A new
// operand (attention statistics, a GEMM epilogue's input) is a new field with a default, so call
// sites that do not use it stay as they are.
//
// Errors: kernels return nothing. A kernel that cannot run (scratch memory refused, a launch
// failed, operands it cannot take) keeps its error with Fail(); the backend keeps the first one
// (sticky, as a CUDA context's error is) and returns it from the next WaitEvent, SynchronizeEvent,
// Synchronize or EventTimesNs. The runtime synchronises at the end of every step
// (RuntimeContext::EndStep), so a failed kernel fails the step it ran in.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/dtype.h"
#include "executor/fp8.h"
#include "model/result.h"
#include "model/training_spec.h"

namespace parallax::executor {

struct HostThreads;


class Backend;
class LaunchContext;
class Mailbox;

//! What a tensor holds, for the per-rank memory breakdown (compared with the planner's model).
enum class MemoryKind { kWeights, kGradients, kOptimizer, kActivations, kWorkspace };
inline constexpr int kMemoryKinds = 5;
const char* ToString(MemoryKind k);

struct MemoryStats {
  int64_t current_bytes = 0;  //!< bytes of live tensors
  int64_t peak_bytes = 0;
  std::array<int64_t, kMemoryKinds> current_by_kind{};  //!< bytes now, by MemoryKind
  std::array<int64_t, kMemoryKinds> at_peak_by_kind{};  //!< the breakdown at the moment of the peak
  int64_t reserved_bytes = 0;       //!< live + cached blocks held from the device
  int64_t peak_reserved_bytes = 0;
  int64_t limit_bytes = 0;          //!< the allocator never reserves more than this
};

//! Owned backend memory of `numel` elements of one dtype. Move-only; returns itself to the
//! backend's cache when reset or destroyed.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Backend* backend, void* data, int64_t numel, DType dtype, MemoryKind kind, int64_t block_bytes)
      : backend_(backend), data_(data), numel_(numel), dtype_(dtype), kind_(kind), block_bytes_(block_bytes) {}
  Tensor(Tensor&& o) noexcept { *this = std::move(o); }
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() { Reset(); }

  void Reset();
  DevPtr ptr() const { return DevPtr{data_, dtype_}; }
  DevPtr at(int64_t element) const { return ptr() + element; }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * SizeOf(dtype_); }
  DType dtype() const { return dtype_; }
  bool empty() const { return data_ == nullptr; }
  MemoryKind kind() const { return kind_; }

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
  MemoryKind kind_ = MemoryKind::kWorkspace;
  int64_t block_bytes_ = 0;
};

//! The streams of a rank; each is one track of the trace. kCpComm carries context parallelism's
//! ring exchanges, so they overlap the attention blocks on the compute stream; kEpComm an MoE layer's
//! token all-to-all (dispatch and combine) over the expert-parallel group.
enum class StreamKind { kCompute, kTpComm, kDpComm, kPpComm, kCpComm, kEpComm };
inline constexpr int kStreamKinds = 6;
const char* ToString(StreamKind s);

//! A backend's stream (implementation-specific; the runtime names streams by StreamKind).
class Stream {
 public:
  virtual ~Stream() = default;
  virtual StreamKind kind() const = 0;
};

//! A point in a stream: it completes when all work enqueued on that stream before it has
//! completed. Used to order streams and, resolved once per step, to time ops.
struct Event {
  int64_t id = -1;
  bool valid() const { return id >= 0; }
};

enum class ReduceOp { kSum, kMax };

//! A group of ranks.
//! Host plane (control data on the host: losses, norms, status agreement): blocking calls.
//! Device plane (tensors in backend memory): enqueued on a stream, completing in stream order as
//! NCCL's do; the caller orders them against other streams with events.
//! Every wait runs under a watchdog: a peer that never arrives becomes an error naming the lost
//! rank and the operation, never a hang.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  //! World rank of member `r` (for messages that name a lost peer).
  virtual int WorldRank(int r) const = 0;

  // ---- host plane ---------------------------------------------------------------------------
  virtual Status HostAllReduce(double* data, int64_t count, ReduceOp op) = 0;
  //! recv = concat over ranks of each rank's `bytes` bytes.
  virtual Status HostAllGather(const void* send, void* recv, int64_t bytes) = 0;
  virtual Status Barrier() = 0;

  // ---- device plane (element type = the DevPtr's dtype; float types only) -----------------------
  virtual Status AllReduce(DevPtr data, int64_t count, ReduceOp op, Stream& stream) = 0;
  //! recv[i] = sum over ranks of send[rank() * recv_count + i]. In place when recv is this rank's
  //! block of send (NCCL's convention; the rest of send is undefined afterwards).
  virtual Status ReduceScatter(DevPtr send, DevPtr recv, int64_t recv_count, Stream& stream) = 0;
  //! recv = concat over ranks of their `send_count` elements; send may be this rank's block of recv.
  virtual Status AllGather(DevPtr send, DevPtr recv, int64_t send_count, Stream& stream) = 0;
  virtual Status Broadcast(DevPtr data, int64_t count, int root, Stream& stream) = 0;
  //! Point-to-point, NCCL's semantics: no buffering (the buffer must stay valid until the stream
  //! has passed the operation). Between GroupStart() and GroupEnd() sends and receives are
  //! collected and issued together as one stream operation, so paired exchanges cannot deadlock.
  virtual void GroupStart() = 0;
  virtual Status GroupEnd() = 0;
  //! `tag` tells concurrent exchanges between the same pair apart (MPI matches on it; NCCL matches
  //! by issue order, which the pipeline schedules keep identical on both sides).
  virtual Status Send(DevPtr data, int64_t count, int peer, int tag, Stream& stream) = 0;
  virtual Status Recv(DevPtr data, int64_t count, int peer, int tag, Stream& stream) = 0;

  //! Collective over this communicator: every member passes the member list (ranks of this
  //! communicator, in the new order) of the group it joins; the groups partition the members.
  virtual Result<std::unique_ptr<Communicator>> Split(const std::vector<int>& ranks) = 0;
  //! Ends the whole job after an unrecoverable per-rank error (MPI_Abort); no-op locally.
  virtual void Abort(int exit_code) = 0;
  //! Collective: host-plane messages between the members (executor/mailbox.h), for the classic
  //! modes; a communicator without them says so.
  virtual Result<std::unique_ptr<Mailbox>> OpenMailbox();
};

enum class Trans { kNo, kYes };

//! The first member of every kernel-argument struct. It takes no value, so a struct can only be
//! filled by name (designated initialisers, in declaration order, or member by member), never by
//! position: `NormArgs{x, gamma, ...}` does not compile (tests/executor/backend_args_test.cpp).
struct ByName {
  explicit ByName() = default;
};

//! C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] for b < batch (row-major, leading dimensions
//! and element strides between batch entries given). A and B share a dtype; C may be fp32 while
//! A and B are bf16/fp16 (weight-gradient accumulation into fp32 gradients). Accumulation is fp32.
struct GemmArgs {
  [[no_unique_address]] ByName by_name{};
  Trans ta = Trans::kNo, tb = Trans::kNo;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  DevPtr a{}, b{}, c{};
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

//! Softmax attention of one micro-batch on this rank's heads: `seq` query positions against
//! `kv_seq` key/value positions (0: the same `seq`; ring attention passes one key block). q and out:
//! [seq*batch, heads*D]; k and v: [kv_seq*batch, kv_heads*D], rows sequence-major as every token
//! tensor (grouped-query: head h reads kv head h / (heads/kv_heads)).
//!
//! Visibility: with `causal`, query row i sees key j when j <= i + causal_offset; without it, every
//! key. causal_offset is the query block's first position minus the key block's first position, so
//! ring attention (context parallelism) runs each (query chunk, key chunk) pair as one call:
//!   - the diagonal block (same chunk):              causal, causal_offset = 0;
//!   - a key chunk wholly before the query chunk:    causal = false (fully visible);
//!   - a key chunk wholly after it:                  masked, skip the call (it contributes nothing);
//!   - any other alignment (a half chunk, unequal sizes) follows from the offset.
//! A row that sees no key gets out = 0 and lse = -inf (the identity of the merge below).
//!
//! Local attention (causal only; model/model_spec.h attention_window): with `window` > 0 a query
//! also stops seeing keys from the front. Sliding: the query at absolute position p sees the last
//! `window` positions (p - window, p]; chunked: only its own block of `window` positions,
//! [window * floor(p / window), p]. Absolute positions: query row i is at query_start + i, key j
//! at query_start - causal_offset + j (only chunked needs them).
struct AttentionShape {
  int64_t batch = 1;
  int64_t seq = 1;  //!< query positions
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 1;
  int64_t kv_seq = 0;  //!< key/value positions; 0: seq
  bool causal = true;
  int64_t causal_offset = 0;  //!< query i sees key j when j <= i + causal_offset (causal only)
  int64_t window = 0;         //!< local attention's span; 0: none
  bool chunked = false;       //!< window is a chunk (Llama 4), not a sliding span (gpt-oss)
  int64_t query_start = 0;    //!< absolute position of query row 0 (chunked windows)

  int64_t keys() const { return kv_seq > 0 ? kv_seq : seq; }
  int64_t q_elements() const { return seq * batch * heads * head_dim; }
  int64_t kv_elements() const { return keys() * batch * kv_heads * head_dim; }
  //! fp32 log-sum-exp statistics: one per (query row, head), [seq*batch, heads] like q's rows.
  int64_t stats_floats() const { return seq * batch * heads; }
  //! Keys query row i sees: [FirstVisibleKey(i), VisibleKeys(i)) (empty when first >= end).
  int64_t VisibleKeys(int64_t i) const {
    if (!causal) return keys();
    const int64_t n = i + causal_offset + 1;
    return n < 0 ? 0 : (n > keys() ? keys() : n);
  }
  int64_t FirstVisibleKey(int64_t i) const {
    if (!causal || window <= 0) return 0;
    int64_t first = i + causal_offset - window + 1;  // sliding: the last `window` positions
    if (chunked) {
      const int64_t p = query_start + i;
      first = p / window * window - (query_start - causal_offset);
    }
    return first < 0 ? 0 : (first > keys() ? keys() : first);
  }
  //! Whether some query row sees some key (a ring-attention block that does not is skipped).
  bool AnyVisible() const {
    for (int64_t i = 0; i < seq; ++i) {
      if (FirstVisibleKey(i) < VisibleKeys(i)) return true;
    }
    return false;
  }
};

struct AdamWParams {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0;  //!< applied to tensors whose AdamWTensor::decay is set
  int64_t step = 1;         //!< 1-based step for bias correction
  double grad_scale = 1.0;  //!< multiplies the gradient first (clipping and loss-scale removal)
};

//! One tensor of a multi-tensor AdamW launch. `main` (fp32) is updated; when `model` is set it
//! receives the updated value in its dtype (the bf16/fp16 copy the forward pass reads).
struct AdamWTensor {
  [[no_unique_address]] ByName by_name{};
  DevPtr main{}, grad{}, m{}, v{}, model{};
  int64_t n = 0;
  bool decay = false;
};

struct DevSpan {
  DevPtr p;
  int64_t n = 0;
};

// ---- kernel arguments, one struct per kernel family (Backend's kernels say what each does) -----
// Pointers in the order of the kernel's formula, then sizes. A field marked "optional" may stay null.

//! dst = src (Backend::Copy).
struct CopyArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr dst{}, src{};
  int64_t n = 0;
};

//! dst[r * dst_ld + c] = src[r * src_ld + c], or += with accumulate, for r < rows, c < cols
//! (Backend::Copy2D): a block between two row-strided layouts, as multi-head latent attention moves
//! each head's no-position and rotary parts of its queries and keys.
struct Copy2DArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr dst{}, src{};
  int64_t rows = 0, cols = 0, dst_ld = 0, src_ld = 0;
  bool accumulate = false;
};

//! y += alpha * x (Backend::Axpy).
struct AxpyArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr y{}, x{};
  int64_t n = 0;
  float alpha = 1;
};

//! y[r, :] += bias (Backend::AddBias).
struct BiasArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr y{}, bias{};
  int64_t rows = 0, cols = 0;
};

//! dbias += column sums of dy (Backend::BiasBackward).
struct BiasBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr dy{}, dbias{};
  int64_t rows = 0, cols = 0;
};

//! A norm of each of `rows` rows over `cols` (LayerNorm; RMSNorm reads neither beta nor mean).
struct NormArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, gamma{}, beta{};  //!< beta optional
  DevPtr y{};
  DevPtr mean{}, rstd{};  //!< saved for backward: fp32, one per row
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;  //!< added to the variance (mean square for RMSNorm)
};

//! A norm's backward from what its forward saved. dx is overwritten by *Backward and added to by
//! *BackwardAdd; dgamma and dbeta (optional) accumulate. RMSNorm reads neither mean nor dbeta.
struct NormBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr dy{}, x{}, gamma{}, mean{}, rstd{};
  DevPtr dx{}, dgamma{}, dbeta{};
  int64_t rows = 0, cols = 0;
};

//! A residual join followed by a norm: h = x + residual (+ bias per row), then y = norm(h) as
//! NormArgs. h must not alias x or residual.
struct ResidualNormArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, residual{}, bias{};  //!< the branch, the residual stream, bias optional
  DevPtr gamma{}, beta{};          //!< beta optional
  DevPtr h{}, y{};
  DevPtr mean{}, rstd{};
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;  //!< added to the variance (mean square for RMSNorm)
};

//! out = x + residual (+ bias per row; optional). out must not alias x or residual.
struct ResidualAddArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, residual{}, bias{};
  DevPtr out{};
  int64_t rows = 0, cols = 0;
};

//! y = gelu(x) over n elements.
struct GeluArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, y{};
  int64_t n = 0;
};

//! dx = dy * gelu'(x) over n elements.
struct GeluBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, dy{}, dx{};
  int64_t n = 0;
};

//! x[r, :] += bias (optional), then y = gelu(x), over rows x cols.
struct BiasGeluArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, bias{}, y{};
  int64_t rows = 0, cols = 0;
};

//! dx = dy * gelu'(x); dbias (optional) += column sums of dx.
struct BiasGeluBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{}, dy{}, dx{}, dbias{};
  int64_t rows = 0, cols = 0;
};

//! y = silu(gate) * up over n elements.
struct SwigluArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr gate{}, up{}, y{};
  int64_t n = 0;
};

//! dgate, dup from dy, over n elements.
struct SwigluBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr gate{}, up{}, dy{}, dgate{}, dup{};
  int64_t n = 0;
};

//! Rotary embedding in place on x: [seq * batch, heads * head_dim].
struct RotaryArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{};
  int64_t seq = 0, batch = 0, heads = 0, head_dim = 0;
  int64_t first_position = 0;  //!< the position of x's first row block (a context-parallel chunk's start)
  bool inverse = false;  //!< rotate by -theta: the backward pass
};

//! Attention forward (flash-attention style: keeps statistics, not probabilities). Writes out and
//! lse, lse[t, h] = log sum_j exp(scale q_t,h . k_j) over the keys row t sees (scale 1/sqrt(D)), fp32
//! [seq*batch, heads] (AttentionShape::stats_floats), -inf where the row sees none. lse is optional:
//! null when the caller keeps no statistics (selective recompute reruns the forward in backward).
//! Blocks merge exactly (ring attention): for the (out_i, lse_i) of key blocks i of one query block,
//! lse = log sum_i exp(lse_i) and out = sum_i exp(lse_i - lse) out_i is the attention over their union.
struct AttentionArgs {
  [[no_unique_address]] ByName by_name{};
  AttentionShape shape;
  DevPtr q{}, k{}, v{};
  DevPtr out{}, lse{};
};

//! Attention backward from q, k, v, the forward's out and lse, and dout (Dao 2023, FlashAttention-2
//! algorithm 2): P = exp(scale q k^T - lse) is recomputed per key block, delta = rowsum(dout * out),
//! dS = P (dout v^T - delta) scale. dq, dk, dv are overwritten.
//! Ring attention passes the merged out and lse of the whole query row (not the block's own), with
//! one key block's k and v and that block's shape: each call then yields the exact gradient
//! contributions of that block (dq's part, and dk, dv of the block), which the caller sums.
struct AttentionBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  AttentionShape shape;
  DevPtr q{}, k{}, v{}, out{}, lse{}, dout{};
  DevPtr dq{}, dk{}, dv{};
};

//! Rows of a vocabulary slice [vocab_begin, vocab_begin + table_rows) of a [*, hidden] table,
//! looked up by `n` kI32 indices in backend memory.
struct EmbeddingArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr index{}, table{};
  DevPtr out{};  //!< [n, hidden]
  int64_t n = 0, vocab_begin = 0, table_rows = 0, hidden = 0;
  bool accumulate = false;  //!< add the rows to out instead of writing them
};

//! dtable += the rows of dout by index, over the slice of EmbeddingArgs.
struct EmbeddingBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr index{}, dout{};
  DevPtr dtable{};
  int64_t n = 0, vocab_begin = 0, table_rows = 0, hidden = 0;
};

//! row_max (fp32) = max over each of `rows` rows of `cols` logits.
struct RowMaxArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr logits{}, row_max{};
  int64_t rows = 0, cols = 0;
};

//! Cross-entropy statistics of one vocabulary slice [vocab_begin, vocab_begin + cols) of logits
//! [rows, cols]; targets are kI32 (global vocabulary ids), the statistics fp32, one per row.
struct CrossEntropyStatsArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr logits{}, row_max{}, targets{};
  DevPtr sum_exp{}, target_logit{};
  int64_t rows = 0, cols = 0, vocab_begin = 0;
};

//! The statistics of `parts` vocabulary slices side by side in `stats` combined per row; loss_sum
//! is one kF64.
struct CrossEntropyCombineArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr stats{};
  DevPtr row_max{}, sum_exp{}, loss_sum{};
  int64_t rows = 0, parts = 0;
};

//! dlogits of one vocabulary slice, as CrossEntropyStatsArgs, from the combined row_max and sum_exp.
struct CrossEntropyBackwardArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr logits{}, row_max{}, sum_exp{}, targets{};
  DevPtr dlogits{};
  int64_t rows = 0, cols = 0, vocab_begin = 0;
  float scale = 1;
};

// ---- FP8 (executor/fp8.h: formats, casts, Transformer Engine's delayed scaling) -----------------
// A scaled FP8 tensor is its codes (kE4M3 or kE5M2) plus one fp32 scale in backend memory:
// codes = cast(x * scale), x ~ codes * scale_inv. Scales stay in backend memory so a delayed-scaling
// step never waits for the host (Transformer Engine's and cuBLASLt's convention).

//! y = FP8 cast of x * scale[0] (round to nearest even, saturating); amax[0] (optional, fp32) =
//! max(amax[0], max |x|), NaN-propagating (executor/fp8.h AmaxBits).
struct Fp8CastArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr x{};      //!< fp32, bf16 or fp16
  DevPtr scale{};  //!< one fp32
  DevPtr y{};      //!< kE4M3 or kE5M2
  DevPtr amax{};   //!< optional, one fp32
  int64_t n = 0;
};

//! C = alpha * (a_scale_inv[0] * b_scale_inv[0]) * op(A) op(B) + beta * C, row-major as GemmArgs,
//! A and B FP8 (E4M3 x E4M3, E4M3 x E5M2 or E5M2 x E4M3: cuBLASLt has no E5M2 x E5M2), products
//! accumulated in fp32, C fp32, bf16 or fp16. CPU: emulated exactly (FP8 products are exact in
//! fp32). CUDA: cuBLASLt FP8 matmul (compute capability 8.9 or newer; older GPUs fail with an
//! error saying so), the operands transposed into scratch where cuBLASLt's "TN" rule needs it.
struct Fp8GemmArgs {
  [[no_unique_address]] ByName by_name{};
  Trans ta = Trans::kNo, tb = Trans::kNo;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  DevPtr a{}, b{}, c{};
  DevPtr a_scale_inv{}, b_scale_inv{};  //!< one fp32 each: the operands' dequantization factors
  int64_t lda = 0, ldb = 0, ldc = 0;
};

//! The end-of-step delayed-scaling update of `count` tensors of one format (executor/fp8.h
//! DelayedScalingUpdate): amax_history [recipe.amax_history_len, count] fp32 with this step's amax in
//! row 0; scale and scale_inv `count` fp32, updated.
struct Fp8ScaleUpdateArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr amax_history{}, scale{}, scale_inv{};
  int64_t count = 0;
  Fp8Format format = Fp8Format::kE4M3;
  DelayedScaling recipe{};
};

//! Ring attention's merge of one key block's partial attention (block_out, block_lse) into the
//! running (out, lse) of the same query rows: lse' = log(exp(lse) + exp(block_lse)), out =
//! exp(lse - lse') out + exp(block_lse - lse') block_out. out and block_out [rows, heads*head_dim]
//! in the compute dtype or fp32 (a running sum kept in fp32), lse and block_lse fp32 [rows, heads];
//! a side at -inf (no key seen) adds nothing, and both at -inf leave out and lse as they are.
struct AttentionMergeArgs {
  [[no_unique_address]] ByName by_name{};
  DevPtr out{}, lse{}, block_out{}, block_lse{};
  int64_t rows = 0, heads = 0, head_dim = 0;
};

class Backend {
 public:
  virtual ~Backend();
  Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;
  //! Whether this backend can train in `p` (compute dtype; main weights are fp32 in every case).
  virtual bool SupportsPrecision(Precision p) const = 0;
  //! Bytes of memory the device has (host RAM for the CPU backend); the default allocator limit.
  virtual int64_t DeviceMemoryBytes() const = 0;
  //! The job's communicator over every rank, for this backend's streams (CPU: MPI or the local
  //! size-1 communicator; CUDA: NCCL bootstrapped over MPI). Every wait gives up after `timeout_s`.
  virtual Result<std::unique_ptr<Communicator>> ConnectWorld(LaunchContext& launch, double timeout_s) = 0;
  //! Applies the job's host-thread decision (executor/host_threads.h). CPU: the BLAS and kernel
  //! threads and how waits back off; a GPU backend's host threads only launch, so it keeps none.
  virtual void UseHostThreads(const HostThreads& /*threads*/) {}
  //! Threads one kernel runs on now (the CPU backend asks its BLAS).
  virtual int64_t IntraOpThreads() const { return 1; }
  //! Whether a collective advances only while the rank's host thread polls it between kernels
  //! (CPU: MPI progress) rather than beside them on the device (NCCL). Measured traces record it
  //! (traces::TraceMetadata::comm_progress): a polled collective's slice lasts until the poll that
  //! saw it done, so `refine` reads its cost, not its length, from the compute around it.
  virtual bool CollectivesProgressOnHostThread() const { return false; }

  // ---- memory -----------------------------------------------------------------------------
  //! Allocates `numel` elements (contents undefined) from the caching allocator. Out of memory
  //! (over the limit, or refused by the device) is an error naming the bytes asked for and free.
  Result<Tensor> Allocate(int64_t numel, DType dtype, MemoryKind kind);
  //! Allocate, then fill with zeros on the compute stream.
  Result<Tensor> AllocateZeroed(int64_t numel, DType dtype, MemoryKind kind);
  const MemoryStats& memory() const { return stats_; }
  void ResetPeak();
  //! Caps reserved memory (live + cached); 0 restores the device's size.
  void SetMemoryLimit(int64_t bytes);
  //! Returns cached blocks to the device.
  void EmptyCache();

  //! Host -> backend: `count` elements of `host` (type `host_type`: kF32 or kI32) converted to
  //! dst's dtype. Returns when the host buffer may be reused.
  virtual void CopyToDevice(DevPtr dst, const void* host, DType host_type, int64_t count) = 0;
  //! Backend -> host: waits for the compute stream, converts to `host_type` (kF32, kF64 or kI32).
  virtual void CopyToHost(void* host, DType host_type, DevPtr src, int64_t count) = 0;
  //! Raw bytes in the element type of `src`/`dst` (checkpoints keep weights in their dtype).
  virtual void CopyBytesToHost(void* host, DevPtr src, int64_t count) = 0;
  virtual void CopyBytesToDevice(DevPtr dst, const void* host, int64_t count) = 0;

  // ---- streams and events -----------------------------------------------------------------
  virtual Stream& stream(StreamKind s) = 0;
  //! Marks the current end of stream `s`.
  virtual Event RecordEvent(StreamKind s) = 0;
  //! Later work on `waiter` starts after `e` completes (CPU compute: the host waits here).
  virtual Status WaitEvent(StreamKind waiter, Event e) = 0;
  //! The host waits until `e` completes.
  virtual Status SynchronizeEvent(Event e) = 0;
  //! The host waits until every stream is idle.
  virtual Status Synchronize() = 0;
  //! Nanoseconds from `origin` to each of `events` (all must have completed or complete here).
  virtual Result<std::vector<int64_t>> EventTimesNs(Event origin, std::span<const Event> events) = 0;
  //! Recycles events; a released event may not be used again.
  virtual void ReleaseEvents(std::span<const Event> events) = 0;

  // ---- kernels (compute stream; errors: see "Errors" at the top) --------------------------------
  //! Keeps `e` as this backend's error unless it already has one; later kernels still run.
  virtual void Fail(Error e) = 0;

  virtual void Gemm(const GemmArgs& g) = 0;
  virtual void Fill(DevPtr x, int64_t n, float value) = 0;
  //! dst = src, converting between float dtypes (a cast when they differ).
  virtual void Copy(const CopyArgs& a) = 0;
  //! y += alpha * x
  virtual void Axpy(const AxpyArgs& a) = 0;
  //! y[r, :] += bias for each of `rows` rows.
  virtual void AddBias(const BiasArgs& a) = 0;
  //! dbias += column sums of dy.
  virtual void BiasBackward(const BiasBackwardArgs& a) = 0;

  //! y = (x - mean) * rstd * gamma + beta per row; saves mean and rstd.
  virtual void LayerNormForward(const NormArgs& a) = 0;
  //! dx = d/dx; dgamma, dbeta +=.
  virtual void LayerNormBackward(const NormBackwardArgs& a) = 0;
  //! y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps) (beta and mean are not read).
  virtual void RmsNormForward(const NormArgs& a) = 0;
  virtual void RmsNormBackward(const NormBackwardArgs& a) = 0;

  //! GELU, tanh approximation (Hendrycks & Gimpel 2016, eq. for GPT-2).
  virtual void GeluForward(const GeluArgs& a) = 0;
  virtual void GeluBackward(const GeluBackwardArgs& a) = 0;
  //! y = silu(gate) * up (Shazeer 2020).
  virtual void SwigluForward(const SwigluArgs& a) = 0;
  virtual void SwigluBackward(const SwigluBackwardArgs& a) = 0;
  //! Rotary position embedding in place (rotate-half form, base 10000, Su et al. 2021).
  virtual void Rotary(const RotaryArgs& a) = 0;

  //! Softmax attention (AttentionShape: causal by default, or one ring-attention block): out and the
  //! fp32 row log-sum-exp, never the s x s probabilities (AttentionArgs says how blocks merge).
  virtual void AttentionForward(const AttentionArgs& a) = 0;
  //! dq, dk, dv (overwritten) from out, lse and dout; the probabilities are recomputed from q and k.
  virtual void AttentionBackward(const AttentionBackwardArgs& a) = 0;

  //! out[t, :] (+)= table[index[t] - vocab_begin, :] when the index is in [vocab_begin,
  //! vocab_begin + table_rows), else 0 (+0) (vocab-parallel embedding, Megatron-LM). With
  //! `accumulate` the rows are added to `out` (position embeddings).
  virtual void EmbeddingForward(const EmbeddingArgs& a) = 0;
  //! dtable[index[t] - vocab_begin, :] += dout[t, :] for local indices, summed in a fixed order
  //! (deterministic), in one launch.
  virtual void EmbeddingBackward(const EmbeddingBackwardArgs& a) = 0;
  //! Per row: row_max (fp32) = max over the local vocabulary slice.
  virtual void RowMax(const RowMaxArgs& a) = 0;
  //! Per row, with `row_max` (the slice's own, or any value at or above it): sum_exp = sum exp(l -
  //! max) over the local slice, and target_logit = l[target - vocab_begin] when the target is
  //! local, else 0 (both fp32).
  virtual void CrossEntropyStats(const CrossEntropyStatsArgs& a) = 0;
  //! Combines `parts` vocabulary slices' statistics, laid out side by side (fp32): slice p at
  //! stats + 3 rows p holds [row max | sum_exp relative to that max | target logit], as RowMax and
  //! CrossEntropyStats write them. Per row: row_max = M = the max over slices, sum_exp = sum over
  //! slices of sum_exp_p exp(max_p - M) (fp32 outputs); loss_sum (one kF64) += sum over rows of
  //! log(sum_exp) + M - sum over slices of target_logit_p.
  virtual void CrossEntropyCombine(const CrossEntropyCombineArgs& a) = 0;
  //! dlogits = (softmax - onehot(target)) * scale with the global max and sum_exp.
  virtual void CrossEntropyBackward(const CrossEntropyBackwardArgs& a) = 0;

  //! Merges a key block's partial attention into the running one (AttentionMergeArgs).
  virtual void AttentionMerge(const AttentionMergeArgs& a) = 0;

  //! AdamW with decoupled weight decay (Loshchilov & Hutter 2019) and bias correction over many
  //! tensors in one launch.
  virtual void MultiTensorAdamW(std::span<const AdamWTensor> tensors, const AdamWParams& p) = 0;
  //! out (one kF64) += sum of squares of every span, in one launch. Non-finite inputs make it
  //! non-finite (fp16 overflow detection relies on this).
  virtual void MultiTensorSumSquares(std::span<const DevSpan> spans, DevPtr out) = 0;

  // ---- FP8 (compute stream; the structs above say what each does) ------------------------------
  // Defaults fail with an error naming the backend: a backend without FP8 refuses fp8 plans at the
  // first kernel instead of computing something else.
  virtual void Fp8Cast(const Fp8CastArgs& a);
  virtual void Fp8Gemm(const Fp8GemmArgs& g);
  virtual void Fp8ScaleUpdate(const Fp8ScaleUpdateArgs& a);

  // ---- fused chains (compute stream) --------------------------------------------------------
  // Elementwise chains the runtime runs back to back. Each has a generic default composed from
  // the kernels above, in the runtime's former order (so a backend that does not override them
  // computes exactly what the unfused sequence did); a backend overrides them with one kernel
  // that reads each row once (CPU: executor/cpu/fused_kernels.h).

  //! x[r, :] += bias (x keeps the biased pre-activation for backward; no bias when null), then
  //! y = gelu(x). Default: AddBias, GeluForward.
  virtual void BiasGeluForward(const BiasGeluArgs& a);
  //! dx = dy * gelu'(x); dbias += column sums of dx (skipped when null). Default: GeluBackward,
  //! BiasBackward.
  virtual void BiasGeluBackward(const BiasGeluBackwardArgs& a);
  //! out = x + residual (+ bias per row when set): a residual join not followed by a norm in the
  //! same layer. Default: Copy, Axpy, AddBias.
  virtual void ResidualAdd(const ResidualAddArgs& a);
  //! A strided block copy (Copy2DArgs). Default: one Copy (or Axpy when accumulating) per row.
  virtual void Copy2D(const Copy2DArgs& a);
  //! h = x + residual (+ bias per row when set), then y = LayerNorm(h) with mean and rstd saved as
  //! LayerNormForward does. Default: Copy, Axpy, AddBias, LayerNormForward.
  virtual void ResidualLayerNormForward(const ResidualNormArgs& a);
  //! h = x + residual (+ bias), then y = RMSNorm(h). Default: Copy, Axpy, AddBias, RmsNormForward.
  virtual void ResidualRmsNormForward(const ResidualNormArgs& a);
  //! dx += LayerNorm's input gradient (dx is the residual stream's gradient, which the norm branch
  //! joins); dgamma, dbeta +=. Default: LayerNormBackward into a workspace tensor, then Axpy; a
  //! refused workspace is kept with Fail().
  virtual void LayerNormBackwardAdd(const NormBackwardArgs& a);
  //! dx += RMSNorm's input gradient; dgamma +=. Default: RmsNormBackward into workspace, Axpy.
  virtual void RmsNormBackwardAdd(const NormBackwardArgs& a);

 protected:
  //! Raw device allocation hooks (nullptr when the device refuses); accounting and caching are
  //! done by Allocate()/Tensor.
  virtual void* RawAllocate(int64_t bytes) = 0;
  virtual void RawFree(void* p) = 0;
  //! Releases every cached block; derived destructors call it while their device is alive.
  void ReleaseCache();

 private:
  friend class Tensor;
  void Release(void* p, int64_t numel_bytes, int64_t block_bytes, MemoryKind kind);
  struct Cache;
  std::unique_ptr<Cache> cache_;
  MemoryStats stats_;
};

//! Ranks as error messages print them: "[0,1,3]".
std::string RankList(const std::vector<int>& ranks);

}  // namespace parallax::executor

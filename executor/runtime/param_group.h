#pragma once
// A parameter group: the parameters of one transformer layer, the word embedding, the position
// embedding or the head, stored as one flat buffer of this rank's tensor-parallel shards. The
// group is also the unit of ZeRO partitioning (padded to a multiple of dp, split into dp equal
// shards) and the bucket of DP gradient synchronisation.
//
//   zero 0: full params, full grads, full Adam state (and full fp32 main weights in mixed precision)
//   zero 1: full params, full grads, Adam state of this rank's shard (Rajbhandari et al. 2020, P_os);
//           after the step's DP reduce-scatter only the shard of the gradient buffer is meaningful
//   zero 2: + gradients kept only for the shard; a full gradient exists transiently while one
//           backward pass of the group runs, then is reduce-scattered into the shard (P_os+g)
//   zero 3: + parameters kept only for the shard, all-gathered before each use and freed (P_os+g+p)

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/runtime/fp8_linear.h"
#include "executor/runtime/op_recorder.h"
#include "model/param_groups.h"

namespace parallax::executor {
struct RuntimeContext;
}

namespace parallax::executor {

enum class ShardDim { kNone, kRows, kCols };
enum class InitKind { kNormal, kOnes, kZeros };

//! One logical parameter of the model (global shape) and how this rank holds it.
struct ParamSpec {
  std::string name;  //!< logical name ("layer3.wq"), identical in every layout: it seeds init
  int64_t rows = 1;  //!< global shape [rows, cols] (a vector is [1, n])
  int64_t cols = 1;
  ShardDim shard = ShardDim::kNone;  //!< tensor-parallel split
  InitKind init = InitKind::kNormal;
  float std = 0.02f;
  bool weight_decay = false;
  //! The gradient is a partial sum per TP rank under sequence parallelism (norm weights, biases
  //! added after a reduce-scatter, position embedding): all-reduced over TP before DP sync.
  bool sequence_parallel_partial = false;
  //! The gradient is a partial sum per TP rank in every layout with tp > 1 (an MoE router: each TP
  //! rank routes its own share of the tokens): all-reduced over TP before DP sync.
  bool tp_partial = false;

  // Filled by ParamGroup:
  int64_t local_rows = 0, local_cols = 0;
  int64_t row0 = 0, col0 = 0;  //!< where the local shard starts in the global tensor
  int64_t offset = 0;          //!< in the group's flat buffer
  int64_t numel() const { return local_rows * local_cols; }
  bool tp_replicated() const { return shard == ShardDim::kNone; }
};

//! How a group is sharded: over its reduction group (model/param_groups.h ParamGroupDef::reduced_over),
//! `dp` ranks of which this is `dp_idx`.
struct ZeroConfig {
  int64_t stage = 0;
  int64_t dp = 1;
  int64_t dp_idx = 0;
  ReductionGroup group = ReductionGroup::kDpCp;
};

//! ZeroConfig of a group defined by `def` on this rank: the layout's ZeRO stage over the ranks of
//! def.reduced_over.
ZeroConfig ZeroConfigFor(const RuntimeContext& ctx, const ParamGroupDef& def);
//! The communicator of reduction group `g`: a group's gradient reduction and ZeRO gathers run on it.
Communicator& ReductionComm(const RuntimeContext& ctx, ReductionGroup g);

class ParamGroup {
 public:
  ParamGroup(std::string name, std::vector<ParamSpec> params, int64_t tp, int64_t tp_idx);

  const std::string& name() const { return name_; }
  const std::vector<ParamSpec>& params() const { return specs_; }
  const ParamSpec& spec(size_t i) const { return specs_[i]; }
  //! The delayed-scaling state of the group's FP8 GEMMs (Precision::kFp8 layer groups), or null.
  Fp8Scales* fp8() const { return fp8_.get(); }
  void set_fp8(std::unique_ptr<Fp8Scales> s) { fp8_ = std::move(s); }

  //! Allocates and initialises this rank's storage from `seed` (counter-based, layout
  //! independent): model weights in `compute` dtype, and with a half `compute` a separate fp32
  //! main copy over the optimizer's range (Megatron's mixed precision: 2 + 4 + 12 bytes per
  //! parameter, the 12 of main weights and Adam moments sharded from ZeRO-1). The values are
  //! generated on up to `threads` host threads (the same values for any count).
  Status Materialize(Backend& backend, const ZeroConfig& zero, int64_t seed, DType compute, int64_t threads = 1);

  int64_t size() const { return size_; }        //!< elements of this rank's TP shards
  int64_t padded() const { return padded_; }    //!< size rounded up to a multiple of dp
  int64_t shard_size() const { return padded_ / zero_.dp; }
  int64_t shard_begin() const { return zero_.dp_idx * shard_size(); }
  //! Range of the flat buffer this rank's optimizer updates.
  int64_t opt_begin() const { return zero_.stage == 0 ? 0 : shard_begin(); }
  int64_t opt_size() const { return zero_.stage == 0 ? padded_ : shard_size(); }
  const ZeroConfig& zero() const { return zero_; }
  DType compute() const { return compute_; }
  bool has_main_copy() const { return !main_.empty(); }

  //! Makes full parameters available (ZeRO-3: all-gather over dp into a transient buffer, on the
  //! dp stream, reference counted; the compute stream waits for it). Other stages: no-op.
  Status Acquire(RuntimeContext& ctx, int64_t trace_layer);
  void Release();
  //! ZeRO-3: starts the all-gather of the full parameters on the dp stream now (the compute stream
  //! does not wait), so it overlaps the layer computing; the Acquire that follows only waits for
  //! it. Layers are prefetched as model/param_groups.h prefetch_ahead defines (memory: the current
  //! and the prefetched layer). No-op for other stages or when the parameters are already gathered.
  Status Prefetch(RuntimeContext& ctx, int64_t trace_layer);
  //! Parameter `i` in the compute dtype (valid while acquired under ZeRO-3).
  DevPtr param(size_t i) const;
  //! Before a backward pass: ZeRO 2/3 allocate the transient full gradient if absent and zero it
  //! (recorded as a grad_zero op); FlushMicrobatchGrads() reduces it into the shard.
  Status EnsureGrads(RuntimeContext& ctx);
  //! fp32 gradient of parameter `i` for accumulation (+=); call EnsureGrads(ctx) first.
  DevPtr grad(size_t i) const;
  bool has_transient_grad() const { return !grad_temp_.empty(); }

  // Storage the optimizer, grad sync and checkpoints work on.
  //! Model weights (compute dtype): full (zero<3) or shard (zero 3).
  const Tensor& values() const { return values_; }
  Tensor& values() { return values_; }
  //! fp32 main weights over the optimizer's range (the model weights themselves in fp32 training).
  DevPtr main_at(int64_t flat) const {
    return has_main_copy() ? main_.at(flat - opt_begin()) : values_.at(param_storage_index(flat));
  }
  const Tensor& main_copy() const { return main_; }
  Tensor& main_copy() { return main_; }
  const Tensor& grads() const { return grads_; }       //!< fp32: full (zero<2) or shard (zero>=2)
  Tensor& transient_grads() { return grad_temp_; }
  Tensor TakeTransientGrads() { return std::move(grad_temp_); }
  Tensor& adam_m() { return m_; }
  Tensor& adam_v() { return v_; }
  //! Offset of flat element `i` in values() (shard-relative under ZeRO-3).
  int64_t param_storage_index(int64_t i) const { return zero_.stage == 3 ? i - shard_begin() : i; }
  int64_t grad_storage_index(int64_t i) const { return zero_.stage >= 2 ? i - shard_begin() : i; }
  int64_t params_storage_size() const { return zero_.stage == 3 ? shard_size() : padded_; }
  int64_t grads_storage_size() const { return zero_.stage >= 2 ? shard_size() : padded_; }

  //! Whether this copy counts in the global gradient norm (false for the last stage's copy of
  //! a tied word embedding, which the first stage already counts).
  bool counts_in_norm = true;
  //! A layer's routed experts (model/param_groups.h kExperts): whole on every rank (etp = 1) yet
  //! distinct across the tp ranks, so every rank counts its shard in the gradient norm.
  bool experts = false;
  int64_t layer = -1;  //!< global layer for trace identities (-1: embedding/head)
  int64_t stage = -1;  //!< model stage that holds the group

  //! DP gradient sync in flight: completes at `done` (an event on the dp stream); `reduce_buffer`
  //! holds the low-precision copy when gradients are reduced in bf16/fp16; ZeRO-2/3 keep the
  //! transient gradient and the received shard alive until the sync is folded in.
  struct PendingSync {
    Event done;
    int64_t microbatch = -1;  //!< ZeRO-2/3: the micro-batch whose gradient it reduces (identity of its fold)
    Tensor reduce_buffer;
    Tensor transient;
    Tensor part;
  };
  std::vector<PendingSync> pending;

 private:
  std::string name_;
  std::vector<ParamSpec> specs_;
  int64_t size_ = 0;
  int64_t padded_ = 0;
  ZeroConfig zero_;
  DType compute_ = DType::kF32;
  Backend* backend_ = nullptr;
  Tensor values_;
  Tensor main_;
  Tensor gathered_;  // ZeRO-3 transient full parameters
  int acquired_ = 0;
  bool prefetched_ = false;  // gathered_ holds a prefetch the compute stream has not waited for
  Event prefetch_done_;
  Tensor grads_;
  Tensor grad_temp_;
  Tensor m_, v_;
  std::unique_ptr<Fp8Scales> fp8_;

  //! ZeRO-3: this rank's shard into the gathered buffer before its all-gather (a shard_copy op).
  void CopyShard(RuntimeContext& ctx, DevPtr dst, int64_t trace_layer);
  //! ZeRO-3: all-gathers the full parameters into a new gathered_ buffer on the dp stream (the
  //! compute stream waits for it when `compute_waits`).
  Status Gather(RuntimeContext& ctx, int64_t trace_layer, bool compute_waits);
};

}  // namespace parallax::executor

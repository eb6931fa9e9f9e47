#pragma once
// A parameter group: the parameters of one transformer layer, the word embedding, the position
// embedding or the head, stored as one flat buffer of this rank's tensor-parallel shards. The
// group is also the unit of ZeRO partitioning (padded to a multiple of dp, split into dp equal
// shards) and the bucket of DP gradient synchronisation.
//
//   zero 0: full params, full grads, full Adam state
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
#include "executor/runtime/op_recorder.h"

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

  // Filled by ParamGroup:
  int64_t local_rows = 0, local_cols = 0;
  int64_t row0 = 0, col0 = 0;  //!< where the local shard starts in the global tensor
  int64_t offset = 0;          //!< in the group's flat buffer
  int64_t numel() const { return local_rows * local_cols; }
  bool tp_replicated() const { return shard == ShardDim::kNone; }
};

struct ZeroConfig {
  int64_t stage = 0;
  int64_t dp = 1;
  int64_t dp_idx = 0;
};

class ParamGroup {
 public:
  ParamGroup(std::string name, std::vector<ParamSpec> params, int64_t tp, int64_t tp_idx);

  const std::string& name() const { return name_; }
  const std::vector<ParamSpec>& params() const { return specs_; }
  const ParamSpec& spec(size_t i) const { return specs_[i]; }

  //! Allocates and initialises this rank's storage from `seed` (counter-based, layout independent).
  void Materialize(Backend& backend, const ZeroConfig& zero, int64_t seed);

  int64_t size() const { return size_; }        //!< floats of this rank's TP shards
  int64_t padded() const { return padded_; }    //!< size rounded up to a multiple of dp
  int64_t shard_size() const { return padded_ / zero_.dp; }
  int64_t shard_begin() const { return zero_.dp_idx * shard_size(); }
  //! Range of the flat buffer this rank's optimizer updates.
  int64_t opt_begin() const { return zero_.stage == 0 ? 0 : shard_begin(); }
  int64_t opt_size() const { return zero_.stage == 0 ? padded_ : shard_size(); }
  const ZeroConfig& zero() const { return zero_; }

  //! Makes full parameters available (ZeRO-3: all-gather over dp into a transient buffer;
  //! reference counted). Other stages: no-op.
  Status Acquire(Communicator& dp, OpRecorder& rec, int64_t trace_layer);
  void Release();
  //! Parameter `i` (valid while acquired under ZeRO-3).
  float* param(size_t i) const;
  //! Gradient of parameter `i` for accumulation (+=). ZeRO 2/3: a transient full gradient,
  //! allocated zeroed on first use and reduced into the shard by FlushGradients().
  float* grad(size_t i);
  bool has_transient_grad() const { return !grad_temp_.empty(); }

  // Storage the optimizer, grad sync and checkpoints work on.
  float* params_storage() const { return values_.f32(); }  //!< full (zero<3) or shard (zero 3)
  float* grads_storage() const { return grads_.f32(); }    //!< full (zero<2) or shard (zero>=2)
  float* transient_grads() const { return grad_temp_.f32(); }
  void FreeTransientGrads() { grad_temp_.Reset(); }
  float* adam_m() const { return m_.f32(); }
  float* adam_v() const { return v_.f32(); }
  //! Offset of flat element `i` in params_storage() (shard-relative under ZeRO-3).
  int64_t param_storage_index(int64_t i) const { return zero_.stage == 3 ? i - shard_begin() : i; }
  int64_t grad_storage_index(int64_t i) const { return zero_.stage >= 2 ? i - shard_begin() : i; }
  int64_t params_storage_size() const { return zero_.stage == 3 ? shard_size() : padded_; }
  int64_t grads_storage_size() const { return zero_.stage >= 2 ? shard_size() : padded_; }

  //! Whether this copy counts in the global gradient norm (false for the last stage's copy of
  //! a tied word embedding, which the first stage already counts).
  bool counts_in_norm = true;
  //! Pending asynchronous DP gradient sync (ZeRO-0 all-reduce, ZeRO-1 reduce-scatter).
  std::unique_ptr<CommRequest> pending_sync;
  int64_t layer = -1;  //!< global layer for trace identities (-1: embedding/head)
  int64_t stage = -1;  //!< model stage that holds the group

 private:
  std::string name_;
  std::vector<ParamSpec> specs_;
  int64_t size_ = 0;
  int64_t padded_ = 0;
  ZeroConfig zero_;
  Backend* backend_ = nullptr;
  Buffer values_;
  Buffer gathered_;  // ZeRO-3 transient full parameters
  int acquired_ = 0;
  Buffer grads_;
  Buffer grad_temp_;
  Buffer m_, v_;
};

}  // namespace parallax::executor

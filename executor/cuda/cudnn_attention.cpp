// cuDNN SDPA forward through the backend API (cudnn_attention.h). The graph follows cuDNN's
// documented flash-attention forward pattern (cuDNN Developer Guide, Graph API, "Specialized Runtime
// Fusion Engines": matmul, pointwise scale, the causal mask from two GEN_INDEX, CMP_GE and
// BINARY_SELECT, max and sum reductions, exp, the statistics max + log(sum), matmul with V).
#include "executor/cuda/cudnn_attention.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace parallax::executor::gpu {
namespace {

// Unique ids of the graph's non-virtual tensors (the variant pack names them).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kNegInf, kOffset, kFirstVirtual = 100 };

cudnnDataType_t CudnnType(DType t) {
  switch (t) {
    case DType::kBf16: return CUDNN_DATA_BFLOAT16;
    case DType::kF16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_FLOAT;
  }
}

//! One backend descriptor (RAII); the first failing call is kept with the step that made it.
class Desc {
 public:
  Desc(const CudnnApi* api, cudnnBackendDescriptorType_t type, std::string what) : api_(api), what_(std::move(what)) {
    status_ = api_->CreateDescriptor(type, &d_);
  }
  ~Desc() {
    if (d_ != nullptr) api_->DestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : api_(o.api_), d_(std::exchange(o.d_, nullptr)), status_(o.status_), what_(std::move(o.what_)) {}
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc& operator=(Desc&&) = delete;

  Desc& Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* value) {
    if (status_ == CUDNN_STATUS_SUCCESS) status_ = api_->SetAttribute(d_, name, type, count, value);
    return *this;
  }
  Desc& Int(cudnnBackendAttributeName_t name, int64_t v) { return Set(name, CUDNN_TYPE_INT64, 1, &v); }
  Desc& Ints(cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
    return Set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
  }
  Desc& Type(cudnnBackendAttributeName_t name, cudnnDataType_t t) { return Set(name, CUDNN_TYPE_DATA_TYPE, 1, &t); }
  Desc& Bool(cudnnBackendAttributeName_t name, bool b) { return Set(name, CUDNN_TYPE_BOOLEAN, 1, &b); }
  Desc& Ref(cudnnBackendAttributeName_t name, const Desc& other) {
    return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &other.d_);
  }
  Desc& Finalize() {
    if (status_ == CUDNN_STATUS_SUCCESS) status_ = api_->Finalize(d_);
    return *this;
  }
  cudnnBackendDescriptor_t Raw() const { return d_; }
  bool Ok() const { return status_ == CUDNN_STATUS_SUCCESS; }
  //! The first failure, as "cuDNN SDPA: <step>: <status>".
  Error Fail() const { return IoError("cuDNN SDPA: " + what_ + ": " + api_->GetErrorString(status_)); }

 private:
  const CudnnApi* api_;
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
  std::string what_;
};

//! Builds the operation graph: tensors and operations, each finalized as it is made.
class GraphBuilder {
 public:
  explicit GraphBuilder(const CudnnApi* api) : api_(api) {}

  //! A tensor; virtual ones (intermediates) get ids from kFirstVirtual on.
  Result<const Desc*> Tensor(int64_t uid, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                             cudnnDataType_t t, bool is_virtual = false, bool by_value = false) {
    if (is_virtual) uid = next_virtual_++;
    Desc d(api_, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + std::to_string(uid));
    d.Type(CUDNN_ATTR_TENSOR_DATA_TYPE, t)
        .Ints(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .Ints(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .Int(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .Int(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .Bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
    if (by_value) d.Bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
    d.Finalize();
    return Keep(std::move(d));
  }

  //! y = mode(x, b) (b optional; t the select's condition; axis for GEN_INDEX).
  Status Pointwise(cudnnPointwiseMode_t mode, const Desc* x, const Desc* b, const Desc* y, const Desc* t = nullptr,
                   int64_t axis = -1) {
    Desc pw(api_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise mode " + std::to_string(mode));
    pw.Set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode).Type(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_DATA_FLOAT);
    if (axis >= 0) pw.Int(CUDNN_ATTR_POINTWISE_AXIS, axis);
    PX_ASSIGN(const Desc* kept, Keep(std::move(pw.Finalize())));
    Desc op(api_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op " + std::to_string(mode));
    op.Ref(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *kept).Ref(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x);
    if (b != nullptr) op.Ref(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t != nullptr) op.Ref(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.Ref(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y);
    return AddOp(std::move(op.Finalize()));
  }

  Status Matmul(const Desc* a, const Desc* b, const Desc* c) {
    Desc mm(api_, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    PX_ASSIGN(const Desc* kept, Keep(std::move(mm.Type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).Finalize())));
    Desc op(api_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
    op.Ref(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a)
        .Ref(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b)
        .Ref(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c)
        .Ref(CUDNN_ATTR_OPERATION_MATMUL_DESC, *kept);
    return AddOp(std::move(op.Finalize()));
  }

  Status Reduce(cudnnReduceTensorOp_t mode, const Desc* x, const Desc* y) {
    Desc r(api_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    r.Set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .Type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
    PX_ASSIGN(const Desc* kept, Keep(std::move(r.Finalize())));
    Desc op(api_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
    op.Ref(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x)
        .Ref(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y)
        .Ref(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *kept);
    return AddOp(std::move(op.Finalize()));
  }

  //! The operation graph of every op added, on `handle`.
  Result<Desc> Graph(cudnnHandle_t handle) {
    std::vector<cudnnBackendDescriptor_t> ops;
    for (const Desc* o : ops_) ops.push_back(o->Raw());
    Desc g(api_, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    g.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()), ops.data())
        .Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .Finalize();
    if (!g.Ok()) return g.Fail();
    return g;
  }

 private:
  Result<const Desc*> Keep(Desc d) {
    if (!d.Ok()) return d.Fail();
    kept_.push_back(std::make_unique<Desc>(std::move(d)));
    return kept_.back().get();
  }
  Status AddOp(Desc op) {
    PX_ASSIGN(const Desc* kept, Keep(std::move(op)));
    ops_.push_back(kept);
    return {};
  }

  const CudnnApi* api_;
  int64_t next_virtual_ = kFirstVirtual;
  std::vector<std::unique_ptr<Desc>> kept_;
  std::vector<const Desc*> ops_;
};

// Row-major strides of dims.
std::vector<int64_t> Packed(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) s[i - 1] = s[i] * dims[i];
  return s;
}

// The forward graph of AttentionShape `s` in dtype `dt` (cudnn_attention.h).
Status BuildForward(GraphBuilder& g, const AttentionShape& s, DType dt) {
  const int64_t B = s.batch, H = s.heads, Hk = s.kv_heads, S = s.seq, Sk = s.keys(), D = s.head_dim;
  const cudnnDataType_t io = CudnnType(dt), f32 = CUDNN_DATA_FLOAT;
  PX_ASSIGN(const Desc* q, g.Tensor(kQ, {B, H, S, D}, {H * D, D, B * H * D, 1}, io));
  PX_ASSIGN(const Desc* kt, g.Tensor(kK, {B, Hk, D, Sk}, {Hk * D, D, 1, B * Hk * D}, io));
  PX_ASSIGN(const Desc* v, g.Tensor(kV, {B, Hk, Sk, D}, {Hk * D, D, B * Hk * D, 1}, io));
  PX_ASSIGN(const Desc* o, g.Tensor(kO, {B, H, S, D}, {H * D, D, B * H * D, 1}, io));
  PX_ASSIGN(const Desc* stats, g.Tensor(kStats, {B, H, S, 1}, {H * S, S, 1, 1}, f32));
  PX_ASSIGN(const Desc* scale, g.Tensor(kScale, {1, 1, 1, 1}, {1, 1, 1, 1}, f32, false, true));
  const std::vector<int64_t> sd{B, H, S, Sk}, rd{B, H, S, 1};
  auto scores = [&](cudnnDataType_t t) { return g.Tensor(0, sd, Packed(sd), t, true); };
  PX_ASSIGN(const Desc* s1, scores(f32));
  PX_TRY(g.Matmul(q, kt, s1));
  PX_ASSIGN(const Desc* s2, scores(f32));
  PX_TRY(g.Pointwise(CUDNN_POINTWISE_MUL, s1, scale, s2));
  const Desc* masked = s2;
  if (s.causal) {  // key j visible to query i when i + offset >= j
    PX_ASSIGN(const Desc* row, scores(CUDNN_DATA_INT32));
    PX_ASSIGN(const Desc* col, scores(CUDNN_DATA_INT32));
    PX_TRY(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, s2, nullptr, row, nullptr, 2));
    PX_TRY(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, s2, nullptr, col, nullptr, 3));
    if (s.causal_offset != 0) {
      PX_ASSIGN(const Desc* off, g.Tensor(kOffset, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT32, false, true));
      PX_ASSIGN(const Desc* shifted, scores(CUDNN_DATA_INT32));
      PX_TRY(g.Pointwise(CUDNN_POINTWISE_ADD, row, off, shifted));
      row = shifted;
    }
    PX_ASSIGN(const Desc* visible, scores(CUDNN_DATA_BOOLEAN));
    PX_TRY(g.Pointwise(CUDNN_POINTWISE_CMP_GE, row, col, visible));
    PX_ASSIGN(const Desc* neg_inf, g.Tensor(kNegInf, {1, 1, 1, 1}, {1, 1, 1, 1}, f32, false, true));
    PX_ASSIGN(const Desc* s3, scores(f32));
    PX_TRY(g.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, s2, neg_inf, s3, visible));
    masked = s3;
  }
  PX_ASSIGN(const Desc* mx, g.Tensor(0, rd, Packed(rd), f32, true));
  PX_TRY(g.Reduce(CUDNN_REDUCE_TENSOR_MAX, masked, mx));
  PX_ASSIGN(const Desc* centred, scores(f32));
  PX_TRY(g.Pointwise(CUDNN_POINTWISE_SUB, masked, mx, centred));
  PX_ASSIGN(const Desc* e, scores(f32));
  PX_TRY(g.Pointwise(CUDNN_POINTWISE_EXP, centred, nullptr, e));
  PX_ASSIGN(const Desc* sum, g.Tensor(0, rd, Packed(rd), f32, true));
  PX_TRY(g.Reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum));
  PX_ASSIGN(const Desc* log_sum, g.Tensor(0, rd, Packed(rd), f32, true));
  PX_TRY(g.Pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum));
  PX_TRY(g.Pointwise(CUDNN_POINTWISE_ADD, mx, log_sum, stats));
  PX_ASSIGN(const Desc* p, scores(io));
  PX_TRY(g.Pointwise(CUDNN_POINTWISE_DIV, e, sum, p));
  return g.Matmul(p, v, o);
}

}  // namespace

struct CudnnAttention::Plan {
  Desc plan;
  int64_t workspace_bytes = 0;
  bool causal = true, offset = false;
};

Result<std::unique_ptr<CudnnAttention>> CudnnAttention::Create() {
  PX_ASSIGN(const CudnnApi* api, LoadCudnn());
  cudnnHandle_t h = nullptr;
  if (const cudnnStatus_t st = api->Create(&h); st != CUDNN_STATUS_SUCCESS) {
    return IoError(std::string("cudnnCreate (") + api->path + "): " + api->GetErrorString(st));
  }
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(api, h));
}

CudnnAttention::CudnnAttention(const CudnnApi* api, cudnnHandle_t handle) : api_(api), handle_(handle) {}

CudnnAttention::~CudnnAttention() {
  plans_.clear();  // plans before the handle they were built on
  if (handle_ != nullptr) api_->Destroy(handle_);
}

Result<CudnnAttention::Plan*> CudnnAttention::PlanFor(const AttentionShape& s, DType dt) {
  const Key key{static_cast<int>(dt), s.batch, s.seq, s.keys(), s.heads, s.kv_heads, s.head_dim, s.causal,
                s.causal ? s.causal_offset : 0};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  GraphBuilder g(api_);
  PX_TRY(BuildForward(g, s, dt));
  PX_ASSIGN(Desc graph, g.Graph(handle_));
  Desc heur(api_, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.Ref(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
      .Finalize();
  if (!heur.Ok()) return heur.Fail();
  int64_t count = 0;
  api_->GetAttribute(heur.Raw(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(api_, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    raw.push_back(cfgs.back().Raw());
  }
  int64_t got = 0;
  if (count > 0) {
    api_->GetAttribute(heur.Raw(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                       raw.data());
  }
  std::string refused;
  for (int64_t i = 0; i < got; ++i) {  // the first configuration cuDNN can build a plan for
    Desc plan(api_, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
    plan.Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_)
        .Ref(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[static_cast<size_t>(i)])
        .Finalize();
    if (!plan.Ok()) {
      refused = plan.Fail().message;
      continue;
    }
    auto p = std::make_unique<Plan>(Plan{std::move(plan), 0, s.causal, s.causal && s.causal_offset != 0});
    int64_t n = 0;
    api_->GetAttribute(p->plan.Raw(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                       &p->workspace_bytes);
    return (plans_[key] = std::move(p)).get();
  }
  return IoError("cuDNN SDPA: no engine for this attention (" + std::to_string(got) + " configurations" +
                 (refused.empty() ? "" : "; last: " + refused) + ")");
}

Status CudnnAttention::Forward(const AttentionShape& s, const SdpaForwardOperands& x, cudaStream_t stream,
                               const Workspace& ws) {
  PX_ASSIGN(Plan* plan, PlanFor(s, x.q.dtype));
  void* workspace = nullptr;
  if (plan->workspace_bytes > 0) {
    PX_ASSIGN(workspace, ws(plan->workspace_bytes));
  }
  float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  float neg_inf = -std::numeric_limits<float>::infinity();
  auto offset = static_cast<int32_t>(s.causal_offset);
  std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs{x.q.ptr, x.k.ptr, x.v.ptr, x.out.ptr, x.stats, &scale};  // by-value: host addresses
  if (plan->causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg_inf);
  }
  if (plan->offset) {
    uids.push_back(kOffset);
    ptrs.push_back(&offset);
  }
  Desc pack(api_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data())
      .Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()), ptrs.data())
      .Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .Finalize();
  if (!pack.Ok()) return pack.Fail();
  if (const cudnnStatus_t st = api_->SetStream(handle_, stream); st != CUDNN_STATUS_SUCCESS) {
    return IoError(std::string("cudnnSetStream: ") + api_->GetErrorString(st));
  }
  if (const cudnnStatus_t st = api_->Execute(handle_, plan->plan.Raw(), pack.Raw()); st != CUDNN_STATUS_SUCCESS) {
    return IoError(std::string("cudnnBackendExecute (SDPA forward): ") + api_->GetErrorString(st));
  }
  return {};
}

}  // namespace parallax::executor::gpu

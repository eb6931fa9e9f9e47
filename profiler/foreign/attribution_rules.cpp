// The mapping tables. Names are those the PyTorch profiler records: aten ops and autograd nodes
// (PyTorch 1.13 and 2.x native_functions.yaml names; "autograd::engine::evaluate_function: X" wraps
// each backward node X), record_function ranges ("Optimizer.step#AdamW.step",
// torch/optim/optimizer.py), CUDA kernels (ATen's, cuBLAS/CUTLASS, flash-attention, cuDNN, Apex,
// Transformer Engine, NCCL), Megatron-Core module attribute names (megatron/core/transformer/
// transformer_layer.py, attention.py, mlp.py; models/gpt/gpt_model.py) and DeepSpeed's ranges.
#include "profiler/foreign/attribution_rules.h"

#include <map>

namespace parallax::profiler {
namespace {

using K = OpKind;
constexpr FrameKind kRange = FrameKind::kRange;
constexpr FrameKind kHost = FrameKind::kHostOp;
constexpr FrameKind kKernel = FrameKind::kKernel;

const std::vector<OpKind> kNorms{K::kAttnNorm, K::kMlpNorm, K::kFinalNorm};
const std::vector<OpKind> kLinears{K::kQkv, K::kAttnOut, K::kFc1, K::kFc2, K::kLmHead};

//! Device kernels whose family is plain from their name, whatever framework launched them.
std::vector<AttributionRule> KernelRules() {
  const std::vector<OpKind> all_reduce{K::kDpAllReduce, K::kTpAllReduce};
  const std::vector<OpKind> all_gather{K::kDpAllGather, K::kTpAllGather};
  const std::vector<OpKind> reduce_scatter{K::kDpReduceScatter, K::kTpReduceScatter};
  const std::vector<OpKind> p2p{K::kPpSend, K::kPpRecv};
  return {
      {kKernel, "nccl*AllReduce*", "collective", all_reduce},
      {kKernel, "nccl*AllGather*", "collective", all_gather},
      {kKernel, "nccl*ReduceScatter*", "collective", reduce_scatter},
      {kKernel, "nccl*SendRecv*", "collective", p2p},
      {kKernel, "nccl*", "collective", {}},
      {kKernel, "*flash*", "attention", {K::kAttnCore}},
      {kKernel, "*fmha*", "attention", {K::kAttnCore}},
      {kKernel, "*cudnn_generated_fort_native_sdpa*", "attention", {K::kAttnCore}},
      {kKernel, "*softmax*", "attention", {K::kAttnCore, K::kLoss}},
      {kKernel, "*SoftMax*", "attention", {K::kAttnCore, K::kLoss}},
      {kKernel, "*layer_norm*", "norm", kNorms},
      {kKernel, "*LayerNorm*", "norm", kNorms},
      {kKernel, "*rms_norm*", "norm", kNorms},
      {kKernel, "*rmsnorm*", "norm", kNorms},
      {kKernel, "*bn_fw*", "norm", {}},
      {kKernel, "*bn_bw*", "norm", {}},
      {kKernel, "*gelu*", "activation", {K::kAct}},
      {kKernel, "*Gelu*", "activation", {K::kAct}},
      {kKernel, "*silu*", "activation", {K::kAct}},
      {kKernel, "*swiglu*", "activation", {K::kAct}},
      {kKernel, "*multi_tensor_apply*", "optimizer", {K::kOptimizer, K::kGradClip}},
      {kKernel, "*adam*", "optimizer", {K::kOptimizer}},
      {kKernel, "*Adam*", "optimizer", {K::kOptimizer}},
      {kKernel, "*embedding*", "embedding", {K::kEmbedding}},
      {kKernel, "*indexSelect*", "embedding", {K::kEmbedding}},
      {kKernel, "*cross_entropy*", "loss", {K::kLoss}},
      {kKernel, "*nll_loss*", "loss", {K::kLoss}},
  };
}

//! GEMM and convolution kernels: after the ranges, which say which linear a GEMM is.
std::vector<AttributionRule> GemmKernelRules() {
  std::vector<OpKind> gemm_ops = kLinears;
  gemm_ops.push_back(K::kAttnCore);
  return {
      {kKernel, "*gemm*", "gemm", gemm_ops},
      {kKernel, "*Gemm*", "gemm", gemm_ops},
      {kKernel, "*cutlass*", "gemm", gemm_ops},
      {kKernel, "*xmma*", "gemm", gemm_ops},
      {kKernel, "*cublas*", "gemm", gemm_ops},
      // ROCm: rocBLAS / hipBLASLt run Tensile kernels named "Cijk_<layout>_<types>_MT<tile>..."
      // (C[i,j] = sum over k of A and B), e.g. "Cijk_Alik_Bljk_SB_Bias_..." (HTA's MI250 trace).
      {kKernel, "Cijk_*", "gemm", gemm_ops},
      {kKernel, "*conv*", "gemm", {}},
      {kKernel, "*Memcpy*", "memory", {}},
      {kKernel, "*Memset*", "memory", {}},
  };
}

//! Eager PyTorch's host ops and autograd nodes (a CPU run's units; a GPU run's context).
std::vector<AttributionRule> TorchOpRules() {
  return {
      {kRange, "Optimizer.step*", "optimizer", {K::kOptimizer}},
      {kRange, "Optimizer.zero_grad*", "optimizer", {K::kGradZero}},
      {kHost, "aten::embedding", "embedding", {K::kEmbedding}},
      {kHost, "*EmbeddingBackward0", "embedding", {K::kEmbedding}},
      {kHost, "aten::layer_norm", "norm", kNorms},
      {kHost, "aten::rms_norm", "norm", kNorms},
      {kHost, "*NativeLayerNormBackward0", "norm", kNorms},
      {kHost, "aten::scaled_dot_product_attention", "attention", {K::kAttnCore}},
      {kHost, "*ScaledDotProduct*Backward*", "attention", {K::kAttnCore}},
      {kHost, "aten::softmax", "attention", {K::kAttnCore}},
      {kHost, "aten::_softmax", "attention", {K::kAttnCore}},
      {kHost, "*SoftmaxBackward0", "attention", {K::kAttnCore}},
      {kHost, "aten::masked_fill", "attention", {K::kAttnCore}},
      {kHost, "*MaskedFillBackward0", "attention", {K::kAttnCore}},
      {kHost, "aten::bmm", "attention", {K::kAttnCore}},
      {kHost, "*BmmBackward0", "attention", {K::kAttnCore}},
      {kHost, "aten::gelu", "activation", {K::kAct}},
      {kHost, "*GeluBackward0", "activation", {K::kAct}},
      {kHost, "aten::silu", "activation", {K::kAct}},
      {kHost, "*SiluBackward0", "activation", {K::kAct}},
      {kHost, "aten::cross_entropy_loss", "loss", {K::kLoss}},
      {kHost, "aten::log_softmax", "loss", {K::kLoss}},
      {kHost, "aten::nll_loss*", "loss", {K::kLoss}},
      {kHost, "*NllLossBackward0", "loss", {K::kLoss}},
      {kHost, "*LogSoftmaxBackward0", "loss", {K::kLoss}},
      {kHost, "aten::linear", "gemm", kLinears},
      {kHost, "aten::addmm", "gemm", kLinears},
      {kHost, "aten::mm", "gemm", kLinears},
      {kHost, "*AddmmBackward0", "gemm", kLinears},
      {kHost, "*MmBackward0", "gemm", kLinears},
      {kHost, "aten::matmul", "gemm", {K::kAttnCore, K::kLmHead}},
      {kHost, "aten::norm", "grad_clip", {K::kGradClip}},
      {kHost, "aten::linalg_vector_norm", "grad_clip", {K::kGradClip}},
      {kHost, "aten::_foreach_norm", "grad_clip", {K::kGradClip}},
      {kHost, "gloo:all_reduce", "collective", {K::kDpAllReduce}},
      {kHost, "nccl:all_reduce", "collective", {K::kDpAllReduce}},
      {kHost, "record_param_comms", "collective", {}},
  };
}

//! Megatron-Core's module attributes (with_modules / Module Hierarchy, nn.Module ranges).
std::vector<AttributionRule> MegatronRanges() {
  return {
      {kRange, "*linear_qkv*", "gemm", {K::kQkv}},
      {kRange, "*linear_proj*", "gemm", {K::kAttnOut}},
      {kRange, "*linear_fc1*", "gemm", {K::kFc1}},
      {kRange, "*linear_fc2*", "gemm", {K::kFc2}},
      {kRange, "*core_attention*", "attention", {K::kAttnCore}},
      {kRange, "*DotProductAttention*", "attention", {K::kAttnCore}},
      {kRange, "*input_layernorm*", "norm", {K::kAttnNorm}},
      {kRange, "*pre_mlp_layernorm*", "norm", {K::kMlpNorm}},
      {kRange, "*final_layernorm*", "norm", {K::kFinalNorm}},
      {kRange, "*output_layer*", "gemm", {K::kLmHead}},
      {kRange, "*VocabParallelEmbedding*", "embedding", {K::kEmbedding}},
      {kRange, "*LanguageModelEmbedding*", "embedding", {K::kEmbedding}},
      {kRange, "*DistributedOptimizer*", "optimizer", {K::kOptimizer}},
      // The module classes (nn.Module ranges name the class, not the attribute): ambiguous ones
      // leave the choice to the plan's op order.
      {kRange, "*TELayerNormColumnParallelLinear*", "gemm", {K::kQkv, K::kFc1}},
      {kRange, "*TERowParallelLinear*", "gemm", {K::kAttnOut, K::kFc2}},
      {kRange, "*TEColumnParallelLinear*", "gemm", {K::kQkv, K::kFc1, K::kLmHead}},
      {kRange, "*RowParallelLinear*", "gemm", {K::kAttnOut, K::kFc2}},
      {kRange, "*ColumnParallelLinear*", "gemm", {K::kQkv, K::kFc1, K::kLmHead}},
      {kRange, "*TENorm*", "norm", kNorms},
      {kRange, "*FusedLayerNorm*", "norm", kNorms},
  };
}

std::vector<AttributionRule> Concat(std::initializer_list<std::vector<AttributionRule>> parts) {
  std::vector<AttributionRule> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const std::vector<std::string_view> kTorchWrappers{
    kProfilerStepPattern, "##*", "DistributedDataParallel.forward", "nn.Module:*", "Trace*", "PyTorch Profiler*",
    "enumerate(DataLoader)*"};

const std::map<std::string, AttributionTable>& Tables() {
  static const auto* tables = [] {
    auto* m = new std::map<std::string, AttributionTable>;  // NOLINT: immortal table
    m->emplace("pytorch", AttributionTable{"pytorch", "eager PyTorch 1.13 / 2.x op and kernel names",
                                           Concat({KernelRules(), TorchOpRules(), GemmKernelRules()}),
                                           kTorchWrappers});
    m->emplace("megatron-core",
               AttributionTable{"megatron-core", "Megatron-Core module names over eager PyTorch's",
                                Concat({KernelRules(), MegatronRanges(), TorchOpRules(), GemmKernelRules()}),
                                kTorchWrappers});
    std::vector<AttributionRule> ds{{kRange, "*DeepSpeedZeroOptimizer*", "optimizer", {K::kOptimizer}},
                                    {kRange, "*FusedAdam*", "optimizer", {K::kOptimizer}},
                                    {kRange, "*ParallelAttention*", "attention", {K::kAttnCore}}};
    m->emplace("deepspeed", AttributionTable{"deepspeed", "DeepSpeed ranges over Megatron-DeepSpeed's and PyTorch's",
                                             Concat({KernelRules(), ds, MegatronRanges(), TorchOpRules(),
                                                     GemmKernelRules()}),
                                             kTorchWrappers});
    return m;
  }();
  return *tables;
}

}  // namespace

bool PatternMatches(std::string_view pattern, std::string_view name) {
  // Glob with '*' only: the classic greedy match with one backtrack point.
  size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Result<const AttributionTable*> AttributionTableFor(const std::string& implementation) {
  static const std::map<std::string, std::string> kAlias{
      {"parallax", "pytorch"}, {"megatron-2021", "megatron-core"}, {"megatron-2022", "megatron-core"}};
  std::string name = implementation;
  if (auto it = kAlias.find(name); it != kAlias.end()) name = it->second;
  auto it = Tables().find(name);
  if (it == Tables().end()) {
    std::string known;
    for (const auto& [k, v] : Tables()) known += (known.empty() ? "" : ", ") + k;
    return BadInput("--implementation: no attribution table for \"" + implementation + "\" (known: " + known + ")");
  }
  return &it->second;
}

}  // namespace parallax::profiler

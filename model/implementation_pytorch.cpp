// The `pytorch` implementation profile: eager PyTorch training with DistributedDataParallel (the
// code people write themselves; bench/peer/torch_gpt.py is one). File and symbol names refer to
// PyTorch 1.13 and 2.x (pytorch/pytorch); `parallax refine --implementation pytorch` learns its costs
// from a profiler trace of such a run (profiler/foreign/), which also says which attention it ran.
#include "model/implementation.h"

namespace parallax {

ImplementationProfile PytorchEager() {
  ImplementationProfile p;
  p.name = "pytorch";
  p.description = "eager PyTorch (1.13 or 2.x) with torch.nn.parallel.DistributedDataParallel and torch.optim.AdamW";
  p.attention = {AttentionKernel::kUnfused,
                 "eager attention written as torch.matmul, masked_fill, softmax, matmul (bench/peer/torch_gpt.py; "
                 "the only choice on 1.13's CPU build); refine replaces it with what its trace ran "
                 "(F.scaled_dot_product_attention's flash kernel in 2.x on a GPU)"};
  p.attention_keeps_statistics = {false, "eager attention: autograd saves softmax's output (the s x s probabilities) "
                                        "for SoftmaxBackward; SDPA's flash kernel keeps the row log-sum-exp instead, "
                                        "which AttentionKeepsStatistics follows from attention = flash"};
  p.flash_attention_2 = {false, "eager attention (bench/peer/torch_gpt.py): no flash kernel"};
  p.fused_qkv_gemm = {false, "bench/peer/torch_gpt.py Block: three nn.Linear (wq, wk, wv), each an aten::linear"};
  p.fused_bias_activation = {false, "eager mode fuses nothing: nn.Linear (aten::addmm) then F.gelu, a kernel of its "
                                    "own (torch/nn/functional.py gelu)"};
  p.fused_bias_dropout_add = {false, "eager mode: x + dropout(linear(h)) runs aten::dropout and aten::add separately"};
  p.applies_dropout = {true, "nn.Dropout / F.dropout applies the model's dropout in train() mode"};
  p.fp32_cross_entropy = {true, "torch.autocast docs, 'CUDA Ops that can autocast to float32': cross_entropy, "
                                "log_softmax and nll_loss run in fp32 under autocast"};
  p.loss_reduction = {LossReduction::kAllReduce, "no tensor parallelism in plain DDP: the fact does not apply"};
  p.sp_grad_reduction = {SpGradReduction::kPerParameter, "no sequence parallelism in plain DDP: the fact does not apply"};
  p.residual_join_in_norm = {false, "eager mode: the residual aten::add, then nn.LayerNorm (aten::layer_norm)"};
  p.grad_buffer_dtype = {GradDType::kFp32, "torch.autocast keeps parameters, and so param.grad, in fp32 (AMP docs)"};
  p.grad_reduce_dtype = {GradDType::kFp32, "DDP all-reduces param.grad in its dtype unless a comm hook "
                                           "(fp16_compress_hook) is registered (torch/distributed/algorithms/ddp_comm_hooks)"};
  p.dp_algorithm = {DpAlgorithm::kNccl, "torch/csrc/distributed/c10d/reducer.cpp: one allreduce per bucket over the "
                                        "whole process group (ProcessGroupNCCL on GPUs, gloo on CPUs)"};
  p.dp_bucket_MiB = {25, "torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25) default (its docs); the first "
                         "bucket is 1 MiB (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)"};
  p.max_zero_stage = {0, "DDP replicates every parameter and optimizer state; FSDP and ZeroRedundancyOptimizer are "
                         "other code not described by this profile"};
  p.max_zero_stage_pipelined = {0, "no pipeline parallelism in plain DDP"};
  p.zero3_prefetch_layers = {0, "no ZeRO-3 in plain DDP"};
  p.zero3_prefetch_params = {0, "no ZeRO-3 in plain DDP"};
  p.overlap_tp_comm = {false, "no tensor parallelism in plain DDP"};
  p.async_tp_backward = {false, "no tensor parallelism in plain DDP"};
  p.grad_accumulation = {GradAccumulation::kAfterFirst,
                         "torch/csrc/autograd/functions/accumulate_grad.h AccumulateGrad: the first gradient becomes "
                         "param.grad as it is, later micro-batches' (DDP no_sync) are added to it"};
  p.overlap_dp_reduce = {true, "DDP design note ('Internal Design', Backward Pass): each bucket's allreduce starts "
                               "when its gradients are ready, asynchronously, during the backward"};
  p.overlap_param_gather = {false, "no parameter gather in plain DDP"};
  p.launch_overhead_us = {10.0, "PyTorch eager dispatch + cudaLaunchKernel: ~10 us of host time per op (Horace He, "
                                "'Making Deep Learning Go Brrrr From First Principles', 2022, section 'Overhead'); "
                                "refine measures the run's own host gap between ops"};
  p.optimizer = {OptimizerKind::kPerTensor,
                 "torch/optim/adamw.py: 1.13 defaults to the per-tensor for loop (foreach=None -> False); 2.x "
                 "defaults to foreach on CUDA, multi-tensor launches of the same per-moment passes; "
                 "fused=True (one kernel) is opt-in: a profile file with base pytorch says so"};
  p.mixed_precision_passes = {false, "torch.autocast keeps no master copy: AdamW updates the fp32 parameters in place; "
                                     "GradScaler.unscale_ (fp16 only) is one pass"};
  p.optimizer_state_bytes = {12, "torch/optim/adamw.py: exp_avg and exp_avg_sq like the fp32 parameters (8 B), "
                                 "counted with the 16-bit weight copy as a master copy (4 B)"};
  p.optimizer_reads_grad_buffer = {false, "torch.autocast: the gradients are fp32 like the parameters"};
  p.pipeline_p2p = {P2pSemantics::kBlocking, "no pipeline parallelism in plain DDP: the fact does not apply"};
  p.cp_comm_type = {CpCommType::kNone, "no context parallelism in plain DDP (torch.distributed.tensor.experimental "
                                       "context_parallel is other code not described by this profile)"};
  p.moe_dispatcher = {MoeDispatcher::kAllToAll, "plain PyTorch has no MoE layer: a user's MoE code dispatches with "
                                                "torch.distributed.all_to_all_single, priced as an all-to-all"};
  p.moe_shared_expert_overlap = {false, "plain PyTorch: no overlap of the dispatch with shared experts"};
  p.moe_probs_in_activation = {false, "plain PyTorch has no MoE layer: a user's combine is priced as weighting the "
                                      "expert outputs it keeps"};
  p.fp8_params = {false, "torch.autocast has no FP8 parameters; the parameters stay fp32"};
  p.fp8_recipe = {Fp8Recipe::kDelayed, "torch.autocast has no FP8 recipe: eager PyTorch trains in bf16/fp32 here"};
  p.fp8_saves_quantized_inputs = {false, "torch.autocast has no FP8 linear layers"};
  return p;
}

}  // namespace parallax

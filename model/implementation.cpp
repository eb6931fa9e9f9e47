// Implementation profiles. Each preset's facts cite where they come from; file and symbol names
// refer to the named repository at the release the profile describes.
#include "model/implementation.h"

#include <algorithm>
#include <map>

namespace parallax {
namespace {

constexpr const char* kPytorchEager =
    "PyTorch eager dispatch + cudaLaunchKernel: ~10 us of host time per op (Horace He, 'Making Deep "
    "Learning Go Brrrr From First Principles', 2022, section 'Overhead')";

ImplementationProfile Parallax() {
  ImplementationProfile p;
  p.name = "parallax";
  p.description = "this repository's executor (executor/runtime), whose costs `parallax calibrate`/`refine` measure";
  p.attention = {AttentionKernel::kUnfused,
                 "executor/cuda/cuda_kernels.cpp AttentionForward/Backward: strided-batched GEMMs around softmax "
                 "kernels, the s x s scores of a chunk of heads in HBM"};
  p.attention_keeps_statistics = {true, "executor/backend.h AttentionForward: keeps the fp32 row log-sum-exp; "
                                        "AttentionBackward recomputes the probabilities from it"};
  p.flash_attention_2 = {false, "executor/cuda: our attention core is a GEMM path (attention: unfused), no flash kernel"};
  p.fused_qkv_gemm = {false,
                      "executor/runtime/transformer_layer.cpp: the qkv op is three LinearForward calls (wq, wk, wv), "
                      "each a GEMM then Backend::AddBias, then Backend::Rotary on q and k for a rotary model; its "
                      "backward three LinearBackward calls (dW, bias gradient, dX accumulated)"};
  p.fused_bias_activation = {true,
                             "executor/runtime/transformer_layer.cpp: fc1's bias and GELU in one kernel "
                             "(Backend::BiasGeluForward/Backward; CPU: executor/cpu/fused_kernels.cpp); a SwiGLU "
                             "model's biases (none in the presets) are still added after the GEMM"};
  p.fused_bias_dropout_add = {true,
                              "executor/runtime/transformer_layer.cpp: no dropout; bias + residual add in one kernel "
                              "(Backend::ResidualAdd after fc2; after the attention output it is fused into the MLP "
                              "norm, Backend::ResidualLayerNormForward; CPU: executor/cpu/fused_kernels.cpp)"};
  p.applies_dropout = {false, "docs/executor.md 'Not done yet': the model's dropout flag is ignored; "
                              "executor/runtime/transformer_layer.cpp applies no dropout and keeps no mask"};
  p.fp32_cross_entropy = {false, "executor/runtime/embedding_head.cpp Head: logits and their gradient in the compute "
                                 "dtype, both live in the loss backward; fp32 row max and sums only"};
  p.loss_reduction = {LossReduction::kAllGather,
                      "executor/runtime/embedding_head.cpp Head::Forward: RowMax and CrossEntropyStats over the "
                      "local shard, one TP all-gather of [row max | sum_exp | target logit]; Head::Backward "
                      "combines them (Backend::CrossEntropyCombine)"};
  p.sp_grad_reduction = {SpGradReduction::kPerParameter,
                         "executor/runtime/grad_sync.cpp ReduceSequenceParallelGrads: one TP all-reduce per "
                         "sequence_parallel_partial parameter when its group's gradient is final (the last "
                         "micro-batch; every micro-batch under ZeRO-2/3)"};
  p.residual_join_in_norm = {true,
                             "executor/runtime/transformer_layer.cpp Run: ResidualJoin passed to the mlp_norm op "
                             "(Backend::ResidualLayerNormForward / ResidualRmsNormForward)"};
  p.grad_buffer_dtype = {GradDType::kFp32,
                         "agreed with the executor: fp32 gradient buffers for 16-bit training, as Megatron-Core "
                         "(Megatron-LM docs/source/api-guide/distributed_optimizer.md)"};
  p.grad_reduce_dtype = {GradDType::kFp32, "executor/runtime/grad_sync.cpp reduces the fp32 gradient buffer"};
  p.dp_algorithm = {DpAlgorithm::kNccl, "executor/cuda: ncclAllReduce / ncclReduceScatter over the DP communicator"};
  p.dp_bucket_MiB = {0, "executor/runtime/param_group.h: one bucket per parameter group (a layer); 0 = per layer"};
  p.max_zero_stage = {3, "executor/runtime/grad_sync.cpp, param_group.cpp: ZeRO-1 (optimizer shard), ZeRO-2 "
                        "(gradient reduce-scatter per layer), ZeRO-3 (parameters gathered per layer)"};
  p.max_zero_stage_pipelined = {3, "executor/runtime/param_group.cpp, grad_sync.cpp: each pipeline stage shards its own "
                                  "parameter groups over its DP group, whatever pp"};
  p.zero3_prefetch_layers = {1, "executor/runtime/pipeline_runner.cpp: ParamGroup::Prefetch issues the next layer's "
                                "all-gather (forward: l+1, backward: l-1) before the current layer computes"};
  p.zero3_prefetch_params = {0, "executor/runtime/param_group.cpp: a layer's group is gathered whole"};
  p.overlap_tp_comm = {false, "executor/runtime/tp_ops.cpp: TP collectives run between the GEMMs, on the critical path"};
  p.async_tp_backward = {false, "executor/runtime/tp_ops.cpp: RunCollective waits for every TP collective before the "
                                "next compute op"};
  p.grad_accumulation = {GradAccumulation::kInGemm, "executor/runtime/transformer_layer.h LinearBackward: dW (fp32) += dy^T x, the "
                                     "weight-gradient GEMM accumulates into the buffer (beta 1)"};
  p.overlap_dp_reduce = {true, "executor/runtime/grad_sync.h: StartGradSync is asynchronous, waited before the optimizer"};
  p.overlap_param_gather = {false, "executor/runtime/optimizer.cpp: ZeRO-1/2 gather each parameter group after the "
                                  "AdamW step, before the step ends (ZeRO-3's prefetched gathers: "
                                  "zero3_prefetch_layers)"};
  p.launch_overhead_us = {5.0,
                          "C++ host loop, no Python: cudaLaunchKernel ~5 us per launch (CUDA C++ Best Practices "
                          "Guide, 'Kernel launch overhead' is on the order of microseconds); our own calibration overrides"};
  p.optimizer = {OptimizerKind::kFusedMultiTensor, "executor/runtime/optimizer.cpp: one multi-tensor AdamW kernel per group"};
  p.mixed_precision_passes = {false, "executor/runtime/optimizer.cpp: the AdamW kernel reads the fp32 gradient buffer "
                                     "and writes the 16-bit weight copy in the same pass"};
  p.optimizer_state_bytes = {12, "executor/runtime/optimizer.cpp: fp32 master weights, m and v beside 16-bit weights"};
  p.optimizer_reads_grad_buffer = {false, "executor/runtime/optimizer.cpp: a 16-bit run's gradients accumulate in fp32"};
  p.pipeline_p2p = {P2pSemantics::kAsync, "executor/runtime/pipeline_runner.cpp: sends on the pp-comm stream"};
  p.moe_dispatcher = {MoeDispatcher::kAllToAll, "issue 37 item 5: the executor's dispatch is an all-to-all on the ep "
                                                "group's stream (not built yet; priced as planned)"};
  p.moe_shared_expert_overlap = {false, "issue 37 item 5: no overlap planned for the executor's first MoE version"};
  p.moe_probs_in_activation = {false, "executor/runtime/moe_layer.h MoeCache::ytok: the combine keeps the expert outputs "
                                      "to weight them by the probabilities in backward"};
  p.cp_comm_type = {CpCommType::kP2p, "issue 36 (docs/executor.md): ring attention with causal load balancing, K and V "
                                      "blocks sent to the next cp rank while the previous block's attention computes, "
                                      "as Megatron-Core's p2p"};
  p.fp8_params = {false, "executor/runtime/fp8_linear.h: the 16-bit weights stay the parameters; each step casts "
                         "them to FP8 for the GEMMs (planner: Fp8WeightCopyBytes)"};
  p.fp8_recipe = {Fp8Recipe::kDelayed, "executor/fp8.h DelayedScaling: per-tensor scales from an amax history"};
  p.fp8_saves_quantized_inputs = {false, "executor/runtime/fp8_linear.h: a linear casts its input to FP8 for the GEMM "
                                         "and keeps the compute-dtype input for backward; the FP8 copy is transient"};
  return p;
}

ImplementationProfile MegatronCore() {
  ImplementationProfile p;
  p.name = "megatron-core";
  p.description = "Megatron-LM with Megatron-Core r0.8+ and Transformer Engine on Hopper (2024)";
  p.attention = {AttentionKernel::kFlash,
                 "transformer_engine/pytorch/attention.py DotProductAttention: cuDNN fused / flash-attn backend"};
  p.attention_keeps_statistics = {true, "flash attention saves softmax_lse (Dao 2023, FlashAttention-2, algorithm 1)"};
  p.flash_attention_2 = {false, "transformer_engine/pytorch/attention.py get_attention_backend: the cuDNN fused "
                                "backend first (NVTE_FUSED_ATTN=1 by default); a run with NVTE_FUSED_ATTN=0 sets it"};
  p.fused_qkv_gemm = {true, "megatron/core/transformer/attention.py SelfAttention: one linear_qkv (TE LayerNormLinear) "
                            "producing the mixed query/key/value layer"};
  p.fused_bias_activation = {true, "megatron/core/fusions/fused_bias_gelu.py, fused_bias_swiglu.py"};
  p.fused_bias_dropout_add = {true, "megatron/core/fusions/fused_bias_dropout.py"};
  p.applies_dropout = {true, "megatron/core/transformer/transformer_config.py: hidden_dropout = 0.1, "
                             "attention_dropout = 0.1 (with flash attention the attention dropout runs inside the "
                             "kernel from its RNG state, no mask kept)"};
  p.fp32_cross_entropy = {true, "megatron/core/tensor_parallel/cross_entropy.py: calculate_logits_max casts the logits "
                                "to float and _VocabParallelCrossEntropy saves exp_logits for backward "
                                "(cross_entropy_loss_fusion off by default)"};
  p.loss_reduction = {LossReduction::kAllReduce,
                      "megatron/core/tensor_parallel/cross_entropy.py: all_reduce of logits_max (MAX) before the "
                      "exponentials, then of predicted_logits and sum_exp_logits (SUM)"};
  p.sp_grad_reduction = {SpGradReduction::kCoalesced,
                         "megatron/core/distributed/finalize_model_grads.py _allreduce_layernorm_grads: the "
                         "sequence-parallel parameters' gradients flattened into one TP all-reduce after the "
                         "backward"};
  p.residual_join_in_norm = {false, "megatron/core/transformer/transformer_layer.py: self_attn_bda (bias-dropout-add) "
                                    "runs before pre_mlp_layernorm"};
  p.grad_buffer_dtype = {GradDType::kFp32,
                         "docs/source/api-guide/distributed_optimizer.md: bf16 params, fp32 grads (18 B/param, "
                         "6 + 12/d distributed); megatron/training/arguments.py forces "
                         "accumulate_allreduce_grads_in_fp32 for bf16"};
  p.grad_reduce_dtype = {GradDType::kFp32,
                         "megatron/core/distributed/distributed_data_parallel_config.py grad_reduce_in_fp32 "
                         "(the fp32 main_grad buffer is what is reduced)"};
  p.dp_algorithm = {DpAlgorithm::kNccl, "megatron/core/distributed/param_and_grad_buffer.py: torch.distributed "
                                        "reduce_scatter/all_reduce on the DP group (NCCL picks ring or tree)"};
  p.dp_bucket_MiB = {153, "megatron/core/distributed/distributed_data_parallel.py: bucket_size = max(40,000,000, "
                          "1,000,000 x dp) parameters = 160 MB of fp32 gradients (the 40M floor: up to dp = 40; "
                          "a larger DP group has proportionally larger buckets, which one figure per profile "
                          "does not follow)"};
  p.max_zero_stage = {1, "megatron/core/optimizer/distrib_optimizer.py (r0.8): --use-distributed-optimizer shards the "
                        "optimizer state and fp32 main weights over DP while every rank keeps the whole gradient "
                        "buffer and the 16-bit weights; r0.8 has no ZeRO-2/3 (fully sharded data parallelism came "
                        "in later releases)"};
  p.max_zero_stage_pipelined = {1, "the distributed optimizer shards each pipeline stage's buffers over its DP "
                                  "group (the published H100 runs pair it with pp up to 16)"};
  p.zero3_prefetch_layers = {1, "param_and_grad_buffer.py: overlap_param_gather launches the next bucket group's "
                                "all-gather while the current one computes"};
  p.zero3_prefetch_params = {0, "no ZeRO-3 in Megatron-Core's distributed optimizer"};
  p.async_tp_backward = {true, "megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication "
                               "(TE's own linears overlap the same collectives); implied by overlap_tp_comm"};
  p.overlap_tp_comm = {true, "--tp-comm-overlap (Transformer Engine userbuffers), as in the published H100 runs "
                             "(Megatron-LM README, Performance Benchmarking)"};
  p.grad_accumulation = {GradAccumulation::kInGemm, "megatron/training/arguments.py (core_r0.8.0): --no-gradient-accumulation-fusion "
                                     "is opt-out, so the weight-gradient GEMM accumulates into the fp32 main_grad "
                                     "(TE fuse_wgrad_accumulation) and the DDP hook skips params with "
                                     "grad_added_to_main_grad"};
  p.overlap_dp_reduce = {true, "--overlap-grad-reduce (Megatron-LM README, Performance Benchmarking)"};
  p.overlap_param_gather = {true, "--overlap-param-gather (Megatron-LM README, Performance Benchmarking): "
                                 "megatron/core/distributed/param_and_grad_buffer.py, the distributed optimizer's "
                                 "all-gather waited for in each bucket group's forward pre-hook of the next step, "
                                 "which dispatches the next group's"};
  p.launch_overhead_us = {10.0, kPytorchEager};
  p.optimizer = {OptimizerKind::kFusedMultiTensor, "megatron/core/optimizer/__init__.py: TE/apex FusedAdam"};
  p.mixed_precision_passes = {true, "megatron/core/optimizer/distrib_optimizer.py (core_r0.8.0): "
                                    "_copy_model_grads_to_main_grads (.float() of the fp32 main_grad shard: no copy), "
                                    "the grad scaler's unscale only for fp16, then _copy_main_params_to_model_params "
                                    "(copy_ of each fp32 shard into the 16-bit parameter buffer)"};
  p.optimizer_state_bytes = {12, "Megatron-LM docs/source/api-guide/distributed_optimizer.md: fp32 main weights, Adam m and v (4 + 4 + 4 B)"};
  p.optimizer_reads_grad_buffer = {false, "megatron/core/optimizer/optimizer_config.py: use_precision_aware_optimizer "
                                          "defaults to False (main_grads_dtype fp32 only without it)"};
  p.moe_dispatcher = {MoeDispatcher::kAllToAll, "megatron/core/transformer/moe/token_dispatcher.py "
                                                "MoEAlltoAllTokenDispatcher (--moe-token-dispatcher-type alltoall, the "
                                                "setting of NVIDIA's MoE benchmarks and the Megatron-MoE model zoo)"};
  p.moe_shared_expert_overlap = {false, "megatron/core/transformer/transformer_config.py: moe_shared_expert_overlap "
                                        "defaults to False"};
  p.pipeline_p2p = {P2pSemantics::kAsync, "megatron/core/pipeline_parallel/p2p_communication.py: batched "
                                          "isend/irecv, overlap_p2p_comm for the interleaved schedule"};
  p.cp_comm_type = {CpCommType::kP2p,
                    "megatron/training/arguments.py --cp-comm-type default ['p2p'], passed to Transformer Engine's "
                    "DotProductAttention (transformer_engine/pytorch/attention.py AttnFuncWithCPAndKVP2P: K/V "
                    "send/recv around the cp ring, each step overlapped with the previous block's attention); the "
                    "published Llama 3.1 recipes keep the default"};
  p.moe_probs_in_activation = {
      false, "megatron/core/transformer/moe/token_dispatcher.py (core_r0.8.0-core_r0.11.0): unpermute(..., probs) "
             "weights the expert outputs in the combine and keeps them for backward; core_r0.12.0 moved the "
             "probabilities into the experts' activation (experts.py activation_func_with_probs). This profile "
             "covers r0.8+, so it keeps the older, larger count: a profile of r0.12+ sets it true"};
  p.fp8_params = {false, "megatron/training/arguments.py: --fp8-param-gather is opt-in (default False): "
                         "Transformer Engine keeps the bf16 weights and caches their FP8 copies and transposes"};
  p.fp8_recipe = {Fp8Recipe::kDelayed, "github:NVIDIA/Megatron-LM @ d98e8a64 megatron/core/transformer/transformer_config.py:594 "
                                       "fp8_recipe default 'delayed' (--fp8-recipe)"};
  p.fp8_saves_quantized_inputs = {
      true, "github:NVIDIA/TransformerEngine @ d0067d0d transformer_engine/pytorch/module/linear.py:603-621 (the quantized input, "
            "column-wise data only, is what backward keeps), layernorm_linear.py:466-487 (ln_out, quantized), "
            "grouped_linear.py:903-916 (the experts' inputs); github:NVIDIA/Megatron-LM @ d98e8a64 megatron/core/transformer/"
            "attention.py:428-444 (linear_proj keeps its original input, the core attention's output, unless the "
            "recipe is delayed), moe/moe_utils.py:1382 (the router keeps its 16-bit input)"};
  return p;
}

//! NeMo 2.0's performance recipes: Megatron-Core and Transformer Engine as `megatron-core`, with the
//! recipes' own settings where they differ. Sources at NeMo d2b2155, the commit NVIDIA dgxc-benchmarking
//! v25.04 llama3.1/setup.sh checks out for its published Llama 3.1 runs.
ImplementationProfile Nemo() {
  ImplementationProfile p = MegatronCore();
  p.name = "nemo";
  p.description = "NeMo 2.0 performance recipes (performance_mode=True, NeMo 25.02-25.04) on Megatron-Core and "
                  "Transformer Engine, as NVIDIA's dgxc-benchmarking runs them (2025)";
  constexpr const char* kBf16Grads =
      "nemo/collections/llm/recipes/llama3_8b.py, llama3_70b.py, llama31_405b.py pretrain_performance_optimizations: "
      "trainer.plugins.grad_reduce_in_fp32 = False (dgxc-benchmarking llama3.1/pretrain_llama31.py sets it again for "
      "fp8), which nemo/lightning/pytorch/strategies/megatron_strategy.py connect() writes over the strategy's "
      "DistributedDataParallelConfig (update_config_with_dtype_overrides); megatron/core/distributed/"
      "param_and_grad_buffer.py then keeps and reduces the gradient buffer in the parameters' bf16";
  p.grad_buffer_dtype = {GradDType::kParam, kBf16Grads};
  p.grad_reduce_dtype = {GradDType::kParam, kBf16Grads};
  p.fp8_params = {true, "nemo/collections/llm/recipes/precision/mixed_precision.py bf16_with_fp8_mixed: "
                        "fp8_params = True, so MegatronMixedPrecision sets Transformer Engine's "
                        "FP8GlobalStateManager.FP8_PARAMETERS (the linear weights are created as FP8 tensors: 1 B "
                        "data + its 1 B transpose) and fp8_param_gather; dgxc-benchmarking llama3.1/"
                        "pretrain_llama31.py takes that plugin for fp8"};
  p.fp8_recipe = {Fp8Recipe::kDelayed, "nemo/collections/llm/recipes/precision/mixed_precision.py bf16_with_fp8_mixed: "
                                       "fp8_recipe = \"delayed\", amax history 1024"};
  return p;
}

ImplementationProfile Megatron2021() {
  ImplementationProfile p;
  p.name = "megatron-2021";
  p.description = "Megatron-LM v2.x as run for Narayanan et al. SC'21 (fp16, A100)";
  p.attention = {AttentionKernel::kUnfused,
                 "megatron/model/transformer.py ParallelAttention.forward (v2.5): baddbmm QK^T, "
                 "FusedScaleMaskSoftmax, attention_dropout, bmm with V"};
  p.attention_keeps_statistics = {false, "megatron/model/transformer.py (v2.5): autograd saves attention_probs for the "
                                         "bmm with V"};
  p.flash_attention_2 = {false, "unfused attention (megatron/model/transformer.py v2.5 CoreAttention): no flash kernel"};
  p.fused_qkv_gemm = {true, "megatron/model/transformer.py ParallelAttention: one ColumnParallelLinear query_key_value"};
  p.fused_bias_activation = {true, "megatron/model/fused_bias_gelu.py (--bias-gelu-fusion, on by default)"};
  p.fused_bias_dropout_add = {true, "megatron/model/transformer.py bias_dropout_add_fused_train (--bias-dropout-fusion)"};
  p.applies_dropout = {true, "megatron/arguments.py (v2.5): --attention-dropout 0.1, --hidden-dropout 0.1 by default"};
  p.fp32_cross_entropy = {true, "megatron/model/gpt_model.py post_language_model_processing: "
                                "vocab_parallel_cross_entropy(output.float(), labels) unless --fp16-lm-cross-entropy"};
  p.loss_reduction = {LossReduction::kAllReduce,
                      "megatron/mpu/cross_entropy.py (v2.5) _VocabParallelCrossEntropy: all_reduce of logits_max "
                      "(MAX), then of predicted_logits and sum_exp_logits (SUM)"};
  p.sp_grad_reduction = {SpGradReduction::kCoalesced,
                         "no sequence parallelism in v2.x; v3.0 (megatron-2022) adds it with "
                         "MegatronOptimizer.allreduce_layernorm_grads: the sequence-parallel parameters' "
                         "gradients flattened into one TP all-reduce after the backward"};
  p.residual_join_in_norm = {false, "megatron/model/transformer.py ParallelTransformerLayer.forward: bias_dropout_add, "
                                    "then post_attention_layernorm"};
  p.grad_buffer_dtype = {GradDType::kParam,
                         "megatron/arguments.py (v2.5): accumulate_allreduce_grads_in_fp32 defaults to False and "
                         "is forced only for bf16; fp16 runs keep fp16 main_grad buffers"};
  p.grad_reduce_dtype = {GradDType::kParam, "megatron/model/distributed.py allreduce_gradients: the fp16 buffer"};
  p.dp_algorithm = {DpAlgorithm::kNccl, "megatron/model/distributed.py: torch.distributed.all_reduce (NCCL)"};
  p.dp_bucket_MiB = {0, "megatron/model/distributed.py: one all-reduce over the contiguous gradient buffer"};
  p.max_zero_stage = {0, "megatron/optimizer/__init__.py (v2.5): Float16OptimizerWithFloat16Params over the whole "
                        "model on every rank; no distributed optimizer in v2.x"};
  p.max_zero_stage_pipelined = {0, "no distributed optimizer in v2.x"};
  p.zero3_prefetch_layers = {0, "no ZeRO-3 in Megatron-LM v2.x"};
  p.zero3_prefetch_params = {0, "no ZeRO-3 in Megatron-LM v2.x"};
  p.overlap_tp_comm = {false, "megatron/mpu/mappings.py: TP all-reduces are synchronous autograd functions"};
  p.async_tp_backward = {false, "megatron/mpu/layers.py (v2.5): ColumnParallelLinear's backward all-reduce is "
                                "copy_to_tensor_model_parallel_region's synchronous backward"};
  p.grad_accumulation = {GradAccumulation::kAfterFirst, "megatron/arguments.py (v2.5): --use-contiguous-buffers-in-ddp is opt-in "
                                    "and examples/sc21/run_table_1.sh does not set it, so autograd adds each "
                                    "micro-batch's weight gradient after the first into param.grad (no "
                                    "main_grad.add_ hook; no GEMM accumulation before 2022)"};
  p.overlap_dp_reduce = {false, "megatron/training.py train_step: model.allreduce_gradients() after the whole "
                                "forward_backward_func, not overlapped with backward"};
  p.overlap_param_gather = {false, "no distributed optimizer in v2.x"};
  p.launch_overhead_us = {10.0, kPytorchEager};
  p.optimizer = {OptimizerKind::kFusedMultiTensor, "megatron/optimizer/__init__.py: apex.optimizers.FusedAdam"};
  p.mixed_precision_passes = {true, "megatron/optimizer/optimizer.py (v2.5) Float16OptimizerWithFloat16Params.step: "
                                    "_copy_model_grads_to_main_grads (grad.float()), "
                                    "_unscale_main_grads_and_check_for_nan (fp16), FusedAdam on the fp32 main grads, "
                                    "_copy_main_params_to_model_params (multi_tensor_scale)"};
  p.optimizer_state_bytes = {12, "Megatron-LM v2.5 megatron/optimizer/optimizer.py: fp32 main params, FusedAdam's fp32 m and v"};
  p.optimizer_reads_grad_buffer = {false, "Megatron-LM v2.5 _copy_model_grads_to_main_grads (grad.float())"};
  p.moe_dispatcher = {MoeDispatcher::kAllToAll, "Megatron-LM v2.5 has no MoE layer: GShard's all-to-all dispatch "
                                                "(Lepikhin et al. 2020, section 2.2) stands in"};
  p.moe_shared_expert_overlap = {false, "Megatron-LM v2.5 has no MoE layer"};
  p.moe_probs_in_activation = {false, "Megatron-LM v2.5 has no MoE layer"};
  p.pipeline_p2p = {P2pSemantics::kBlocking, "megatron/p2p_communication.py (v2.5): batch_isend_irecv, wait on "
                                             "every request, then torch.cuda.synchronize()"};
  p.cp_comm_type = {CpCommType::kNone, "megatron/arguments.py (v2.5, v3.0): no context parallelism; "
                                       "--context-parallel-size came with Megatron-Core (2023)"};
  p.fp8_params = {false, "Megatron-LM v2.x predates FP8 training (no Transformer Engine)"};
  p.fp8_recipe = {Fp8Recipe::kDelayed, "Megatron-LM v2.x predates FP8 training (no Transformer Engine)"};
  p.fp8_saves_quantized_inputs = {false, "Megatron-LM v2.x predates FP8 training (no Transformer Engine)"};
  return p;
}

ImplementationProfile Megatron2022() {
  ImplementationProfile p = Megatron2021();
  p.name = "megatron-2022";
  p.description = "Megatron-LM v3.0 as run for Korthikanti et al. 2022 (sequence parallelism, selective recompute, A100)";
  p.grad_accumulation = {GradAccumulation::kEveryMicrobatch, "megatron/arguments.py (May 2022, 35a3fa8): gradient_accumulation_fusion is "
                                    "switched off unless gradients accumulate in fp32 (bf16 or "
                                    "--accumulate-allreduce-grads-in-fp32); with 16-bit buffers "
                                    "megatron/model/distributed.py _make_param_hook runs main_grad.add_ "
                                    "every micro-batch"};
  p.async_tp_backward = {true,
                         "Korthikanti et al. 2022 (arXiv 2205.05198) section 6.2: the measured backward overlaps the "
                         "all-reduce with the linear weight's gradient computation; megatron/mpu/layers.py (v3.0) "
                         "LinearWithGradAccumulationAndAsyncCommunication: async input all-gather (SP) before the "
                         "input-gradient GEMM, async all-reduce / reduce-scatter before the weight-gradient GEMM"};
  return p;
}

ImplementationProfile DeepSpeed() {
  ImplementationProfile p;
  p.name = "deepspeed";
  p.description = "DeepSpeed ZeRO (stage 1-3) with Megatron-DeepSpeed models (2022-2023)";
  p.attention = {AttentionKernel::kUnfused,
                 "Megatron-DeepSpeed megatron/model/transformer.py CoreAttention (flash only with --use-flash-attn)"};
  p.attention_keeps_statistics = {false, "Megatron-DeepSpeed megatron/model/transformer.py CoreAttention: autograd "
                                         "saves attention_probs for the bmm with V"};
  p.flash_attention_2 = {false, "unfused attention (Megatron-DeepSpeed CoreAttention): no flash kernel"};
  p.fused_qkv_gemm = {true, "Megatron-DeepSpeed megatron/model/transformer.py ParallelAttention: one query_key_value GEMM"};
  p.fused_bias_activation = {true, "Megatron-DeepSpeed megatron/model/fused_bias_gelu.py"};
  p.fused_bias_dropout_add = {true, "Megatron-DeepSpeed megatron/model/transformer.py bias_dropout_add_fused_train"};
  p.applies_dropout = {true, "Megatron-DeepSpeed megatron/arguments.py: --attention-dropout 0.1, --hidden-dropout 0.1"};
  p.fp32_cross_entropy = {true, "Megatron-DeepSpeed megatron/model/gpt_model.py post_language_model_processing: "
                                "output.float() unless --fp16-lm-cross-entropy"};
  p.loss_reduction = {LossReduction::kAllReduce,
                      "Megatron-DeepSpeed megatron/core/tensor_parallel/cross_entropy.py: Megatron-LM's "
                      "all_reduce of the row max, then of the target logits and sums of exponentials"};
  p.sp_grad_reduction = {SpGradReduction::kCoalesced,
                         "as Megatron-LM's allreduce_layernorm_grads (one flattened TP all-reduce after the "
                         "backward), which Megatron-DeepSpeed's sequence parallelism is merged from; not "
                         "checked in its source"};
  p.residual_join_in_norm = {false, "Megatron-DeepSpeed megatron/model/transformer.py: bias_dropout_add, then "
                                    "post_attention_layernorm"};
  p.grad_buffer_dtype = {GradDType::kParam,
                         "Rajbhandari et al. SC'20 section 3.1: 2 + 2 + K (K = 12) bytes per parameter, fp16 grads"};
  p.grad_reduce_dtype = {GradDType::kParam,
                         "DeepSpeed config docs: communication_data_type defaults to the model's fp16/bf16"};
  p.dp_algorithm = {DpAlgorithm::kNccl,
                    "deepspeed/runtime/zero/partitioned_param_coordinator.py: flat all_gather over the whole DP group"};
  p.dp_bucket_MiB = {954, "DeepSpeed config docs: reduce_bucket_size default 5e8 elements (2 B each)"};
  p.max_zero_stage = {3, "DeepSpeed config docs: zero_optimization.stage 0-3"};
  p.max_zero_stage_pipelined = {1, "deepspeed/runtime/pipe/engine.py PipelineEngine: asserts the ZeRO stage is below "
                                  "gradients (\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\")"};
  p.zero3_prefetch_layers = {1, "deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module: after "
                                "a module's own gather, the next parameters in trace order are prefetched, up to "
                                "zero3_prefetch_params"};
  p.zero3_prefetch_params = {50000000, "deepspeed/runtime/zero/config.py: prefetch_bucket_size (stage3_prefetch_"
                                       "bucket_size) default 5e7 in the code (the config docs say 5e8); "
                                       "partitioned_param_coordinator.py fetch_sub_module prefetches parameters "
                                       "while fewer than min(max_live_parameters 1e9 - live, 5e7) are in flight, "
                                       "and gathers the rest of a module when it is reached: a 175B layer (1.8e9) "
                                       "is prefetched 3% ahead"};
  p.overlap_tp_comm = {false, "Megatron-DeepSpeed: TP all-reduces on the critical path"};
  p.async_tp_backward = {false, "Megatron-DeepSpeed megatron/mpu/layers.py (the 2022 fork of Megatron-LM v2.x): "
                                "ColumnParallelLinear's backward all-reduce through copy_to_tensor_model_parallel_"
                                "region, synchronous; later versions carry Megatron-LM's async linear "
                                "(megatron/core/tensor_parallel/layers.py): a profile file with base deepspeed "
                                "sets this true for them"};
  p.grad_accumulation = {GradAccumulation::kInGemm, "not modelled: ZeRO stage 1/2 copy each micro-batch's gradients into their "
                                     "reduction buckets (deepspeed/runtime/zero/stage_1_and_2.py, contiguous_gradients) "
                                     "instead of one add pass; those copies are left out of this profile"};
  p.overlap_dp_reduce = {true, "DeepSpeed config docs: overlap_comm (true by default for ZeRO-3)"};
  p.overlap_param_gather = {false, "ZeRO-1/2: deepspeed/runtime/zero/stage_1_and_2.py step() all-gathers the "
                                  "updated partitions (all_gather_dp_groups) before it returns; ZeRO-3 prefetches "
                                  "instead (zero3_prefetch_layers)"};
  p.launch_overhead_us = {15.0, std::string(kPytorchEager) +
                                    " + ZeRO-3 module pre/post-forward hooks on every submodule: DeepSpeed "
                                    "issue 5047 (a maintainer puts the idle time between layers down to the "
                                    "hooks that launch all-gather / reduce-scatter), DeepSpeed PR 6649 (fewer "
                                    "hooks, 40% faster on one workload); no per-module figure is published, so "
                                    "the +5 us per kernel is an estimate, not a measurement"};
  p.optimizer = {OptimizerKind::kFusedMultiTensor, "deepspeed/ops/adam/fused_adam.py (multi_tensor_adam.cu)"};
  p.mixed_precision_passes = {false, "not modelled: DeepSpeed ZeRO's fp16 optimizers copy, unscale and clip their "
                                     "fp32 partitions in passes of their own too (stage_1_and_2.py); their bytes "
                                     "are not checked here"};
  p.optimizer_state_bytes = {12, "ZeRO paper (Rajbhandari et al. 2020), section 3.1: K = 12 for mixed-precision Adam"};
  p.optimizer_reads_grad_buffer = {false, "deepspeed/runtime/zero/stage_1_and_2.py: fp32 partitions of the gradients"};
  p.pipeline_p2p = {P2pSemantics::kBlocking, "deepspeed/runtime/pipe/p2p.py: blocking dist.send / dist.recv"};
  p.moe_dispatcher = {MoeDispatcher::kAllToAll, "deepspeed/moe/sharded_moe.py MOELayer.forward: _AllToAll of the "
                                                "dispatched tokens over the expert-parallel group"};
  p.moe_shared_expert_overlap = {false, "deepspeed/moe/layer.py: the residual (shared) expert runs after the all-to-all"};
  p.moe_probs_in_activation = {false, "deepspeed/moe/sharded_moe.py MOELayer.forward: the combine einsum weights the "
                                      "expert outputs (kept for backward)"};
  p.cp_comm_type = {CpCommType::kNone,
                    "DeepSpeed has no ring-attention context parallelism; DeepSpeed-Ulysses (deepspeed/sequence/"
                    "layer.py DistributedAttention, all-to-alls over heads) is a different scheme, not in this profile"};
  p.fp8_params = {false, "not in this profile: its Megatron-DeepSpeed runs train in fp16/bf16"};
  p.fp8_recipe = {Fp8Recipe::kDelayed, "not in this profile: its Megatron-DeepSpeed runs train in fp16/bf16"};
  p.fp8_saves_quantized_inputs = {false, "not in this profile: its Megatron-DeepSpeed runs train in fp16/bf16"};
  return p;
}

}  // namespace

ImplementationProfile PytorchEager();  // model/implementation_pytorch.cpp

namespace {

const std::map<std::string, ImplementationProfile>& Presets() {
  static const auto* presets = [] {
    auto* m = new std::map<std::string, ImplementationProfile>;  // NOLINT: immortal preset table
    for (auto p : {Parallax(), MegatronCore(), Nemo(), Megatron2021(), Megatron2022(), DeepSpeed(), PytorchEager()}) m->emplace(p.name, p);
    return m;
  }();
  return *presets;
}

std::string KnownNames() {
  std::string s;
  for (const auto& n : ImplementationNames()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Fact readers: each fact is {"value": ..., "source": "..."}, both required.
class FactReader {
 public:
  explicit FactReader(ObjectReader& facts) : facts_(facts) {}

  template <class T, class Parse>
  void Read(const char* key, Fact<T>& out, Parse parse) {
    if (!facts_.Has(key)) return;
    ObjectReader f = facts_.Object(key);
    if (!f.Has("value")) f.Fail("value", "missing (a fact needs a value and a source)");
    out.value = parse(f);
    out.source = f.String("source");
    if (out.source.empty()) f.Fail("source", "must not be empty");
    f.Finish();
  }

  template <class E>
  void Enum(const char* key, Fact<E>& out, std::initializer_list<E> values) {
    Read(key, out, [&](ObjectReader& f) {
      const std::string s = f.String("value");
      std::string list;
      for (E v : values) {
        if (s == ToString(v)) return v;
        list += (list.empty() ? "" : ", ") + std::string(ToString(v));
      }
      f.Fail("value", "unknown value \"" + s + "\" (expected one of " + list + ")");
    });
  }
  void Bool(const char* key, Fact<bool>& out) {
    Read(key, out, [](ObjectReader& f) { return f.Bool("value", false); });
  }
  void Int(const char* key, Fact<int64_t>& out, int64_t max = INT64_MAX) {
    Read(key, out, [&](ObjectReader& f) {
      const int64_t v = f.NonNegativeInt("value", 0);
      if (v > max) f.Fail("value", "must be at most " + std::to_string(max));
      return v;
    });
  }
  void Number(const char* key, Fact<double>& out) {
    Read(key, out, [](ObjectReader& f) { return f.NonNegativeNumber("value"); });
  }

 private:
  ObjectReader& facts_;
};

template <class T>
Json FactJson(const Fact<T>& f) {
  return Json{{"value", f.value}, {"source", f.source}};
}
template <class E>
Json EnumJson(const Fact<E>& f) {
  return Json{{"value", ToString(f.value)}, {"source", f.source}};
}

}  // namespace

const char* ToString(AttentionKernel k) { return k == AttentionKernel::kFlash ? "flash" : "unfused"; }
const char* ToString(GradDType d) { return d == GradDType::kFp32 ? "fp32" : "param"; }
const char* ToString(DpAlgorithm a) { return a == DpAlgorithm::kNccl ? "nccl" : "hierarchical"; }
const char* ToString(OptimizerKind k) { return k == OptimizerKind::kFusedMultiTensor ? "fused_multi_tensor" : "per_tensor"; }
const char* ToString(P2pSemantics p) { return p == P2pSemantics::kAsync ? "async" : "blocking"; }
const char* ToString(SpGradReduction r) {
  return r == SpGradReduction::kCoalesced ? "coalesced" : "per_parameter";
}
const char* ToString(MoeDispatcher d) {
  return d == MoeDispatcher::kAllToAll ? "alltoall" : d == MoeDispatcher::kAllGather ? "allgather" : "deepep";
}

const char* ToString(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kDelayed: return "delayed";
    case Fp8Recipe::kTensorwise: return "tensorwise";
    case Fp8Recipe::kBlockwise: return "blockwise";
    case Fp8Recipe::kMxfp8: return "mxfp8";
  }
  return "delayed";
}

const char* ToString(CpCommType t) {
  switch (t) {
    case CpCommType::kNone: return "none";
    case CpCommType::kP2p: return "p2p";
    case CpCommType::kAllGather: return "all_gather";
    case CpCommType::kA2a: return "a2a";
    case CpCommType::kA2aP2p: return "a2a+p2p";
  }
  return "?";
}
const char* ToString(LossReduction r) { return r == LossReduction::kAllGather ? "all_gather" : "all_reduce"; }
const char* ToString(GradAccumulation g) {
  return g == GradAccumulation::kInGemm ? "in_gemm" : g == GradAccumulation::kEveryMicrobatch ? "every_microbatch" : "after_first";
}

std::vector<std::string> ImplementationNames() {
  std::vector<std::string> out;
  for (const auto& [k, v] : Presets()) out.push_back(k);
  return out;
}

Result<ImplementationProfile> ImplementationPreset(const std::string& name) {
  auto it = Presets().find(name);
  if (it == Presets().end()) {
    return BadInput("--implementation: unknown implementation \"" + name + "\" (known: " + KnownNames() + ")");
  }
  return it->second;
}

ImplementationProfile DefaultImplementation() { return Parallax(); }

Result<ImplementationProfile> ImplementationFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<ImplementationProfile> {
    ObjectReader r(j, file, path);
    // A profile file has its header; one embedded in a plan (PlanToJson writes a profile read from a
    // file in full) may carry it too.
    if (path.empty() || r.Has("kind")) r.Header("implementation", 1);
    ImplementationProfile p = Parallax();
    if (r.Has("base")) {
      const std::string base = r.String("base");
      auto it = Presets().find(base);
      if (it == Presets().end()) r.Fail("base", "unknown implementation \"" + base + "\" (known: " + KnownNames() + ")");
      p = it->second;
    }
    p.name = r.String("name");
    p.description = r.String("description", p.description);
    if (r.Has("facts")) {
      ObjectReader facts = r.Object("facts");
      FactReader f(facts);
      f.Enum("attention", p.attention, {AttentionKernel::kUnfused, AttentionKernel::kFlash});
      f.Bool("attention_keeps_statistics", p.attention_keeps_statistics);
      f.Bool("flash_attention_2", p.flash_attention_2);
      f.Bool("fused_qkv_gemm", p.fused_qkv_gemm);
      f.Bool("fused_bias_activation", p.fused_bias_activation);
      f.Bool("fused_bias_dropout_add", p.fused_bias_dropout_add);
      f.Bool("applies_dropout", p.applies_dropout);
      f.Bool("fp32_cross_entropy", p.fp32_cross_entropy);
      f.Enum("loss_reduction", p.loss_reduction, {LossReduction::kAllReduce, LossReduction::kAllGather});
      f.Enum("sp_grad_reduction", p.sp_grad_reduction, {SpGradReduction::kPerParameter, SpGradReduction::kCoalesced});
      f.Bool("residual_join_in_norm", p.residual_join_in_norm);
      f.Enum("grad_buffer_dtype", p.grad_buffer_dtype, {GradDType::kFp32, GradDType::kParam});
      f.Enum("grad_reduce_dtype", p.grad_reduce_dtype, {GradDType::kFp32, GradDType::kParam});
      f.Enum("dp_algorithm", p.dp_algorithm, {DpAlgorithm::kNccl, DpAlgorithm::kHierarchical});
      f.Int("dp_bucket_MiB", p.dp_bucket_MiB);
      f.Int("zero3_prefetch_layers", p.zero3_prefetch_layers);
      f.Int("zero3_prefetch_params", p.zero3_prefetch_params);
      f.Int("max_zero_stage", p.max_zero_stage, 3);
      f.Int("max_zero_stage_pipelined", p.max_zero_stage_pipelined, 3);
      f.Bool("overlap_tp_comm", p.overlap_tp_comm);
      f.Bool("async_tp_backward", p.async_tp_backward);
      f.Enum("grad_accumulation", p.grad_accumulation,
             {GradAccumulation::kInGemm, GradAccumulation::kEveryMicrobatch, GradAccumulation::kAfterFirst});
      f.Bool("overlap_dp_reduce", p.overlap_dp_reduce);
      f.Bool("overlap_param_gather", p.overlap_param_gather);
      f.Number("launch_overhead_us", p.launch_overhead_us);
      f.Enum("optimizer", p.optimizer, {OptimizerKind::kFusedMultiTensor, OptimizerKind::kPerTensor});
      f.Bool("mixed_precision_passes", p.mixed_precision_passes);
      f.Int("optimizer_state_bytes", p.optimizer_state_bytes, 16);
      f.Bool("optimizer_reads_grad_buffer", p.optimizer_reads_grad_buffer);
      f.Enum("pipeline_p2p", p.pipeline_p2p, {P2pSemantics::kAsync, P2pSemantics::kBlocking});
      f.Enum("moe_dispatcher", p.moe_dispatcher, {MoeDispatcher::kAllToAll, MoeDispatcher::kAllGather, MoeDispatcher::kDeepEp});
      f.Bool("moe_shared_expert_overlap", p.moe_shared_expert_overlap);
      f.Bool("moe_probs_in_activation", p.moe_probs_in_activation);
      f.Enum("cp_comm_type", p.cp_comm_type,
             {CpCommType::kNone, CpCommType::kP2p, CpCommType::kAllGather, CpCommType::kA2a, CpCommType::kA2aP2p});
      f.Bool("fp8_params", p.fp8_params);
      f.Enum("fp8_recipe", p.fp8_recipe, {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8});
      f.Bool("fp8_saves_quantized_inputs", p.fp8_saves_quantized_inputs);
      facts.Finish();
    }
    r.Finish();
    return p;
  });
}

Json ImplementationToJson(const ImplementationProfile& p) {
  return Json{{"kind", "implementation"},
              {"version", 1},
              {"name", p.name},
              {"description", p.description},
              {"facts",
               {{"attention", EnumJson(p.attention)},
                {"attention_keeps_statistics", FactJson(p.attention_keeps_statistics)},
                {"flash_attention_2", FactJson(p.flash_attention_2)},
                {"fused_qkv_gemm", FactJson(p.fused_qkv_gemm)},
                {"fused_bias_activation", FactJson(p.fused_bias_activation)},
                {"fused_bias_dropout_add", FactJson(p.fused_bias_dropout_add)},
                {"applies_dropout", FactJson(p.applies_dropout)},
                {"fp32_cross_entropy", FactJson(p.fp32_cross_entropy)},
                {"loss_reduction", EnumJson(p.loss_reduction)},
                {"sp_grad_reduction", EnumJson(p.sp_grad_reduction)},
                {"residual_join_in_norm", FactJson(p.residual_join_in_norm)},
                {"grad_buffer_dtype", EnumJson(p.grad_buffer_dtype)},
                {"grad_reduce_dtype", EnumJson(p.grad_reduce_dtype)},
                {"dp_algorithm", EnumJson(p.dp_algorithm)},
                {"dp_bucket_MiB", FactJson(p.dp_bucket_MiB)},
                {"zero3_prefetch_layers", FactJson(p.zero3_prefetch_layers)},
                {"zero3_prefetch_params", FactJson(p.zero3_prefetch_params)},
                {"max_zero_stage", FactJson(p.max_zero_stage)},
                {"max_zero_stage_pipelined", FactJson(p.max_zero_stage_pipelined)},
                {"overlap_tp_comm", FactJson(p.overlap_tp_comm)},
                {"async_tp_backward", FactJson(p.async_tp_backward)},
                {"grad_accumulation", EnumJson(p.grad_accumulation)},
                {"overlap_dp_reduce", FactJson(p.overlap_dp_reduce)},
                {"overlap_param_gather", FactJson(p.overlap_param_gather)},
                {"launch_overhead_us", FactJson(p.launch_overhead_us)},
                {"optimizer", EnumJson(p.optimizer)},
                {"mixed_precision_passes", FactJson(p.mixed_precision_passes)},
                {"optimizer_state_bytes", FactJson(p.optimizer_state_bytes)},
                {"optimizer_reads_grad_buffer", FactJson(p.optimizer_reads_grad_buffer)},
                {"pipeline_p2p", EnumJson(p.pipeline_p2p)},
                {"moe_dispatcher", EnumJson(p.moe_dispatcher)},
                {"moe_shared_expert_overlap", FactJson(p.moe_shared_expert_overlap)},
                {"moe_probs_in_activation", FactJson(p.moe_probs_in_activation)},
                {"cp_comm_type", EnumJson(p.cp_comm_type)},
                {"fp8_params", FactJson(p.fp8_params)},
                {"fp8_recipe", EnumJson(p.fp8_recipe)},
                {"fp8_saves_quantized_inputs", FactJson(p.fp8_saves_quantized_inputs)}}}};
}

Result<ImplementationProfile> ResolveImplementation(const std::string& name_or_file) {
  const std::string name = name_or_file.empty() ? kDefaultImplementation : name_or_file;
  if (Presets().count(name) != 0) return Presets().at(name);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
    PX_ASSIGN(const Json j, LoadJsonFile(name));
    return ImplementationFromJson(j, name);
  }
  return ImplementationPreset(name);
}

int64_t UnfusedAttentionChunkItems(int64_t seq, int64_t items) { return UnfusedAttentionChunkItems(seq, seq, items); }

int64_t UnfusedAttentionChunkItems(int64_t seq, int64_t keys, int64_t items) {
  return std::clamp<int64_t>(kUnfusedAttentionChunkBytes / (seq * keys * 4), 1, std::max<int64_t>(items, 1));
}

int64_t DpBucketBytes(const ImplementationProfile& impl, int64_t layer_grad_bytes) {
  const int64_t mib = impl.dp_bucket_MiB.value;
  if (mib <= 0) return layer_grad_bytes;
  return std::min(layer_grad_bytes, mib * (int64_t{1} << 20));
}

}  // namespace parallax

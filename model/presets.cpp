// Built-in presets. Device figures are dense (non-sparse) datasheet peaks:
//   A100 SXM4: NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5, TF32 156, BF16/FP16 312 TFLOP/s;
//              HBM2 1,555 GB/s (40 GB) / HBM2e 2,039 GB/s (80 GB).
//   H100 SXM5: NVIDIA H100 datasheet (2023): FP32 67, TF32 494.7, BF16/FP16 989.4, FP8 1,978.9 TFLOP/s;
//              HBM3 3,350 GB/s, 80 GB.
//   H200 SXM:  NVIDIA H200 datasheet (2024): H100 compute; HBM3e 4,800 GB/s, 141 GB.
//   Capacity of a Hopper GPU: what CUDA reports as its total memory, the pool the allocator and the
//     context reserve share (as B200's below), not the datasheet's GB nor NVML's total. H100 80GB
//     HBM3: 79.11 GiB, the "total capacity" PyTorch's out-of-memory errors print on it
//     (vllm-project/vllm issue #27508, gpt-oss-120b on an H100: "GPU 0 has a total capacity of
//     79.11 GiB"); NVML shows 81,559
//     MiB = 79.65 GiB (huggingface/text-generation-inference issue #2572's nvidia-smi; Modal's
//     "Why does an NVIDIA H100 80GB card offer 85.52 GB?", thundergolfer.com). H200: 139.72 GiB
//     (sgl-project/sglang issue #2895, an out-of-memory error on 8x H200); NVML 143,771 MiB = 140.40
//     GiB (the same Modal table). Before 2026-11-29 the presets held 80 and 140.4 GiB, above what a
//     run can allocate: a plan within 0.9 GiB of the top was called feasible and was not.
// Networks: DGX A100 user guide (NVLink3 600 GB/s bidirectional per GPU, 8x 200 Gb/s HDR IB per node);
//   DGX H100/H200 (NVLink4 900 GB/s bidirectional per GPU, 8x 400 Gb/s NDR IB per node).
// Model shapes: GPT-3 (Brown et al. 2020, table 2.1), Megatron-LM SC'21 table 1, LLaMA (Touvron et al. 2023),
//   Llama 2 (2023), Llama 3 (Meta 2024) configs.
#include "model/presets.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

namespace parallax {
namespace {

ModelSpec Gpt(const std::string& name, int64_t layers, int64_t hidden, int64_t heads, int64_t vocab,
              int64_t seq_len, bool dropout) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.ffn_hidden = 4 * hidden;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.tie_embeddings = true;
  m.bias = true;
  m.dropout = dropout;
  return m;
}

ModelSpec Llama(const std::string& name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                int64_t ffn_hidden, int64_t vocab, int64_t seq_len) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.ffn_hidden = ffn_hidden;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRotary;
  m.tie_embeddings = false;
  m.bias = false;
  m.dropout = false;
  return m;
}

//! A mixture of experts on a LLaMA-style base (SwiGLU, RMSNorm, rotary, untied).
struct MoeShape {
  int64_t experts = 0, top_k = 0, expert_ffn = 0, shared = 0, dense_layers = 0, layer_freq = 1, head_dim = 0;
};
ModelSpec Moe(const std::string& name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
              int64_t ffn_hidden, int64_t vocab, int64_t seq_len, const MoeShape& e) {
  ModelSpec m = Llama(name, layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len);
  m.experts = e.experts;
  m.experts_per_token = e.top_k;
  m.moe_ffn_hidden = e.expert_ffn;
  m.shared_experts = e.shared;
  m.dense_layers = e.dense_layers;
  m.moe_layer_freq = e.layer_freq;
  m.head_size = e.head_dim;
  return m;
}

// MoE shapes from each model's published config.json (Hugging Face) or reference code:
//   deepseek-v3: deepseek-ai/DeepSeek-V3 config.json (61 layers, 3 dense of 18432, 256 experts of 2048,
//     top-8, 1 shared, MLA q 1536 / kv 512 / 128+64 / 128, sigmoid router 8 groups top-4, 1 MTP module).
//   qwen3-235b-a22b, qwen3-30b-a3b: Qwen/Qwen3-235B-A22B and Qwen/Qwen3-30B-A3B config.json.
//   mixtral-8x7b: mistralai/Mixtral-8x7B-v0.1 config.json.
//   llama4-maverick: meta-llama/Llama-4-Maverick-17B-128E config.json text_config (interleave_moe_layer_step 2,
//     intermediate_size_mlp 16384 for the dense layers, 1 shared expert, chunked attention of 8192 on three
//     layers of four).
//   grok-1: xai-org/grok-1 run.py (64 layers, emb 6144, 48 heads, 8 kv heads, widening factor 8 -> 32768,
//     8 experts top-2, vocab 131072, embedding shared with the output).
//   gpt-oss-120b: openai/gpt-oss-120b config.json (36 layers, 2880 hidden, 64 heads of 64, 8 kv heads,
//     128 experts of 2880 top-4, biases, alternating 128-token sliding windows).
void AddMoePresets(const std::function<void(ModelSpec)>& add) {
  ModelSpec ds = Moe("deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096, {256, 8, 2048, 1, 3, 1, 0});
  ds.attention = AttentionKind::kMla;
  ds.q_lora_rank = 1536;
  ds.kv_lora_rank = 512;
  ds.qk_nope_head_dim = 128;
  ds.qk_rope_head_dim = 64;
  ds.v_head_dim = 128;
  ds.router = RouterKind::kSigmoid;
  ds.router_groups = 8;
  ds.router_group_topk = 4;
  ds.mtp_layers = 1;
  add(ds);
  add(Moe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 4096, {128, 8, 1536, 0, 0, 1, 128}));
  add(Moe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 4096, {128, 8, 768, 0, 0, 1, 128}));
  add(Moe("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, {8, 2, 14336, 0, 0, 1, 0}));
  ModelSpec l4 = Moe("llama4-maverick", 48, 5120, 40, 8, 16384, 202048, 8192, {128, 1, 8192, 1, 0, 2, 0});
  l4.attention_window = 8192;
  l4.window_kind = WindowKind::kChunked;
  l4.full_attention_every = 4;
  add(l4);
  ModelSpec grok = Moe("grok-1", 64, 6144, 48, 8, 32768, 131072, 8192, {8, 2, 32768, 0, 0, 1, 0});
  grok.tie_embeddings = true;
  add(grok);
  ModelSpec oss = Moe("gpt-oss-120b", 36, 2880, 64, 8, 2880, 201088, 4096, {128, 4, 2880, 0, 0, 1, 64});
  oss.bias = true;
  oss.attention_window = 128;
  oss.full_attention_every = 2;
  add(oss);
}

const std::map<std::string, ModelSpec>& Models() {
  static const auto* models = [] {
    auto* m = new std::map<std::string, ModelSpec>;  // NOLINT: immortal preset table
    auto add = [&](ModelSpec s) { m->emplace(s.name, std::move(s)); };
    add(Gpt("gpt-tiny", 4, 64, 4, 256, 32, false));
    add(Gpt("gpt-1.3b", 24, 2048, 16, 51200, 2048, true));
    add(Gpt("gpt3-175b", 96, 12288, 96, 51200, 2048, true));
    // Megatron-LM SC'21 table 1 (seq 2048, vocab 51200).
    add(Gpt("megatron-1.7b", 24, 2304, 24, 51200, 2048, true));
    add(Gpt("megatron-3.6b", 30, 3072, 32, 51200, 2048, true));
    add(Gpt("megatron-7.5b", 36, 4096, 32, 51200, 2048, true));
    add(Gpt("megatron-18.4b", 40, 6144, 48, 51200, 2048, true));
    add(Gpt("megatron-39.1b", 48, 8192, 64, 51200, 2048, true));
    add(Gpt("megatron-76.1b", 60, 10240, 80, 51200, 2048, true));
    add(Gpt("megatron-145.6b", 80, 12288, 96, 51200, 2048, true));
    add(Gpt("megatron-310.1b", 96, 16384, 128, 51200, 2048, true));
    add(Gpt("megatron-529.6b", 105, 20480, 128, 51200, 2048, true));
    add(Gpt("megatron-1008b", 128, 25600, 160, 51200, 2048, true));
    add(Llama("llama-7b", 32, 4096, 32, 32, 11008, 32000, 2048));
    add(Llama("llama-13b", 40, 5120, 40, 40, 13824, 32000, 2048));
    add(Llama("llama-33b", 60, 6656, 52, 52, 17920, 32000, 2048));
    add(Llama("llama-65b", 80, 8192, 64, 64, 22016, 32000, 2048));
    add(Llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096));
    add(Llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192));
    add(Llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192));
    add(Llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192));
    // Llama 3.1 405B (Llama Team 2024, "The Llama 3 Herd of Models", table 3: 126 layers, model
    // dimension 16,384, FFN 53,248, 128 heads, 8 key/value heads, vocabulary 128,000 (128,256 in
    // the released config.json); pre-trained at 8,192 tokens): the model llama3-405b describes,
    // released as 3.1, under the name its users look for.
    add(Llama("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192));
    AddMoePresets(add);
    return m;
  }();
  return *models;
}

DeviceSpec Device(const std::string& name, PeakTflops peak, double memory_GiB, double hbm_GBps) {
  DeviceSpec d;
  d.name = name;
  d.peak_tflops = peak;
  d.memory_GiB = memory_GiB;
  d.hbm_GBps = hbm_GBps;
  return d;
}

// Micro-architecture (DeviceSpec::arch), each figure with its source:
//   SMs, L2: NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs, 40 MB L2); NVIDIA H100
//     Tensor Core GPU Architecture whitepaper (132 SMs on H100 SXM5, 50 MB L2).
//   GEMM tiles: Ampere: CUTLASS 2.x default tensor-op tiles (cutlass/gemm/device/default_gemm_configuration.h,
//     128x256x32 / 256x128x32 3 stages, 128x128x32 4, 128x64x32 4, 64x64x32 5). Hopper: CUTLASS 3.x
//     warp-specialized wgmma tiles (cutlass/gemm/collective/builders/sm90_gmma_builder.inl; cuBLAS sm90
//     kernel names sm90_xmma_gemm_*_128x256x64 / 256x128x64 / 128x128x64), k = 64 per stage, 4 stages.
//   Clocks: datasheet peaks assume 1410 MHz (A100) and 1830 MHz (H100: 528 tensor cores x 1024 FLOP/clk
//     x 1.83 GHz = 989.4 TFLOP/s, glennklockwood.com/garden/peak-FLOPS). Sustained under dense MMA at
//     the power limit: A100 ~1275 MHz at 400 W (ml-engineering MAMF table: 267.9 of 312 TFLOP/s at
//     6912x16384x2048, with this tile model's 4.5% pipeline fill: 0.859 / 0.955 = 0.90 of 1410 MHz);
//     GH100 at 700 W ~1450 MHz (ml-engineering mamf-finder MSMF on H200 SXM, same GH100 die and TDP:
//     702.9 TFLOP/s sustained at 1440-1465 MHz, compute/accelerator/benchmarks/README.md).
//   sustained_matmul_tflops (GH100): 702.9 TFLOP/s bf16, mamf-finder's MSMF ("maximum sustainable matmul
//     FLOPS": thermally soaked, power-saturated, trimmed median of 5) on H200 SXM, the same GH100 die, 132
//     SMs and 700 W TDP as H100 SXM (ml-engineering compute/accelerator/benchmarks/README.md, "What we
//     measured: alone vs all-8 concurrent": 702.9 alone at ~1440-1465 MHz, 698.6 mean with all 8 GPUs
//     busy); the burst MAMF of H100 SXM is 794.5 (compute/accelerator/README.md, "H200 is the same").
//     Per clock that is 0.895 of the tensor peak at 1452 MHz, so the clock ratio alone (1450/1830,
//     which puts this tile model's best shape at 772) overstates it; the tile model is scaled to it.
//     A100 has no published MSMF; its best measured rate, MAMF 271.2 TFLOP/s bf16 (A100 SXM, torch 2.6,
//     1024x10240x5120, same README table; the older 267.9 at 6912x16384x2048), is a boost burst and so an
//     upper bound on the sustained rate: the tile model is capped to it (at 1275 MHz alone its best
//     fat shape reached 280.5, above anything measured).
//   SFU: 16 exp2/ex2 results per clock per SM on compute capability 8.0 and 9.0 (CUDA C++ Programming
//     Guide, "Arithmetic Instructions" throughput table); H100: 3.9 TFLOP/s of special functions
//     (Shah et al. 2024, FlashAttention-3, section 3.1), which is 132 x 16 x 1.83 GHz.
//   warp_specialized_mma: Hopper's asynchronous wgmma + TMA let a kernel overlap softmax with the GEMMs
//     (FlashAttention-3, section 3.1); Ampere's mma.sync does not (FlashAttention-2).
//   dram_fraction 0.88: streaming kernels reach 85-90% of HBM pin bandwidth (refresh, bus turnaround).
//     Public microbenchmarks: on a DGX A100 (40 GB, 1448 GiB/s nominal) a 1 GiB device memcpy peaks at
//     1225 GiB/s, 0.846 (GPUInspector.jl documentation, "Example: Data Bandwidth",
//     pc2.github.io/GPUInspector.jl); on an A100 80GB SXM a read kernel reaches 1.80 of 2.04 TB/s,
//     0.88, which Nsight Compute reports as 88% of peak, and the best kernel of an NVIDIA GTC talk
//     about 90% (forums.developer.nvidia.com/t/trouble-to-reach-peak-bandwidth-of-a100/339083).
//     Our own elementwise kernel (calibrate's largest `elementwise` sample, its bandwidth) reached 0.72 of the
//     H200's 4.8 TB/s and 0.765 of the H100's 3.35 TB/s (data/calibration/h200-2026-11-26,
//     h100-2026-11-27): a lower bound, our kernel not being tuned.
//   dram_latency 0.6 us: a loaded latency (Little's law: a kernel reaches the achieved bandwidth only
//     with bandwidth x latency bytes in flight; memory-bound ops are priced (bytes + those bytes) /
//     bandwidth). Unloaded DRAM latency, public: a one-warp pointer chase (te42kyfo/gpu-benches,
//     gpu-latency/a100_80.txt, h100_pcie.txt) takes ~570 cycles at 1410 MHz = ~0.40 us on the
//     A100 and ~650 cycles at 1755 MHz = ~0.37 us on the H100 PCIe; loaded latency is higher
//     (queueing). Our own probe on one H100 SXM (bench/gpu/dram_latency.cu, 2026-11-27; figures
//     in data/calibration/h100-2026-11-27/README.md): unloaded 342 ns (676 cycles at 1980 MHz); a
//     streaming read saturates at 3.09 TB/s (0.92 of 3.35, so a read-only kernel sits above the
//     0.88 streaming fraction) and reaches 87-93% of that with 2.16 MB in flight, where in flight /
//     bandwidth is 0.75-0.81 us; 0.6 us x 3.35 TB/s = 2.0 MB sits at that knee. Not measured on an
//     A100 or an H200: the same figure is taken for both.
//   unfused_attention_fraction 0.68, unfused_attention_bwd_fraction 0.53 (Ampere): the passes of an
//     unfused attention core over the s x s scores (batched QK^T / AV GEMMs, scale-mask-softmax,
//     dropout) reach less than a streaming copy. Source: Dao et al. 2022, FlashAttention (arXiv
//     2205.14135 v2), appendix E.6, tables 15, 16, 18, 19: Megatron-LM's attention on one A100 40
//     GB, batch 16, 8 heads of 64, fp16, seq 2048, with and without dropout (6.56 / 4.28 ms forward,
//     10.80 / 8.86 ms backward). Forward: with every byte at 0.88 our counts predicted 0.794 / 0.757
//     of those times, so all forward passes and the score GEMMs (both directions: the backward
//     runs the same shapes, and refine pools a shape's samples) at 0.88 x their geometric mean
//     0.775 = 0.68. Backward: with its GEMMs at 0.68, its softmax / dropout gradient passes at the
//     fraction that makes the geometric mean of predicted / measured over the two backward rows 1:
//     0.525, rounded 0.53 (rows -6.0% / +7.6%). A kernel microbenchmark, not a training run; the
//     PyTorch baseline of the same tables is within 1-3%. Compared with what it was not taken
//     from (tests/planner/megatron_validation_test.cpp): the 22B layer's selective-recompute
//     overhead (Korthikanti et al. 2022 table 4, A100 80 GB, head dim 96) matches; the same
//     tables' shorter sequences (17-44% at seq 512-1024) and FlashAttention-2's PyTorch baseline on
//     an A100 80 GB (13-38%) stay faster in the model. Hopper: not set (the streaming 0.88): no
//     published measurement of unfused attention on an H100.
//   kernel_overhead 2 us: launch-to-start + tail of a kernel on a busy stream. Our own measurement:
//     on one H100 (2026-11-27, scripts/fidelity.sh gpu, gpt 12 x 1024 micro-batch 2, ops timed by
//     CUDA events) consecutive ops of a micro-batch on the busy compute stream started a median
//     1.9 us after the previous one ended (1.3-2.0 us by op pair, 810 pairs a step; an event
//     record between them included); the larger gaps at layer boundaries are host time
//     (CostDb::op_gap_us).
//   nccl_channels 8: NCCL's default channel count on NVSwitch systems (one CTA = one SM each).
//   nvlink_sharp (Hopper): the third-generation NVSwitch of HGX/DGX H100 and H200 boards reduces
//     and multicasts in the switch (NVLink SHARP; H100 whitepaper, "NVLink Switch System"); NCCL
//     runs an intra-node all-reduce over it (algorithm NVLS, 2.17+, on by default since 2.19) when
//     its model says NVLS beats the ring: NVIDIA/nccl src/graph/tuning.cc (nvlsEfficiency 0.85 on
//     Hopper, 25 us NVLS latency over NVLink) and src/graph/search.cc (one NVLS channel per GPU).
//     Measured: 476 GB/s busbw for an 8x H100 all-reduce (NVIDIA/nccl-tests issue 290, a maintainer
//     confirming NVLS), where a ring tops out near 360. Ampere has no NVLS (nvlsEfficiency 0).
//   accumulate_epilogue_fraction 0.8 (Hopper): a weight-gradient GEMM that adds into the fp32
//     gradient buffer (cuBLASLt beta 1 with fp32 C and D: our executor's LinearBackward and Megatron-
//     Core / NeMo with gradient_accumulation_fusion) reads and writes 4-byte C where a plain GEMM writes
//     a 2-byte D. Our own calibration on one H200 (data/calibration/h200-2026-11-26, 2026-11-26,
//     cuBLASLt 13): GPT-1.3B's accumulating 8192x2048x2048, 6144x2048x2048 and 51200x2048x2048 took
//     115.8, 90.0 and 621.2 us against 91.3, 69.9 and 557.0 us for the plain transposed shapes of the
//     same work (1.27, 1.29, 1.11x): 1.03, 1.12 and 0.43 of the extra 6 B per element at the
//     streaming bandwidth (4800 GB/s x 0.88), geometric mean 0.79, so 0.8 of that traffic is priced
//     on top of the main loop. One K (2048) only: the term is the C traffic, so its share falls as 1/K
//     (the alternative reading, a per-FLOP cost of the transposed operand, would not); test
//     CostDbAccumulate.HopperEpilogueFigureAgainstTheH200Calibration. Ampere: 0, not measured.
//   fa2_attention_fraction 0.62 (Hopper): Tri Dao's FlashAttention-2 against cuDNN's fused attention
//     on one H100 80GB SXM5, BF16, head dim 128, sequence 8k: 333 / 529 TFLOP/s forward causal,
//     370 / 600 forward non-causal, 318 / 518 backward (Shah et al. 2024, FlashAttention-3, arXiv
//     2407.08608, figures 5 and 6), ratios 0.63, 0.62, 0.61, geometric mean 0.62. The model's fused
//     attention is cuDNN's (the Llama 3.1 context-parallel runs, cuDNN by Transformer Engine's
//     default, are predicted within 3%: docs/validation.md). FA2 runs Ampere's mma.sync on Hopper,
//     without the warpgroup MMA and the warp specialization of cuDNN and FlashAttention-3. Ampere:
//     not set (FlashAttention-2 is that generation's fast kernel; the A100 attention validation
//     runs it). Blackwell: not measured, not set.
//   context_reserve 723 MiB (Ampere): the first CUDA call of a PyTorch process takes 723 MiB of device
//     memory (discuss.pytorch.org/t/what-is-the-reason-for-pytorchs-gpu-memory-floor/73021); not
//     measured on an A100 by us.
//   context_reserve 2821 MiB (Hopper): our own measurement, not a lower bound from the forum figure:
//     on an H200 (CUDA 13.0, driver 580.159.04, 2026-11-26) a parallax process training GPT-125M bf16
//     held 2820.6 MiB of device memory outside its caching allocator after three steps (530.8 MiB
//     when the backend had started; the rest is NCCL's one-rank world communicator and the
//     lazily loaded cuBLASLt and parallax kernels): test CudaGpu.MemoryOutsideTheAllocatorWithin-
//     ThePlannerReserve, docs/cuda.md "Measured on a GPU". Taken for the H100 too (same software).
//   blas_workspace: cuBLAS recommends 4 MiB of workspace per handle before Hopper and 32 MiB on Hopper
//     (cuBLAS docs, cublasSetWorkspace; PyTorch CUDABlas.cpp follows it since PR #120925).
Microarch Ampere() {
  Microarch a;
  a.sm_count = 108;
  a.l2_MiB = 40;
  a.gemm_tiles = {GemmTile{256, 128, 32, 3}, GemmTile{128, 256, 32, 3}, GemmTile{128, 128, 32, 4},
                  GemmTile{128, 64, 32, 4}, GemmTile{64, 64, 32, 5}};
  a.peak_clock_MHz = 1410;
  a.sustained_clock_MHz = 1275;
  a.sustained_matmul_tflops = 271.2;
  a.sfu_ops_per_clock_per_sm = 16;
  a.warp_specialized_mma = false;
  a.dram_fraction = 0.88;
  a.unfused_attention_fraction = 0.68;
  a.unfused_attention_bwd_fraction = 0.53;
  a.dram_latency_us = 0.6;
  a.kernel_overhead_us = 2;
  a.nccl_channels = 8;
  a.context_reserve_MiB = 723;
  a.blas_workspace_MiB = 4;
  return a;
}

Microarch Hopper() {
  Microarch a = Ampere();
  a.sm_count = 132;
  a.l2_MiB = 50;
  a.gemm_tiles = {GemmTile{128, 256, 64, 4}, GemmTile{256, 128, 64, 4}, GemmTile{128, 128, 64, 4},
                  GemmTile{64, 128, 64, 4}};
  a.peak_clock_MHz = 1830;
  a.sustained_clock_MHz = 1450;
  a.sustained_matmul_tflops = 702.9;
  a.warp_specialized_mma = true;
  a.nvlink_sharp = true;
  a.accumulate_epilogue_fraction = 0.8;
  a.unfused_attention_fraction = 0;  // no published Hopper measurement: the streaming fraction
  a.unfused_attention_bwd_fraction = 0;
  a.fa2_attention_fraction = 0.62;
  a.context_reserve_MiB = 2821;
  a.blas_workspace_MiB = 32;
  return a;
}

// Blackwell (B200, GB200) and Blackwell Ultra (B300, GB300), each figure with its source; what no
// public source gives is said so and left at what the model does without it.
//   Dense peaks (NVIDIA lists sparse figures, "with sparsity"; dense is half, which NVIDIA's own
//   per-GPU tables and the figures below agree with):
//     B200 (HGX/DGX B200, 1000 W): NVIDIA HGX B200 specifications, "Individual Blackwell GPU": FP4 18,
//       FP8/FP6 9, FP16/BF16 4.5, TF32 2.2 PFLOPS sparse, FP32 75 TFLOPS; 180 GB HBM3E at 7.7 TB/s
//       (nvidia.com/en-us/data-center/hgx, the table beside GB200 NVL72's): dense FP4 9,000,
//       FP8 4,500, BF16 2,250, TF32 1,100 TFLOPS. glennklockwood.com/garden/processors/B200 lists the
//       same dense figures for the 1,000 W HGX part.
//     GB200 (GB200 NVL72, 1200 W): the same NVIDIA table: FP4 20, FP8/FP6 10, FP16/BF16 5, TF32 2.5
//       PFLOPS sparse, FP32 80 TFLOPS; 186 GB HBM3E at 8 TB/s (rack: 13.4 TB, 576 TB/s over 72 GPUs):
//       dense FP4 10,000, FP8 5,000, BF16 2,500, TF32 1,250.
//     B300 (HGX B300, Blackwell Ultra): NVIDIA HGX B300 specifications for 8 GPUs: FP4 108 PFLOPS
//       dense, FP8/FP6 72, FP16/BF16 36, TF32 18 PFLOPS sparse, FP32 600 TFLOPS, up to 2.3 TB HBM3e
//       (per GPU: FP4 13,500, FP8 4,500, BF16 2,250, TF32 1,125 dense, FP32 75; 288 GB). Others
//       print 13,125 (glennklockwood.com/garden/processors/B300) and 14,000 (verda.com/blog/gb300-
//       nvl72-architecture) dense FP4; only FP4, which no precision here computes in, differs.
//       HBM 7.7 TB/s: verda.com/blog/gb300-nvl72-architecture, per-GPU table (B300: 270 GB shown by
//       the driver, 7.7 TB/s).
//     GB300 (GB300 NVL72): NVIDIA GB300 NVL72 specifications: FP4 1,080 PFLOPS dense per rack,
//       FP8/FP6 720, FP16/BF16 360, TF32 180 PFLOPS sparse, 576 TB/s: per GPU FP4 15,000, FP8 5,000,
//       BF16 2,500, TF32 1,250 dense, 8 TB/s; "Inside NVIDIA Blackwell Ultra" (developer.nvidia.com
//       blog, 2025): 15 PFLOPS dense NVFP4, 288 GB HBM3E, 8 TB/s per GPU. FP32 80 (verda.com table).
//   Memory_GiB: B200 178.35 GiB, what CUDA reports as the device's total global memory (pytorch/ao
//     PR #4002, a device query on a B200: "Total Global Memory: 178.35 GB" from 182642 MiB; nvidia-smi
//     shows 183359 MiB, NVIDIA/TensorRT-LLM issue #10278), the pool the context reserve below and the
//     allocator share. The others take the datasheet capacity in GiB (186 GB = 173.2; 288 GB =
//     268.2): what CUDA reports is larger but not found published per product, and a smaller
//     capacity keeps the memory model an upper bound of what fits.
//   NVLink 5: 1.8 TB/s bidirectional per GPU, 18 links (NVIDIA HGX and NVL72 specifications), 900 GB/s
//     per direction.
//   SMs: B200 148 (two dies of 80 SMs with 74 enabled each: chipsandcheese.com, "Nvidia's B200:
//     Keeping the CUDA Juggernaut Rolling", measured on a Verda 8x B200 instance), L2 126 MB (same
//     article). Blackwell Ultra 160 SMs, 640 tensor cores ("Inside NVIDIA Blackwell Ultra"). GB200's
//     GPU: NVIDIA publishes no SM count of its own; the B200 configuration (148) is assumed (the same
//     Blackwell GPU at a higher power limit: its peaks are 2,500 / 2,250 = 1.11x B200's). L2 of
//     Blackwell Ultra: not published; B200's 126 MB is taken (informational: no cost reads l2_MiB).
//   GEMM tiles: tcgen05 MMA (PTX ISA, sm_100a) computes up to 128 x 256 per SM (cta_group::1: M 64 or
//     128; cta_group::2: M 256 over an SM pair, 128 rows each), K 64 per stage for 16-bit and 8-bit
//     inputs alike in CUTLASS's sm100 examples (MmaTileShape 256x128x64 2-SM and 128x128x64 1-SM,
//     examples/70_blackwell_gemm, 71_blackwell_gemm_with_collective_builder, the FP8 example with
//     amax output): per-SM tiles 128x256x64, 128x128x64 and 64x128x64. Stages 4: 228 KB of shared
//     memory per SM (CUDA Programming Guide, compute capability 10.0) over the 48 KB per stage of
//     the 128x256x64 16-bit tile (CUTLASS's StageCountAutoCarveout arithmetic).
//   warp_specialized_mma: tcgen05.mma is asynchronous (issued by one thread, accumulating in tensor
//     memory, completion signalled on an mbarrier; PTX ISA "tcgen05"), so softmax overlaps the MMAs
//     as on Hopper.
//   Matmul rate: no sustained (thermally soaked) figure is published for Blackwell; the best
//     measured burst rate is, and as for A100 the tile model is capped to it (an upper bound on the
//     sustained rate): MAMF bf16 B200 SXM 1745.0 TFLOP/s (77.6% of 2250), GB200 1822.0 (72.9% of
//     2500), B300 SXM 1769.0 (78.6% of 2250) (stas00/ml-engineering @ 744d01e
//     compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table", mamf-finder,
//     mean of 100 iterations at the best shape; its FP8 rows agree: 76.3 / 72.3 / 74.5% of peak).
//     GB300 has no measurement: uncapped, the tile model at the datasheet peak (optimistic).
//   Not published, left at the model's default: peak and sustained clocks (the tile model's clock
//     derating comes from the matmul cap above); the special-function rate per SM and clock (NVIDIA gives 5 and 10.7 TeraExponentials/s
//     for Blackwell and Blackwell Ultra, verda.com table, but without the clock it is priced free,
//     as on a device with sfu_ops_per_clock_per_sm 0); NVLink SHARP: NCCL's NVLS model has an
//     efficiency of 0.74 on Blackwell (NVIDIA/nccl src/graph/tuning.cc nvlsEfficiency) where this
//     model's NVLS formula holds Hopper's 0.85, so NVLS is off and all-reduces inside a domain are
//     priced as NCCL's rings (slower, conservative).
//   Carried over from Hopper (not measured on Blackwell; the same software stack): dram_fraction 0.88,
//     dram_latency 0.6 us, kernel overhead 2 us, 8 NCCL channels, context reserve 2821 MiB, cuBLAS
//     workspace 32 MiB, the accumulating-epilogue fraction 0.8; no unfused-attention fractions.
Microarch Blackwell(int64_t sm_count, double mamf_bf16_tflops) {
  Microarch a = Hopper();
  a.sm_count = sm_count;
  a.l2_MiB = 126e6 / (1024.0 * 1024.0);
  a.gemm_tiles = {GemmTile{128, 256, 64, 4}, GemmTile{128, 128, 64, 4}, GemmTile{64, 128, 64, 4}};
  a.peak_clock_MHz = 0;
  a.sustained_clock_MHz = 0;
  a.sustained_matmul_tflops = mamf_bf16_tflops;
  a.sfu_ops_per_clock_per_sm = 0;
  a.warp_specialized_mma = true;
  a.nvlink_sharp = false;
  a.fa2_attention_fraction = 0;  // not measured on Blackwell
  return a;
}

const std::map<std::string, DeviceSpec>& Devices() {
  static const auto* devices = [] {
    auto* d = new std::map<std::string, DeviceSpec>;  // NOLINT: immortal preset table
    const PeakTflops a100{19.5, 156, 312, 312, 0};
    const PeakTflops h100{66.9, 494.7, 989.4, 989.4, 1978.9};
    auto with = [](DeviceSpec dev, Microarch a) {
      dev.arch = std::move(a);
      return dev;
    };
    d->emplace("a100-sxm-40g", with(Device("a100-sxm-40g", a100, 40, 1555), Ampere()));
    d->emplace("a100-sxm-80g", with(Device("a100-sxm-80g", a100, 80, 2039), Ampere()));
    d->emplace("h100-sxm-80g", with(Device("h100-sxm-80g", h100, 79.11, 3350), Hopper()));
    d->emplace("h200-sxm-141g", with(Device("h200-sxm-141g", h100, 139.72, 4800), Hopper()));
    // Blackwell: dense peaks per GPU, TFLOP/s {fp32, tf32, bf16, fp16, fp8, fp4}; sources above Blackwell().
    constexpr double kGB = 1e9 / (1024.0 * 1024.0 * 1024.0);  // GiB per GB
    d->emplace("b200", with(Device("b200", PeakTflops{75, 1100, 2250, 2250, 4500, 9000}, 178.35, 7700),
                            Blackwell(148, 1745.0)));
    d->emplace("gb200", with(Device("gb200", PeakTflops{80, 1250, 2500, 2500, 5000, 10000}, 186 * kGB, 8000),
                             Blackwell(148, 1822.0)));
    d->emplace("b300", with(Device("b300", PeakTflops{75, 1125, 2250, 2250, 4500, 13500}, 288 * kGB, 7700),
                            Blackwell(160, 1769.0)));
    d->emplace("gb300", with(Device("gb300", PeakTflops{80, 1250, 2500, 2500, 5000, 15000}, 288 * kGB, 8000),
                             Blackwell(160, 0)));
    // One core of an AVX2 machine, the device one CPU rank runs on: 2.5 GHz x 32 fp32 FLOP/cycle
    // (two 8-lane FMA units: 2 x 8 x 2) = 0.08 TFLOP/s, and a core's share (half) of a two-channel
    // DDR4 host's nominal 20 GB/s; 8 GiB. Nominal figures, meant to be replaced by
    // `parallax calibrate --backend cpu`, which measures the machine it runs on.
    d->emplace("cpu", Device("cpu", PeakTflops{0.08, 0, 0, 0, 0}, 8, 10));
    return d;
  }();
  return *devices;
}

//! Cores this process may run on (sysconf(_SC_NPROCESSORS_ONLN)), at least 1.
int64_t LocalCores() { return std::max<int64_t>(1, static_cast<int64_t>(::sysconf(_SC_NPROCESSORS_ONLN))); }

//! Physical memory of this host in GiB (0 when the system does not say).
double LocalMemoryGiB() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<double>(pages) * static_cast<double>(page) / (1024.0 * 1024.0 * 1024.0);
}

ClusterSpec Cluster(const std::string& name, int64_t gpus_per_node, const std::string& device, LinkSpec intra,
                    LinkSpec inter) {
  ClusterSpec c;
  c.name = name;
  c.nodes = 1;
  c.gpus_per_node = gpus_per_node;
  c.device = Devices().at(device);
  c.intra_node = intra;
  c.inter_node = inter;
  return c;
}

const std::map<std::string, ClusterSpec>& Clusters() {
  static const auto* clusters = [] {
    auto* c = new std::map<std::string, ClusterSpec>;  // NOLINT: immortal preset table
    // Link latencies (send/recv and the hierarchical DP algorithm; NCCL collectives use NCCL's own
    // tables, collective.cpp): NVLink 3 us, within NCCL's per-step NVLink latencies of 1.9 (LL128)
    // and 3.4 us (Simple) (NVIDIA/nccl src/graph/tuning.cc hwLat) and the ~3 us peer-to-peer write
    // latency of a DGX A100 (p2pBandwidthLatencyTest, NVIDIA/nccl-tests issue 123); InfiniBand 5 us,
    // NCCL's network latency for tree LL (tuning.cc hwLat[NET]; ring LL 2.7, Simple 9.6-14 by
    // version); an 8-byte all-reduce between two A100 nodes measured 19-20 us over HDR
    // (NVIDIA/nccl-tests issue 150), two such hops plus NCCL's base latency.
    c->emplace("dgx-a100", Cluster("dgx-a100", 8, "a100-sxm-80g", {300, 3}, {200, 5}));
    c->emplace("dgx-h100", Cluster("dgx-h100", 8, "h100-sxm-80g", {450, 3}, {400, 5}));
    c->emplace("dgx-h200", Cluster("dgx-h200", 8, "h200-sxm-141g", {450, 3}, {400, 5}));
    // Blackwell: NVLink 5 at 900 GB/s per GPU per direction (1.8 TB/s bidirectional), the link
    // latencies above (NVLink 5 and the NICs' are not published apart from them).
    //   DGX B200: 8 GPUs on one NVLink 5 switch board; 8 single-port ConnectX-7 at 400 Gb/s
    //     (NVIDIA DGX B200 datasheet): 400 GB/s per node.
    //   GB200 NVL72: a node is one 1RU compute tray of 4 GPUs and 2 Grace CPUs; 18 trays and 9 NVLink
    //     switch trays form one 72-GPU NVLink domain (NVIDIA Multi-Node NVLink tuning guide, "The 72x1
    //     configuration"); each tray's GPUs reach the compute fabric through ConnectX-7 at 400 Gb/s,
    //     one per GPU (same guide: "CX7" on the compute tray; NVIDIA GB200 NVL72 reference
    //     architecture): 200 GB/s per tray. The preset is one rack (18 trays); a job given 16-tray
    //     Slurm segments sets "nvlink_domain": 64.
    //   GB300 NVL72: the same rack with Blackwell Ultra; 4 ConnectX-8 per tray (NVIDIA NVL72 AI
    //     Factory enterprise reference architecture, "NVIDIA GB300 NVL Compute Tray") at 800 Gb/s:
    //     400 GB/s per tray.
    c->emplace("dgx-b200", Cluster("dgx-b200", 8, "b200", {900, 3}, {400, 5}));
    for (const auto& [name, device, nic_GBps] : {std::tuple{"gb200-nvl72", "gb200", 200.0},
                                                 std::tuple{"gb300-nvl72", "gb300", 400.0}}) {
      ClusterSpec rack = Cluster(name, 4, device, {900, 3}, {nic_GBps, 5});
      rack.nodes = 18;
      rack.nvlink_domain = 72;
      c->emplace(name, rack);
    }
    // This host: one device per online core (one MPI rank each, over shared memory), each with its
    // share of the host's memory; a 10 GbE link between hosts. Compute and link figures stay nominal
    // until `parallax calibrate --cluster-out` measures them.
    ClusterSpec local = Cluster("local-cpu", LocalCores(), "cpu", {5, 1}, {1.25, 20});
    if (const double mem = LocalMemoryGiB(); mem > 0) local.device.memory_GiB = mem / static_cast<double>(LocalCores());
    local.cpus_per_node = LocalCores();  // ranks beyond the cores share them (SlowestCoreShare)
    c->emplace("local-cpu", local);
    return c;
  }();
  return *clusters;
}

template <class T>
std::vector<std::string> Names(const std::map<std::string, T>& m) {
  std::vector<std::string> out;
  out.reserve(m.size());
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

}  // namespace

std::optional<ModelSpec> ModelPreset(const std::string& name) {
  auto it = Models().find(name);
  if (it == Models().end()) return std::nullopt;
  return it->second;
}

std::optional<DeviceSpec> DevicePreset(const std::string& name) {
  auto it = Devices().find(name);
  if (it == Devices().end()) return std::nullopt;
  return it->second;
}

std::optional<ClusterSpec> ClusterPreset(const std::string& name) {
  auto it = Clusters().find(name);
  if (it == Clusters().end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ModelPresetNames() { return Names(Models()); }
std::vector<std::string> DevicePresetNames() { return Names(Devices()); }
std::vector<std::string> ClusterPresetNames() { return Names(Clusters()); }

}  // namespace parallax

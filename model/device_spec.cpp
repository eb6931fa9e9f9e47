#include "model/device_spec.h"

#include "model/presets.h"

namespace parallax {

double PeakTflops::For(DType t) const {
  switch (t) {
    case DType::kFp32: return fp32;
    case DType::kTf32: return tf32;
    case DType::kBf16: return bf16;
    case DType::kFp16: return fp16;
    case DType::kFp8: return fp8;
  }
  return 0;
}

const char* ToString(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp8: return "fp8";
  }
  return "?";
}

Result<DType> DTypeFromString(const std::string& s) {
  for (DType t : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16, DType::kFp8}) {
    if (s == ToString(t)) return t;
  }
  return BadInput("unknown dtype \"" + s + "\" (expected fp32, tf32, bf16, fp16 or fp8)");
}

Result<DeviceSpec> DeviceFromJson(const Json& j, const std::string& file, const std::string& path) {
  return CatchJsonErrors([&]() -> Result<DeviceSpec> {
    if (j.is_string()) {
      const std::string name = j.get<std::string>();
      if (auto d = DevicePreset(name)) return *d;
      std::string names;
      for (const auto& n : DevicePresetNames()) names += (names.empty() ? "" : ", ") + n;
      return BadInput(file + ": " + path + ": unknown device preset \"" + name + "\" (known: " + names + ")");
    }
    ObjectReader r(j, file, path);
    DeviceSpec d;
    d.name = r.String("name");
    ObjectReader p = r.Object("peak_tflops");
    d.peak_tflops.fp32 = p.NonNegativeNumber("fp32", 0);
    d.peak_tflops.tf32 = p.NonNegativeNumber("tf32", 0);
    d.peak_tflops.bf16 = p.NonNegativeNumber("bf16", 0);
    d.peak_tflops.fp16 = p.NonNegativeNumber("fp16", 0);
    d.peak_tflops.fp8 = p.NonNegativeNumber("fp8", 0);
    d.peak_tflops.fp4 = p.NonNegativeNumber("fp4", 0);
    p.Finish();
    if (d.peak_tflops.fp32 <= 0 && d.peak_tflops.bf16 <= 0 && d.peak_tflops.fp16 <= 0) {
      p.Fail("fp32", "at least one of fp32, bf16, fp16 must be > 0");
    }
    d.memory_GiB = r.PositiveNumber("memory_GiB");
    d.hbm_GBps = r.PositiveNumber("hbm_GBps");
    if (r.Has("microarch")) {
      ObjectReader a = r.Object("microarch");
      Microarch& m = d.arch;
      m.sm_count = a.NonNegativeInt("sm_count", 0);
      m.l2_MiB = a.NonNegativeNumber("l2_MiB", 0);
      if (a.Has("gemm_tiles")) {
        const Json& tiles = a.Raw("gemm_tiles");
        if (!tiles.is_array()) a.Fail("gemm_tiles", "expected an array of {m, n, k, stages}");
        for (size_t i = 0; i < tiles.size(); ++i) {
          ObjectReader t(tiles[i], r.file(), a.PathOf("gemm_tiles") + "/" + std::to_string(i));
          GemmTile g;
          g.m = t.PositiveInt("m");
          g.n = t.PositiveInt("n");
          g.k = t.PositiveInt("k");
          g.stages = t.NonNegativeInt("stages", 0);
          t.Finish();
          m.gemm_tiles.push_back(g);
        }
      }
      m.peak_clock_MHz = a.NonNegativeNumber("peak_clock_MHz", 0);
      m.sustained_clock_MHz = a.NonNegativeNumber("sustained_clock_MHz", m.peak_clock_MHz);
      m.sustained_matmul_tflops = a.NonNegativeNumber("sustained_matmul_tflops", 0);
      m.sfu_ops_per_clock_per_sm = a.NonNegativeNumber("sfu_ops_per_clock_per_sm", 0);
      m.warp_specialized_mma = a.Bool("warp_specialized_mma", false);
      m.dram_fraction = a.PositiveNumber("dram_fraction", 1.0);
      if (m.dram_fraction > 1.0) a.Fail("dram_fraction", "must be <= 1");
      for (auto [key, field] : {std::pair{"unfused_attention_fraction", &m.unfused_attention_fraction},
                                std::pair{"unfused_attention_bwd_fraction", &m.unfused_attention_bwd_fraction}}) {
        *field = a.NonNegativeNumber(key, 0);
        if (*field > 1.0) a.Fail(key, "must be <= 1");
      }
      m.dram_latency_us = a.NonNegativeNumber("dram_latency_us", 0);
      m.kernel_overhead_us = a.NonNegativeNumber("kernel_overhead_us", 0);
      m.nccl_channels = a.NonNegativeInt("nccl_channels", 0);
      m.nvlink_sharp = a.Bool("nvlink_sharp", false);
      m.fa2_attention_fraction = a.NonNegativeNumber("fa2_attention_fraction", 0);
      if (m.fa2_attention_fraction > 1.0) a.Fail("fa2_attention_fraction", "must be <= 1");
      m.accumulate_epilogue_fraction = a.NonNegativeNumber("accumulate_epilogue_fraction", 0);
      if (m.accumulate_epilogue_fraction > 1.0) a.Fail("accumulate_epilogue_fraction", "must be <= 1");
      m.context_reserve_MiB = a.NonNegativeNumber("context_reserve_MiB", 0);
      m.blas_workspace_MiB = a.NonNegativeNumber("blas_workspace_MiB", 0);
      if (m.sustained_clock_MHz > m.peak_clock_MHz && m.peak_clock_MHz > 0) {
        a.Fail("sustained_clock_MHz", "must not exceed peak_clock_MHz");
      }
      a.Finish();
    }
    r.Finish();
    return d;
  });
}

Json DeviceToJson(const DeviceSpec& d) {
  Json j{{"name", d.name},
              {"peak_tflops",
               {{"fp32", d.peak_tflops.fp32},
                {"tf32", d.peak_tflops.tf32},
                {"bf16", d.peak_tflops.bf16},
                {"fp16", d.peak_tflops.fp16},
                {"fp8", d.peak_tflops.fp8}}},
              {"memory_GiB", d.memory_GiB},
              {"hbm_GBps", d.hbm_GBps}};
  if (d.peak_tflops.fp4 > 0) j["peak_tflops"]["fp4"] = d.peak_tflops.fp4;  // only where a device has it
  const Microarch& m = d.arch;
  Json tiles = Json::array();
  for (const GemmTile& t : m.gemm_tiles) tiles.push_back({{"m", t.m}, {"n", t.n}, {"k", t.k}, {"stages", t.stages}});
  j["microarch"] = {{"sm_count", m.sm_count},
                    {"l2_MiB", m.l2_MiB},
                    {"gemm_tiles", tiles},
                    {"peak_clock_MHz", m.peak_clock_MHz},
                    {"sustained_clock_MHz", m.sustained_clock_MHz},
                    {"sustained_matmul_tflops", m.sustained_matmul_tflops},
                    {"sfu_ops_per_clock_per_sm", m.sfu_ops_per_clock_per_sm},
                    {"warp_specialized_mma", m.warp_specialized_mma},
                    {"dram_fraction", m.dram_fraction},
                    {"unfused_attention_fraction", m.unfused_attention_fraction},
                    {"unfused_attention_bwd_fraction", m.unfused_attention_bwd_fraction},
                    {"dram_latency_us", m.dram_latency_us},
                    {"nvlink_sharp", m.nvlink_sharp},
                    {"accumulate_epilogue_fraction", m.accumulate_epilogue_fraction},
                    {"kernel_overhead_us", m.kernel_overhead_us},
                    {"nccl_channels", m.nccl_channels},
                    {"context_reserve_MiB", m.context_reserve_MiB},
                    {"blas_workspace_MiB", m.blas_workspace_MiB}};
  if (m.fa2_attention_fraction > 0) j["microarch"]["fa2_attention_fraction"] = m.fa2_attention_fraction;  // written when measured
  return j;
}

}  // namespace parallax

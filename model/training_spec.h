#pragma once
// TrainingSpec: what one optimizer step consumes and how numbers are stored.

#include <cstdint>
#include <string>
#include <string_view>

#include "model/json_io.h"

namespace parallax {

//! Mixed precision keeps fp32 master weights and Adam moments; kFp32 trains entirely in fp32.
//! kFp8 is Transformer Engine's recipe (fp8_autocast with DelayedScaling, Format.HYBRID): the GEMMs
//! of the transformer layers' linear layers (qkv, attention output, fc1, fc2) take FP8 inputs,
//! E4M3 in the forward pass and E5M2 for gradients, each tensor scaled per tensor from an amax
//! history (delayed scaling); attention, norms, the embedding, the LM head and every activation
//! stay bf16; main weights and the optimizer fp32 (Transformer Engine user guide, "Using FP8 with
//! Transformer Engine"; Micikevicius et al. 2022, "FP8 Formats for Deep Learning").
enum class Precision { kBf16, kFp16, kFp32, kFp8 };

struct TrainingSpec {
  int64_t global_batch = 0;  //!< sequences per optimizer step; 0 = let the planner choose
  int64_t seq_len = 0;       //!< 0 = the model's seq_len
  Precision precision = Precision::kBf16;
  double lr = 3e-4;
  double weight_decay = 0.1;
  double grad_clip = 1.0;    //!< global-norm clipping threshold; 0 disables
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  int64_t seed = 1234;
};

//! Bytes of one activation / parameter element in the compute precision (fp8: 2, its activations
//! and model weights are bf16; only the linear layers' GEMM inputs are cast to 1-byte copies).
int64_t BytesPerElement(Precision p);
const char* ToString(Precision p);
//! The inverse of ToString ("bf16", "fp16", "fp32", "fp8"); anything else is BadInput naming the
//! accepted values. The one parser of a precision: command lines, plan files, traces.
Result<Precision> PrecisionFromString(std::string_view s);

Result<TrainingSpec> TrainingFromJson(const Json& j, const std::string& file, const std::string& path);
Json TrainingToJson(const TrainingSpec& t);

}  // namespace parallax

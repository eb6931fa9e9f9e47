#pragma once
// `parallax plan --export megatron`: the Megatron-LM (core_r0.x) pretrain_gpt.py arguments
// for a plan. ZeRO-1 maps to --use-distributed-optimizer; ZeRO-2/3 have no Megatron-LM
// equivalent and are reported in `warnings`. cp > 1 writes --context-parallel-size and the
// profile's --cp-comm-type; Megatron-Core's uneven pipeline split its two account-for flags.

#include <string>
#include <type_traits>
#include <vector>

#include "model/plan.h"

namespace parallax::planner {

struct MegatronArgs {
  std::vector<std::string> args;      //!< "--tensor-model-parallel-size", "8", ...
  std::vector<std::string> warnings;  //!< settings Megatron-LM cannot express
  std::string CommandLine() const;    //!< args joined with spaces
};

MegatronArgs ExportMegatron(const Plan& plan);

}  // namespace parallax::planner

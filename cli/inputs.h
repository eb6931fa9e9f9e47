#pragma once
// A command's inputs, read one way by every command: the model, cluster, plan, implementation
// profile and cost database (each a preset name or a file), the training precision (and why it
// was chosen), and the checks of numeric options. plan, simulate, refine, run and tune call these;
// none of them resolves an input on its own.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "model/cluster_spec.h"
#include "model/cost_db.h"
#include "model/implementation.h"
#include "model/json_io.h"
#include "model/model_spec.h"
#include "model/plan.h"
#include "model/result.h"
#include "model/training_spec.h"

namespace parallax::cli {

//! What the command line names; empty or 0: not given.
struct InputArgs {
  std::string model;           //!< preset, model JSON or Hugging Face config.json
  std::string cluster;         //!< preset or cluster JSON
  int64_t nodes = 0;           //!< > 0: the cluster's node count
  std::string plan;            //!< plan JSON or inline layout (simulate, refine, run)
  int64_t global_batch = 0;    //!< > 0: overrides the plan's / fixes the search's
  int64_t seq_len = 0;         //!< > 0: overrides the model's seq_len (and a plan's training seq_len)
  std::string precision;       //!< bf16, fp16 or fp32; empty: the plan's or the device's default
  std::string implementation;  //!< profile preset or JSON; empty: the plan's or parallax
  std::string costdb;          //!< cost database file; empty: none
  std::string backend;         //!< tune: the backend to run on the cluster's device (CheckBackendDevice)
  bool warn = true;            //!< warnings on stderr (false on every MPI rank but 0)
};

//! The training precision and why it is the one used.
struct PrecisionChoice {
  Precision precision = Precision::kBf16;
  std::string source;  //!< "--precision", "the plan's", "default for a CPU device", "default for a GPU device"
  bool given() const { return source == "--precision"; }
};

//! The model --model names (ResolveModel); nullopt when not given.
Result<std::optional<ModelSpec>> OptionalModel(const std::string& name_or_path);

//! The device's default: fp32 on a CPU (its backend emulates 16-bit types at a loss), bf16 on a GPU.
PrecisionChoice DevicePrecision(const ClusterSpec& cluster);

//! Measured costs at `path` (nullopt when empty). A database of another device is bad input (A100
//! timings say nothing of an H100); one keyed by another op catalogue warns (InputArgs::warn).
Result<std::optional<CostDb>> LoadCostDbFor(const std::string& path, const ClusterSpec& cluster, bool warn);

//! What a search (plan, tune) runs on.
struct SearchInputs {
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;  //!< global_batch 0: searched
  PrecisionChoice precision;
  ImplementationProfile implementation;
  std::optional<CostDb> db;
};
Result<SearchInputs> ResolveSearchInputs(const InputArgs& args);

//! One plan (simulate, refine, run): a plan file with the command line's model, cluster, global
//! batch, precision and implementation over its own, or an inline layout on them. Not validated
//! against the cluster: `run` places it on the job's ranks, simulate and refine on the cluster.
struct PlanInputs {
  Plan plan;
  PrecisionChoice precision;
  std::optional<CostDb> db;  //!< for the plan's device
};
Result<PlanInputs> ResolvePlanInputs(const InputArgs& args);

//! Says which precision is used and why: text on stderr (so that stdout stays a table, a command
//! line or a config to pipe), only when --precision did not name it; with `json` nothing (see
//! AddPrecisionJson).
void NotePrecision(const PrecisionChoice& choice, bool json);
//! "precision" and "precision_source" in a --json object.
void AddPrecisionJson(Json& j, const PrecisionChoice& choice);

//! `--seq-len N` on a command (plan, simulate, run): sequences of N tokens, overriding the model's.
void AddSeqLenOption(CLI::App* cmd, InputArgs& in);

//! --precision's check: one of PrecisionFromString's values, its message otherwise.
CLI::Validator PrecisionCheck();
//! An integer option's lower bound, said as "must be ≥ N (got V)".
CLI::Validator AtLeast(int64_t min);
//! An integer option's range, said as "must be from A to B (got V)".
CLI::Validator Within(int64_t min, int64_t max);

}  // namespace parallax::cli

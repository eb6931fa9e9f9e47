#pragma once
// How data-parallel workers agree on the weights: the synchronous all-reduce family (the default)
// or one of the classic designs — parameter servers, asynchronous and stale-synchronous SGD,
// backup workers, local SGD / federated averaging — and how gradients are compressed on the wire.
// One definition read by the plan parsers, the planner's pricing and the executor's runtime.
//
// Inline form (keys of an inline plan / --fix):
//   sync=allreduce|ps|async|ssp:S|backup:B|local:H
//   servers=N|colocated:N          parameter servers (dedicated ranks after the workers by default)
//   compression=none|bf16|int8|topk:F|powersgd:R
//   data=iid|federated:RULE        RULE: label_skew | contiguous

#include <cstdint>
#include <optional>
#include <string>

#include "model/json_io.h"
#include "model/result.h"

namespace parallax {

enum class SyncKind {
  kAllReduce,  //!< synchronous all-reduce of gradients (DP as Megatron/DDP run it)
  kPs,         //!< synchronous parameter servers: every worker pushes, servers update, all pull
  kAsync,      //!< asynchronous SGD (Dean et al. 2012, Downpour): servers apply each push on arrival
  kSsp,        //!< stale-synchronous parallel (Ho et al. 2013): the fastest worker at most S steps ahead
  kBackup,     //!< synchronous SGD with B backup workers (Chen et al. 2016): the first W-B gradients win
  kLocal,      //!< local SGD / federated averaging (McMahan et al. 2017): average the models every H steps
};

enum class CompressionKind {
  kNone,
  kBf16,      //!< gradients travel as bfloat16
  kInt8,      //!< per-bucket scaled int8 (QSGD-style deterministic rounding), with error feedback
  kTopK,      //!< the largest |g| fraction F of each bucket, all-gathered, with error feedback (Lin et al. 2018)
  kPowerSgd,  //!< rank-R low-rank approximation per matrix, two small all-reduces (Vogels et al. 2019)
};

enum class FederatedRule {
  kIid,        //!< every worker samples the whole corpus (the default)
  kLabelSkew,  //!< worker w keeps only the samples whose first target token falls in its share of the vocabulary
  kContiguous, //!< worker w reads only its contiguous 1/W of the corpus
};

struct SyncMode {
  SyncKind kind = SyncKind::kAllReduce;
  int64_t staleness = 0;       //!< ssp:S, S >= 1
  int64_t backup_workers = 0;  //!< backup:B, 1 <= B < dp
  int64_t local_steps = 0;     //!< local:H, H >= 1
  int64_t servers = 0;         //!< parameter-server shards (ps, async, ssp)
  bool colocated = false;      //!< servers share the workers' ranks (the first N workers host a shard each)
  CompressionKind compression = CompressionKind::kNone;
  double topk_fraction = 0;    //!< topk:F, 0 < F <= 1
  int64_t powersgd_rank = 0;   //!< powersgd:R, R >= 1
  FederatedRule data = FederatedRule::kIid;

  bool uses_servers() const { return kind == SyncKind::kPs || kind == SyncKind::kAsync || kind == SyncKind::kSsp; }
  //! Ranks the job needs beyond the dp*tp*pp workers.
  int64_t dedicated_servers() const { return colocated ? 0 : servers; }
  //! Whether gradients are all-reduced as the existing synchronous runtime does it (no classic mode).
  bool is_default() const;
  //! Whether workers may run ahead of each other (their losses and weights differ within a step).
  bool is_stale() const { return kind == SyncKind::kAsync || kind == SyncKind::kSsp; }
};

const char* ToString(SyncKind k);
const char* ToString(CompressionKind k);
const char* ToString(FederatedRule r);
std::string SyncToString(const SyncMode& m);         //!< "ssp:3"
std::string ServersToString(const SyncMode& m);      //!< "2" or "colocated:2"
std::string CompressionToString(const SyncMode& m);  //!< "topk:0.01"
std::string DataToString(const SyncMode& m);         //!< "iid" or "federated:label_skew"

//! Applies one inline key (sync, servers, compression, data) to `m`. Returns std::nullopt when
//! `key` is not one of them, else the parse status (bad values name the key: "plan: /sync: ...").
std::optional<Status> ParseSyncKey(const std::string& key, const std::string& value, SyncMode* m);
//! ",sync=...,servers=..." for the keys that differ from the defaults ("" for the default mode).
std::string SyncModeInlineSuffix(const SyncMode& m);
//! Reads the optional keys sync, servers, compression, data of a layout object.
SyncMode SyncModeFromJson(ObjectReader& r);
//! Adds the keys that differ from the defaults to a layout object.
void SyncModeToJson(const SyncMode& m, Json* layout);

//! The combination rules, with the reason when one is broken.
Status ValidateSyncMode(const SyncMode& m, int64_t dp, int64_t tp, int64_t pp, int64_t zero_stage);

}  // namespace parallax

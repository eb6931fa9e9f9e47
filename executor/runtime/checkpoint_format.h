#pragma once
// The on-disk format of one rank's checkpoint file, parsed without a backend or a runtime, so the
// reader can be fuzzed and tested alone (tests/fuzz/fuzz_checkpoint.cpp).
//
//   "PLXCKPT1\n"
//   one JSON header line (CheckpointHeader, below) "\n"
//   per group, raw little-endian arrays: params (compute dtype, `params` elements) | main (fp32,
//   `main` elements, mixed precision only) | adam_m | adam_v (fp32, `opt` elements each)
//
// The payload's size must equal what the header promises; anything else is bad input naming
// the file and the JSON path (or "payload") that is wrong.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"
#include "model/training_spec.h"

namespace parallax::executor {

inline constexpr std::string_view kCheckpointMagic = "PLXCKPT1\n";
inline constexpr int64_t kCheckpointVersion = 1;

struct CheckpointGroupHeader {
  std::string name;
  int64_t params = 0;  //!< elements of the parameter storage, compute dtype
  int64_t main = 0;    //!< elements of the fp32 main copy (0 when training in fp32)
  int64_t opt = 0;     //!< elements of each Adam moment (fp32)
};

struct CheckpointHeader {
  int64_t version = kCheckpointVersion;
  int64_t step = 0;
  int64_t samples_consumed = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
  std::string layout;
  std::string model;
  int64_t seed = 0;
  Precision precision = Precision::kFp32;
  double loss_scale = 1.0;
  int64_t loss_scale_clean_steps = 0;
  std::vector<CheckpointGroupHeader> groups;
};

struct CheckpointFile {
  CheckpointHeader header;
  size_t payload_offset = 0;  //!< first byte of the first group's params in the parsed bytes
};

//! The magic line and the header line, ready for the payload to be appended.
std::string EncodeCheckpointHeader(const CheckpointHeader& h);
//! Bytes of the payload the header promises (saturates at INT64_MAX on absurd sizes).
int64_t CheckpointPayloadBytes(const CheckpointHeader& h);
//! Parses and checks a whole checkpoint file held in memory; `origin` names it in messages.
Result<CheckpointFile> ParseCheckpoint(std::string_view bytes, const std::string& origin);
//! Parses the `latest` pointer file ("step_<k>\n"); returns k.
Result<int64_t> ParseLatestPointer(std::string_view text, const std::string& origin);

}  // namespace parallax::executor

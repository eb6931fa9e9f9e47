#pragma once
// Reads the text that an nccl-tests program (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// alltoall_perf, broadcast_perf, sendrecv_perf; github.com/NVIDIA/nccl-tests) prints, in every
// layout era since 2.9: the "# nThread" line, the "# Using devices" rank lines (with or without
// "Group"), the column header (with or without redop / root, "error" or "#wrong"), and one data row
// per size with an out-of-place and an in-place column group. NCCL log lines interleaved with the
// output ("host:pid:tid [dev] NCCL INFO ...") are ignored; any other line that is not a comment
// and not a data row makes the file malformed (the message names the file and the line).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/cost_db.h"
#include "model/result.h"

namespace parallax::profiler {

//! One rank line of "# Using devices".
struct NcclTestsRank {
  int64_t rank = 0;
  std::string host;
  int64_t device = 0;
  std::string device_name;  //!< as printed ("NVIDIA H100 80GB HBM3", "A100-SXM4-40GB")
};

//! One column group of a data row (out-of-place or in-place), as printed.
struct NcclTestsColumn {
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::string check;  //!< the "error" / "#wrong" field: "N/A", "0", "2e-07", ...
  //! False when the check field reports wrong results: a nonzero "#wrong" count (2.13+) or an
  //! "error" above nccl-tests' own tolerance is not ours to judge, so only "#wrong" counts.
  bool valid = true;
};

struct NcclTestsRow {
  int line = 0;  //!< 1-based line in the file
  int64_t bytes = 0;
  int64_t count = 0;
  std::string type;   //!< "float", "half", "bfloat16", ...
  std::string redop;  //!< "sum"; empty when the program has none
  int64_t root = -1;  //!< -1: none
  NcclTestsColumn out_of_place;
  NcclTestsColumn in_place;
};

struct NcclTestsOutput {
  std::string file;
  std::string program;  //!< "all_reduce_perf", ...
  CollectiveKind op = CollectiveKind::kAllReduce;
  int64_t threads = 1;  //!< nThread
  int64_t gpus_per_thread = 1;  //!< nGpus
  std::vector<NcclTestsRank> ranks;
  std::vector<NcclTestsRow> rows;

  int64_t group_size() const { return static_cast<int64_t>(ranks.size()); }
  int64_t hosts() const;  //!< distinct host names among the rank lines
  bool spans_nodes() const { return hosts() > 1; }
};

//! The collective an nccl-tests program measures: "all_reduce_perf" -> kAllReduce, "alltoall_perf"
//! -> kAllToAll, "sendrecv_perf" -> kSendRecv, ...; an error for any other name.
Result<CollectiveKind> CollectiveOfProgram(std::string_view program);

//! Finds the program's name in `file`'s name ("..._all_reduce_perf_...") when the output itself
//! does not say it ("# Collective test starting: all_reduce_perf", nccl-tests 2.16+). Empty if none.
std::string ProgramFromFileName(std::string_view file);

//! Parses the text of one output; `file` names it in messages ("<file>:<line>: <what>").
Result<NcclTestsOutput> ParseNcclTestsOutput(std::string_view text, const std::string& file);
//! Reads and parses a file.
Result<NcclTestsOutput> ReadNcclTestsFile(const std::string& path);

}  // namespace parallax::profiler

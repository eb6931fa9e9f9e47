#pragma once
// nccl-tests output -> CostDb collective curves. Each point keeps the measured time; algbw and
// busbw are recomputed from it with nccl-tests' definitions (doc/PERFORMANCE.md): algbw = size /
// time, busbw = algbw x factor (all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all
// (n-1)/n; broadcast, send/recv 1), n the rank lines' count. The out-of-place and in-place
// columns become two curves (tagged "placement"); the one the training frameworks use comes first
// so the planner, which takes the first curve of a kind, prices with it: in-place for all-reduce
// (torch.distributed.all_reduce), out-of-place for the others (all_gather_into_tensor,
// reduce_scatter_tensor, all_to_all_single write a separate buffer).

#include <string>
#include <vector>

#include "model/cost_db.h"
#include "profiler/nccl_tests/output_parser.h"

namespace parallax::profiler {

struct NcclTestsImport {
  std::string device;  //!< parallax device preset name when the printed GPU is known, else as printed
  std::vector<CollectiveCurve> curves;
  std::vector<SkippedMeasurement> skipped;  //!< rows left out, with the reason
};

//! nccl-tests' device name ("NVIDIA H100 80GB HBM3") -> parallax preset ("h100-sxm-80g"); the
//! printed name itself when no preset matches.
std::string DeviceFromNcclTestsName(const std::string& printed);

//! Curves of one output. Rows of size 0 carry no bandwidth and are dropped silently; rows whose
//! "#wrong" count is nonzero are listed in `skipped`. An output whose ranks name different GPUs is
//! bad input.
Result<NcclTestsImport> ImportNcclTests(const NcclTestsOutput& out);

//! Reads each file and adds its curves and skipped rows to `db`. `db.device` empty: it takes the
//! files' device; otherwise every file must have been measured on that device (exit-2 error naming
//! the file otherwise). `device_override` non-empty: the files are taken as measured on that device
//! whatever GPU their rank lines name (e.g. 40 GB outputs for an 80 GB part on the same NVLink).
//! An imported curve replaces the database's curves of the same collective, group size and node
//! span (calibrate's, refine's, an earlier import's): the planner prices a collective with the
//! nearest curve, and an import measures the library the user's framework runs (NCCL; gloo)
//! rather than our communicator. The imported curves are the last of `db.collectives`;
//! `replaced`, when given, gets the ones that went. On an error `db` is unchanged.
Status ImportNcclTestsFiles(const std::vector<std::string>& files, CostDb& db, const std::string& device_override = "",
                            std::vector<CollectiveCurve>* replaced = nullptr);

}  // namespace parallax::profiler

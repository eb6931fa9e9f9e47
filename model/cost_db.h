#pragma once
// CostDb: measured costs for one device and cluster (filled by `parallax calibrate`, nccl-tests
// import and `refine`; read by the planner's cost model).

#include <cstdint>
#include <string>
#include <vector>

#include "model/device_spec.h"
#include "model/json_io.h"

namespace parallax {

//! One measured GEMM: `batch` independent C[m,n] = A[m,k] B[k,n] in `dtype` (one strided-batched
//! call when batch > 1, as attention's score and context products run).
struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  DType dtype = DType::kBf16;
  double time_s = 0;
  double tflops() const { return 2.0 * static_cast<double>(m) * n * k * batch / time_s / 1e12; }
};

//! One measured memory-bound kernel family point (norm, softmax, activation, optimizer...).
struct KernelSample {
  std::string op;  //!< an OpKind name ("attn_norm", "act", "optimizer", ...) or "attn_core"
  int64_t bytes = 0;  //!< bytes read + written
  double time_s = 0;
};

//! One point of a collective's bandwidth-vs-size curve, nccl-tests definitions.
struct CollectivePoint {
  int64_t bytes = 0;     //!< message size as nccl-tests prints it ("size")
  double time_s = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kSendRecv };

struct CollectiveCurve {
  CollectiveKind op = CollectiveKind::kAllReduce;
  int64_t group_size = 0;
  bool spans_nodes = false;  //!< group crosses node boundaries
  std::string source;        //!< "calibrate", "nccl-tests", "refine"
  std::vector<CollectivePoint> points;  //!< sorted by bytes
};

struct CostDb {
  std::string device;   //!< device name the measurements belong to
  std::string cluster;  //!< cluster name (collectives); may be empty
  std::vector<GemmSample> gemms;
  std::vector<KernelSample> kernels;
  std::vector<CollectiveCurve> collectives;
  double contention_factor = 1.0;  //!< compute slowdown while communication overlaps (>= 1)
};

const char* ToString(CollectiveKind k);
Result<CollectiveKind> CollectiveFromString(const std::string& s);

Result<CostDb> CostDbFromJson(const Json& j, const std::string& file);
Json CostDbToJson(const CostDb& db);
Result<CostDb> LoadCostDbFile(const std::string& path);
Status SaveCostDbFile(const std::string& path, const CostDb& db);

}  // namespace parallax

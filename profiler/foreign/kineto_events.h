#pragma once
// The events of a PyTorch profiler trace as `refine` attributes them (profiler/foreign/attribution.h):
// host ops with their arguments (Kineto correlation and External ids, recorded shapes, module
// hierarchy, autograd sequence numbers), device kernels with their correlation ids and an NCCL
// kernel's collective arguments. Two file forms are read:
//   - the Kineto object form {"traceEvents": [...], "distributedInfo": ...} (PyTorch 1.8 and later
//     on a GPU or with Kineto; PyTorch 2.x everywhere);
//   - the older array form [...] that PyTorch's legacy autograd profiler writes
//     (torch.autograd.profiler export_chrome_trace; Debian's python3-torch 1.13 on the CPU): "X"
//     events named by aten op, without shapes or modules.
// The trace reader of traces/ keeps only what a timeline needs; this one keeps what attribution needs.

#include <cstdint>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::profiler {

struct KinetoEvent {
  std::string name;
  std::string cat;  //!< "cpu_op", "kernel", "cuda_runtime", "user_annotation", ... ("" in the array form)
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;
  int64_t correlation = -1;  //!< args.correlation (kernels, runtime calls)
  int64_t external_id = -1;  //!< args["External id"]
  int64_t sequence = -1;     //!< args["Sequence number"]: a forward op and its backward node share it
  std::string module;        //!< args["Module Hierarchy"] (with_modules), else ""
  std::vector<std::vector<int64_t>> input_dims;  //!< args["Input Dims"] (record_shapes)
  std::vector<std::string> input_types;          //!< args["Input type"]
  // Collective arguments (NCCL kernels and record_param_comms ops of PyTorch 2.x).
  std::string collective;    //!< args["Collective name"]: "allreduce", ...
  int64_t in_nelems = -1;    //!< args["In msg nelems"]
  std::string dtype;         //!< args["dtype"]
  int64_t group_size = 0;    //!< args["Group size"]
  int64_t end_ns() const { return ts_ns + dur_ns; }
};

struct KinetoEvents {
  std::vector<KinetoEvent> events;  //!< "X" events only, sorted by (ts, longer first)
  bool array_form = false;          //!< the legacy array form (no correlation ids, shapes or modules)
  int64_t rank = -1, world_size = -1;  //!< distributedInfo (object form), -1 when absent
};

//! Reads `path` (.json or .json.gz). A file that is neither form is bad input naming the file.
Result<KinetoEvents> ReadKinetoEvents(const std::string& path);
//! The same from JSON text; `origin` names it in messages.
Result<KinetoEvents> ParseKinetoEvents(const std::string& text, const std::string& origin);

}  // namespace parallax::profiler

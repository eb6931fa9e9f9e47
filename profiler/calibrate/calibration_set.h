#pragma once
// What `parallax calibrate` measures: the GEMM shapes and the memory-bound kernel family points,
// each with the kernel probe that times it and the CostDb key it is stored under. With a model,
// the shapes are those the op catalogue (model/op_catalogue.h) gives its layers, embedding and
// head for every tp, sequence-parallel and micro-batch value the planner searches on this many
// ranks, keyed exactly as the planner's cost model looks them up (planner/cost/layer_ops.h
// MemoryFamily, AttentionFamily; "optimizer" and "grad_clip" as planner/cost/plan_costs.cpp
// prices them). Without one, a generic m x n x k grid and two reference models' families.

#include <cstdint>
#include <string>
#include <vector>

#include "model/cost_db.h"
#include "model/model_spec.h"
#include "profiler/calibrate/kernel_probe.h"

namespace parallax::profiler {

struct CalibrationSetOptions {
  const ModelSpec* model = nullptr;  //!< focus; null: generic grid
  int64_t ranks_per_node = 1;        //!< tp values are the planner's: divisors of it
  bool quick = false;
  //! GEMM dtypes (backend element types); memory-bound families are measured in `kernel_dtype`
  //! only (KernelSample carries no dtype; the planner keys them by bytes of the training dtype).
  std::vector<executor::DType> gemm_dtypes{executor::DType::kF32};
  executor::DType kernel_dtype = executor::DType::kF32;
};

struct GemmPoint {
  ProbeShape probe;  //!< kind kGemm
};

struct KernelPoint {
  std::string family;  //!< CostDb kernel family
  int64_t bytes = 0;   //!< bytes as the op catalogue counts them (the planner's query)
  ProbeShape probe;
};

struct CalibrationSet {
  std::vector<GemmPoint> gemms;
  std::vector<KernelPoint> kernels;
};

CalibrationSet BuildCalibrationSet(const CalibrationSetOptions& o);

//! Model's DType of a backend element type (kF32 -> kFp32, ...).
DType ModelDType(executor::DType d);

}  // namespace parallax::profiler

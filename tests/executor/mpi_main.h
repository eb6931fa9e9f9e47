#pragma once
// The main of a multi-rank executor test binary (run under mpirun, srun or a torchrun-style launch).

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "executor/launch.h"

namespace parallax::executor::testing {

//! Starts the launch, makes `world` (the test file's communicator; `timeout_s` for a silent peer),
//! prints results on rank 0 only, fails a filter that matches no test, and fails the job when any
//! rank failed.
inline int RunOnWorld(int* argc, char*** argv, std::unique_ptr<Communicator>& world, double timeout_s) {
  auto launch = InitLaunch(argc, argv);
  ::testing::InitGoogleTest(argc, *argv);
  auto made = launch->World(timeout_s);
  if (!made) {
    std::fprintf(stderr, "%s\n", made.error().message.c_str());
    return 1;
  }
  world = std::move(made).value();
  if (launch->world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::fprintf(stderr, "no test matches this --gtest_filter: fix the case name in tests/executor/CMakeLists.txt\n");
    rc = 1;
  }
  // Every rank must agree: a failure on any rank fails the job.
  double failed = rc;
  (void)world->HostAllReduce(&failed, 1, ReduceOp::kMax);
  world.reset();
  return failed > 0 ? 1 : 0;
}

}  // namespace parallax::executor::testing

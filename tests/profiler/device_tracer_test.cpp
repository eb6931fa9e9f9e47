// StartDeviceTracer: the CUPTI tracer's start-up and its faults (profiler/cuda/cupti_tracer.h).
// The records' conversion and attribution are tested GPU-free in tests/executor/device_timeline_test.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "profiler/cuda/cupti_tracer.h"

namespace parallax::profiler {
namespace {

TEST(DeviceTracer, VersionCheckRejectsOlderLibraries) {
  EXPECT_EQ(CuptiVersionProblem(130001, 130001), "");
  EXPECT_EQ(CuptiVersionProblem(130002, 130001), "");
  const std::string why = CuptiVersionProblem(120008, 130001);
  EXPECT_NE(why.find("120008"), std::string::npos) << why;
  EXPECT_NE(why.find("130001"), std::string::npos) << why;
}

TEST(DeviceTracer, OnlyTheCudaBackendIsTracedAndBuffersHaveAFloor) {
  auto cpu = StartDeviceTracer("cpu");
  ASSERT_FALSE(cpu);
  EXPECT_EQ(cpu.error().kind, ErrorKind::kBadInput);
  DeviceTracerOptions tiny;
  tiny.buffer_bytes = 1024;
  auto small = StartDeviceTracer("cuda", tiny);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().kind, ErrorKind::kBadInput);
}

TEST(DeviceTracer, AMissingLibraryIsReportedNotFatal) {
  DeviceTracerOptions o;
  o.library = "/nonexistent-parallax/libcupti.so";
  auto t = StartDeviceTracer("cuda", o);
  ASSERT_FALSE(t);
#ifdef PARALLAX_WITH_CUPTI
  EXPECT_NE(t.error().message.find("CUPTI library not found"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("/nonexistent-parallax/libcupti.so"), std::string::npos) << t.error().message;
#else
  EXPECT_NE(t.error().message.find("without CUDA"), std::string::npos) << t.error().message;
#endif
}

// The toolkit's own libcupti: on a machine without a GPU or driver CUPTI refuses, and the reason
// comes back (the run then times ops with CUDA events); with a GPU the tracer starts, drains and
// stops. Either way it can start again: nothing stays registered after a failure or a stop.
TEST(DeviceTracer, TheToolkitLibraryStartsOrSaysWhyAndCleansUp) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto t = StartDeviceTracer("cuda");
    if (!t) {
      std::printf("CUPTI did not start here: %s\n", t.error().message.c_str());
      EXPECT_FALSE(t.error().message.empty());
      EXPECT_EQ(t.error().message.find("already running"), std::string::npos) << t.error().message;
      continue;
    }
    std::vector<executor::ActivityRecord> records;
    std::vector<executor::ExternalLink> links;
    (*t)->EnterOp(1);
    (*t)->ExitOp();
    EXPECT_TRUE((*t)->Drain(records, links).ok());
    EXPECT_EQ((*t)->stats().dropped, 0);
    EXPECT_EQ((*t)->source(), "cupti");
  }
}

}  // namespace
}  // namespace parallax::profiler

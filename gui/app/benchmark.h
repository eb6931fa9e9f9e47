#pragma once
// `parallax-gui --benchmark FILE`: load time, first frame, frame times at full zoom-out and at
// 1 us per pixel, and memory per slice, as one JSON object.

#include <string>

#include "model/result.h"

namespace parallax::gui {

//! {"slices","load_s","load_cpu_s","threads","first_frame_ms","frame_ms_p50","frame_ms_p99",
//! "bytes_per_slice"}. load_cpu_s: CPU time of the whole process during the load (all threads;
//! on a shared machine the wall time also counts waiting for a core). Frames are 1920x1080
//! renders of the timeline into an image (the widget's paint path). `threads`: reader threads
//! (0: one per core).
Result<std::string> RunBenchmark(const std::string& path, int threads = 0);

}  // namespace parallax::gui

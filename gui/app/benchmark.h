#pragma once
// `parallax-gui --benchmark FILE`: load time, first frame, frame times at full zoom-out and at
// 1 us per pixel, and memory per slice, as one JSON object.

#include <string>

#include "model/result.h"

namespace parallax::gui {

//! {"slices","load_s","first_frame_ms","frame_ms_p50","frame_ms_p99","bytes_per_slice"}.
//! Frames are 1920x1080 renders of the timeline into an image (the widget's paint path).
Result<std::string> RunBenchmark(const std::string& path);

}  // namespace parallax::gui

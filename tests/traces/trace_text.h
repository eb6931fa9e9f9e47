#pragma once
// A read's result as text two reads can be compared by: the trace written back as Chrome JSON, or
// the error message.

#include <gtest/gtest.h>

#include <string>

#include "traces/byte_stream.h"
#include "traces/chrome_writer.h"

namespace parallax::traces {

//! Sets `*text` to `t` written back, or to its error message; returns whether `t` holds a trace.
inline bool TraceText(const Result<Trace>& t, std::string* text) {
  if (!t.ok()) {
    *text = t.error().message;
    return false;
  }
  auto sink = StringSink(text);
  EXPECT_TRUE(WriteChromeTrace(*t, *sink).ok());
  return true;
}

}  // namespace parallax::traces

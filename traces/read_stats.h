#pragma once
// ReadStats: what the Chrome trace reader saw beyond the Trace itself. Its own header so that
// the reader's internals (event_builder.h) fill it without including the public reader API.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parallax::traces {

struct ReadStats {
  int64_t events = 0;                          //!< entries of traceEvents
  std::map<std::string, int64_t> phases;       //!< "X" -> count, ...
  std::map<std::string, int64_t> categories;   //!< "kernel" -> count; "" for events without cat
  int64_t nccl_kernels = 0;                    //!< kernels recognised as NCCL communication
  int64_t raw_bytes = 0;                       //!< bytes read from the file (compressed if gzip)
  int64_t json_bytes = 0;                      //!< bytes of JSON parsed
  bool truncated = false;                      //!< lenient load of a cut-off file
  std::vector<std::string> warnings;
};

}  // namespace parallax::traces

#include "executor/all_to_all.h"

namespace parallax::executor {

Status GroupedAllToAll(Communicator& c, DevPtr send, const std::vector<int64_t>& send_counts, DevPtr recv,
                       const std::vector<int64_t>& recv_counts, int tag, Stream& s) {
  Status st;
  int64_t so = 0, ro = 0;
  c.GroupStart();
  for (int r = 0; r < c.size(); ++r) {
    const auto i = static_cast<size_t>(r);
    if (r != c.rank() && st && send_counts[i] > 0) st = c.Send(send + so, send_counts[i], r, tag, s);
    if (r != c.rank() && st && recv_counts[i] > 0) st = c.Recv(recv + ro, recv_counts[i], r, tag, s);
    so += send_counts[i];
    ro += recv_counts[i];
  }
  Status end = c.GroupEnd();
  return st ? end : st;
}

}  // namespace parallax::executor

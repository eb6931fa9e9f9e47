#include "cli/format.h"

#include <cmath>
#include <cstdio>

namespace parallax::cli {

std::string HumanCount(double v) {
  const char* suffix[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 1000.0 && i < 6) {
    a /= 1000.0;
    v /= 1000.0;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f%s" : "%.2f%s", v, suffix[i]);
  return buf;
}

std::string HumanBytes(int64_t bytes) {
  const char* suffix[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int i = 0;
  while (std::fabs(v) >= 1024.0 && i < 5) {
    v /= 1024.0;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s" : "%.2f %s", v, suffix[i]);
  return buf;
}

std::string HumanSeconds(double s) {
  char buf[32];
  if (s < 1.0) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

}  // namespace parallax::cli

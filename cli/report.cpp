#include <cstdio>
#include <iostream>

#include "cli/command.h"

namespace parallax::cli {

int ReportError(const Error& e, bool json) {
  std::fprintf(stderr, "parallax: %s\n", e.message.c_str());
  const int rc = ExitCodeFor(e);
  if (json) PrintJson(Json{{"error", e.message}, {"exit_status", rc}});
  return rc;
}

void PrintJson(const Json& j) { std::cout << j.dump(2) << std::endl; }

}  // namespace parallax::cli

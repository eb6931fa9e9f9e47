#include "cli/version_info.h"  // generated: PARALLAX_GIT_COMMIT

#include "cli/command.h"

namespace parallax::cli {

std::string VersionText() {
  // PARALLAX_VERSION and PARALLAX_BACKENDS come from cli/CMakeLists.txt.
  return std::string("parallax ") + PARALLAX_VERSION + "\ncommit " + PARALLAX_GIT_COMMIT + "\nbackends: " +
         PARALLAX_BACKENDS;
}

}  // namespace parallax::cli

#pragma once
// The backends compiled into this binary, by name ("cpu", "cuda").

#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"

namespace parallax::executor {

//! Names of the backends this binary can create.
std::vector<std::string> CompiledBackends();
//! Creates a backend; an unknown or unavailable one is an error saying why ("cuda": not built,
//! or no GPU).
Result<std::unique_ptr<Backend>> CreateBackend(const std::string& name);

}  // namespace parallax::executor

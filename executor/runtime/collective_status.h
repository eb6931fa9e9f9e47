#pragma once
// Agreeing on success: a check that may fail on some ranks only (an unwritable directory, a
// missing file) must fail on all of them, or the others would wait forever in the next collective.

#include "executor/backend.h"

namespace parallax::executor {

//! Collective over `world`: returns `local` where it failed, an error naming the first failing
//! rank elsewhere, or Ok when every rank succeeded.
Status AgreeOnStatus(Communicator& world, const Status& local);

}  // namespace parallax::executor

#pragma once
// The temporary files behind every atomic write (plans, cost databases, traces, checkpoints).
//
// A file is written unnamed (O_TMPFILE) in the target's folder, fsync'd, linked under a temporary
// name and renamed over the target. rename(2) is the only atomic replacement, and it needs a named
// source, so a writer killed by SIGKILL in the microseconds between the link and the rename leaves
// one complete temporary file behind. Temporary names carry the writer's host and pid,
//   .<file>.tmp.<host>.<pid>.<n>
// and every writer first removes the temporaries of `file` left by dead processes of its own host:
// a kill never leaves more than one, and the next write to the same path clears it.

#include <string>

#include "model/result.h"

namespace parallax {

//! Opens an unnamed file for writing in `dir` (O_TMPFILE). Where the file system lacks it, a named
//! temporary of `target` (exclusive create) whose name is stored in `named`. Stale temporaries of
//! `target` are removed first.
Result<int> OpenTempFor(const std::string& target, std::string& named);
//! Gives the complete, fsync'd file `fd` a name (unless it has one in `named`) and renames it over
//! `target`. `fd` stays open (the caller closes it).
Status PublishTemp(int fd, const std::string& target, std::string& named);
//! Removes `.<file>.tmp.<host>.<pid>.<n>` entries beside `target` whose host is this one and whose
//! process no longer exists. Returns how many were removed.
int RemoveStaleTemps(const std::string& target);
//! The temporary-name prefix of `target` for this process: ".<file>.tmp.<host>.<pid>." (with folder).
std::string TempPrefixFor(const std::string& target);

}  // namespace parallax

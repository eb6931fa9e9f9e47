#include "model/atomic_publish.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace parallax {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string FileOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The host name as it appears in temporary names: '/' (never in a host name, but a name must not
// make a path) becomes '_'.
const std::string& HostTag() {
  static const std::string tag = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return std::string("localhost");
    std::string h(buf);
    for (char& c : h) c = c == '/' ? '_' : c;
    return h;
  }();
  return tag;
}

// ".<file>.tmp." (appended piecewise: GCC 12's -Wrestrict misfires on `"." + std::string&&` at -O3).
std::string StemOf(const std::string& target) {
  const std::string file = FileOf(target);
  std::string stem;
  stem.reserve(file.size() + 6);
  stem.push_back('.');
  stem.append(file);
  stem.append(".tmp.");
  return stem;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The pid of a temporary name of this host (`rest` is what follows the stem), or -1.
long PidOfOurs(std::string_view rest) {
  const size_t last = rest.rfind('.');
  if (last == std::string_view::npos || !AllDigits(rest.substr(last + 1))) return -1;
  const std::string_view head = rest.substr(0, last);  // <host>.<pid>
  const size_t dot = head.rfind('.');
  if (dot == std::string_view::npos) return -1;
  const std::string_view pid = head.substr(dot + 1);
  if (!AllDigits(pid) || pid.size() > 9 || head.substr(0, dot) != HostTag()) return -1;
  return std::stol(std::string(pid));
}

// Names target's temporaries prefix0, prefix1, ... in turn until `make(name)` succeeds (named is
// set) or fails for a reason other than EEXIST; at most 101 names.
template <class Make>
bool NameUnique(const std::string& target, Make make, std::string& named) {
  const std::string prefix = TempPrefixFor(target);
  for (int attempt = 0; attempt <= 100; ++attempt) {
    std::string candidate = prefix + std::to_string(attempt);
    if (make(candidate)) {
      named = std::move(candidate);
      return true;
    }
    if (errno != EEXIST) break;
  }
  return false;
}

}  // namespace

std::string TempPrefixFor(const std::string& target) {
  const std::string dir = DirOf(target);
  std::string prefix = target.find('/') == std::string::npos ? std::string() : dir + (dir == "/" ? "" : "/");
  prefix.append(StemOf(target)).append(HostTag()).append(".").append(std::to_string(::getpid())).append(".");
  return prefix;
}

int RemoveStaleTemps(const std::string& target) {
  const std::string dir = DirOf(target);
  const std::string stem = StemOf(target);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  const long self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.size() <= stem.size() || name.substr(0, stem.size()) != stem) continue;
    const long pid = PidOfOurs(name.substr(stem.size()));
    // Alive (or not ours to judge: EPERM means a live process of another user): keep it.
    if (pid <= 0 || pid == self || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    const std::string path = dir + "/" + std::string(name);
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

Result<int> OpenTempFor(const std::string& target, std::string& named) {
  named.clear();
  RemoveStaleTemps(target);
  // An unnamed file first: a writer killed before it is complete leaves nothing behind.
  int fd = ::open(DirOf(target).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  // No O_TMPFILE here: a named temporary from the start (a kill leaves it; the next write removes it).
  const auto create = [&fd](const std::string& name) {
    fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    return fd >= 0;
  };
  if (NameUnique(target, create, named)) return fd;
  return IoError(target + ": cannot create a temporary file: " + std::strerror(errno));
}

Status PublishTemp(int fd, const std::string& target, std::string& named) {
  if (named.empty()) {
    // Complete: link the unnamed file under a unique name and rename it over the target at once
    // (nothing in between, so the window where a kill leaves the name is as short as it can be).
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    const auto link = [&proc](const std::string& name) {
      return ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0;
    };
    if (!NameUnique(target, link, named)) {
      return IoError(target + ": cannot link the temporary file: " + std::strerror(errno));
    }
  }
  // Test hook: PARALLAX_FAULT_PUBLISH_PAUSE_MS holds the named temporary before the rename, so a
  // test can kill the writer exactly there (tests/cli/cli_kill_test.cpp).
  static const long pause_ms = [] {
    const char* v = std::getenv("PARALLAX_FAULT_PUBLISH_PAUSE_MS");
    return v != nullptr ? std::strtol(v, nullptr, 10) : 0L;
  }();
  if (pause_ms > 0) ::usleep(static_cast<useconds_t>(pause_ms) * 1000);
  if (std::rename(named.c_str(), target.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(named.c_str());
    named.clear();
    return IoError(target + ": rename failed: " + why);
  }
  named.clear();
  // Persist the rename itself.
  const int dfd = ::open(DirOf(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace parallax

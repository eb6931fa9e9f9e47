// AtomicFileSink: unnamed temp file beside the target, buffered writes, fsync, link + rename
// (DESIGN: traces written to disk are atomic, so a crashed writer never leaves a half trace under
// the real name, nor a partial temp file).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "traces/byte_stream.h"

namespace parallax::traces {

namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Result<std::unique_ptr<AtomicFileSink>> AtomicFileSink::Create(const std::string& path) {
  // An unnamed file in the target's folder (O_TMPFILE): a writer killed mid-trace leaves nothing
  // behind. It gets a name only once complete (Finish). Named temp file where unsupported.
  int fd = ::open(DirOf(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  std::string temp;
  if (fd < 0) {
    temp = path + ".tmp.XXXXXX";
    fd = ::mkstemp(temp.data());
    if (fd < 0) return IoError(path + ": cannot create temp file: " + std::strerror(errno));
  }
  return std::unique_ptr<AtomicFileSink>(new AtomicFileSink(path, std::move(temp), fd));
}

AtomicFileSink::AtomicFileSink(std::string path, std::string temp, int fd)
    : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

AtomicFileSink::~AtomicFileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

Status AtomicFileSink::Write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t put = ::write(fd_, bytes.data(), bytes.size());
    if (put < 0) {
      if (errno == EINTR) continue;
      return IoError(path_ + ": write failed: " + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<size_t>(put));
  }
  return Status::Ok();
}

Status AtomicFileSink::Finish() {
  if (::fsync(fd_) != 0) return IoError(path_ + ": fsync failed: " + std::strerror(errno));
  // mkstemp creates 0600; a trace is an ordinary user file.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
  if (temp_.empty()) {
    // Complete: link the unnamed file beside the target under a unique name, renamed over below.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0; temp_.empty(); ++attempt) {
      std::string candidate = path_;
      candidate.append(".tmp.").append(std::to_string(::getpid())).append(".").append(std::to_string(attempt));
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, candidate.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        temp_ = candidate;
      } else if (errno != EEXIST || attempt > 100) {
        return IoError(path_ + ": cannot link the temporary file: " + std::strerror(errno));
      }
    }
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    return IoError(path_ + ": close failed: " + std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    return IoError(path_ + ": rename failed: " + std::strerror(errno));
  }
  committed_ = true;
  return Status::Ok();
}

}  // namespace parallax::traces

// AtomicFileSink: temp file beside the target, buffered writes, fsync, rename (DESIGN: traces
// written to disk are atomic, so a crashed writer never leaves a half trace under the real name).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "traces/byte_stream.h"

namespace parallax::traces {

Result<std::unique_ptr<AtomicFileSink>> AtomicFileSink::Create(const std::string& path) {
  std::string temp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return IoError(path + ": cannot create temp file: " + std::strerror(errno));
  return std::unique_ptr<AtomicFileSink>(new AtomicFileSink(path, std::move(temp), fd));
}

AtomicFileSink::AtomicFileSink(std::string path, std::string temp, int fd)
    : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

AtomicFileSink::~AtomicFileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
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

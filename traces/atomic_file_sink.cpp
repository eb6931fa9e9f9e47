// AtomicFileSink: unnamed temp file beside the target, buffered writes, fsync, link + rename
// (DESIGN: traces written to disk are atomic, so a crashed writer never leaves a half trace under
// the real name, nor a partial temp file).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "model/atomic_publish.h"
#include "traces/byte_stream.h"

namespace parallax::traces {

Result<std::unique_ptr<AtomicFileSink>> AtomicFileSink::Create(const std::string& path) {
  // An unnamed file in the target's folder (O_TMPFILE): a writer killed mid-trace leaves nothing
  // behind. It gets a name only once complete (Finish). Named temp file where unsupported.
  std::string temp;
  auto fd = OpenTempFor(path, temp);
  if (!fd) return fd.error();
  return std::unique_ptr<AtomicFileSink>(new AtomicFileSink(path, std::move(temp), *fd));
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
  // A trace is an ordinary user file (the temporary was created 0644 or 0600).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
  Status published = PublishTemp(fd_, path_, temp_);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (!published.ok()) return published;
  committed_ = true;
  if (closed != 0) return IoError(path_ + ": close failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace parallax::traces

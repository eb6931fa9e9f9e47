// Plain byte sources and sinks: POSIX files, memory, std::string.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/json_io.h"
#include "traces/byte_stream.h"

namespace parallax::traces {
namespace {

class FileSource final : public ByteSource {
 public:
  FileSource(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  Result<size_t> Read(char* buf, size_t n) override {
    for (;;) {
      const ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) {
        offset_ += got;
        return static_cast<size_t>(got);
      }
      if (errno != EINTR) return IoError(path_ + ": read failed: " + std::strerror(errno));
    }
  }
  int64_t raw_offset() const override { return offset_; }

 private:
  std::string path_;
  int fd_;
  int64_t offset_ = 0;
};

class MemSource final : public ByteSource {
 public:
  explicit MemSource(std::string_view bytes) : bytes_(bytes) {}
  Result<size_t> Read(char* buf, size_t n) override {
    const size_t k = std::min(n, bytes_.size() - pos_);
    std::memcpy(buf, bytes_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  int64_t raw_offset() const override { return static_cast<int64_t>(pos_); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

class StrSink final : public ByteSink {
 public:
  explicit StrSink(std::string* out) : out_(out) {}
  Status Write(std::string_view bytes) override {
    out_->append(bytes);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }

 private:
  std::string* out_;
};

bool IsGzipMagic(const unsigned char* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

}  // namespace

Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  auto fd = OpenRegularFile(path);  // a directory or FIFO is bad input, never a blocking open
  if (!fd) return fd.error();
  std::unique_ptr<ByteSource> src = std::make_unique<FileSource>(path, *fd);
  return src;
}

std::unique_ptr<ByteSource> MemorySource(std::string_view bytes) {
  return std::make_unique<MemSource>(bytes);
}

std::unique_ptr<ByteSink> StringSink(std::string* out) { return std::make_unique<StrSink>(out); }

Result<std::unique_ptr<ByteSource>> OpenTraceSource(const std::string& path) {
  // A missing input file, a directory or a FIFO is bad input (exit 2), like a bad path in any
  // other argument.
  auto opened = OpenRegularFile(path);
  if (!opened) return opened.error();
  const int fd = *opened;
  unsigned char magic[2] = {0, 0};
  const ssize_t got = ::pread(fd, magic, 2, 0);
  std::unique_ptr<ByteSource> src = std::make_unique<FileSource>(path, fd);
  if (got == 2 && IsGzipMagic(magic, 2)) return GzipSource(std::move(src), path);
  return src;
}

std::unique_ptr<ByteSource> OpenMemoryTraceSource(std::string_view bytes, std::string origin) {
  auto src = MemorySource(bytes);
  if (IsGzipMagic(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size())) {
    return GzipSource(std::move(src), std::move(origin));
  }
  return src;
}

}  // namespace parallax::traces

#pragma once
// Byte streams for trace I/O: a source to read from and a sink to write to, with plain-file,
// in-memory and gzip (zlib) implementations. Errors name the file and byte offset.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "model/result.h"

namespace parallax::traces {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  //! Reads up to `n` bytes into `buf`; returns how many (0 only at the end), or an error.
  virtual Result<size_t> Read(char* buf, size_t n) = 0;
  //! Bytes consumed from the underlying file so far (compressed bytes for gzip).
  virtual int64_t raw_offset() const = 0;
};

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status Write(std::string_view bytes) = 0;
  //! Flushes everything written; for gzip writes the trailer. Call once, last.
  virtual Status Finish() = 0;
};

//! Reads a file. `origin` names it in errors.
Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);
//! Reads bytes held by the caller (they must outlive the source).
std::unique_ptr<ByteSource> MemorySource(std::string_view bytes);
//! Inflates gzip (one or more concatenated members) from `inner`. A stream that ends before
//! the gzip trailer is an error: "<origin>: truncated gzip at compressed byte N".
std::unique_ptr<ByteSource> GzipSource(std::unique_ptr<ByteSource> inner, std::string origin);
//! Opens `path` and inflates it when it starts with the gzip magic bytes (1f 8b).
Result<std::unique_ptr<ByteSource>> OpenTraceSource(const std::string& path);
//! The same for bytes in memory.
std::unique_ptr<ByteSource> OpenMemoryTraceSource(std::string_view bytes, std::string origin);

//! Appends to a std::string.
std::unique_ptr<ByteSink> StringSink(std::string* out);
//! Deflates into `inner` (gzip format, zlib level 1..9).
std::unique_ptr<ByteSink> GzipSink(std::unique_ptr<ByteSink> inner, int level = 6);

//! A file written atomically: bytes go to a temp file beside `path`; Commit() fsyncs and
//! renames it over `path`. Destroyed without Commit(), the temp file is removed.
class AtomicFileSink final : public ByteSink {
 public:
  static Result<std::unique_ptr<AtomicFileSink>> Create(const std::string& path);
  ~AtomicFileSink() override;
  Status Write(std::string_view bytes) override;
  Status Finish() override;  //!< flush + fsync + rename
 private:
  AtomicFileSink(std::string path, std::string temp, int fd);
  std::string path_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace parallax::traces

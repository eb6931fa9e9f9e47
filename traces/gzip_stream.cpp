// gzip (RFC 1952) streams over zlib: inflate for reading, deflate for writing.
#include <zlib.h>

#include <vector>

#include "traces/byte_stream.h"

namespace parallax::traces {
namespace {

constexpr size_t kChunk = 1 << 16;

class InflateSource final : public ByteSource {
 public:
  InflateSource(std::unique_ptr<ByteSource> inner, std::string origin)
      : inner_(std::move(inner)), origin_(std::move(origin)), in_(kChunk) {
    zs_ = {};
    // 16 + MAX_WBITS: gzip wrapper only.
    ok_ = inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK;
  }
  ~InflateSource() override { inflateEnd(&zs_); }
  InflateSource(const InflateSource&) = delete;
  InflateSource& operator=(const InflateSource&) = delete;

  Result<size_t> Read(char* buf, size_t n) override {
    if (!ok_) return Error{origin_ + ": zlib inflateInit failed", ErrorKind::kInternal};
    if (n == 0) return size_t{0};
    zs_.next_out = reinterpret_cast<Bytef*>(buf);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
    while (zs_.avail_out == static_cast<uInt>(std::min<size_t>(n, UINT32_MAX))) {
      if (zs_.avail_in == 0 && !inner_eof_) {
        auto got = inner_->Read(reinterpret_cast<char*>(in_.data()), in_.size());
        if (!got.ok()) return got.error();
        if (*got == 0) {
          inner_eof_ = true;
        } else {
          zs_.next_in = in_.data();
          zs_.avail_in = static_cast<uInt>(*got);
        }
      }
      if (zs_.avail_in == 0 && inner_eof_) {
        if (member_done_) return size_t{0};  // clean end after a complete member
        return BadInput(origin_ + ": truncated gzip at compressed byte " +
                        std::to_string(inner_->raw_offset()));
      }
      if (member_done_) {
        // Another gzip member follows (concatenated .gz files are valid gzip).
        inflateReset(&zs_);
        member_done_ = false;
      }
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        const int64_t at = inner_->raw_offset() - static_cast<int64_t>(zs_.avail_in);
        return BadInput(origin_ + ": corrupt gzip at compressed byte " + std::to_string(at) + ": " +
                        (zs_.msg ? zs_.msg : "inflate error"));
      }
    }
    return static_cast<size_t>(std::min<size_t>(n, UINT32_MAX) - zs_.avail_out);
  }
  int64_t raw_offset() const override { return inner_->raw_offset(); }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::string origin_;
  std::vector<unsigned char> in_;
  z_stream zs_;
  bool ok_ = false;
  bool inner_eof_ = false;
  bool member_done_ = false;
};

class DeflateSink final : public ByteSink {
 public:
  DeflateSink(std::unique_ptr<ByteSink> inner, int level) : inner_(std::move(inner)), out_(kChunk) {
    zs_ = {};
    ok_ = deflateInit2(&zs_, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~DeflateSink() override { deflateEnd(&zs_); }
  DeflateSink(const DeflateSink&) = delete;
  DeflateSink& operator=(const DeflateSink&) = delete;

  Status Write(std::string_view bytes) override { return Pump(bytes, Z_NO_FLUSH); }
  Status Finish() override {
    if (Status st = Pump({}, Z_FINISH); !st.ok()) return st;
    return inner_->Finish();
  }

 private:
  Status Pump(std::string_view bytes, int flush) {
    if (!ok_) return Error{"zlib deflateInit failed", ErrorKind::kInternal};
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs_.avail_in = static_cast<uInt>(bytes.size());
    for (;;) {
      zs_.next_out = out_.data();
      zs_.avail_out = static_cast<uInt>(out_.size());
      const int rc = deflate(&zs_, flush);
      if (rc == Z_STREAM_ERROR) return Error{"zlib deflate failed", ErrorKind::kInternal};
      const size_t have = out_.size() - zs_.avail_out;
      if (have > 0) {
        if (Status st = inner_->Write({reinterpret_cast<char*>(out_.data()), have}); !st.ok()) return st;
      }
      if (flush == Z_FINISH ? rc == Z_STREAM_END : (zs_.avail_in == 0 && zs_.avail_out != 0)) break;
    }
    return Status::Ok();
  }

  std::unique_ptr<ByteSink> inner_;
  std::vector<unsigned char> out_;
  z_stream zs_;
  bool ok_ = false;
};

}  // namespace

std::unique_ptr<ByteSource> GzipSource(std::unique_ptr<ByteSource> inner, std::string origin) {
  return std::make_unique<InflateSource>(std::move(inner), std::move(origin));
}

std::unique_ptr<ByteSink> GzipSink(std::unique_ptr<ByteSink> inner, int level) {
  return std::make_unique<DeflateSink>(std::move(inner), level);
}

}  // namespace parallax::traces

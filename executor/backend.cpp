#include "executor/backend.h"

#include <cstdio>
#include <cstdlib>

namespace parallax::executor {

const char* ToString(MemoryKind k) {
  switch (k) {
    case MemoryKind::kWeights: return "weights";
    case MemoryKind::kGradients: return "gradients";
    case MemoryKind::kOptimizer: return "optimizer";
    case MemoryKind::kActivations: return "activations";
    case MemoryKind::kWorkspace: return "workspace";
  }
  return "?";
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Reset();
    backend_ = o.backend_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    kind_ = o.kind_;
    o.backend_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr && backend_ != nullptr) backend_->Release(data_, bytes_, kind_);
  backend_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Result<Buffer> Backend::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) return Error{"negative allocation", ErrorKind::kInternal};
  void* p = RawAllocate(bytes == 0 ? 64 : bytes);
  if (p == nullptr) {
    return Error{name() + " backend: out of memory allocating " + std::to_string(bytes) + " bytes of " +
                     ToString(kind) + " (" + std::to_string(stats_.current_bytes) + " bytes in use)",
                 ErrorKind::kInternal};
  }
  stats_.current_bytes += bytes;
  stats_.current_by_kind[static_cast<size_t>(kind)] += bytes;
  if (stats_.current_bytes > stats_.peak_bytes) {
    stats_.peak_bytes = stats_.current_bytes;
    stats_.at_peak_by_kind = stats_.current_by_kind;
  }
  return Buffer(this, p, bytes, kind);
}

Buffer Backend::AllocateFloats(int64_t count, MemoryKind kind) {
  auto b = Allocate(count * static_cast<int64_t>(sizeof(float)), kind);
  if (!b) {
    std::fprintf(stderr, "parallax: %s\n", b.error().message.c_str());
    std::abort();
  }
  return std::move(b).value();
}

void Backend::Release(void* p, int64_t bytes, MemoryKind kind) {
  RawFree(p);
  stats_.current_bytes -= bytes;
  stats_.current_by_kind[static_cast<size_t>(kind)] -= bytes;
}

void Backend::ResetPeak() {
  stats_.peak_bytes = stats_.current_bytes;
  stats_.at_peak_by_kind = stats_.current_by_kind;
}

}  // namespace parallax::executor

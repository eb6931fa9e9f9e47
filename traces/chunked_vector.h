#pragma once
// ChunkedVector<T>: append-only storage in chunks. Appending never moves existing elements (no
// 2x reallocation spike at 10M slices, references stay valid) and allocates once per chunk,
// which keeps the Tracer's hot path allocation-free. Chunks grow 1 Ki, 1 Ki, 2 Ki, ... 32 Ki
// elements (so a small trace stays small), then stay at 64 Ki elements.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace parallax::traces {

template <class T>
class ChunkedVector {
 public:
  static constexpr size_t kMinBits = 10;
  static constexpr size_t kMaxBits = 16;
  static constexpr size_t kSmallChunks = kMaxBits - kMinBits + 1;  // chunks before the fixed size
  static constexpr size_t kSmallTotal = size_t{1} << kMaxBits;     // elements in the small chunks

  ChunkedVector() = default;
  ChunkedVector(ChunkedVector&&) noexcept = default;
  ChunkedVector& operator=(ChunkedVector&&) noexcept = default;
  ChunkedVector(const ChunkedVector&) = delete;
  ChunkedVector& operator=(const ChunkedVector&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) {
    const auto [c, o] = Locate(i);
    return chunks_[c][o];
  }
  const T& operator[](size_t i) const {
    const auto [c, o] = Locate(i);
    return chunks_[c][o];
  }

  //! Appends and returns the new element's index.
  size_t push_back(const T& v) {
    if (size_ == capacity_) AddChunk();
    (*this)[size_] = v;
    return size_++;
  }
  //! Allocates chunks for `n` elements up front (the hot path then never allocates).
  void reserve(size_t n) {
    while (capacity_ < n) AddChunk();
  }
  void clear() { size_ = 0; }
  //! Bytes held by the chunks (capacity, not size).
  size_t capacity_bytes() const { return capacity_ * sizeof(T); }

  template <class F>
  void ForEach(F&& fn) const {
    size_t left = size_;
    for (size_t c = 0; c < chunks_.size() && left > 0; ++c) {
      const size_t n = std::min(left, ChunkSize(c));
      const T* p = chunks_[c].get();
      for (size_t i = 0; i < n; ++i) fn(p[i]);
      left -= n;
    }
  }

 private:
  static size_t ChunkSize(size_t c) {
    if (c == 0) return size_t{1} << kMinBits;
    if (c < kSmallChunks) return size_t{1} << (kMinBits + c - 1);
    return size_t{1} << kMaxBits;
  }
  static std::pair<size_t, size_t> Locate(size_t i) {
    if (i >= kSmallTotal) {
      const size_t j = i - kSmallTotal;
      return {kSmallChunks + (j >> kMaxBits), j & ((size_t{1} << kMaxBits) - 1)};
    }
    const size_t q = i >> kMinBits;
    if (q == 0) return {0, i};
    const auto c = static_cast<size_t>(std::bit_width(q));
    return {c, i - (size_t{1} << (kMinBits + c - 1))};
  }
  void AddChunk() {
    const size_t n = ChunkSize(chunks_.size());
    chunks_.push_back(std::make_unique_for_overwrite<T[]>(n));
    capacity_ += n;
  }

  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace parallax::traces

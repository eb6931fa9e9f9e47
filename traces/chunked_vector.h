#pragma once
// ChunkedVector<T>: append-only storage in fixed-size chunks. Appending never moves existing
// elements (no 2x reallocation spike at 10M slices, references stay valid) and allocates once
// per kChunkSize elements, which keeps the Tracer's hot path allocation-free.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace parallax::traces {

template <class T, size_t kChunkBits = 16>
class ChunkedVector {
 public:
  static constexpr size_t kChunkSize = size_t{1} << kChunkBits;

  ChunkedVector() = default;
  ChunkedVector(ChunkedVector&&) noexcept = default;
  ChunkedVector& operator=(ChunkedVector&&) noexcept = default;
  ChunkedVector(const ChunkedVector&) = delete;
  ChunkedVector& operator=(const ChunkedVector&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return chunks_[i >> kChunkBits][i & (kChunkSize - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kChunkBits][i & (kChunkSize - 1)]; }

  //! Appends and returns the new element's index.
  size_t push_back(const T& v) {
    if ((size_ & (kChunkSize - 1)) == 0 && (size_ >> kChunkBits) == chunks_.size()) AddChunk();
    (*this)[size_] = v;
    return size_++;
  }
  //! Allocates chunks for `n` elements up front (the hot path then never allocates).
  void reserve(size_t n) {
    while (chunks_.size() * kChunkSize < n) AddChunk();
  }
  void clear() { size_ = 0; }
  //! Bytes held by the chunks (capacity, not size).
  size_t capacity_bytes() const { return chunks_.size() * kChunkSize * sizeof(T); }

  template <class F>
  void ForEach(F&& fn) const {
    for (size_t i = 0; i < size_; ++i) fn((*this)[i]);
  }

 private:
  void AddChunk() { chunks_.push_back(std::make_unique_for_overwrite<T[]>(kChunkSize)); }

  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace parallax::traces

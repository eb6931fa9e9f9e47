#pragma once
// Training data. Sample n of the job is a deterministic function of (seed, n): a synthetic token
// stream (noisy arithmetic progressions a model can learn) or a window of a byte-level text
// corpus. Step s consumes samples [s*global_batch, (s+1)*global_batch); DP replica d takes the
// d-th contiguous slice of global_batch/dp, micro-batch j the j-th run of micro_batch samples —
// so every layout sees exactly the reference's samples, and the data position is just the step.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/result.h"

namespace parallax::executor {

struct DataOptions {
  std::string file;  //!< byte-level corpus; empty: synthetic stream
  int64_t seed = 1234;
};

class DataSource {
 public:
  static Result<std::unique_ptr<DataSource>> Create(const DataOptions& o, int64_t vocab, int64_t seq);
  virtual ~DataSource() = default;
  //! seq+1 tokens of sample `index` (inputs are [0, seq), targets [1, seq]).
  virtual void Sample(int64_t index, int32_t* out) const = 0;
  virtual std::string Describe() const = 0;

  //! Inputs and targets of `batch` samples starting at `first`, rows sequence-major
  //! (row = position * batch + b).
  void Batch(int64_t first, int64_t batch, std::vector<int32_t>* inputs, std::vector<int32_t>* targets) const;
  int64_t seq() const { return seq_; }

 protected:
  explicit DataSource(int64_t seq) : seq_(seq) {}
  int64_t seq_;
};

//! Keeps, of sequence-major `rows` (seq * batch), the rows of cp rank `cp_idx`'s two sequence
//! chunks (model/cp_chunks.h), in local order: position p of the local sequence is row block p.
//! No change when cp = 1.
void KeepCpRows(int64_t seq, int64_t batch, int64_t cp, int64_t cp_idx, std::vector<int32_t>* rows);

//! Global index of the first sample of micro-batch `microbatch` of DP replica `dp_idx` at `step`.
int64_t FirstSample(int64_t step, int64_t global_batch, int64_t dp, int64_t dp_idx, int64_t micro_batch,
                    int64_t microbatch);

}  // namespace parallax::executor

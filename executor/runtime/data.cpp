#include "executor/runtime/data.h"

#include <fstream>
#include <iterator>

#include "executor/runtime/param_init.h"
#include "model/cp_chunks.h"

namespace parallax::executor {
namespace {

class SyntheticData final : public DataSource {
 public:
  SyntheticData(int64_t vocab, int64_t seq, int64_t seed) : DataSource(seq), vocab_(vocab), key_(ParamKey(seed, "data")) {}
  void Sample(int64_t index, int32_t* out) const override {
    // Start and stride from the sample index; one token in ten replaced by noise.
    const int64_t base = index * (seq_ + 3);
    const int64_t start = static_cast<int64_t>(UniformAt(key_, base) * static_cast<double>(vocab_));
    const int64_t stride = 1 + static_cast<int64_t>(UniformAt(key_, base + 1) * 7.0);
    for (int64_t t = 0; t <= seq_; ++t) {
      int64_t tok = (start + stride * t) % vocab_;
      if (UniformAt(key_, base + 2 + t) < 0.1) {
        tok = static_cast<int64_t>(UniformAt(key_ ^ 0x5bd1e995ULL, base + t) * static_cast<double>(vocab_));
      }
      out[t] = static_cast<int32_t>(tok);
    }
  }
  std::string Describe() const override { return "synthetic token stream (vocab " + std::to_string(vocab_) + ")"; }

 private:
  int64_t vocab_;
  uint64_t key_;
};

class ByteCorpus final : public DataSource {
 public:
  ByteCorpus(std::string path, std::string bytes, int64_t seq)
      : DataSource(seq), path_(std::move(path)), bytes_(std::move(bytes)) {}
  void Sample(int64_t index, int32_t* out) const override {
    // Consecutive windows of seq tokens, wrapping around the corpus.
    const int64_t windows = static_cast<int64_t>(bytes_.size()) - seq_;
    const int64_t start = (index * seq_) % windows;
    for (int64_t t = 0; t <= seq_; ++t) out[t] = static_cast<unsigned char>(bytes_[static_cast<size_t>(start + t)]);
  }
  std::string Describe() const override {
    return "byte-level corpus " + path_ + " (" + std::to_string(bytes_.size()) + " bytes)";
  }

 private:
  std::string path_;
  std::string bytes_;
};

}  // namespace

Result<std::unique_ptr<DataSource>> DataSource::Create(const DataOptions& o, int64_t vocab, int64_t seq) {
  if (o.file.empty()) return std::unique_ptr<DataSource>(std::make_unique<SyntheticData>(vocab, seq, o.seed));
  if (vocab < 256) {
    return BadInput("--data " + o.file + ": a byte-level corpus needs vocab >= 256 (the model has " +
                    std::to_string(vocab) + ")");
  }
  std::ifstream in(o.file, std::ios::binary);
  if (!in) return IoError("--data " + o.file + ": cannot open the file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(bytes.size()) < seq + 2) {
    return BadInput("--data " + o.file + ": " + std::to_string(bytes.size()) + " bytes is shorter than one sample (" +
                    std::to_string(seq + 1) + " bytes)");
  }
  return std::unique_ptr<DataSource>(std::make_unique<ByteCorpus>(o.file, std::move(bytes), seq));
}

void DataSource::Batch(int64_t first, int64_t batch, std::vector<int32_t>* inputs,
                       std::vector<int32_t>* targets) const {
  inputs->assign(static_cast<size_t>(seq_ * batch), 0);
  targets->assign(static_cast<size_t>(seq_ * batch), 0);
  std::vector<int32_t> sample(static_cast<size_t>(seq_ + 1));
  for (int64_t b = 0; b < batch; ++b) {
    Sample(first + b, sample.data());
    for (int64_t t = 0; t < seq_; ++t) {
      (*inputs)[static_cast<size_t>(t * batch + b)] = sample[static_cast<size_t>(t)];
      (*targets)[static_cast<size_t>(t * batch + b)] = sample[static_cast<size_t>(t + 1)];
    }
  }
}

void KeepCpRows(int64_t seq, int64_t batch, int64_t cp, int64_t cp_idx, std::vector<int32_t>* rows) {
  if (cp == 1) return;
  const int64_t local_seq = seq / cp;
  std::vector<int32_t> kept(static_cast<size_t>(local_seq * batch));
  for (int64_t p = 0; p < local_seq; ++p) {
    const int64_t global = CpGlobalPosition(seq, cp, cp_idx, p);
    for (int64_t b = 0; b < batch; ++b) {
      kept[static_cast<size_t>(p * batch + b)] = (*rows)[static_cast<size_t>(global * batch + b)];
    }
  }
  *rows = std::move(kept);
}

int64_t FirstSample(int64_t step, int64_t global_batch, int64_t dp, int64_t dp_idx, int64_t micro_batch,
                    int64_t microbatch) {
  return step * global_batch + dp_idx * (global_batch / dp) + microbatch * micro_batch;
}

}  // namespace parallax::executor

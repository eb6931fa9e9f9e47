#include "profiler/nccl_tests/output_parser.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace parallax::profiler {
namespace {

constexpr std::array<std::pair<std::string_view, CollectiveKind>, 6> kPrograms{{
    {"all_reduce_perf", CollectiveKind::kAllReduce},
    {"all_gather_perf", CollectiveKind::kAllGather},
    {"reduce_scatter_perf", CollectiveKind::kReduceScatter},
    {"alltoall_perf", CollectiveKind::kAllToAll},
    {"broadcast_perf", CollectiveKind::kBroadcast},
    {"sendrecv_perf", CollectiveKind::kSendRecv},
}};

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    const size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') ++i;
    if (i > b) out.push_back(s.substr(b, i - b));
  }
  return out;
}

bool ParseInt(std::string_view s, int64_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

//! A line NCCL's own logging (NCCL_DEBUG=INFO/WARN) interleaves with the output.
bool IsNcclLogLine(std::string_view line) {
  return line.find(" NCCL INFO ") != std::string_view::npos || line.find(" NCCL WARN ") != std::string_view::npos;
}

//! Value of `key` in "... key value ..." (the "# nThread 1 nGpus 8 ..." line).
bool ValueAfter(const std::vector<std::string_view>& tokens, std::string_view key, int64_t& v) {
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (tokens[i] == key) return ParseInt(tokens[i + 1], v);
  }
  return false;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& file) : text_(text) { out_.file = file; }

  Result<NcclTestsOutput> Run() {
    int line_no = 0;
    size_t pos = 0;
    while (pos <= text_.size()) {
      size_t end = text_.find('\n', pos);
      if (end == std::string_view::npos) end = text_.size();
      const std::string_view line = text_.substr(pos, end - pos);
      ++line_no;
      PX_TRY(Line(line, line_no));
      if (end == text_.size()) break;
      pos = end + 1;
    }
    if (!saw_header_) return Fail(0, "no nccl-tests column header (\"#  size  count  type ... time  algbw  busbw\")");
    if (out_.ranks.empty()) return Fail(0, "no \"# Using devices\" rank lines: the group size is unknown");
    if (out_.rows.empty()) return Fail(0, "no data rows");
    if (out_.program.empty()) out_.program = ProgramFromFileName(out_.file);
    if (out_.program.empty()) {
      return Fail(0, "cannot tell which nccl-tests program wrote it (no \"# Collective test starting:\" line and no "
                     "program name such as all_reduce_perf in the file name)");
    }
    auto op = CollectiveOfProgram(out_.program);
    if (!op) return Fail(0, op.error().message);
    out_.op = *op;
    for (size_t i = 0; i < out_.ranks.size(); ++i) {
      if (out_.ranks[i].rank != static_cast<int64_t>(i)) {
        return Fail(0, "rank lines are not ranks 0.." + std::to_string(out_.ranks.size() - 1) + " in order");
      }
    }
    return std::move(out_);
  }

 private:
  // Built by append: GCC 12's -O3 -Wrestrict false positive (PR 105329) fires on `"x" + std::string`.
  Error Fail(int line, const std::string& what) const {
    std::string msg = out_.file;
    if (line > 0) {
      msg.push_back(':');
      msg.append(std::to_string(line));
    }
    msg.append(": ");
    msg.append(what);
    return BadInput(std::move(msg));
  }

  Status Line(std::string_view line, int n) {
    const auto tokens = Split(line);
    if (tokens.empty()) return Status::Ok();
    if (tokens[0].front() == '#') return Comment(line, tokens, n);
    if (IsNcclLogLine(line)) return Status::Ok();
    if (!saw_header_) return Fail(n, "a line that is neither a comment nor a data row before the column header");
    return Row(tokens, n);
  }

  Status Comment(std::string_view line, const std::vector<std::string_view>& tokens, int n) {
    std::vector<std::string_view> t = tokens;
    if (t[0] == "#") {
      t.erase(t.begin());
    } else {
      t[0].remove_prefix(1);
    }
    if (t.empty()) return Status::Ok();
    if (t[0] == "nThread") {
      if (!ValueAfter(t, "nThread", out_.threads) || !ValueAfter(t, "nGpus", out_.gpus_per_thread)) {
        return Fail(n, "unreadable \"# nThread N nGpus G\" line");
      }
      return Status::Ok();
    }
    if (t[0] == "Collective" && t.size() >= 4 && t[1] == "test" && t[2] == "starting:") {
      out_.program = std::string(t[3]);
      return Status::Ok();
    }
    if (t[0] == "Rank" && !saw_header_) return RankLine(line, t, n);
    if (t[0] == "size" && !saw_header_) return Header(t, n);
    return Status::Ok();
  }

  //! "#  Rank  0 Group  0 Pid 43 on host device  0 [0x0f] NVIDIA A100-SXM4-40GB" (Group since 2.13).
  Status RankLine(std::string_view line, const std::vector<std::string_view>& t, int n) {
    NcclTestsRank r;
    size_t i = 1;
    if (t.size() < 2 || !ParseInt(t[i++], r.rank)) return Fail(n, "unreadable rank line");
    if (i < t.size() && t[i] == "Group") i += 2;
    if (i + 1 >= t.size() || t[i] != "Pid") return Fail(n, "rank line without \"Pid\"");
    i += 2;
    if (i + 1 >= t.size() || t[i] != "on") return Fail(n, "rank line without \"on <host>\"");
    r.host = std::string(t[i + 1]);
    i += 2;
    if (i + 1 >= t.size() || t[i] != "device" || !ParseInt(t[i + 1], r.device)) {
      return Fail(n, "rank line without \"device <n>\"");
    }
    const size_t bracket = line.find(']');
    if (bracket != std::string_view::npos) {
      std::string_view name = line.substr(bracket + 1);
      while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t' || name.back() == '\r')) name.remove_suffix(1);
      r.device_name = std::string(name);
    }
    out_.ranks.push_back(std::move(r));
    return Status::Ok();
  }

  //! "#  size  count  type  [redop]  [root]  time algbw busbw error|#wrong  time algbw busbw error|#wrong"
  Status Header(const std::vector<std::string_view>& t, int n) {
    columns_.assign(t.begin(), t.end());
    if (columns_.size() < 11 || columns_[1] != "count" || columns_[2] != "type") {
      return Fail(n, "unexpected column header (want size, count, type, [redop], [root], then time, algbw, busbw, "
                     "error twice)");
    }
    const size_t groups = columns_.size() - 8;
    for (size_t g = 0; g < 2; ++g) {
      const size_t b = groups + 4 * g;
      if (columns_[b] != "time" || columns_[b + 1] != "algbw" || columns_[b + 2] != "busbw") {
        return Fail(n, "unexpected column header: no \"time algbw busbw\" at column " + std::to_string(b + 1));
      }
    }
    for (size_t c = 3; c < groups; ++c) {
      if (columns_[c] == "redop") {
        redop_col_ = static_cast<int>(c);
      } else if (columns_[c] == "root") {
        root_col_ = static_cast<int>(c);
      } else {
        return Fail(n, "unexpected column \"" + columns_[c] + "\" in the header");
      }
    }
    saw_header_ = true;
    return Status::Ok();
  }

  Status Column(const std::vector<std::string_view>& t, size_t b, bool wrong_count, NcclTestsColumn& c, int n) const {
    if (!ParseDouble(t[b], c.time_us) || !ParseDouble(t[b + 1], c.algbw_GBps) || !ParseDouble(t[b + 2], c.busbw_GBps)) {
      return Fail(n, "time, algbw and busbw must be numbers (got \"" + std::string(t[b]) + "\", \"" +
                         std::string(t[b + 1]) + "\", \"" + std::string(t[b + 2]) + "\")");
    }
    if (c.time_us < 0 || c.algbw_GBps < 0 || c.busbw_GBps < 0) return Fail(n, "negative time or bandwidth");
    c.check = std::string(t[b + 3]);
    int64_t wrong = 0;
    if (wrong_count && ParseInt(t[b + 3], wrong)) c.valid = wrong == 0;
    return Status::Ok();
  }

  Status Row(const std::vector<std::string_view>& tokens, int n) {
    std::vector<std::string_view> t = tokens;
    // alltoall (<= 2.9) names a redop column but prints it blank.
    if (t.size() + 1 == columns_.size() && redop_col_ >= 0) {
      t.insert(t.begin() + redop_col_, std::string_view());
    }
    if (t.size() != columns_.size()) {
      return Fail(n, "expected " + std::to_string(columns_.size()) + " fields as the column header names, got " +
                         std::to_string(tokens.size()));
    }
    NcclTestsRow r;
    r.line = n;
    if (!ParseInt(t[0], r.bytes) || r.bytes < 0) return Fail(n, "size \"" + std::string(t[0]) + "\" is not a byte count");
    if (!ParseInt(t[1], r.count) || r.count < 0) return Fail(n, "count \"" + std::string(t[1]) + "\" is not an element count");
    r.type = std::string(t[2]);
    if (redop_col_ >= 0) r.redop = std::string(t[static_cast<size_t>(redop_col_)]);
    if (root_col_ >= 0 && !ParseInt(t[static_cast<size_t>(root_col_)], r.root)) {
      return Fail(n, "root \"" + std::string(t[static_cast<size_t>(root_col_)]) + "\" is not an integer");
    }
    const size_t b = columns_.size() - 8;
    const bool wrong_count = columns_[b + 3] == "#wrong";
    PX_TRY(Column(t, b, wrong_count, r.out_of_place, n));
    PX_TRY(Column(t, b + 4, wrong_count, r.in_place, n));
    // One curve per file: one data type and reduction, sizes rising (nccl-tests prints zero-byte
    // rows more than once at the small end; those are skipped on import). `-d all` or `-o all`
    // restart the sizes for each type or operation, and two runs pasted together restart them too.
    if (!out_.rows.empty() && (r.type != out_.rows.front().type || r.redop != out_.rows.front().redop)) {
      return Fail(n, "data type / reduction \"" + r.type + " " + r.redop + "\" after \"" + out_.rows.front().type +
                         " " + out_.rows.front().redop +
                         "\": a file holds one curve (run nccl-tests with one -d and -o, or split the file)");
    }
    if (r.bytes > 0 && last_bytes_ > 0 && r.bytes <= last_bytes_) {
      return Fail(n, "size " + std::to_string(r.bytes) + " B does not rise above the previous row's " +
                         std::to_string(last_bytes_) + " B: a file holds one run of rising sizes (two runs pasted "
                         "together? import them as separate files)");
    }
    if (r.bytes > 0) last_bytes_ = r.bytes;
    out_.rows.push_back(std::move(r));
    return Status::Ok();
  }

  std::string_view text_;
  NcclTestsOutput out_;
  std::vector<std::string> columns_;
  int redop_col_ = -1, root_col_ = -1;
  int64_t last_bytes_ = 0;  //!< the last positive size of a data row
  bool saw_header_ = false;
};

}  // namespace

int64_t NcclTestsOutput::hosts() const {
  std::set<std::string> h;
  for (const auto& r : ranks) h.insert(r.host);
  return static_cast<int64_t>(h.size());
}

Result<CollectiveKind> CollectiveOfProgram(std::string_view program) {
  for (const auto& [name, kind] : kPrograms) {
    if (program == name) return kind;
  }
  std::string msg = "\"";
  msg.append(program);
  msg.append("\" is not an nccl-tests program parallax reads (all_reduce_perf, all_gather_perf, "
             "reduce_scatter_perf, alltoall_perf, broadcast_perf, sendrecv_perf)");
  return BadInput(std::move(msg));
}

std::string ProgramFromFileName(std::string_view file) {
  const size_t slash = file.find_last_of('/');
  const std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  for (const auto& [name, kind] : kPrograms) {
    if (base.find(name) != std::string_view::npos) return std::string(name);
  }
  return "";
}

Result<NcclTestsOutput> ParseNcclTestsOutput(std::string_view text, const std::string& file) {
  return Parser(text, file).Run();
}

Result<NcclTestsOutput> ReadNcclTestsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return BadInput(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return BadInput(path + ": read failed");
  return ParseNcclTestsOutput(ss.str(), path);
}

}  // namespace parallax::profiler

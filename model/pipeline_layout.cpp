#include "model/pipeline_layout.h"

#include <cctype>

namespace parallax {
namespace {

//! Position of the ')' closing the '(' at `open`, or npos.
size_t ClosingParen(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) return i;
  }
  return std::string::npos;
}

//! Reads "*n" at `pos` (advancing it past the digits): n, 1 when there is no '*', -1 when the
//! count is missing or zero.
int64_t RepeatCount(const std::string& s, size_t& pos) {
  if (pos >= s.size() || s[pos] != '*') return 1;
  size_t end = ++pos;
  while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end])) != 0) ++end;
  if (end == pos || end - pos > 6) return -1;
  const int64_t n = std::stoll(s.substr(pos, end - pos));
  pos = end;
  return n > 0 ? n : -1;
}

//! Unrolls "(group)*n" and "x*n" (Megatron's parse_str_to_list, groups may nest).
Result<std::string> Unroll(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    std::string unit;
    if (s[i] == '(') {
      const size_t close = ClosingParen(s, i);
      if (close == std::string::npos) return BadInput("pipeline_layout \"" + s + "\": unclosed '('");
      auto inner = Unroll(s.substr(i + 1, close - i - 1));
      if (!inner) return inner;
      unit = *inner;
      i = close + 1;
    } else {
      unit = s.substr(i, 1);
      ++i;
    }
    const int64_t n = RepeatCount(s, i);
    if (n < 0) return BadInput("pipeline_layout \"" + s + "\": '*' needs a positive count");
    for (int64_t k = 0; k < n; ++k) out += unit;
  }
  return out;
}

}  // namespace

Result<std::vector<PipelineLayoutStage>> ParsePipelineLayout(const std::string& text) {
  std::string s;
  for (char c : text) {
    if (c != ',' && c != ' ') s += c;
  }
  auto flat = Unroll(s);
  if (!flat) return flat.error();
  std::vector<PipelineLayoutStage> stages(1);
  for (char c : *flat) {
    PipelineLayoutStage& st = stages.back();
    switch (c) {
      case '|': stages.emplace_back(); break;
      case 't': ++st.decoders; break;
      case 'm': ++st.mtp; break;
      case 'E': st.embedding = true; break;
      case 'L': st.loss = true; break;
      default:
        return BadInput("pipeline_layout \"" + text + "\": unknown character '" + std::string(1, c) +
                        "' (expected E, t, m, L, '|', '*', parentheses)");
    }
  }
  return stages;
}

std::string PipelineLayoutProblem(const std::string& text, int64_t layers, int64_t mtp_layers, int64_t pp, int64_t vp) {
  auto stages = ParsePipelineLayout(text);
  if (!stages) return stages.error().message;
  const auto s = [](int64_t v) { return std::to_string(v); };
  const std::string what = "pipeline_layout \"" + text + "\"";
  const auto n = static_cast<int64_t>(stages->size());
  if (n != pp * vp) return what + " names " + s(n) + " stages, pp*virtual_stages=" + s(pp * vp);
  int64_t decoders = 0, embeddings = 0, losses = 0, mtp = 0;
  bool mtp_seen = false;
  for (int64_t i = 0; i < n; ++i) {
    const PipelineLayoutStage& st = (*stages)[static_cast<size_t>(i)];
    if (mtp_seen && st.decoders > 0) return what + ": a decoder layer after the MTP module (stage " + s(i) + ")";
    mtp_seen = mtp_seen || st.mtp > 0;
    mtp += st.mtp;
    decoders += st.decoders;
    embeddings += st.embedding ? 1 : 0;
    losses += st.loss ? 1 : 0;
  }
  if (decoders != layers) return what + " places " + s(decoders) + " decoder layers (t), the model has layers=" + s(layers);
  if (mtp_layers >= 0 && mtp != mtp_layers) return what + " places " + s(mtp) + " MTP modules (m), the model has mtp_layers=" + s(mtp_layers);
  if (embeddings != 1 || !stages->front().embedding) return what + ": the embedding (E) must open the first stage, once";
  if (losses != 1 || !stages->back().loss) return what + ": the loss (L) must close the last stage, once";
  return "";
}

}  // namespace parallax

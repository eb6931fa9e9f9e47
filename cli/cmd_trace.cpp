// `parallax trace stats|diff|convert`: thin front end over parallax_traces.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/diff.h"
#include "traces/kineto.h"
#include "traces/stats.h"

namespace parallax::cli {
namespace {

struct CommonArgs {
  bool json = false;
  bool lenient = false;
};

//! Reads a trace; warnings go to stderr and into `warnings` (for --json).
Result<traces::Trace> Load(const std::string& path, const CommonArgs& a, Json& warnings) {
  traces::ReadOptions o;
  o.lenient = a.lenient;
  traces::ReadStats st;
  auto t = traces::ReadChromeTrace(path, o, &st);
  for (const std::string& w : st.warnings) {
    std::fprintf(stderr, "parallax: warning: %s: %s\n", path.c_str(), w.c_str());
    std::string line = path;
    line += ": ";
    line += w;
    warnings.push_back(std::move(line));
  }
  return t;
}

//! A diff by name that paired nothing: a PyTorch profiler trace names kernels and aten ops, not the
//! plan's ops, so say how to lay it onto them first rather than compare spans silently.
void WarnNothingMatched(const traces::TraceDiff& d, const std::string& measured, Json& warnings) {
  if (d.mode != traces::AlignMode::kNameOrder || d.matched > 0 || d.only_measured == 0) return;
  const std::string w =
      measured +
      ": no slice matched a predicted op (a PyTorch profiler trace names kernels and aten ops, "
      "not the plan's ops): write it with the plan's identities first, `parallax refine --plan P "
      "--implementation I --trace " +
      measured + " --attributed-trace OUT`, and diff OUT";
  std::fprintf(stderr, "parallax: warning: %s\n", w.c_str());
  warnings.push_back(w);
}

void AddCommon(CLI::App* cmd, CommonArgs& a) {
  cmd->add_flag("--json", a.json, "Print one JSON object on stdout");
  cmd->add_flag("--lenient", a.lenient, "Load the complete events of a trace cut off mid-file (with a warning)");
}

// Each subcommand's options live in a shared struct owned by its callback (kept by the App).

void RegisterStats(CLI::App* trace, CliState& state) {
  struct Args {
    CommonArgs common;
    std::string file;
    size_t top = 20;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = trace->add_subcommand("stats", "Counts, busy time, per-name table and per-rank breakdown");
  SetExample(cmd, "parallax trace stats measured.json.gz --top 10");
  cmd->add_option("FILE", a->file, "Trace (.json or .json.gz; parallax or PyTorch profiler)")->required();
  AddCommon(cmd, a->common);
  cmd->add_option("--top", a->top, "Rows of the per-name table")->capture_default_str();
  cmd->callback([&state, a] {
    Json warnings = Json::array();
    auto t = Load(a->file, a->common, warnings);
    if (!t.ok()) {
      state.exit_code = ReportError(t.error(), a->common.json);
      return;
    }
    traces::StatsOptions o;
    o.top_names = a->top;
    const traces::TraceStats st = traces::ComputeStats(*t, o);
    if (a->common.json) {
      Json j = traces::StatsToJson(st);
      j["file"] = a->file;
      j["warnings"] = warnings;
      PrintJson(j);
    } else {
      std::cout << a->file << ": " << traces::FormatStats(st);
    }
    state.exit_code = 0;
  });
}

void RegisterDiff(CLI::App* trace, CliState& state) {
  struct Args {
    CommonArgs common;
    std::string predicted, measured;
    size_t top = 10;
    int64_t step = -1;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = trace->add_subcommand("diff", "Align predicted and measured slices by op identity and compare");
  SetExample(cmd, "parallax trace diff predicted.json.gz measured.json.gz");
  cmd->add_option("PREDICTED", a->predicted, "Predicted trace (parallax simulate --trace)")->required();
  cmd->add_option("MEASURED", a->measured, "Measured trace (parallax run --trace, or a PyTorch profiler trace)")
      ->required();
  AddCommon(cmd, a->common);
  cmd->add_option("--top", a->top, "How many of the largest mismatches to list")->capture_default_str();
  cmd->add_option("--step", a->step,
                  "Measured step to compare with (default: a one-step prediction against every measured step "
                  "but the first, the warm-up)");
  cmd->callback([&state, a] {
    Json warnings = Json::array();
    auto p = Load(a->predicted, a->common, warnings);
    if (!p.ok()) {
      state.exit_code = ReportError(p.error(), a->common.json);
      return;
    }
    auto m = Load(a->measured, a->common, warnings);
    if (!m.ok()) {
      state.exit_code = ReportError(m.error(), a->common.json);
      return;
    }
    traces::DiffOptions o;
    o.top = a->top;
    o.steps.measured_step = a->step;
    if (a->step >= 0) {
      const std::vector<int64_t> ms = traces::StepsOf(*m);
      if (!std::binary_search(ms.begin(), ms.end(), a->step)) {
        std::string have;
        for (int64_t s : ms) {
          if (!have.empty()) have += ", ";
          have += std::to_string(s);
        }
        state.exit_code = ReportError(BadInput(a->measured + ": --step " + std::to_string(a->step) +
                                               ": no such step (the trace has " + (have.empty() ? "none" : have) + ")"),
                                      a->common.json);
        return;
      }
    }
    const traces::TraceDiff d = traces::DiffTraces(*p, *m, o);
    WarnNothingMatched(d, a->measured, warnings);
    if (a->common.json) {
      Json j = traces::DiffToJson(d);
      j["predicted"] = a->predicted;
      j["measured"] = a->measured;
      j["warnings"] = warnings;
      PrintJson(j);
    } else {
      std::cout << traces::FormatDiff(d);
    }
    state.exit_code = 0;
  });
}

void RegisterConvert(CLI::App* trace, CliState& state) {
  struct Args {
    CommonArgs common;
    std::string in, out;
    bool keep_layout = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = trace->add_subcommand(
      "convert", "Rewrite a trace: JSON <-> JSON.gz by OUT's name; PyTorch profiler traces to parallax's track layout");
  SetExample(cmd, "parallax trace convert pytorch_trace.json trace.json.gz");
  cmd->add_option("IN", a->in, "Input trace")->required();
  cmd->add_option("OUT", a->out, "Output trace (gzip when it ends in .gz)")->required();
  AddCommon(cmd, a->common);
  cmd->add_flag("--keep-layout", a->keep_layout, "Keep imported tracks as they are (no rank x stream layout)");
  cmd->callback([&state, a] {
    Json warnings = Json::array();
    auto t = Load(a->in, a->common, warnings);
    if (!t.ok()) {
      state.exit_code = ReportError(t.error(), a->common.json);
      return;
    }
    const bool relayout = t->metadata.kind == "imported" && !a->keep_layout;
    traces::Trace out = relayout ? traces::ToParallaxLayout(*t) : std::move(t.value());
    out.metadata.source = a->in;
    if (Status st = traces::WriteChromeTrace(out, a->out); !st.ok()) {
      state.exit_code = ReportError(st.error(), a->common.json);
      return;
    }
    if (a->common.json) {
      PrintJson(Json{{"input", a->in}, {"output", a->out}, {"slices", out.slices().size()},
                     {"tracks", out.tracks().size()}, {"flows", out.flows().size()},
                     {"layout", relayout ? "parallax" : "kept"}, {"warnings", warnings}});
    } else {
      std::printf("%s -> %s: %zu slices on %zu tracks%s\n", a->in.c_str(), a->out.c_str(), out.slices().size(),
                  out.tracks().size(), relayout ? " (rank x stream layout)" : "");
    }
    state.exit_code = 0;
  });
}

}  // namespace

void RegisterTraceCommand(CLI::App& root, CliState& state) {
  auto* trace = root.add_subcommand("trace", "Trace statistics, predicted-vs-measured diff, conversion");
  trace->require_subcommand(1);
  SetExample(trace, "parallax trace diff predicted.json.gz measured.json.gz");
  RegisterStats(trace, state);
  RegisterDiff(trace, state);
  RegisterConvert(trace, state);
}

}  // namespace parallax::cli

// `parallax refine --plan P --trace measured.json --costdb in.json -o out.json [--json]`: fits the
// cost database from a measured trace of plan P (profiler/refine/refine.h) and prints the
// step-time and per-op-family errors before and after. A PyTorch profiler trace of another
// framework (its slices carry no op identities) is attributed through --implementation's table
// first (profiler/foreign/foreign_refine.h). Thin: parse, call, print.
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/inputs.h"
#include "model/load.h"
#include "profiler/foreign/foreign_refine.h"
#include "profiler/refine/refine.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"

namespace parallax::cli {
namespace {

struct RefineOptions {
  InputArgs in;
  std::string trace, output;
  std::string attributed_trace;  //!< a foreign trace's ops and units as refine attributed them
  bool json = false;
};

//! A parallax trace (ours: `parallax run --trace`) carries op identities; a framework's does not.
bool HasIdentities(const traces::Trace& t) {
  for (size_t i = 0; i < t.slices().size(); ++i) {
    if (t.slice(i).has(traces::slice_flags::kHasIdentity)) return true;
  }
  return false;
}

int RunForeignRefine(const RefineOptions& o, const PlanInputs& in) {
  auto r = profiler::RefineForeign(in.plan, o.trace, *in.db);
  if (!r) return ReportError(r.error(), o.json);
  if (Status st = SaveCostDbFile(o.output, r->refine.db); !st) return ReportError(st.error(), o.json);
  if (!o.attributed_trace.empty()) {
    if (Status st = traces::WriteChromeTrace(r->attributed, o.attributed_trace); !st) {
      return ReportError(st.error(), o.json);
    }
  }
  if (o.json) {
    Json j = profiler::ForeignRefineToJson(*r);
    j["costdb"] = o.output;
    PrintJson(j);
  } else {
    std::printf("%swrote %s\n", profiler::FormatForeignRefine(*r).c_str(), o.output.c_str());
  }
  return 0;
}

int RunRefine(const RefineOptions& o) {
  auto in = ResolvePlanInputs(o.in);
  if (!in) return ReportError(in.error(), o.json);
  if (Status st = ValidateLayout(in->plan.layout, in->plan.model, in->plan.cluster); !st) {
    return ReportError(st.error(), o.json);
  }
  auto trace = traces::ReadChromeTrace(o.trace);
  if (!trace || !HasIdentities(*trace)) return RunForeignRefine(o, *in);
  auto r = profiler::Refine(in->plan, *trace, o.trace, *in->db);
  if (!r) return ReportError(r.error(), o.json);
  if (Status st = SaveCostDbFile(o.output, r->db); !st) return ReportError(st.error(), o.json);
  if (o.json) {
    Json j = profiler::RefineToJson(*r);
    j["costdb"] = o.output;
    PrintJson(j);
  } else {
    std::printf("%swrote %s\n", profiler::FormatRefine(*r).c_str(), o.output.c_str());
  }
  return 0;
}

}  // namespace

void RegisterRefineCommand(CLI::App& root, CliState& state) {
  auto o = std::make_shared<RefineOptions>();
  auto* cmd = root.add_subcommand("refine", "Fit the cost database from a measured trace of a plan");
  SetExample(cmd, "parallax refine --plan plan.json --trace measured.json.gz --costdb costdb.json -o refined.json");
  cmd->add_option("--plan", o->in.plan, "The plan the trace ran: plan JSON or inline dp=..,tp=..,pp=..")->required();
  cmd->add_option("--trace", o->trace,
                  "Measured trace: parallax run --trace, or a PyTorch profiler trace of --implementation")
      ->required();
  cmd->add_option("--implementation", o->in.implementation,
                  "What ran the trace: parallax, megatron-core, deepspeed, pytorch, ... (a PyTorch profiler trace "
                  "is attributed through its table)");
  cmd->add_option("--costdb", o->in.costdb, "Cost database to refine")->required();
  cmd->add_option("-o,--output", o->output, "Refined cost database (written atomically)")->required();
  cmd->add_option("--attributed-trace", o->attributed_trace,
                  "A PyTorch profiler trace only: write its ops with the plan's identities and its kernels or "
                  "host ops beside them, each named by the op it went to (for trace diff and parallax-gui)");
  cmd->add_option("--model", o->in.model, "Model preset or JSON (inline plan)");
  cmd->add_option("--cluster", o->in.cluster, "Cluster preset or JSON (inline plan)");
  cmd->add_option("--global-batch", o->in.global_batch, "Sequences per step (inline plan)")->check(AtLeast(1));
  cmd->add_option("--precision", o->in.precision,
                  "Training precision: bf16, fp16, fp32 or fp8 (default: what the trace recorded, else the plan's; an "
                  "inline plan's is fp32 on a CPU device, bf16 on a GPU)")
      ->check(PrecisionCheck());
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o, &state] { state.exit_code = RunRefine(*o); });
}

}  // namespace parallax::cli

#pragma once
// The HTML report `parallax report` writes: one self-contained file (inline CSS and SVG, no
// script, no link to fetch) that any browser opens without a server. Pure: data in, text out.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parallax::cli {

//! One row of the ranked plan table.
struct ReportPlanRow {
  std::string layout;  //!< inline form (LayoutToString)
  std::vector<std::pair<std::string, std::string>> dims;  //!< the layout by column: {"dp", "2"}, ...
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  int64_t peak_memory_bytes = 0;
  bool chosen = false;  //!< the plan that ran
};

//! One op kind and phase of the predicted-vs-measured diff.
struct ReportOpError {
  std::string op;  //!< "fc1 fwd"
  double measured_s = 0;                  //!< a step's time of this op, summed over the ranks
  double error_before = 0;                //!< (predicted - measured) / measured, from the calibration
  std::optional<double> error_after;      //!< the same after refine
};

struct ReportData {
  std::string title;          //!< "gpt-tiny on 2 x cpu (local-cpu)"
  std::string plan_layout;    //!< the plan that ran, inline form
  std::string ranking_note;   //!< where the ranked rows come from
  std::vector<ReportPlanRow> plans;
  double measured_step_s = 0;
  std::string measured_note;  //!< which measured steps, and how they are summarised
  double predicted_step_s = 0;
  std::optional<double> refined_step_s;
  std::vector<ReportOpError> ops;  //!< largest measured time first
  std::vector<std::string> inputs;  //!< "what: file" lines
};

std::string HtmlReport(const ReportData& data);

}  // namespace parallax::cli

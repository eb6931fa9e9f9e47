#include "cli/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli/format.h"

namespace parallax::cli {
namespace {

constexpr const char* kMeasuredColour = "#555b66";
constexpr const char* kBeforeColour = "#e0873c";
constexpr const char* kAfterColour = "#3c78d8";

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Percent(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", fraction * 100);
  return buf;
}

std::string Milliseconds(double s) {
  const double ms = s * 1e3;
  return Fixed(ms, ms >= 100 ? 1 : ms >= 1 ? 2 : 3) + " ms";
}

constexpr const char* kStyle = R"(<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2329; max-width: 1040px;
       margin: 24px auto; padding: 0 16px; line-height: 1.45; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d8dce3; padding-bottom: 4px; }
code { background: #f1f3f6; padding: 1px 4px; border-radius: 3px; }
table { border-collapse: collapse; font-size: 14px; }
th, td { padding: 4px 7px; text-align: right; border-bottom: 1px solid #e4e7ec; white-space: nowrap; }
th.l, td.l { text-align: left; }
tr.chosen td { background: #e8f0fe; font-weight: 600; }
.note { color: #5f6670; font-size: 13px; }
svg text { font-family: inherit; font-size: 12px; fill: #1f2329; }
</style>)";

void PlanTable(std::ostringstream& h, const ReportData& d) {
  h << "<h2>Ranked plans</h2>\n<table>\n<tr><th>#</th>";
  if (!d.plans.empty()) {
    for (const auto& [name, value] : d.plans.front().dims) h << "<th class=\"l\">" << Escape(name) << "</th>";
  }
  h << "<th>predicted step</th><th>tokens/s</th><th>MFU</th><th>peak memory</th><th class=\"l\"></th></tr>\n";
  int rank = 1;
  for (const auto& r : d.plans) {
    h << "<tr" << (r.chosen ? " class=\"chosen\"" : "") << " title=\"" << Escape(r.layout) << "\"><td>" << rank++
      << "</td>";
    for (const auto& [name, value] : r.dims) h << "<td class=\"l\">" << Escape(value) << "</td>";
    h << "<td>" << Milliseconds(r.step_time_s) << "</td><td>"
      << Escape(HumanCount(r.tokens_per_s)) << "</td><td>"
      << (r.mfu > 0 ? Fixed(r.mfu * 100, 1) + "%" : std::string("n/a")) << "</td><td>"
      << Escape(HumanBytes(r.peak_memory_bytes)) << "</td><td class=\"l\">" << (r.chosen ? "&larr; ran" : "")
      << "</td></tr>\n";
  }
  h << "</table>\n<p class=\"note\">" << Escape(d.ranking_note) << "</p>\n";
}

//! Horizontal bars for measured and predicted step times, each prediction with its error.
void StepChart(std::ostringstream& h, const ReportData& d) {
  struct Bar {
    std::string label;
    double s;
    const char* colour;
  };
  std::vector<Bar> bars{{"measured", d.measured_step_s, kMeasuredColour},
                        {"predicted from calibration", d.predicted_step_s, kBeforeColour}};
  if (d.refined_step_s) bars.push_back({"predicted after refine", *d.refined_step_s, kAfterColour});
  double max_s = 0;
  for (const auto& b : bars) max_s = std::max(max_s, b.s);
  const int label_w = 200, plot_w = 560, row_h = 34;
  const int height = static_cast<int>(bars.size()) * row_h + 8;
  h << "<h2>Step time: predicted vs measured</h2>\n<svg width=\""
    << label_w + plot_w + 200 << "\" height=\"" << height << "\" role=\"img\" aria-label=\"step times\">\n";
  int y = 4;
  for (const auto& b : bars) {
    const double w = max_s > 0 ? b.s / max_s * plot_w : 0;
    std::string value = Milliseconds(b.s);
    if (&b != &bars.front() && d.measured_step_s > 0) value += "  (" + Percent((b.s - d.measured_step_s) / d.measured_step_s) + ")";
    h << "<text x=\"0\" y=\"" << y + 19 << "\">" << Escape(b.label) << "</text>"
      << "<rect x=\"" << label_w << "\" y=\"" << y + 4 << "\" width=\"" << Fixed(w, 1) << "\" height=\"22\" fill=\""
      << b.colour << "\"/>"
      << "<text x=\"" << label_w + w + 8 << "\" y=\"" << y + 19 << "\">" << Escape(value) << "</text>\n";
    y += row_h;
  }
  h << "</svg>\n<p class=\"note\">" << Escape(d.measured_note) << "</p>\n";
}

//! The symmetric axis range of the error chart: the largest error shown, rounded up, at most +-200%.
double ErrorRange(const std::vector<ReportOpError>& ops) {
  double m = 0.1;
  for (const auto& o : ops) {
    m = std::max(m, std::fabs(o.error_before));
    if (o.error_after) m = std::max(m, std::fabs(*o.error_after));
  }
  for (double r : {0.1, 0.25, 0.5, 1.0, 2.0}) {
    if (m <= r) return r;
  }
  return 2.0;
}

//! One signed bar from the zero line, clipped at the axis (its text still says the error).
void ErrorBar(std::ostringstream& h, int zero_x, int half_w, double range, int y, double e, const char* colour) {
  const double clipped = std::clamp(e, -range, range);
  const double w = std::fabs(clipped) / range * half_w;
  const double x = clipped < 0 ? zero_x - w : zero_x;
  const double tx = clipped < 0 ? x - 6 : zero_x + w + 6;
  h << "<rect x=\"" << Fixed(x, 1) << "\" y=\"" << y << "\" width=\"" << Fixed(std::max(w, 1.0), 1)
    << "\" height=\"11\" fill=\"" << colour << "\"/><text x=\"" << Fixed(tx, 1) << "\" y=\"" << y + 10
    << "\" text-anchor=\"" << (clipped < 0 ? "end" : "start") << "\">" << Percent(e) << "</text>\n";
}

void ErrorChart(std::ostringstream& h, const ReportData& d) {
  h << "<h2>Per-op error, before and after refine</h2>\n";
  if (d.ops.empty()) {
    h << "<p>No op of the predicted trace matched the measured one.</p>\n";
    return;
  }
  const double range = ErrorRange(d.ops);
  const int label_w = 230, half_w = 300, row_h = d.refined_step_s ? 32 : 20, top = 24;
  const int zero_x = label_w + 70 + half_w;
  const int height = top + static_cast<int>(d.ops.size()) * row_h + 8;
  h << "<svg width=\"" << zero_x + half_w + 70 << "\" height=\"" << height
    << "\" role=\"img\" aria-label=\"per-op errors\">\n"
    << "<text x=\"" << zero_x - half_w << "\" y=\"14\" text-anchor=\"middle\">" << Percent(-range) << "</text>"
    << "<text x=\"" << zero_x << "\" y=\"14\" text-anchor=\"middle\">0</text>"
    << "<text x=\"" << zero_x + half_w << "\" y=\"14\" text-anchor=\"middle\">" << Percent(range) << "</text>\n"
    << "<line x1=\"" << zero_x << "\" y1=\"18\" x2=\"" << zero_x << "\" y2=\"" << height << "\" stroke=\"#9aa0a6\"/>\n";
  int y = top;
  for (const auto& o : d.ops) {
    h << "<text x=\"0\" y=\"" << y + 11 << "\">" << Escape(o.op) << "</text><text x=\"" << label_w + 60 << "\" y=\""
      << y + 11 << "\" text-anchor=\"end\" fill=\"#5f6670\">" << Milliseconds(o.measured_s) << "</text>\n";
    ErrorBar(h, zero_x, half_w, range, y + 1, o.error_before, kBeforeColour);
    if (o.error_after) ErrorBar(h, zero_x, half_w, range, y + 14, *o.error_after, kAfterColour);
    y += row_h;
  }
  h << "</svg>\n<p class=\"note\"><span style=\"color:" << kBeforeColour << "\">&#9632;</span> from calibration";
  if (d.refined_step_s) h << " &nbsp; <span style=\"color:" << kAfterColour << "\">&#9632;</span> after refine";
  h << ". Error = (predicted &minus; measured) / measured over the matched slices of each op and phase; the "
       "time beside each op is what it measured in a step, summed over the ranks. Largest first.</p>\n";
}

}  // namespace

std::string HtmlReport(const ReportData& d) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>parallax report: "
    << Escape(d.title) << "</title>\n"
    << kStyle << "\n</head>\n<body>\n<h1>parallax report</h1>\n<p>" << Escape(d.title) << ", plan <code>"
    << Escape(d.plan_layout) << "</code></p>\n";
  PlanTable(h, d);
  StepChart(h, d);
  ErrorChart(h, d);
  h << "<h2>Inputs</h2>\n<ul>\n";
  for (const auto& i : d.inputs) h << "<li>" << Escape(i) << "</li>\n";
  h << "</ul>\n</body>\n</html>\n";
  return h.str();
}

}  // namespace parallax::cli

#pragma once
// What plan and simulate say beside the planner's numbers: MFU where the datasheet gives no peak,
// and why a search left no layout (its rejection counts, the first reason in words).

#include <optional>
#include <string>

#include "cli/inputs.h"
#include "model/json_io.h"
#include "model/result.h"
#include "planner/estimate/prediction.h"
#include "planner/search/constraints.h"
#include "planner/search/search.h"

namespace parallax::cli {

//! The prediction's MFU (against the datasheet peak of the precision). Where the datasheet gives
//! none (the cpu device's 16-bit types, its fp32 in a cluster file without peaks), against the
//! best GEMM `db` measured in that precision; nullopt when neither is known.
std::optional<double> ShownMfu(const planner::Prediction& p, const ClusterSpec& cluster, Precision precision,
                               const CostDb* db);
//! "42.1%", or "n/a" for an unknown MFU.
std::string MfuText(const std::optional<double>& mfu);

//! The error `plan` reports when the search left no layout: the closest layout's memory shortfall,
//! else what rules out the pinned dimensions (--fix) or the most frequent rejection, in words.
Error NoLayoutError(const SearchInputs& in, const planner::Constraints& fix, const planner::SearchResult& r);
//! {"rejected": {reason: count}, "searched": n}: the counts text and --json print.
Json RejectedJson(const planner::SearchResult& r);
//! " reason count; reason count" in the reasons' order (" none" when nothing was rejected).
std::string RejectedText(const planner::SearchResult& r);
//! A search rejection reason (planner/search/search.cpp's keys) as a rule, with the model's and the
//! cluster's numbers.
std::string RejectionInWords(const std::string& reason, const SearchInputs& in);

}  // namespace parallax::cli

#include "planner/search/constraints.h"

#include <sstream>

namespace parallax::planner {

bool Constraints::Admits(const Layout& l) const {
  return (!dp || *dp == l.dp) && (!tp || *tp == l.tp) && (!pp || *pp == l.pp) && (!cp || *cp == l.cp) &&
         (!zero_stage || *zero_stage == l.zero_stage) && (!micro_batch || *micro_batch == l.micro_batch) &&
         (!global_batch || *global_batch == l.global_batch) && (!virtual_stages || *virtual_stages == l.virtual_stages) &&
         (!recompute || *recompute == l.recompute) && (!schedule || *schedule == l.schedule) &&
         (!sequence_parallel || *sequence_parallel == l.sequence_parallel) && (!ep || *ep == l.ep) &&
         (!etp || *etp == l.expert_tp()) && (!routing || *routing == l.routing) &&
         (!recompute_modules || (l.recompute == Recompute::kSelective && l.selective_modules() == *recompute_modules)) &&
         (!first_stage_layers || *first_stage_layers == l.first_stage_layers) &&
         (!last_stage_layers || *last_stage_layers == l.last_stage_layers);
}

Result<Constraints> ParseConstraints(const std::string& text) {
  Constraints c;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) return BadInput("--fix: \"" + item + "\": expected key=value");
    const std::string key = item.substr(0, eq);
    // Reuse the inline-layout parser for values: it knows every key, alias and value syntax.
    auto one = ParseInlineLayout(item);
    if (!one) return BadInput("--fix: " + one.error().message);
    const Layout& l = *one;
    if (key == "dp") c.dp = l.dp;
    else if (key == "tp") c.tp = l.tp;
    else if (key == "pp") c.pp = l.pp;
    else if (key == "cp") c.cp = l.cp;
    else if (key == "zero" || key == "zero_stage") c.zero_stage = l.zero_stage;
    else if (key == "micro_batch" || key == "mb") c.micro_batch = l.micro_batch;
    else if (key == "global_batch") c.global_batch = l.global_batch;
    else if (key == "virtual_stages" || key == "vp") c.virtual_stages = l.virtual_stages;
    else if (key == "recompute") c.recompute = l.recompute;
    else if (key == "recompute_modules") {
      c.recompute = Recompute::kSelective;
      c.recompute_modules = l.selective_modules();
    } else if (key == "first_stage_layers") c.first_stage_layers = l.first_stage_layers;
    else if (key == "last_stage_layers") c.last_stage_layers = l.last_stage_layers;
    else if (key == "schedule") c.schedule = l.schedule;
    else if (key == "sequence_parallel" || key == "sp") c.sequence_parallel = l.sequence_parallel;
    else if (key == "ep") c.ep = l.ep;
    else if (key == "etp") c.etp = l.etp;
    else if (key == "routing") c.routing = l.routing;
    else (void)ParseSyncKey(key, item.substr(eq + 1), &c.sync);  // its value was checked by ParseInlineLayout
  }
  const std::pair<const char*, const std::optional<int64_t>*> sizes[] = {
      {"dp", &c.dp}, {"tp", &c.tp}, {"pp", &c.pp}, {"cp", &c.cp}, {"micro_batch", &c.micro_batch},
      {"global_batch", &c.global_batch}, {"virtual_stages", &c.virtual_stages}, {"ep", &c.ep}, {"etp", &c.etp}};
  for (const auto& [name, v] : sizes) {
    if (*v && **v <= 0) return BadInput("--fix: " + std::string(name) + " must be > 0 (got " + std::to_string(**v) + ")");
  }
  if (c.zero_stage && (*c.zero_stage < 0 || *c.zero_stage > 3)) {
    return BadInput("--fix: zero must be 0, 1, 2 or 3 (got " + std::to_string(*c.zero_stage) + ")");
  }
  return c;
}

}  // namespace parallax::planner

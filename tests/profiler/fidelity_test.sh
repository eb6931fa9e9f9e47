#!/usr/bin/env bash
# Label `validation`: runs scripts/fidelity.sh (2-rank calibration, 14 layouts of two models simulated
# and run) and checks that it produced a predicted and a measured step time for every layout. The
# accuracy goals (10% / 5%) are reported, not asserted: on the shared 2-core VM the measured step
# times follow the machine's load (docs/profiler.md, "Fidelity").
set -euo pipefail
src="$1"; build="$2"
out="$build/fidelity-test"
rm -rf "$out"
"$src/scripts/fidelity.sh" "$(realpath --relative-to="$src" "$build")" "$out" 6 | tee "$out.log"
rows=$(python3 -c "import json; print(len(json.load(open('$out/fidelity.json'))['rows']))")
[ "$rows" -ge 8 ] || { echo "fidelity: only $rows layouts"; exit 1; }
python3 -c "
import json
for r in json.load(open('$out/fidelity.json'))['rows']:
    assert r['predicted_s'] > 0 and r['measured_s'] > 0 and r['predicted_after_s'] > 0, r
"

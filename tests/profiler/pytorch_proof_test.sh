#!/usr/bin/env bash
# Label `validation`: issue 40's CPU proof (scripts/pytorch_cpu_proof.sh). Calibrate, profile the peer
# GPT in PyTorch at micro-batch 8, refine from that trace, then predict and run other micro-batches,
# sequence lengths and DDP = 2. Asserts the goal as a ratio: every case's refined prediction within
# 10% of its measured step time. Skipped (77) without Debian's python3-torch.
set -euo pipefail
src="$1"; build="$2"
py="${PYTHON:-/usr/bin/python3}"
"$py" -c "import torch" 2>/dev/null || { echo "python3-torch not installed: skipped"; exit 77; }
out="$build/pytorch-proof-test"
rm -rf "$out"
"$src/scripts/pytorch_cpu_proof.sh" "$(realpath --relative-to="$src" "$build")" "$out" 8 | tee "$out.log"
"$py" - "$out/proof.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert len(rows) >= 7, f"only {len(rows)} cases"
bad = [r for r in rows if abs(r["refined_s"] / r["measured_s"] - 1) > 0.10]
for r in bad:
    print(f"outside 10%: micro-batch {r['micro_batch']} seq {r['seq_len']} x{r['processes']}: "
          f"predicted / measured = {r['refined_s'] / r['measured_s']:.3f}")
sys.exit(1 if bad else 0)
PY

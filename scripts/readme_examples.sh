#!/usr/bin/env bash
# Re-runs the command examples of README.md and checks (or rewrites) their output, so that what the
# README shows is what this build prints. An example is a fenced block right after the line
# "<!-- example -->" whose first line is "$ parallax ARGS"; the lines after it are the output.
# Timings that change from run to run ("searched in 287.42 ms") read "…" in the README.
# Usage: scripts/readme_examples.sh [--check|--update] [PARALLAX]   (default: --check build/cli/parallax)
#   --check   exit 1 and print a diff when an example's output differs (the test readme_examples)
#   --update  rewrite the examples' output in README.md
set -euo pipefail
cd "$(dirname "$0")/.."
mode=--check
if [[ "${1:-}" == --check || "${1:-}" == --update ]]; then mode=$1; shift; fi
bin="${1:-build/cli/parallax}"
if (($# > 1)) || [ ! -x "$bin" ]; then
  echo "usage: scripts/readme_examples.sh [--check|--update] [PARALLAX]  (no program at $bin)" >&2
  exit 2
fi
exec python3 - "$mode" "$bin" README.md <<'PY'
import difflib, re, shlex, subprocess, sys

mode, binary, path = sys.argv[1:4]
text = open(path, encoding="utf-8").read().split("\n")
volatile = [(re.compile(r"searched in [0-9.]+ (?:ms|s|us)"), "searched in …")]

def run(args):
    p = subprocess.run([binary] + shlex.split(args), capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"readme_examples: parallax {args} exited {p.returncode}: {p.stderr.strip()}")
    lines = p.stdout.rstrip("\n").split("\n")
    for pattern, repl in volatile:
        lines = [pattern.sub(repl, l) for l in lines]
    return [l.rstrip() for l in lines]

out, i, examples, drifted = [], 0, 0, 0
while i < len(text):
    out.append(text[i])
    if text[i].strip() != "<!-- example -->":
        i += 1
        continue
    fence, command = text[i + 1], text[i + 2]
    if not fence.startswith("```") or not command.startswith("$ parallax "):
        sys.exit(f"readme_examples: {path}:{i + 1}: expected a fence and '$ parallax ...' after the marker")
    end = i + 3
    while end < len(text) and text[end] != "```":
        end += 1
    shown, actual = text[i + 3:end], run(command[len("$ parallax "):])
    examples += 1
    if shown != actual:
        drifted += 1
        if mode == "--check":
            sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                shown, actual, f"README.md: {command}", f"this build: {command}", lineterm=""))
    out += [fence, command] + actual + ["```"]
    i = end + 1

if examples == 0:
    sys.exit(f"readme_examples: no '<!-- example -->' in {path}")
if mode == "--update":
    open(path, "w", encoding="utf-8").write("\n".join(out))
    print(f"readme_examples: {examples} examples, {drifted} rewritten")
elif drifted:
    print(f"readme_examples: {drifted} of {examples} README examples differ from this build's output; "
          "run scripts/readme_examples.sh --update and review the diff", file=sys.stderr)
    sys.exit(1)
else:
    print(f"readme_examples: {examples} examples match")
PY

#!/usr/bin/env python3
"""Lists the longest function definitions in C++ sources, by lines from the line that names the
function to its closing brace (lambdas count toward the function that holds them).

Usage: scripts/function_lengths.py [--top N] [--over LINES] PATH...   (folders are walked)
Exit status 1 with --over when some function is longer than LINES.

A brace-matching scan, not a compiler: comments, string and character literals and preprocessor
lines are skipped; a `{` at namespace or class scope opens a function when the text before it
since the previous `;`, `{` or `}` holds a parameter list and is not a class, enum or namespace
head. The clang-tidy check readability-function-size (planner/, executor/runtime/, profiler/
.clang-tidy) enforces the same limit on the compiler's view of the code.
"""
import argparse
import os
import re
import sys

SOURCE_EXT = (".cpp", ".h", ".cc", ".hpp", ".cu", ".cuh")


def strip(text):
    """Blanks comments, literals and preprocessor lines, keeping newlines (line numbers hold)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # Preprocessor line, with continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


HEAD_TYPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack = []  # (kind, name, start_line)
    head_start = 0
    line = 1
    results = []
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            if not stack or stack[-1][0] in ("namespace", "class"):
                head_start = i + 1
        elif c == "{":
            head = text[head_start:i]
            if any(k == "function" for k, _, _ in stack):
                kind = "inner"
            elif HEAD_TYPE.search(head) and "(" not in head.split("{")[0].split("=")[0]:
                kind = "namespace" if "namespace" in head else "class"
            elif "(" in head and not re.search(r"=\s*$", head.strip() + " "):
                kind = "function"
            else:
                kind = "inner"
            start = line - head[::-1].count("\n") if head.strip() else line
            # The head's first non-blank line.
            lead = len(head) - len(head.lstrip())
            start = line - head[lead:].count("\n")
            name = ""
            if kind == "function":
                m = re.search(r"([~\w:<>]+)\s*\(", head)
                name = m.group(1) if m else "?"
            stack.append((kind, name, start))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "function":
                    results.append((line - start + 1, name, start))
            if not stack or stack[-1][0] in ("namespace", "class"):
                head_start = i + 1
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--over", type=int, default=0)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    rows = []
    for p in args.paths:
        files = []
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, f) for f in names if f.endswith(SOURCE_EXT)]
        else:
            files.append(p)
        for f in sorted(files):
            rows += [(n, name, f, start) for n, name, start in functions(f)]
    rows.sort(key=lambda r: (-r[0], r[2], r[3]))
    shown = [r for r in rows if r[0] > args.over] if args.over else rows[: args.top]
    for n, name, f, start in shown:
        print(f"{n:5d}  {f}:{start}  {name}")
    return 1 if args.over and shown else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Checks that the sources stay a size a newcomer can hold in their head (make lint).

Limits: no source file over MAX_FILE_LINES lines, no function over
MAX_FUNC_LINES lines. Sources are the C files of user/, bpf/ and include/
(generated code lives in build/ and vmlinux/ and is not read). A function's
length is counted from its opening brace to its closing brace, both
included: the house style (.clang-format, BreakBeforeBraces: Linux) puts
both alone in column 0, which is how functions are found here.

Two lists below name what the limits do not cover:

  PARSERS   functions that are one parser of one input format and read
            best as one piece (the issue excepts parsers); each line says
            which format.
  DEBT      files and functions over a limit when the limit came in. Each
            entry is a debt to pay: split the file or function and remove
            its line. A file or function that is over and not listed fails
            the check. A listed one that is no longer over is reported (remove
            its line), and so is a listed function found in another file
            (moved: update its path); neither fails the check.

Usage: check-sizes.py [ROOT]   exit 0 within limits, 1 on a new oversize file
or function (each printed as file:line), 2 when the tree cannot be read.
"""
import os
import re
import sys

MAX_FILE_LINES = 1000
MAX_FUNC_LINES = 80
DIRS = ("user", "bpf", "include")

PARSERS = {
    # (path, function): the format it parses
    ("user/cmd/alloc_main.c", "parse_args"): "the alloc CLI's command line",
    ("user/cmd/cfg.c", "cfg_parse"): "the driver's command line and environment (--help's flags)",
    ("user/cmd/cfgfile.c", "cfgfile_parse"): "the configuration file (libyaml events)",
    ("user/core/claim.c", "claim_parse"): "a ResourceClaim (JSON)",
    ("user/core/claim.c", "claim_config_parse"): "a claim's CPUConfig parameters (JSON)",
    ("user/core/rtbudget.c", "rt_budget_parse"): "a real-time claim's budget (CPUConfig JSON)",
    ("user/core/state_checkpoint.c", "state_checkpoint_parse"): "the checkpoint file (JSON)",
    ("user/lib/quantity.c", "quantity_parse_milli"): "a Kubernetes quantity (its grammar)",
}

# Over the limits on 2026-11-27 (issue 22, section 4). The number is the size
# then, for the record; the check fails only on entries missing here.
DEBT_FILES = {
}

DEBT_FUNCS = {
    # (path, function): its length in lines then
}

# The function's name: the last identifier before the first "(" of its signature.
IDENT_BEFORE_PAREN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def sources(root):
    for d in DIRS:
        top = os.path.join(root, d)
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, files in os.walk(top):
            dirnames.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(dirpath, f)
                    yield os.path.relpath(path, root), path


def function_name(lines, brace):
    """The name of the function whose body opens at lines[brace] ("{" alone
    in column 0): the identifier before the first "(" of the signature, read
    back from the brace to the line that starts the signature in column 0."""
    i = brace - 1
    while i >= 0 and lines[i][:1] in (" ", "\t"):
        i -= 1  # continuation lines of the parameter list
    if i < 0:
        return None
    sig = " ".join(l.strip() for l in lines[i:brace])
    m = IDENT_BEFORE_PAREN.search(sig)
    return m.group(1) if m else None


def functions(lines):
    """[(name, first line number, length)] of the functions of a C file."""
    out = []
    open_at = None
    for n, line in enumerate(lines):
        s = line.rstrip("\n")
        if s == "{" and open_at is None:
            open_at = n
        elif s == "}" and open_at is not None:
            name = function_name(lines, open_at)
            if name:
                out.append((name, open_at + 1, n - open_at + 1))
            open_at = None
    return out


def check(root):
    errors, notes = [], []
    seen_files, seen_funcs = set(), set()
    n = 0
    for rel, path in sources(root):
        n += 1
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        if len(lines) > MAX_FILE_LINES:
            seen_files.add(rel)
            if rel not in DEBT_FILES:
                errors.append(f"{rel}:{len(lines)}: {len(lines)} lines, over "
                              f"{MAX_FILE_LINES}: split it along a seam")
        if not rel.endswith(".c"):
            continue
        for name, line, length in functions(lines):
            if length <= MAX_FUNC_LINES:
                continue
            key = (rel, name)
            if key in PARSERS or key in DEBT_FUNCS:
                seen_funcs.add(key)
                continue
            moved = [k for k in list(PARSERS) + list(DEBT_FUNCS) if k[1] == name]
            if moved:  # the same function, moved to another file: still listed
                seen_funcs.update(moved)
                notes.append(f"{rel}:{line}: {name}() is listed under {moved[0][0]}; "
                             f"update its path")
                continue
            errors.append(f"{rel}:{line}: {name}() is {length} lines, over "
                          f"{MAX_FUNC_LINES}: split it into steps")
    for rel in sorted(set(DEBT_FILES) - seen_files):
        notes.append(f"{rel}: within {MAX_FILE_LINES} lines now; remove it from DEBT_FILES")
    for rel, name in sorted(set(DEBT_FUNCS) - seen_funcs):
        notes.append(f"{rel}: {name}() within {MAX_FUNC_LINES} lines now (or gone); remove it "
                    f"from DEBT_FUNCS")
    return n, errors, notes


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    try:
        n, errors, notes = check(root)
    except OSError as e:
        print(f"check-sizes: {e}", file=sys.stderr)
        return 2
    if n == 0:
        print("check-sizes: no sources under " + ", ".join(DIRS), file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    for note in notes:
        print("check-sizes: note: " + note)
    if errors:
        print(f"check-sizes: {len(errors)} new file(s) or function(s) over the limits "
              f"({MAX_FILE_LINES} lines a file, {MAX_FUNC_LINES} a function)")
        return 1
    print(f"check-sizes: {n} files within {MAX_FILE_LINES} lines a file and {MAX_FUNC_LINES} "
          f"a function, but for {len(DEBT_FILES)} files and {len(DEBT_FUNCS)} functions "
          f"listed as debt and {len(PARSERS)} parsers")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Checks the order of the #include lines of user/ (make lint).

Enforced, in each file:

  1. own header first: user/<layer>/<module>.c includes "<layer>/<module>.h"
     before anything else, so every header is seen to compile on its own (a
     module split over files, <module>_<part>.c, may start with <module>.h);
  2. then the system and library headers (<...>);
  3. then the project's headers ("..."): none of them before a <...> line;
  4. no header included twice.

Not enforced (yet): alphabetical order inside each group.

Usage: check-includes.py [ROOT]   exit 0 clean, 1 on a violation (each
printed as file:line), 2 when the tree cannot be read.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')


def check_file(rel, lines):
    errors = []
    layer, fname = rel.split("/")[1:3]
    incs = []
    for n, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if m:
            incs.append((n, m.group(1) == "<", m.group(2)))
    if not incs:
        return errors
    own = None
    if fname.endswith(".c"):
        # <module>.h, or for a module in several files (nodemap_draw.c) the
        # header they implement together (nodemap.h) when it comes first
        stem = fname[:-2]
        own = f"{layer}/{stem}.h"
        parts = stem.split("_")
        for k in range(len(parts) - 1, 0, -1):
            cand = f"{layer}/{'_'.join(parts[:k])}.h"
            if incs[0][2] == cand and own not in [name for _, _, name in incs]:
                own = cand
                break
    if own is not None:
        names = [name for _, _, name in incs]
        if own in names and incs[0][2] != own:
            errors.append(f"{rel}:{incs[0][0]}: include \"{own}\" first (its own header)")
    first_project = None
    seen = {}
    for n, system, name in incs:
        if name in seen:
            errors.append(f"{rel}:{n}: \"{name}\" included again (first at line {seen[name]})")
        seen.setdefault(name, n)
        if own is not None and name == own:
            continue
        if not system and first_project is None:
            first_project = n
        elif system and first_project is not None:
            errors.append(f"{rel}:{n}: <{name}> after the project header at line "
                          f"{first_project}: system headers go first")
    return errors


def check(root):
    user = os.path.join(root, "user")
    errors, files = [], 0
    for layer in sorted(os.listdir(user)):
        d = os.path.join(user, layer)
        if not os.path.isdir(d):
            continue
        for fname in sorted(os.listdir(d)):
            if not fname.endswith((".c", ".h")):
                continue
            files += 1
            with open(os.path.join(d, fname), encoding="utf-8") as f:
                errors += check_file(f"user/{layer}/{fname}", f.readlines())
    return files, errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    try:
        files, errors = check(root)
    except OSError as e:
        print(f"check-includes: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    if errors:
        print(f"check-includes: {len(errors)} include line(s) out of order")
        return 1
    if files == 0:
        print("check-includes: no sources under user/", file=sys.stderr)
        return 2
    print(f"check-includes: {files} files: own header first, then <system>, then \"project\" "
          f"headers, none twice (alphabetical order not checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

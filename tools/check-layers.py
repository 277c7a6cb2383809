#!/usr/bin/python3
"""Checks the layering of user/ and the order of its #include lines (make lint).

user/<layer>/<module>.[ch]: a file may include its own layer and the layers
below it, never one above it, and never a sibling at the same height (kube,
kubelet and nri are three peers of the driver and talk only through the
layers below them and through cmd, which wires them). Every project header is
named by its layer ("lib/log.h"), so the rule reads straight off the line.

Order, lowest first (DESIGN.md section 2):

  lib      one copy of each mechanism: log, buffers, errors, files, hashing, clock
  obs      the metrics registry and /metrics: every layer above counts into it
  host     what this machine is: topology, cgroups, /proc and sysfs
  core     claims and CPUs, the durable record; no peer I/O
  pinning  the BPF skeletons and the verdicts drawn from them
  kube | kubelet | nri    the three peers: API server, kubelet, runtime
  cmd      wiring, flags, the loop

Within a layer, modules (user/<layer>/<module>.c and .h together) must not
include each other in a circle (a.c includes b.h, b.c includes c.h, c.c
includes a.h): a circle means none of them can be read, tested or moved
without the others. Each circle is printed once, as the modules in order.

A module split over files keeps what its files share and nobody else may
see in <module>_priv.h (struct definitions, functions of one file called
from another): that header is part of <module> (no circle with <module>.h)
and only user/<layer>/<module>.c and <module>_<part>.c may include it.

Generated headers belong to the layer that owns them: *.skel.h to pinning,
kubelet_*.pb-c.h to kubelet, nri_*.pb-c.h to nri; include/*.h (shared with
BPF) may be included from any layer.

Include order, in each file:

  1. own header first: user/<layer>/<module>.c includes "<layer>/<module>.h"
     before anything else, so every header is seen to compile on its own (a
     module split over files, <module>_<part>.c, may start with <module>.h);
  2. then the system and library headers (<...>);
  3. then the project's headers ("..."): none of them before a <...> line;
  4. no header included twice (an X-macro list, *.def, is included once per use).

Not enforced (yet): alphabetical order inside each group.

Usage: check-layers.py [ROOT]   exit 0 clean, 1 on a violation (each printed
as file:line), 2 when the tree cannot be read.
"""
import os
import re
import sys

RANK = {"lib": 0, "obs": 1, "host": 2, "core": 3, "pinning": 4,
        "kube": 5, "kubelet": 5, "nri": 5, "cmd": 6}
GENERATED = [(re.compile(r"^[a-z_]+\.skel\.h$"), "pinning"),
             (re.compile(r"^kubelet_[a-z0-9_]+\.pb-c\.h$"), "kubelet"),
             (re.compile(r"^nri_[a-z0-9_]+\.pb-c\.h$"), "nri")]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_include(name, shared):
    """The layer a quoted include names, "shared" for include/, or None."""
    head, _, rest = name.partition("/")
    if rest and head in RANK:
        return head
    for rx, layer in GENERATED:
        if rx.match(name):
            return layer
    if name in shared:
        return "shared"
    return None


PRIV_SUFFIX = "_priv"


def fold_priv(mod):
    """core/state_priv -> core/state: a module's private header is the module."""
    return mod[:-len(PRIV_SUFFIX)] if mod.endswith(PRIV_SUFFIX) else mod


def module_of(rel):
    """user/core/state.c -> core/state; a module's private header, shared by
    the files of a module in several files, is the module:
    user/kube/kube_priv.h -> kube/kube"""
    return fold_priv(rel[len("user/"):].rsplit(".", 1)[0])


def may_include_priv(rel, inc):
    """A <module>_priv.h only from <module>.c, <module>_<part>.c or another
    header of the same module."""
    owner = fold_priv(inc.rsplit(".", 1)[0])
    mine = rel[len("user/"):].rsplit(".", 1)[0]
    return mine == owner or mine.startswith(owner + "_")


def cycles(edges):
    """The include circles of a module graph {module: {module, ...}}, each once,
    as a list starting at its smallest module."""
    found = set()
    out = []
    index = {}
    stack = []

    def walk(m):
        index[m] = len(stack)
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if n in index and index[n] is not None:
                circle = stack[index[n]:]
                i = circle.index(min(circle))
                key = tuple(circle[i:] + circle[:i])
                if key not in found:
                    found.add(key)
                    out.append(list(key))
            elif n not in index:
                walk(n)
        stack.pop()
        index[m] = None

    for m in sorted(edges):
        if m not in index:
            walk(m)
    return out


ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')


def check_order(rel, lines):
    """The include-order rules (see the top of this file) on one file."""
    errors = []
    layer, fname = rel.split("/")[1:3]
    incs = []
    for n, line in enumerate(lines, 1):
        m = ANY_INCLUDE.match(line)
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
        # An X-macro list (*.def) is made to be included once per use.
        if name in seen and not name.endswith(".def"):
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
    shared = set(os.listdir(os.path.join(root, "include")))
    errors = []
    files = 0
    edges = {}
    for entry in sorted(os.listdir(user)):
        path = os.path.join(user, entry)
        if not os.path.isdir(path):
            errors.append(f"user/{entry}: a file outside the layer folders")
            continue
        if entry not in RANK:
            errors.append(f"user/{entry}/: not a known layer ({', '.join(RANK)})")
            continue
        for fname in sorted(os.listdir(path)):
            if not fname.endswith((".c", ".h")):
                continue
            files += 1
            rel = f"user/{entry}/{fname}"
            with open(os.path.join(path, fname), encoding="utf-8") as f:
                lines = f.readlines()
            errors += check_order(rel, lines)
            for lineno, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                to = layer_of_include(inc, shared)
                priv = fold_priv(inc.rsplit(".", 1)[0])
                if "/" in inc and priv != inc.rsplit(".", 1)[0] and \
                        not may_include_priv(rel, inc):
                    errors.append(f"{rel}:{lineno}: \"{inc}\" is private to {priv}: "
                                  f"include \"{priv}.h\"")
                if to is None:
                    errors.append(f"{rel}:{lineno}: \"{inc}\" names no layer "
                                  f"(write \"<layer>/{inc}\")")
                elif to == "shared":
                    continue
                elif to == entry:
                    dep = fold_priv(inc.rsplit(".", 1)[0])
                    if "/" in inc and dep != module_of(rel) and \
                            os.path.exists(os.path.join(user, inc)):
                        edges.setdefault(module_of(rel), set()).add(dep)
                    continue
                elif not os.path.exists(os.path.join(user, inc)) and "/" in inc:
                    errors.append(f"{rel}:{lineno}: \"{inc}\" does not exist")
                elif RANK[to] > RANK[entry]:
                    errors.append(f"{rel}:{lineno}: {entry} includes \"{inc}\", "
                                  f"a layer above it ({to})")
                elif RANK[to] == RANK[entry]:
                    errors.append(f"{rel}:{lineno}: {entry} includes \"{inc}\", "
                                  f"a sibling layer ({to}); go through a lower "
                                  f"layer or through cmd")
    for c in cycles(edges):
        errors.append("include cycle: " + " -> ".join(c + [c[0]]))
    return files, errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    try:
        files, errors = check(root)
    except OSError as e:
        print(f"check-layers: {e}", file=sys.stderr)
        return 2
    for e in errors:
        print(e)
    if errors:
        print(f"check-layers: {len(errors)} layering or include-order violation(s)")
        return 1
    if files == 0:
        print("check-layers: no sources under user/", file=sys.stderr)
        return 2
    print(f"check-layers: {files} files, layering holds; includes: own header first, then "
          f"<system>, then \"project\" headers, none twice (alphabetical order not checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

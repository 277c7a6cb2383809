"""make lint's checks besides layering (test_layers.py): tools/check-sizes.py
(1,000 lines a file, 80 a function, an allow-list of today's debt), the
include order tools/check-layers.py also checks (own header first, then
<system>, then project headers, none twice) and the banned calls (make
lint-calls). The tree as
committed passes each; a planted violation fails with its file and line."""
import importlib.util
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIZES = os.path.join(ROOT, "tools", "check-sizes.py")
INCLUDES = os.path.join(ROOT, "tools", "check-layers.py")


def run(tool, root):
    return subprocess.run(["/usr/bin/python3", tool, str(root)], capture_output=True, text=True,
                          timeout=60)


def tree_copy(tmp_path):
    dst = tmp_path / "tree"
    for d in ("user", "include", "bpf"):
        shutil.copytree(os.path.join(ROOT, d), dst / d)
    return dst


def function(name, body_lines):
    body = "".join("\tx += %d;\n" % i for i in range(body_lines))
    return "\nint %s(int x);\nint %s(int x)\n{\n%s\treturn x;\n}\n" % (name, name, body)


# ---- sizes ------------------------------------------------------------------------------


def test_sizes_tree_as_committed_passes():
    r = run(SIZES, ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "listed as debt" in r.stdout


def test_a_new_long_function_fails(tmp_path):
    t = tree_copy(tmp_path)
    with open(t / "user/lib/cpuset.c", "a") as f:
        f.write(function("cpuset_too_long", 79))  # 79 + x += ... + return + braces = 82
    r = run(SIZES, t)
    assert r.returncode == 1, r.stdout
    assert "user/lib/cpuset.c:" in r.stdout and "cpuset_too_long() is 82 lines, over 80" \
        in r.stdout


def test_a_function_of_80_lines_passes(tmp_path):
    t = tree_copy(tmp_path)
    with open(t / "user/lib/cpuset.c", "a") as f:
        f.write(function("cpuset_just_fits", 77))
    r = run(SIZES, t)
    assert r.returncode == 0, r.stdout


def test_a_new_long_file_fails(tmp_path):
    t = tree_copy(tmp_path)
    (t / "user/lib/big.c").write_text("/* big */\n" +
                                      "".join("int v%d;\n" % i for i in range(1001)))
    r = run(SIZES, t)
    assert r.returncode == 1
    assert "user/lib/big.c:1002: 1002 lines, over 1000" in r.stdout


def sizes_module():
    spec = importlib.util.spec_from_file_location("check_sizes", SIZES)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def a_listed_debt():
    """A file and a function still listed as debt and still over the limits in
    the tree: the debt is being paid, so the tests take whichever is left
    rather than a name that a split would make stale."""
    m = sizes_module()
    long_file = long_func = None
    for path in sorted(m.DEBT_FILES):
        full = os.path.join(ROOT, path)
        if os.path.exists(full):
            with open(full, encoding="utf-8") as f:
                if len(f.readlines()) > m.MAX_FILE_LINES:
                    long_file = path
                    break
    for path, name in sorted(m.DEBT_FUNCS):
        full = os.path.join(ROOT, path)
        if not os.path.exists(full):
            continue
        with open(full, encoding="utf-8") as f:
            lines = f.readlines()
        for fname, line, length in m.functions(lines):
            if fname == name and length > m.MAX_FUNC_LINES:
                # from the line that starts its signature (column 0) to "}"
                start = line - 2
                while start > 0 and lines[start][:1] in (" ", "\t"):
                    start -= 1
                long_func = (path, name, start, line - 1 + length)
                break
        if long_func:
            break
    if not long_file or not long_func:
        pytest.skip("no listed debt left over the limits")
    return long_file, long_func


def test_listed_debt_passes_and_paid_debt_is_reported(tmp_path):
    long_file, (path, name, _, _) = a_listed_debt()
    t = tree_copy(tmp_path)
    # A listed file grows: still listed, still passes.
    with open(t / long_file, "a") as f:
        f.write("\n/* more */\n")
    # A listed function gone (paid or renamed): reported, not a failure.
    p = t / path
    p.write_text(re.sub(r"\b%s\b" % name, name + "_renamed", p.read_text()))
    r = run(SIZES, t)
    assert r.returncode == 1  # <name>_renamed() is not listed: a new long function
    assert "%s_renamed() is" % name in r.stdout, r.stdout
    assert "%s() within 80 lines now (or gone)" % name in r.stdout, r.stdout


def test_a_listed_function_moved_to_another_file_is_a_note(tmp_path):
    _, (path, name, start, end) = a_listed_debt()
    t = tree_copy(tmp_path)
    src = t / path
    lines = src.read_text().splitlines(keepends=True)
    with open(t / "user/cmd/main.c", "a") as f:
        f.write("\n" + "".join(lines[start:end]))
    src.write_text("".join(lines[:start] + lines[end:]))
    r = run(SIZES, t)
    assert r.returncode == 0, r.stdout
    assert "%s() is listed under %s; update its path" % (name, path) in r.stdout, r.stdout


# ---- include order ----------------------------------------------------------------------


def test_includes_tree_as_committed_passes():
    r = run(INCLUDES, ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_include_order_violations_fail(tmp_path):
    t = tree_copy(tmp_path)
    p = t / "user/lib/cpuset.c"
    p.write_text('#include <stdint.h>\n' + p.read_text())  # before its own header
    q = t / "user/host/sched.c"
    q.write_text(q.read_text().replace('#include "lib/num.h"\n',
                                       '#include "lib/num.h"\n#include <stdio.h>\n'
                                       '#include "lib/cpuset.h"\n'))
    r = run(INCLUDES, t)
    assert r.returncode == 1
    assert 'user/lib/cpuset.c:1: include "lib/cpuset.h" first' in r.stdout
    assert "<stdio.h> after the project header" in r.stdout
    assert '"lib/cpuset.h" included again' in r.stdout


# ---- banned calls -----------------------------------------------------------------------


def lint_calls(root):
    return subprocess.run(["make", "-s", "--no-print-directory", "lint-calls"], cwd=root,
                          capture_output=True, text=True, timeout=120)


def test_banned_calls(tmp_path):
    t = tree_copy(tmp_path)
    shutil.copy(os.path.join(ROOT, "Makefile"), t / "Makefile")
    r = lint_calls(t)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no banned calls" in r.stdout and "sscanf" in r.stdout
    for call in ("sscanf(s, \"%d\", &v)", "strtol(s, NULL, 10)", "strtoull(s, &e, 10)"):
        p = t / "user/host/sched.c"
        saved = p.read_text()
        p.write_text(saved + "\nstatic int bad(const char *s) { int v; char *e; return %s; }\n"
                     % call)
        r = lint_calls(t)
        p.write_text(saved)
        assert r.returncode != 0, call
        assert "user/host/sched.c:" in r.stdout and "lib/num.h" in r.stdout, r.stdout

"""make lint's checks besides layering (test_layers.py): tools/check-sizes.py
(1,000 lines a file, 80 a function, an allow-list of today's debt), the
include order tools/check-layers.py also checks (own header first, then
<system>, then project headers, none twice) and the banned calls (make
lint-calls). The tree as
committed passes each; a planted violation fails with its file and line."""
import os
import re
import shutil
import subprocess

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


def planted_debt(t):
    """A tree with debt of its own: a long file and a long function planted in
    it, and a copy of check-sizes.py that lists both (the tree's own debt is
    paid: nothing of it is left to play with). Returns the copy, the file and
    the function's (path, name)."""
    (t / "user/lib/planted.c").write_text("/* planted */\n" +
                                          "".join("int w%d;\n" % i for i in range(1001)))
    with open(t / "user/lib/cpuset.c", "a") as f:
        f.write(function("cpuset_planted_debt", 90))
    with open(SIZES, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"DEBT_FILES = \{[^}]*\}", 'DEBT_FILES = {\n    "user/lib/planted.c": 1002,\n}',
                  text, count=1)
    text = re.sub(r"DEBT_FUNCS = \{[^}]*\}",
                  'DEBT_FUNCS = {\n    ("user/lib/cpuset.c", "cpuset_planted_debt"): 93,\n}',
                  text, count=1)
    tool = t / "check-sizes.py"
    tool.write_text(text)
    return str(tool), "user/lib/planted.c", ("user/lib/cpuset.c", "cpuset_planted_debt")


def test_planted_debt_passes_as_listed(tmp_path):
    t = tree_copy(tmp_path)
    tool, _, _ = planted_debt(t)
    r = run(tool, t)
    assert r.returncode == 0, r.stdout
    assert "but for 1 files and 1 functions listed as debt" in r.stdout, r.stdout


def test_listed_debt_passes_and_paid_debt_is_reported(tmp_path):
    t = tree_copy(tmp_path)
    tool, long_file, (path, name) = planted_debt(t)
    # A listed file grows: still listed, still passes.
    with open(t / long_file, "a") as f:
        f.write("\n/* more */\n")
    # A listed function gone (paid or renamed): reported, not a failure.
    p = t / path
    p.write_text(re.sub(r"\b%s\b" % name, name + "_renamed", p.read_text()))
    r = run(tool, t)
    assert r.returncode == 1  # <name>_renamed() is not listed: a new long function
    assert "%s_renamed() is" % name in r.stdout, r.stdout
    assert "%s() within 80 lines now (or gone)" % name in r.stdout, r.stdout


def test_a_listed_function_moved_to_another_file_is_a_note(tmp_path):
    t = tree_copy(tmp_path)
    tool, _, (path, name) = planted_debt(t)
    src = t / path
    text = src.read_text()
    start = text.index("\nint %s(int x)\n{" % name) + 1
    end = text.index("\n}\n", start) + 3
    with open(t / "user/cmd/main.c", "a") as f:
        f.write("\n" + text[start:end])
    src.write_text(text[:start] + text[end:])
    r = run(tool, t)
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

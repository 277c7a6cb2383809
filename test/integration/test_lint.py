"""make lint's checks besides layering (test_layers.py): tools/check-sizes.py
(1,000 lines a file, 80 a function, an allow-list of today's debt), the
include order tools/check-layers.py also checks (own header first, then
<system>, then project headers, none twice) and the banned calls (make
lint-calls). The tree as
committed passes each; a planted violation fails with its file and line."""
import os
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


def test_listed_debt_passes_and_paid_debt_is_reported(tmp_path):
    t = tree_copy(tmp_path)
    # A listed file grows: still listed, still passes.
    with open(t / "user/kube/kube.c", "a") as f:
        f.write("\n/* more */\n")
    # A listed function gone (paid or renamed): reported, not a failure.
    p = t / "user/cmd/daemon.c"
    p.write_text(p.read_text().replace("start_node_agents", "start_agents"))
    r = run(SIZES, t)
    assert r.returncode == 1  # start_agents() is not listed: a new long function
    assert "start_agents() is" in r.stdout
    assert "start_node_agents() within 80 lines now (or gone)" in r.stdout


def test_a_listed_function_moved_to_another_file_is_a_note(tmp_path):
    t = tree_copy(tmp_path)
    src = t / "user/cmd/daemon.c"
    text = src.read_text()
    start = text.index("static int start_node_agents(")
    end = text.index("\n}\n", start) + 3
    with open(t / "user/cmd/main.c", "a") as f:
        f.write("\n" + text[start:end])
    src.write_text(text[:start] + text[end:])
    r = run(SIZES, t)
    assert r.returncode == 0, r.stdout
    assert "start_node_agents() is listed under user/cmd/daemon.c; update its path" in r.stdout


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

"""tools/check-layers.py, the layering rule of user/ (make lint): the tree as
it is passes, a deliberate include up, sideways or without a layer fails
with the file and line named, and an include circle between modules of a
layer fails naming the modules in order."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "tools", "check-layers.py")


def run(root):
    return subprocess.run(["/usr/bin/python3", CHECK, str(root)], capture_output=True,
                          text=True, timeout=60)


def tree_copy(tmp_path):
    dst = tmp_path / "tree"
    shutil.copytree(os.path.join(ROOT, "user"), dst / "user")
    shutil.copytree(os.path.join(ROOT, "include"), dst / "include")
    return dst


def add_line(path, line):
    text = path.read_text()
    path.write_text(line + "\n" + text)


def test_tree_as_committed_holds():
    r = run(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "layering holds" in r.stdout


# (file, the include added on its first line, what the check must say)
VIOLATIONS = [
    ("user/lib/cpuset.c", '#include "core/state.h"',
     'user/lib/cpuset.c:1: lib includes "core/state.h", a layer above it (core)'),
    ("user/nri/pools.c", '#include "kubelet/dra.h"',
     'user/nri/pools.c:1: nri includes "kubelet/dra.h", a sibling layer (kubelet)'),
    ("user/core/state.c", '#include "pinning.skel.h"',
     'core includes "pinning.skel.h", a layer above it (pinning)'),
    ("user/obs/metrics.c", '#include "log.h"', '"log.h" names no layer'),
]


@pytest.mark.parametrize("path,line,message", VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_a_violation_fails_naming_file_and_line(tmp_path, path, line, message):
    t = tree_copy(tmp_path)
    add_line(t / path, line)
    r = run(t)
    assert r.returncode == 1
    assert message in r.stdout, r.stdout


def test_file_outside_the_layers_fails(tmp_path):
    t = tree_copy(tmp_path)
    (t / "user/stray.c").write_text("int x;\n")
    r = run(t)
    assert r.returncode == 1
    assert "user/stray.c: a file outside the layer folders" in r.stdout


def test_empty_tree_is_an_error_not_a_pass(tmp_path):
    (tmp_path / "user").mkdir()
    (tmp_path / "include").mkdir()
    r = run(tmp_path)
    assert r.returncode == 2


def test_an_include_circle_between_modules_fails_naming_it(tmp_path):
    # the circle this check was written for: claim -> rt -> state -> claim,
    # put back by making the budget walk the state again
    t = tree_copy(tmp_path)
    add_line(t / "user/core/rtbudget.c", '#include "core/state.h"')
    r = run(t)
    assert r.returncode == 1
    assert "include cycle: core/claim -> core/rtbudget -> core/state -> core/claim" in r.stdout, \
        r.stdout


def test_a_circle_through_headers_alone_fails_too(tmp_path):
    t = tree_copy(tmp_path)
    add_line(t / "user/lib/buf.h", '#include "lib/fileio.h"')
    add_line(t / "user/lib/fileio.h", '#include "lib/buf.h"')
    r = run(t)
    assert r.returncode == 1
    assert "include cycle: lib/buf -> lib/fileio -> lib/buf" in r.stdout, r.stdout


def test_a_module_including_its_own_header_is_no_circle(tmp_path):
    t = tree_copy(tmp_path)
    add_line(t / "user/lib/buf.c", '#include "lib/buf.h"')
    r = run(t)
    # the second copy of the line is an include-order fault, not a circle
    assert "include cycle" not in r.stdout, r.stdout
    assert r.stdout.splitlines()[0] == \
        'user/lib/buf.c:3: "lib/buf.h" included again (first at line 1)', r.stdout


def test_a_private_header_is_part_of_its_module_not_a_circle(tmp_path):
    # a module in several files shares its struct through <module>_priv.h,
    # which needs the public header: one module, not buf -> buf_priv -> buf
    t = tree_copy(tmp_path)
    (t / "user/lib/buf_priv.h").write_text('#pragma once\n#include "lib/buf.h"\n')
    add_line(t / "user/lib/buf.c", '#include "lib/buf_priv.h"')
    r = run(t)
    assert "include cycle" not in r.stdout, r.stdout
    assert "private" not in r.stdout, r.stdout


def test_a_private_header_included_outside_its_module_fails(tmp_path):
    t = tree_copy(tmp_path)
    (t / "user/lib/buf_priv.h").write_text('#pragma once\n#include "lib/buf.h"\n')
    add_line(t / "user/lib/fileio.c", '#include "lib/buf_priv.h"')
    add_line(t / "user/core/state.c", '#include "lib/buf_priv.h"')
    r = run(t)
    assert r.returncode == 1
    assert 'user/lib/fileio.c:1: "lib/buf_priv.h" is private to lib/buf: ' \
        'include "lib/buf.h"' in r.stdout, r.stdout
    assert 'user/core/state.c:1: "lib/buf_priv.h" is private' in r.stdout, r.stdout

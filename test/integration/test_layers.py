"""tools/check-layers.py, the layering rule of user/ (make lint): the tree as
it is passes, and a deliberate include up, sideways or without a layer fails
with the file and line named."""
import os
import shutil
import subprocess

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


def test_include_from_a_layer_above_fails(tmp_path):
    t = tree_copy(tmp_path)
    add_line(t / "user/lib/cpuset.c", '#include "core/state.h"')
    r = run(t)
    assert r.returncode == 1
    assert 'user/lib/cpuset.c:1: lib includes "core/state.h", a layer above it (core)' in r.stdout


def test_include_from_a_sibling_peer_fails(tmp_path):
    t = tree_copy(tmp_path)
    add_line(t / "user/nri/pools.c", '#include "kubelet/dra.h"')
    r = run(t)
    assert r.returncode == 1
    assert "a sibling layer (kubelet)" in r.stdout
    assert "user/nri/pools.c:1:" in r.stdout


def test_generated_header_counts_for_its_owner(tmp_path):
    t = tree_copy(tmp_path)
    add_line(t / "user/core/state.c", '#include "pinning.skel.h"')
    r = run(t)
    assert r.returncode == 1
    assert 'core includes "pinning.skel.h", a layer above it (pinning)' in r.stdout


def test_include_without_a_layer_fails(tmp_path):
    t = tree_copy(tmp_path)
    add_line(t / "user/obs/metrics.c", '#include "log.h"')
    r = run(t)
    assert r.returncode == 1
    assert '"log.h" names no layer' in r.stdout


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

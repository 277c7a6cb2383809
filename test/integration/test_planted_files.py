"""Files that are not what they seem: the real daemon started with a FIFO, a
socket, a directory or a symlink where it keeps its own regular files (the
checkpoint, the temp files of the checkpoint, owners.json and CDI specs, and
a CDI spec itself). Never a hang (every start and call has a timeout), never
an exit at every start without a message saying what to do, never a write
through a planted link (its target is compared byte for byte)."""

import os
import socket
import subprocess
import uuid

import pytest

from claims import claim, ref
from driver import wait_for

TARGET_TEXT = "precious, not the driver's\n"
ARGS = ["--no-nri", "--no-bpf"]


def plant(path, kind, target):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        os.symlink(target, path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.close()
    else:
        raise ValueError(kind)


def kind_of(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    import stat
    for name, test in (("file", stat.S_ISREG), ("directory", stat.S_ISDIR),
                       ("symlink", stat.S_ISLNK), ("fifo", stat.S_ISFIFO),
                       ("socket", stat.S_ISSOCK)):
        if test(st.st_mode):
            return name
    return "other"


@pytest.fixture
def target(tmp_path):
    """A file a planted symlink points at; must never change."""
    t = tmp_path / "target"
    t.write_text(TARGET_TEXT)
    yield str(t)
    assert t.read_text() == TARGET_TEXT


def spec_name(uid):
    return "dra.k8s.io-cpu_claim-%s.json" % uid


def prepared(apiserver, kubelet, d, uid):
    c = apiserver.put_claim(claim("c-" + uid[:8], [("cpu", "cpudevnuma000", "2")], uid=uid))
    r = kubelet.prepare(d.dra_sock, [ref(c)], timeout=10).claims[uid]
    return c, r


def start(d):
    """Starts and waits for /metrics; a hang fails here, within the wait."""
    d.start(wait=None)
    wait_for(lambda: d.proc.poll() is not None or d.http("/metrics")[0] == 200, timeout=15,
             what="driver serving (or exiting)")
    assert d.proc.poll() is None, d.log()[-3000:]


# Each: (directory attribute of the Driver, file name given the claim uid).
PATHS = {
    "checkpoint": ("state_dir", lambda uid: "checkpoint.json"),
    "checkpoint-temp": ("state_dir", lambda uid: ".checkpoint.json.tmp"),
    "checkpoint-temp-new": ("state_dir", lambda uid: ".checkpoint.json.tmp.Q1w2E3"),
    "owners-temp": ("state_dir", lambda uid: ".owners.json.tmp"),
    "cdi-temp": ("cdi_dir", lambda uid: "." + spec_name(uid) + ".tmp"),
}


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "socket"])
@pytest.mark.parametrize("where", sorted(PATHS))
def test_start_with_a_planted_file_serves_and_commits(apiserver, make_driver, kubelet, target,
                                                      where, kind):
    """Planted before start: the start removes it or replaces it, and the first
    Prepare (of the very claim a planted temp is named after) commits to
    regular files. Earlier, a FIFO at a temp name hung the start or the
    Prepare, and a symlink or directory there failed every start."""
    d = make_driver(args=ARGS)
    uid = str(uuid.uuid4())
    attr, name = PATHS[where]
    os.makedirs(d.state_dir, mode=0o700)
    os.makedirs(d.cdi_dir)
    path = os.path.join(getattr(d, attr), name(uid))
    plant(path, kind, target)
    start(d)
    if where == "checkpoint":
        assert kind_of(path) == "file"
        if kind != "directory":
            assert "checkpoint_unreadable" in d.log()
    else:
        assert kind_of(path) is None, "stale temp %s (%s) still there" % (path, kind)
        assert "stale_temps_removed" in d.log()
    c, r = prepared(apiserver, kubelet, d, uid)
    assert r.error == ""
    assert kind_of(os.path.join(d.cdi_dir, spec_name(uid))) == "file"
    assert kind_of(os.path.join(d.state_dir, "checkpoint.json")) == "file"
    assert kubelet.unprepare(d.dra_sock, [ref(c)], timeout=10).claims[uid].error == ""


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "socket"])
def test_planted_while_running_at_the_old_temp_names(apiserver, make_driver, kubelet, target,
                                                     kind):
    """Planted after the start's clean-up: a write never opens the old fixed
    temp names (a FIFO there blocked the loop for good)."""
    d = make_driver(args=ARGS)
    start(d)
    uid = str(uuid.uuid4())
    os.makedirs(d.cdi_dir, exist_ok=True)
    plant(os.path.join(d.cdi_dir, "." + spec_name(uid) + ".tmp"), kind, target)
    plant(os.path.join(d.state_dir, ".checkpoint.json.tmp"), kind, target)
    c, r = prepared(apiserver, kubelet, d, uid)
    assert r.error == ""
    assert kind_of(os.path.join(d.cdi_dir, spec_name(uid))) == "file"
    assert d.http("/healthz")[0] == 200  # the loop is alive


@pytest.mark.parametrize("kind", ["fifo", "symlink", "socket"])
def test_spec_name_taken_by_a_non_file_is_replaced_at_prepare(apiserver, make_driver, kubelet,
                                                              target, kind):
    d = make_driver(args=ARGS)
    uid = str(uuid.uuid4())
    os.makedirs(d.cdi_dir)
    spec = os.path.join(d.cdi_dir, spec_name(uid))
    plant(spec, kind, target)
    start(d)
    # reported at the scan with what it is, not read
    wait_for(lambda: "cdi_spec_ignored" in d.log(), what="scan report")
    assert "not a regular file" in d.log()
    c, r = prepared(apiserver, kubelet, d, uid)
    assert r.error == ""
    assert kind_of(spec) == "file"


def test_spec_name_taken_by_a_directory(apiserver, make_driver, kubelet):
    """Prepare fails with a reason; Unprepare releases the claim, leaving the
    directory alone (it is not a spec a restart could restore)."""
    d = make_driver(args=ARGS)
    start(d)
    uid = str(uuid.uuid4())
    c, r = prepared(apiserver, kubelet, d, uid)
    assert r.error == ""
    spec = os.path.join(d.cdi_dir, spec_name(uid))
    os.unlink(spec)
    os.mkdir(spec)
    u = kubelet.unprepare(d.dra_sock, [ref(c)], timeout=10).claims[uid]
    assert u.error == ""
    assert kind_of(spec) == "directory"
    assert d.metrics()["dra_cpu_allocated_cpus"] == 0
    # and a Prepare of it says why it cannot commit
    c, r = prepared(apiserver, kubelet, d, uid)
    assert "Is a directory" in r.error, r.error
    assert d.metrics()["dra_cpu_allocated_cpus"] == 0


def test_checkpoint_directory_with_content_exits_with_a_clear_message(make_driver):
    """Somebody's directory at the checkpoint: not removed; the daemon exits
    at once (no hang) with a line naming the path and what to do."""
    d = make_driver(args=ARGS)
    ckpt = os.path.join(d.state_dir, "checkpoint.json")
    os.makedirs(ckpt)
    with open(os.path.join(ckpt, "keep"), "w") as f:
        f.write("x")
    d.start(wait=None)
    try:
        rc = d.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        raise AssertionError("driver neither served nor exited: " + d.log()[-2000:])
    assert rc == 1
    lines = [ln for ln in d.log().splitlines() if "event=checkpoint_not_a_file" in ln]
    assert len(lines) == 1, d.log()[-3000:]
    assert "level=error" in lines[0] and "path=" + ckpt in lines[0]
    assert "kind=directory" in lines[0] and "hint=" in lines[0]
    assert os.path.exists(os.path.join(ckpt, "keep"))

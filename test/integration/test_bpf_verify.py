"""bpf-verify: the real binary against the real kernel.

Each test builds a private cgroup v2 subtree (dra-verify-<pid>-<n>/{A, A/child,
B}), spawns busy or sleeping processes in it pinned with sched_setaffinity,
makes CPU 1 exclusive to A (--exclusive or a state dir's owners.json) and
checks the exit code, the text tables and the JSON. Every process is killed
and every cgroup removed at teardown, also after a failed assertion.

CPU 1 of this machine is not isolated: host daemons (and other test runs)
are allowed on it and do run there. A test that expects "clean" therefore
passes --scope <the test's subtree>, which keeps them out of the verdict;
the intruder tests run node-wide as an SRE would.

Without root (CAP_BPF, cgroup writes) the kernel tests skip with "needs
CAP_BPF"; the argument tests need no privileges.
"""

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD_DIR

BIN = os.path.join(BUILD_DIR, "bpf-verify")
EXCL = 1    # the exclusive CPU
SHARED = 0  # where everything else (and bpf-verify itself) runs
_seq = itertools.count()


def run(*args, timeout=30, **kw):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout, p.stderr


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                return fields[4]
    return None


def cpuset_v1_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup" and "cpuset" in fields[sep + 3].split(","):
                return fields[4]
    return None


def needs_kernel():
    if os.geteuid() != 0:
        pytest.skip("needs CAP_BPF")
    if not cgroup2_mount():
        pytest.skip("needs a cgroup2 mount")
    if os.cpu_count() < 2:
        pytest.skip("needs two CPUs")


class Tree:
    """dra-verify-<pid>-<n>/{A, A/child, B} and the processes spawned in it."""

    def __init__(self, mnt=None):
        self.mnt = mnt or cgroup2_mount()
        self.v1 = mnt is not None
        self.root = os.path.join(self.mnt, "dra-verify-%d-%d" % (os.getpid(), next(_seq)))
        self.a = os.path.join(self.root, "A")
        self.child = os.path.join(self.a, "child")
        self.b = os.path.join(self.root, "B")
        for d in (self.root, self.a, self.child, self.b):
            os.mkdir(d)
            if self.v1:  # a v1 cpuset takes no task before it has CPUs and memory
                for knob, parent in (("cpuset.cpus", "0-%d" % EXCL), ("cpuset.mems", None)):
                    if parent is None:
                        with open(os.path.join(os.path.dirname(d), knob)) as f:
                            parent = f.read().strip()
                    with open(os.path.join(d, knob), "w") as f:
                        f.write(parent)
        self.procs = []
        # comm comes from the name exec'd: symlinks give our tasks names.
        self.bin = tempfile.mkdtemp(prefix="dra-verify-bin.")

    def rel(self, path):
        return path[len(self.mnt):] or "/"

    def _link(self, comm, target):
        link = os.path.join(self.bin, comm)
        if not os.path.exists(link):
            os.symlink(target, link)
        return link

    def spawn(self, cgroup, cpu, comm, sleep=None):
        """A busy shell loop (or `sleep N`) named comm, in cgroup, on cpu."""
        def pre():
            # Into the cgroup first: a moment on cpu under pytest's cgroup
            # would be an intrusion of its own.
            with open(os.path.join(cgroup, "tasks" if self.v1 else "cgroup.procs"), "w") as f:
                f.write("0")
            os.sched_setaffinity(0, {cpu})
        if sleep is None:
            argv = [self._link(comm, "/bin/sh"), "-c", "while :; do :; done"]
        else:
            argv = [self._link(comm, shutil.which("sleep")), str(sleep)]
        p = subprocess.Popen(argv, preexec_fn=pre)
        self.procs.append(p)
        return p

    def kill(self, p):
        p.kill()
        p.wait()

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        # Anything else that ended up in the subtree goes too.
        for d in (self.child, self.a, self.b, self.root):
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        for d in (self.child, self.a, self.b, self.root):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        shutil.rmtree(self.bin, ignore_errors=True)


@pytest.fixture
def tree():
    needs_kernel()
    saved = os.sched_getaffinity(0)
    # Keep pytest off the exclusive CPU: a node-wide run would name it.
    os.sched_setaffinity(0, {SHARED})
    t = Tree()
    try:
        yield t
    finally:
        t.cleanup()
        os.sched_setaffinity(0, saved)


def check_json(out):
    j = json.loads(out)
    assert j["exitCode"] in (0, 1, 2)
    return j


def cpu_entry(j, cpu=EXCL):
    return next(c for c in j["cpus"] if c["cpu"] == cpu)


def pids(entries):
    return {e["pid"] for e in entries}


# ------------------------------------------------------------------ clean


def test_owner_and_its_child_are_clean_although_kthreads_visit(tree):
    owner = tree.spawn(tree.a, EXCL, "dra-owner")
    child = tree.spawn(tree.child, EXCL, "dra-owner-child")
    time.sleep(0.1)
    p = subprocess.Popen([BIN, "--exclusive", "%d=%s" % (EXCL, tree.a), "--scope", tree.root,
                          "--duration", "1.5", "--json", "--verbose"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait for the window, then make migration/1 run on the exclusive CPU:
    # moving a running task off a CPU goes through that CPU's stopper thread.
    line = p.stderr.readline()
    while line and "event=window_started" not in line:
        line = p.stderr.readline()
    for _ in range(4):
        os.sched_setaffinity(child.pid, {SHARED})
        time.sleep(0.05)
        os.sched_setaffinity(child.pid, {EXCL})
        time.sleep(0.05)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, out + err
    j = check_json(out)
    assert j["verdict"] == "clean"
    c = cpu_entry(j)
    assert c["owner"]["path"] == tree.rel(tree.a)
    assert c["owner"]["threads"] == 2
    assert c["ownerSwitches"] > 0
    assert c["ran"] == []
    assert [e for e in c["pinned"] if e["kind"] == "user"] == []
    assert j["counts"]["kthreadSwitches"] > 0          # they visited ...
    assert j["summary"].startswith("clean: only owners ran on CPU 1")  # ... and did not count
    assert owner.poll() is None


# ---------------------------------------------------------------- intruders


def test_pinned_intruder_is_named_with_exit_1(tree):
    tree.spawn(tree.a, EXCL, "dra-owner")
    intruder = tree.spawn(tree.b, EXCL, "dra-intruder")
    time.sleep(0.1)
    rc, out, err = run("--exclusive", "%d=%s" % (EXCL, tree.a), "--duration", "1")
    assert rc == 1, out + err
    row = [l for l in out.splitlines() if "dra-intruder" in l and l.split()[0] == str(intruder.pid)]
    assert len(row) == 2, out   # it ran there, and it is pinned there
    assert tree.rel(tree.b) in row[0]
    assert out.splitlines()[-1].startswith("verdict: VIOLATION on CPU 1:")

    # --json: the same verdict, the intruder in both lists.
    rc, out, err = run("--exclusive", "%d=%s" % (EXCL, tree.a), "--duration", "1", "--json")
    assert rc == 1, out + err
    j = check_json(out)
    assert j["verdict"] == "violation" and j["exitCode"] == 1
    c = cpu_entry(j)
    ran = next(e for e in c["ran"] if e["pid"] == intruder.pid)
    assert ran["comm"] == "dra-intruder"
    assert ran["cgroup"] == tree.rel(tree.b)
    assert ran["switches"] > 0
    assert intruder.pid in pids(c["pinned"])
    # Events and counters agree but for one racing each end of the window.
    assert c["foreign"]["user"]["switches"] + 2 >= ran["switches"]


def test_intruder_for_a_moment_mid_window_is_caught(tree):
    tree.spawn(tree.a, EXCL, "dra-owner")
    # 3 s: the blip must be gone well before the scan at the end, even on
    # a loaded machine (and under ASan).
    p = subprocess.Popen([BIN, "--exclusive", "%d=%s" % (EXCL, tree.a), "--scope", tree.root,
                          "--duration", "3", "--json", "--verbose"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    while line and "event=window_started" not in line:
        line = p.stderr.readline()
    t0 = time.monotonic()
    time.sleep(0.6)
    blip = tree.spawn(tree.b, EXCL, "dra-blip")
    time.sleep(0.2)
    tree.kill(blip)  # gone before the scan: only the watch can see it
    gone = time.monotonic() - t0
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1, out + err
    j = check_json(out)
    c = cpu_entry(j)
    ran = next(e for e in c["ran"] if e["pid"] == blip.pid)
    assert ran["comm"] == "dra-blip"
    # bpf-verify's clock starts a little before ours (it logs, we read).
    assert 0.4 <= ran["firstSeenSeconds"] <= gone + 0.5
    assert ran["lastSeenSeconds"] <= gone + 0.5
    assert gone < 2.5, "the machine is too slow for this test's timing"
    assert blip.pid not in pids(c["pinned"])


def test_sleeping_pinned_intruder_is_caught_statically(tree):
    tree.spawn(tree.a, EXCL, "dra-owner")
    sleeper = tree.spawn(tree.b, EXCL, "dra-sleeper", sleep=60)
    time.sleep(0.1)
    rc, out, err = run("--exclusive", "%d=%s" % (EXCL, tree.a), "--scope", tree.root,
                       "--duration", "1", "--json")
    assert rc == 1, out + err
    j = check_json(out)
    c = cpu_entry(j)
    assert sleeper.pid not in pids(c["ran"])  # asleep the whole window
    pin = next(e for e in c["pinned"] if e["pid"] == sleeper.pid)
    assert pin["comm"] == "dra-sleeper" and pin["allowed"] == "1" and pin["kind"] == "user"
    assert j["counts"]["foreignTasksPinned"] == 1
    assert "1 foreign task is pinned there" in j["summary"]


def test_cpuset_v1_owner_and_intruder():
    """cgroup v1 nodes: owners are cgroups of the cpuset hierarchy."""
    needs_kernel()
    mnt = cpuset_v1_mount()
    if not mnt:
        pytest.skip("no cgroup v1 cpuset hierarchy")
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {SHARED})
    t = Tree(mnt)
    try:
        t.spawn(t.a, EXCL, "dra-v1-owner")
        child = t.spawn(t.child, EXCL, "dra-v1-child")
        intruder = t.spawn(t.b, EXCL, "dra-v1-intruder")
        time.sleep(0.1)
        rc, out, err = run("--exclusive", "%d=%s" % (EXCL, t.a), "--scope", t.root,
                           "--duration", "1", "--json")
        assert rc == 1, out + err
        j = check_json(out)
        assert j["cgroupMode"] == "v1-cpuset"
        c = cpu_entry(j)
        assert c["owner"]["threads"] == 2
        ran = pids(c["ran"])
        assert intruder.pid in ran and child.pid not in ran
        assert pids(e for e in c["pinned"] if e["kind"] == "user") == {intruder.pid}
    finally:
        t.cleanup()
        os.sched_setaffinity(0, saved)


# ------------------------------------------------------------- state dir


def write_owners(d, tree, cgroup_id=None):
    os.makedirs(d, exist_ok=True)
    entry = {"cpus": str(EXCL), "cgroup": tree.a, "claim": "ns/claim-a", "claimUID": "u-1",
             "pod": "ns/pod-a", "container": "app",
             "cgroupId": cgroup_id if cgroup_id is not None else os.stat(tree.a).st_ino}
    with open(os.path.join(d, "owners.json"), "w") as f:
        json.dump({"owners": [entry]}, f)


def test_owners_from_the_state_dir(tree, tmp_path):
    tree.spawn(tree.a, EXCL, "dra-owner")
    state = str(tmp_path / "state")
    write_owners(state, tree)
    rc, out, err = run("--state-dir", state, "--scope", tree.root, "--duration", "1", "--json")
    assert rc == 0, out + err
    j = check_json(out)
    assert j["source"] == os.path.join(state, "owners.json")
    owner = cpu_entry(j)["owner"]
    assert owner["claim"] == "ns/claim-a" and owner["pod"] == "ns/pod-a"
    assert owner["cgroupId"] == os.stat(tree.a).st_ino

    # The container was recreated since: the state is stale, not trusted.
    write_owners(state, tree, cgroup_id=1)
    rc, out, err = run("--state-dir", state, "--duration", "1")
    assert rc == 2
    assert "stale" in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------- could not check: 2


@pytest.mark.parametrize("args,reason", [
    (["--exclusive", "1"], "expected CPUS=CGROUP_PATH"),
    (["--exclusive", "1-0=/sys/fs/cgroup"], "reversed range"),
    (["--exclusive", "x=/sys/fs/cgroup"], "is not a CPU list"),
    (["--exclusive", "1=relative"], "absolute directory"),
    (["--exclusive", "1=/sys/fs/cgroup/dra-verify-no-such-cgroup"], "does not exist"),
    (["--exclusive", "1=/tmp"], "is not a cgroup"),
    (["--duration", "0"], "--duration"),
    (["--duration", "soon"], "--duration"),
    (["--state-dir", "/nonexistent-dra-cpu"], "no /nonexistent-dra-cpu/owners.json"),
    (["--exclusive", "1=/sys/fs/cgroup", "--state-dir", "/x"], "cannot be combined"),
    (["--bogus"], "unknown option"),
    (["--probe", "--version"], "cannot be combined"),
])
def test_could_not_check_exits_2_with_one_line(args, reason):
    rc, out, err = run(*args)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpf-verify: could not check: ")
    assert reason in lines[0], err
    rc, out, err = run(*args, "--json")
    assert rc == 2
    j = json.loads(out)
    assert j["verdict"] == "error" and j["exitCode"] == 2 and reason in j["error"]


def plant(path, kind, target=None):
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


@pytest.mark.parametrize("kind,reason", [
    ("fifo", "is a FIFO, not a regular file"),
    ("directory", "is a directory, not a regular file"),
    ("symlink", "is a symbolic link (not followed), not a regular file"),
    ("socket", "is a socket, not a regular file"),
])
def test_owners_json_that_is_not_a_file_exits_2_naming_it(tmp_path, kind, reason):
    """Never a hang on a FIFO (no writer), never a followed link: exit 2 and why."""
    state = tmp_path / "state"
    state.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text('{"owners": []}')
    owners = str(state / "owners.json")
    plant(owners, kind, str(target))
    for extra in ([], ["--json"]):
        rc, out, err = run("--state-dir", str(state), "--duration", "1", *extra, timeout=10)
        assert rc == 2, out + err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bpf-verify: could not check: ")
        assert owners + ": " + reason in lines[0], err
        if extra:
            assert reason in json.loads(out)["error"]
    assert target.read_text() == '{"owners": []}'


def test_without_privileges_exit_2(tree, tmp_path):
    # A copy nobody can reach and run, whatever the mode of the build tree.
    exe = tempfile.mkdtemp(prefix="dra-verify-exe.")
    try:
        os.chmod(exe, 0o755)
        copy = os.path.join(exe, "bpf-verify")
        shutil.copy(BIN, copy)
        os.chmod(copy, 0o755)
        base = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", copy]
        p = subprocess.run(base + ["--exclusive", "%d=%s" % (EXCL, tree.a), "--duration", "1"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, p.stdout + p.stderr
        assert "CAP_BPF" in p.stderr and len(p.stderr.strip().splitlines()) == 1
        p = subprocess.run(base + ["--probe", "--json"], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2
        assert "CAP_BPF" in p.stderr
        assert json.loads(p.stdout)["verdict"] == "error"
    finally:
        shutil.rmtree(exe, ignore_errors=True)


# ---------------------------------------------------------- probe, help


def test_probe_lists_features_and_objects():
    needs_kernel()
    rc, out, err = run("--probe")
    assert rc == 0, out + err
    for word in ("features:", "btf ", "tp_btf", "ringbuf", "task_storage", "bpf_lsm",
                 "objects:", "pinning    loaded and attached", "baseline   loaded and attached",
                 "runqueue   loaded and attached", "rt         loaded and attached", "enforce"):
        assert word in out, out
    if "enforce    FAILED" in out:
        assert "    | libbpf: " in out  # libbpf's reasons, the verifier log if any
    rc, out, err = run("--probe", "--json")
    assert rc == 0
    j = json.loads(out)
    assert j["verdict"] == "ok"
    assert j["features"]["btf"] is True and j["features"]["tpBtf"] is True
    assert [o["name"] for o in j["objects"]] == ["pinning", "enforce", "baseline", "runqueue",
                                                 "rt"]
    assert j["objects"][0]["loaded"] and j["objects"][0]["attached"]


def test_help_and_version():
    rc, out, err = run("--help")
    assert rc == 0
    for flag in ("--duration", "--state-dir", "--exclusive", "--scope", "--json",
                 "--strict-kthreads", "--probe", "--version"):
        assert flag in out
    rc, out, err = run("--help", "--json")
    assert rc == 0 and "strict-kthreads" in [o["name"] for o in json.loads(out)["options"]]
    rc, out, err = run("--version")
    assert rc == 0 and out.startswith("bpf-verify ")
    rc, out, err = run("--version", "--json")
    assert rc == 0 and json.loads(out)["name"] == "bpf-verify"


# ---------------------------------------------------------------- interrupts


def test_interrupt_work_on_the_exclusive_cpu_is_shown(tree):
    """The owner busy on CPU 1 takes its ticks' softirqs there; the text
    report says it in one line per CPU, the JSON in counts."""
    tree.spawn(tree.a, EXCL, "dra-owner")
    argv = [BIN, "--exclusive", "%d=%s" % (EXCL, tree.a), "--scope", tree.root,
            "--duration", "1"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    import re
    m = re.search(r"^CPU 1: (\d+) interrupts, ([\d.]+) ms in 1 s; (\d+) softirqs, ([\d.]+) ms$",
                  out.stdout, re.M)
    assert m, out.stdout
    assert int(m.group(3)) > 0 and float(m.group(4)) > 0
    j = check_json(subprocess.run(argv + ["--json"], capture_output=True, text=True,
                                  timeout=30).stdout)
    irq = cpu_entry(j)["interrupts"]
    assert irq["soft"] > 0 and irq["softSeconds"] > 0 and irq["hard"] >= 0

"""Real-time claims on this machine's kernel: the real driver (--rt-cpus), the
NRI runtime simulator with real processes in real cgroups, claims prepared
through the grpcio kubelet. sched_setattr, root domains and the kernel's
deadline admission are the real ones; nothing is mocked.

Needs root, the cgroup v1 cpuset hierarchy (this machine; the v2 partition
path is covered by test/rtdomain_test.c), two CPUs and SCHED_DEADLINE. The
last CPU is the real-time one; the driver discovers the topology.
"""

import contextlib
import ctypes
import json
import os
import struct
import subprocess
import sys
import time

import pytest

from claims import realtime_claim, ref
from driver import wait_for
from rtnode import CPUSET, restore_node

NCPU = os.cpu_count() or 1
RT_CPU = NCPU - 1
SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}.get(os.uname().machine)
SCHED_DEADLINE = 6
DL_3MS = {"policy": "deadline", "runtimeNs": 3000000, "deadlineNs": 10000000,
          "periodNs": 10000000}

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(CPUSET + "/cpuset.cpus") or NCPU < 2
    or SYS_SCHED_SETATTR is None,
    reason="skipped: needs root, the cgroup v1 cpuset hierarchy and two CPUs")


def sched_setattr(pid, runtime, period, policy=SCHED_DEADLINE, flags=1, prio=0):
    """0 or the errno of sched_setattr(2)."""
    attr = struct.pack("=IIQiIQQQII", 56, policy, flags, 0, prio, runtime, period, period, 0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(attr, len(attr))
    r = libc.syscall(SYS_SCHED_SETATTR, ctypes.c_int(pid), buf, ctypes.c_uint(0))
    return 0 if r == 0 else ctypes.get_errno()


SCHED_RESET_ON_FORK = 0x40000000


def policy(pid):
    """The policy, without the reset-on-fork bit sched_getscheduler(2) adds."""
    return os.sched_getscheduler(pid) & ~SCHED_RESET_ON_FORK


def resets_on_fork(pid):
    return bool(os.sched_getscheduler(pid) & SCHED_RESET_ON_FORK)


def busy_on_rt_cpu():
    """A task pinned to the real-time CPU that wakes often (so the kernel
    counts it there), outside any claim."""
    p = subprocess.Popen([sys.executable, "-c",
                          "import os,time\nos.sched_setaffinity(0,{%d})\n"
                          "while 1: time.sleep(0.002)" % RT_CPU])
    wait_for(lambda: os.sched_getaffinity(p.pid) == {RT_CPU}, what="affinity")
    time.sleep(0.05)
    return p


def rt_claim(apiserver, name, q="300m", budget=DL_3MS, dev=None, pods=()):
    return apiserver.put_claim(realtime_claim(name, dev or "cpurt%03d" % RT_CPU, q, budget,
                                              reserved_for=pods))


def cdi_env(d, c):
    with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json" % c["metadata"]["uid"])) as f:
        k, v = json.load(f)["devices"][0]["containerEdits"]["env"][0].split("=", 1)
    return {k: v}




@pytest.fixture
def rt_env(apiserver, make_driver, kubelet, driver_dir, request):
    from sim.nrisim import Runtime

    kw = dict(getattr(request, "param", {}))  # Runtime options, through indirect parametrize
    bpf = kw.pop("bpf", False)
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock, cgroups=True, cgroup_root="nrisim-rt-%d" % os.getpid(),
                 command=(sys.executable, "-c",
                          "import time\nwhile 1: time.sleep(0.005)"), **kw).start()
    d = make_driver(topology=None,
                    args=["--nri-socket", sock, "--rt-cpus", str(RT_CPU)]
                    + ([] if bpf else ["--no-bpf"])).start()
    rt.wait_plugin(timeout=5)
    extra = []
    yield apiserver, d, kubelet, rt, extra
    print(d.log()[-8000:])  # shown when the test failed
    print("\n".join(rt.log[-30:]))
    for p in extra:
        p.kill()
        p.wait()
    rt.close()
    d.stop(timeout=5)
    restore_node()


PODS = {}  # claim uid -> the pod it is reserved for


def prepare(env, name, **kw):
    """Prepares a claim reserved for a pod of the same name (pod_of())."""
    apiserver, d, kubelet, rt, _ = env
    pod = rt.add_pod(name)
    c = rt_claim(apiserver, name, pods=[pod], **kw)
    PODS[c["metadata"]["uid"]] = pod
    r = kubelet.prepare(d.dra_sock, [ref(c)])
    return c, r.claims[c["metadata"]["uid"]].error


def pod_of(c):
    return PODS[c["metadata"]["uid"]]


def unprepare(env, c):
    apiserver, d, kubelet, rt, _ = env
    r = kubelet.unprepare(d.dra_sock, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == ""


def metric(d, name):
    return sum(v for k, v in d.metrics().items() if k == name or k.startswith(name + "{"))


def test_three_300m_claims_fit_a_900m_cpu_and_a_fourth_is_refused(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    # the running daemon keeps what it needs for real-time claims: sys_nice, kill
    with open("/proc/%d/status" % d.proc.pid) as f:
        eff = int(next(l for l in f if l.startswith("CapEff")).split()[1], 16)
    assert eff & (1 << 23) and eff & (1 << 5)
    ctrs = []
    for i in range(3):
        c, err = prepare(rt_env, "rt%d" % i)
        assert err == ""
        ctrs.append(rt.create_container(pod_of(c), "loop", env=cdi_env(d, c)))
    _, err = prepare(rt_env, "rt3")
    assert "does not fit on cpurt%03d" % RT_CPU in err and "hold 900m of 900m" in err
    # the kernel runs them under SCHED_DEADLINE, on the real-time CPU alone
    for ctr in ctrs:
        wait_for(lambda: policy(ctr.pid) == SCHED_DEADLINE, what="deadline policy")
        assert os.sched_getaffinity(ctr.pid) == {RT_CPU}
    assert metric(d, "dra_cpu_rt_policy_applied_total") == 3
    # the CPU is its own root domain and the kernel's admission is full
    with open(os.path.join(CPUSET, "cpuset.sched_load_balance")) as f:
        assert f.read().strip() == "0"
    assert os.path.isdir(os.path.join(CPUSET, "dra-cpu-rt", "cpu%d" % RT_CPU))
    p = busy_on_rt_cpu()
    extra.append(p)
    assert sched_setattr(p.pid, 200000, 10000000) == 16  # EBUSY: 0.9 is taken


def test_kernel_ebusy_is_the_second_line(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    first, err = prepare(rt_env, "first", q="100m",
                         budget={"policy": "deadline", "runtimeNs": 1000000,
                                 "periodNs": 10000000})
    assert err == ""  # the CPU is isolated from here on
    hog = busy_on_rt_cpu()
    extra.append(hog)
    # a deadline task outside the driver's claims takes 700m of the CPU
    assert wait_for(lambda: sched_setattr(hog.pid, 7000000, 10000000) == 0, what="hog admitted")
    evict, err = prepare(rt_env, "evicted")
    assert err == ""  # the driver's ledger has room: the kernel has not
    ctr = rt.create_container(pod_of(evict), "loop", env=cdi_env(d, evict))
    wait_for(lambda: rt.evicted, what="eviction")
    cid, reason, _ = rt.evicted[0]
    assert cid == ctr.id and "EBUSY" in reason
    wait_for(lambda: ctr.proc.poll() is not None, what="evicted container stopped")
    warn, err = prepare(rt_env, "warned", budget={**DL_3MS, "onFailure": "warn"})
    assert err == ""
    kept = rt.create_container(pod_of(warn), "loop", env=cdi_env(d, warn))
    wait_for(lambda: 'dra_cpu_rt_policy_failures_total{reason="ebusy",action="warn"}'
             in d.metrics(), what="warn counted")
    assert kept.proc.poll() is None and policy(kept.pid) == os.SCHED_OTHER
    assert len(rt.evicted) == 1
    assert 'reason=ebusy' in d.log() and 'action=running_without_guarantees' in d.log()


@contextlib.contextmanager
def forking_container(rt_env, c, name, script):
    """Runs script (a %-template given nr, cpu, out and procs) as claim c's
    container; yields the container and the pids its main task wrote to out
    once it forked them. Whatever the test leaves of them is killed after."""
    apiserver, d, kubelet, rt, extra = rt_env
    out = "/dev/shm/rt-%s-%d" % (name, os.getpid())
    text = script % {"nr": SYS_SCHED_SETATTR, "cpu": RT_CPU, "out": out,
                     "procs": os.path.join(rt.cg.root, "cgroup.procs")}
    ctr = rt.create_container(pod_of(c), "loop", env=cdi_env(d, c),
                              argv=[sys.executable, "-c", text])
    kids = []
    try:
        wait_for(lambda: os.path.exists(out) and open(out).read(), what="the children")
        kids = [int(x) for x in open(out).read().split()]
        yield ctr, kids
    finally:
        for k in kids:
            if alive(k):
                os.kill(k, 9)
        if os.path.exists(out):
            os.unlink(out)


def test_a_deadline_task_spawns_children_reset_on_fork(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "forker")
    assert err == ""
    script = ("import os,time\n"
              "time.sleep(0.3)\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    time.sleep(100)\n"
              "open(%(out)r,'w').write(str(pid))\n"
              "while 1: time.sleep(0.005)\n")
    with forking_container(rt_env, c, "fork", script) as (ctr, (child,)):
        assert policy(ctr.pid) == SCHED_DEADLINE and resets_on_fork(ctr.pid)
        assert os.sched_getscheduler(child) == os.SCHED_OTHER  # reset on fork


def test_transient_eperm_is_retried(rt_env):
    """A task that joins its cpuset while asleep is still counted on the CPU it
    last ran on, another root domain: the kernel answers EPERM until it wakes."""
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "sleeper")
    assert err == ""
    ctr = rt.create_container(pod_of(c), "loop", env=cdi_env(d, c), start=False)
    p = subprocess.Popen([sys.executable, "-c",
                          "import os,time\nos.sched_setaffinity(0,{0})\ntime.sleep(0.6)\n"
                          "while 1: time.sleep(0.005)"])
    extra.append(p)
    wait_for(lambda: os.sched_getaffinity(p.pid) == {0}, what="pinned to CPU 0")
    time.sleep(0.1)  # asleep on CPU 0
    with open(os.path.join(ctr.cgroup, "cgroup.procs"), "w") as f:
        f.write(str(p.pid))
    rt.start_container_with(ctr, p)
    wait_for(lambda: policy(p.pid) == SCHED_DEADLINE, timeout=5, what="deadline after retries")
    assert metric(d, "dra_cpu_rt_apply_retries_total") >= 1
    assert 'dra_cpu_rt_policy_applied_total{by="plugin"}' in d.metrics()


def test_teardown_ends_tasks_and_leaves_no_bandwidth_charged(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    claims, ctrs = [], []
    for i in range(3):
        c, err = prepare(rt_env, "t%d" % i)
        assert err == ""
        claims.append(c)
        ctrs.append(rt.create_container(pod_of(c), "loop", env=cdi_env(d, c)))
    for ctr in ctrs:
        wait_for(lambda: policy(ctr.pid) == SCHED_DEADLINE, what="deadline")
    rt.stop_container(ctrs[0])  # a normal end: the runtime stops it
    # the other two are unprepared while their tasks still run: the driver
    # ends them rather than switching them back to SCHED_OTHER
    unprepare(rt_env, claims[1])
    unprepare(rt_env, claims[2])
    for ctr in ctrs[1:]:
        wait_for(lambda: ctr.proc.poll() is not None, what="task ended")
    assert metric(d, "dra_cpu_rt_tasks_ended_total") >= 2
    # claim 0 is still prepared (the CPU stays isolated) and nothing is
    # charged: a new task gets the whole 900m
    p = busy_on_rt_cpu()
    extra.append(p)
    assert wait_for(lambda: sched_setattr(p.pid, 9000000, 10000000) == 0, what="900m admitted")
    p.kill()
    p.wait()
    unprepare(rt_env, claims[0])
    # the last claim gone: the node is as it was
    assert not os.path.exists(os.path.join(CPUSET, "dra-cpu-rt"))
    with open(os.path.join(CPUSET, "cpuset.sched_load_balance")) as f:
        assert f.read().strip() == "1"


def alive(pid):
    """Running, not a zombie waiting to be reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# A container whose main task forks two children that make themselves
# deadline tasks pinned to the real-time CPU: one stays in the container's
# cgroup (100m of its own), one leaves it for the runtime's parent cgroup
# under the claim's very budget (300m). Both outlive the main task.
ORPHANS = """import ctypes, os, struct, time
def dl(runtime, period):
    a = struct.pack("=IIQiIQQQII", 56, 6, 0, 0, 0, runtime, period, period, 0, 0)
    b = ctypes.create_string_buffer(a, len(a))
    assert ctypes.CDLL(None).syscall(%(nr)d, 0, b, 0) == 0
time.sleep(0.3)
kids = []
for runtime, leave in ((1000000, False), (3000000, True)):
    pid = os.fork()
    if pid == 0:
        if leave:
            open(%(procs)r, "w").write(str(os.getpid()))
            os.sched_setaffinity(0, {%(cpu)d})
        dl(runtime, 10000000)
        while 1: time.sleep(0.005)
    kids.append(pid)
time.sleep(0.2)
open(%(out)r, "w").write(" ".join(map(str, kids)))
while 1: time.sleep(0.005)
"""


def test_children_of_a_stopped_container_are_ended_with_its_claim(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    keep, err = prepare(rt_env, "keep", q="100m",
                        budget={"policy": "deadline", "runtimeNs": 1000000,
                                "periodNs": 10000000})
    assert err == ""  # keeps the CPU its own root domain throughout
    c, err = prepare(rt_env, "orphans")
    assert err == ""
    with forking_container(rt_env, c, "orphans", ORPHANS) as (ctr, kids):
        stayed, left = kids
        for k in kids:
            assert policy(k) == SCHED_DEADLINE
        # the runtime stops the container: its main task only
        rt.stop_container(ctr)
        # what the container's cgroup still holds is ended with it
        wait_for(lambda: not alive(stayed), what="the child in the cgroup ended")
        assert alive(left)
        # the kubelet unprepares: what runs under the claim's budget on its
        # CPU is ended too, wherever it lives
        unprepare(rt_env, c)
        wait_for(lambda: not alive(left), what="the child under the claim's budget ended")
        assert "reason=running_under_unprepared_budget" in d.log()
        assert metric(d, "dra_cpu_rt_tasks_ended_total") >= 2
        # and nothing is left charged: a new task gets the whole 900m
        p = busy_on_rt_cpu()
        extra.append(p)
        assert wait_for(lambda: sched_setattr(p.pid, 9000000, 10000000) == 0,
                        what="900m admitted")


# A container whose main task forks three children that leave its cgroup
# for the runtime's parent cgroup, pin themselves to the real-time CPU and
# take a real-time policy the claim never granted: FIFO, RR, and deadline
# under a budget of their own (100m). A container may, with CAP_SYS_NICE or
# its RLIMIT_RTPRIO.
ESCAPEES = """import ctypes, os, struct, time
def attr(policy, prio, runtime):
    a = struct.pack("=IIQiIQQQII", 56, policy, 0, 0, prio, runtime,
                    10000000 if runtime else 0, 10000000 if runtime else 0, 0, 0)
    b = ctypes.create_string_buffer(a, len(a))
    assert ctypes.CDLL(None).syscall(%(nr)d, 0, b, 0) == 0
time.sleep(0.3)
kids = []
for policy, prio, runtime in ((1, 5, 0), (2, 5, 0), (6, 0, 1000000)):
    pid = os.fork()
    if pid == 0:
        open(%(procs)r, "w").write(str(os.getpid()))
        os.sched_setaffinity(0, {%(cpu)d})
        attr(policy, prio, runtime)
        while 1: time.sleep(0.005)
    kids.append(pid)
time.sleep(0.2)
open(%(out)r, "w").write(" ".join(map(str, kids)))
while 1: time.sleep(0.005)
"""


def test_real_time_children_of_every_policy_are_ended_with_their_claim(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "escapees")
    assert err == ""
    with forking_container(rt_env, c, "escapees", ESCAPEES) as (ctr, kids):
        assert [policy(k) for k in kids] == [os.SCHED_FIFO, os.SCHED_RR, SCHED_DEADLINE]
        rt.stop_container(ctr)
        wait_for(lambda: ctr.proc.poll() is not None, what="the main task ended")
        assert all(alive(k) for k in kids)  # out of the container's cgroup
        # the claim goes: no real-time claim is left on the CPU, so whatever
        # the container left running real-time there is ended
        unprepare(rt_env, c)
        wait_for(lambda: not any(alive(k) for k in kids), what="every child ended")
        for p in ("fifo", "rr", "deadline"):
            assert "policy=%s reason=real_time_on_unprepared_cpu" % p in d.log()
        assert metric(d, "dra_cpu_rt_tasks_ended_total") == 3
        # nothing is left charged on the CPU: a new claim's task gets 900m
        c2, err = prepare(rt_env, "after")
        assert err == ""
        p = busy_on_rt_cpu()
        extra.append(p)
        assert wait_for(lambda: sched_setattr(p.pid, 9000000, 10000000) == 0,
                        what="900m admitted")


def test_a_task_of_another_claim_on_the_cpu_is_left_alone(rt_env):
    """While another real-time claim is prepared on the CPU, a real-time task
    outside every container cannot be told from its tasks: it stays."""
    apiserver, d, kubelet, rt, extra = rt_env
    keep, err = prepare(rt_env, "keep", q="100m",
                        budget={"policy": "deadline", "runtimeNs": 1000000,
                                "periodNs": 10000000})
    assert err == ""
    c, err = prepare(rt_env, "going")
    assert err == ""
    other = subprocess.Popen([sys.executable, "-c",
                              "import os,time\nos.sched_setaffinity(0,{%d})\n"
                              "os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(3))\n"
                              "while 1: time.sleep(0.005)" % RT_CPU])
    extra.append(other)
    wait_for(lambda: policy(other.pid) == os.SCHED_FIFO, what="fifo")
    unprepare(rt_env, c)
    assert "event=rt_task_kept" in d.log() and "reason=another_claim_on_cpu" in d.log()
    assert other.poll() is None


def test_kill9_and_restart_charges_nothing_twice(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    ctrs = []
    for i in range(2):
        c, err = prepare(rt_env, "k%d" % i)
        assert err == ""
        ctrs.append(rt.create_container(pod_of(c), "loop", env=cdi_env(d, c)))
    for ctr in ctrs:
        wait_for(lambda: policy(ctr.pid) == SCHED_DEADLINE, what="deadline")
    before = rt.plugins()[-1].serial
    d.kill9()
    d.start()
    kubelet.close()  # a new process behind the socket: new connections
    rt.wait_plugin(timeout=10, after=before)
    wait_for(lambda: 'dra_cpu_rt_policy_applied_total{by="already"}' in d.metrics()
             and d.metrics()['dra_cpu_rt_policy_applied_total{by="already"}'] == 2,
             what="tasks found again")
    for ctr in ctrs:
        assert policy(ctr.pid) == SCHED_DEADLINE
    # the ledger holds 600m, not 1200m: one more fits, then no more
    _, err = prepare(rt_env, "k2")
    assert err == ""
    _, err = prepare(rt_env, "k3")
    assert "hold 900m of 900m" in err
    # and the kernel charged each task once: 300m is still free there
    p = busy_on_rt_cpu()
    extra.append(p)
    assert wait_for(lambda: sched_setattr(p.pid, 3000000, 10000000) == 0, what="300m admitted")


def root_balance():
    with open(os.path.join(CPUSET, "cpuset.sched_load_balance")) as f:
        return f.read().strip()


def test_a_restart_without_rt_cpus_undoes_what_a_killed_run_left(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "left")
    assert err == ""
    ctr = rt.create_container(pod_of(c), "loop", env=cdi_env(d, c))
    wait_for(lambda: policy(ctr.pid) == SCHED_DEADLINE, what="deadline")
    record = os.path.join(d.state_dir, "rt-domains.json")
    assert root_balance() == "0" and os.path.exists(record)
    before = rt.plugins()[-1].serial
    d.kill9()
    # started again without --rt-cpus: the claim is still prepared on the
    # CPU the killed run isolated, so the isolation stays, reported
    i = d.args.index("--rt-cpus")
    del d.args[i:i + 2]
    d.start()
    kubelet.close()
    rt.wait_plugin(timeout=10, after=before)
    assert "event=rt_leftovers_kept" in d.log() and "cpus=%d" % RT_CPU in d.log()
    assert root_balance() == "0"
    # the container stops, the claim goes: nothing of it is left on the node
    rt.stop_container(ctr)
    unprepare(rt_env, c)
    wait_for(lambda: root_balance() == "1", what="root balancing back on")
    assert not os.path.exists(os.path.join(CPUSET, "dra-cpu-rt"))
    assert not os.path.exists(record)
    assert not os.path.exists(os.path.join(d.state_dir, "rt-owners.json"))
    assert "event=rt_leftovers_undone" in d.log()


@pytest.mark.parametrize("rt_env", [{"runtime_name": "containerd", "runtime_version": "v2.2.1"}],
                         indirect=True)
def test_a_runtime_with_nri_0_11_applies_the_adjustment(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "adj")
    assert err == ""
    ctr = rt.create_container(pod_of(c), "loop", env=cdi_env(d, c))
    s = ctr.scheduler
    assert s is not None
    assert (s.policy, s.runtime, s.deadline, s.period) == (7, 3000000, 10000000, 10000000)
    assert list(s.flags) == [0]  # reset on fork
    assert policy(ctr.pid) == SCHED_DEADLINE
    wait_for(lambda: 'dra_cpu_rt_policy_applied_total{by="runtime"}' in d.metrics(),
             what="checked in the kernel")


def test_an_older_runtime_gets_it_from_the_plugin(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "old")
    assert err == ""
    ctr = rt.create_container(pod_of(c), "loop", env=cdi_env(d, c))
    assert ctr.scheduler is None
    wait_for(lambda: policy(ctr.pid) == SCHED_DEADLINE, what="deadline")
    assert 'dra_cpu_rt_policy_applied_total{by="plugin"}' in d.metrics()


def test_fifo_takes_the_whole_cpu(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    _, err = prepare(rt_env, "fifo-part", q="300m", budget={"policy": "fifo", "priority": 10})
    assert "must consume the CPU's whole dra.cpu/rtBandwidth" in err
    c, err = prepare(rt_env, "fifo", q="900m", budget={"policy": "fifo", "priority": 10})
    assert err == ""
    ctr = rt.create_container(pod_of(c), "loop", env=cdi_env(d, c))
    wait_for(lambda: policy(ctr.pid) == os.SCHED_FIFO, what="fifo")
    assert os.sched_getparam(ctr.pid).sched_priority == 10
    _, err = prepare(rt_env, "after-fifo")
    assert "hold 900m of 900m" in err


# ---- the BPF monitor ---------------------------------------------------------------------------

BPF_VERIFY = os.path.join(os.environ.get("B", "build"), "bpf-verify")
BUSY = "while True: pass\n"
# 1 ms of work, then sched_yield(): for a deadline task, "done until the next period"
POLITE = ("import os, time\n"
          "while True:\n"
          "    t = time.perf_counter()\n"
          "    while time.perf_counter() - t < 0.001: pass\n"
          "    os.sched_yield()\n")
DL_2MS = {"policy": "deadline", "runtimeNs": 2000000, "deadlineNs": 10000000,
          "periodNs": 10000000}


def verify_rt(d, duration="1.5"):
    p = subprocess.run([BPF_VERIFY, "--realtime", "--state-dir", d.state_dir, "--duration",
                        duration, "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return p.returncode, json.loads(p.stdout)


def task_of(report, pid):
    return next(t for t in report["tasks"] if t["pid"] == pid)


@pytest.mark.parametrize("rt_env", [{"bpf": True}], indirect=True)
def test_bpf_monitor_tells_an_overrun_from_a_polite_task(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    busy_c, err = prepare(rt_env, "busy", budget=DL_2MS)
    assert err == ""
    polite_c, err = prepare(rt_env, "polite", budget=DL_2MS)
    assert err == ""
    busy = rt.create_container(pod_of(busy_c), "loop", env=cdi_env(d, busy_c),
                               argv=[sys.executable, "-c", BUSY])
    polite = rt.create_container(pod_of(polite_c), "loop", env=cdi_env(d, polite_c),
                                 argv=[sys.executable, "-c", POLITE])
    for ctr in (busy, polite):
        wait_for(lambda: policy(ctr.pid) == SCHED_DEADLINE, what="deadline")
    # The interpreter starts up under its 2 ms budget too (tens of ms of CPU:
    # it overruns then); the window opens once it runs its loop.
    time.sleep(1.0)
    with open(os.path.join(d.state_dir, "rt-owners.json")) as f:
        owners = json.load(f)["owners"]
    assert {o["claim"] for o in owners} == {"default/busy", "default/polite"}
    code, rep = verify_rt(d)
    assert code == 1 and rep["verdict"] == "violation"
    b, p = task_of(rep, busy.pid), task_of(rep, polite.pid)
    assert b["claim"] == "default/busy" and p["claim"] == "default/polite"
    assert b["runtimeNs"] == 2000000 and b["periodNs"] == 10000000
    # the kernel enforces at tick granularity: the busy loop overruns its 2 ms
    assert b["violation"] and b["overruns"] > 0 and b["maxNs"] > 2000000
    assert b["periods"] > 50
    # the polite one does 1 ms and yields: it never runs past its deadline
    # (the monitor once compared the deadline, in the scheduler's clock, with
    # CLOCK_MONOTONIC and saw every period missed) and keeps to its budget.
    # Not in every period on a loaded node: the kernel's remaining runtime
    # (what an overrun is read from) went below zero in up to 3 of 150 periods
    # here with both CPUs saturated by other work, while the monitor measured
    # at most 1.1 ms of CPU in any of them (time the kernel charges that is
    # not the task's own: interrupts, on a kernel without
    # CONFIG_IRQ_TIME_ACCOUNTING as here). The busy loop overruns in most.
    assert p["misses"] == 0 and p["periods"] > 50, json.dumps(p)
    assert p["overruns"] <= p["periods"] // 20 and b["overruns"] > b["periods"] // 2, \
        json.dumps([b, p])
    assert 500000 < p["p50Ns"] <= 2000000
    # the daemon's own monitor says the same on /metrics
    def over(claim):
        return d.metrics().get('dra_cpu_rt_overruns_total{claim="%s",cpu="%d"}' % (claim,
                                                                                   RT_CPU))
    wait_for(lambda: (over("default/busy") or 0) > 0, what="overruns on /metrics")
    # counted since the claim's task started (an interpreter starting up may
    # overrun once or twice): over a window the busy loop adds, the polite none
    def misses(claim):
        return d.metrics().get('dra_cpu_rt_deadline_misses_total{claim="%s",cpu="%d"}'
                               % (claim, RT_CPU)) or 0
    b0, p0, m0 = over("default/busy"), over("default/polite"), misses("default/polite")
    time.sleep(1.0)
    # 1 s is 100 periods: the busy loop overruns in most, the polite one in few
    assert over("default/busy") > b0 + 50 and over("default/polite") <= p0 + 5
    assert misses("default/polite") == m0
    m = d.metrics()
    assert m['dra_cpu_rt_tasks{claim="default/busy",cpu="%d"}' % RT_CPU] == 1
    assert m['dra_cpu_rt_runtime_seconds_count{claim="default/polite",cpu="%d"}' % RT_CPU] > 50
    assert 0.05 < m['dra_cpu_rt_bandwidth_used{claim="default/polite",cpu="%d"}' % RT_CPU] < 0.2
    # without the overrunning task the verdict is clean
    rt.stop_container(busy)
    code, rep = verify_rt(d)
    p = task_of(rep, polite.pid)
    assert p["misses"] == 0 and p["overruns"] <= p["periods"] // 20, json.dumps(p)
    if (not any(c.get("foreignPinned") for c in rep["cpus"]) and not rep["pinnedForeign"]
            and not p["overruns"]):
        assert code == 0 and rep["verdict"] == "clean", rep  # (else: someone else's task)


@pytest.mark.parametrize("rt_env", [{"bpf": True}], indirect=True)
def test_bpf_monitor_reports_a_foreign_task_pinned_on_a_real_time_cpu(rt_env):
    apiserver, d, kubelet, rt, extra = rt_env
    c, err = prepare(rt_env, "owner", budget=DL_2MS)
    assert err == ""
    rt.create_container(pod_of(c), "loop", env=cdi_env(d, c),
                        argv=[sys.executable, "-c", POLITE])
    intruder = busy_on_rt_cpu()  # pinned there, no claim
    extra.append(intruder)
    code, rep = verify_rt(d)
    assert code == 1
    cpu = next(x for x in rep["cpus"] if x["cpu"] == RT_CPU)
    assert cpu["violation"] and cpu["foreignPinned"] > 0
    # named, among whatever else is pinned there
    assert intruder.pid in {t["pid"] for t in rep["pinnedForeign"]}
    m = d.metrics()
    assert m['dra_cpu_rt_foreign_switches_total{cpu="%d",kind="pinned"}' % RT_CPU] > 0
    p = subprocess.run([BPF_VERIFY, "--realtime", "--state-dir", d.state_dir, "--duration",
                        "0.5"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "verdict: violation" in p.stdout
    assert "pid %d tid %d" % (intruder.pid, intruder.pid) in p.stdout

"""The real driver (--rt-cpus) following the kernel's deadline servers while
it runs: it is started in a private mount namespace whose
/sys/kernel/debug is a tmpfs holding a fake debugfs tree (so the machine's
own debugfs and every other process are untouched), the test rewrites that
tree through /proc/<pid>/root as an admin or a BPF scheduler would, and the
cpurt device's dra.cpu/rtBandwidth on the simulated API server follows. A
tree without sched/ is what a node without debugfs looks like: the driver
says so once and publishes the kernel's defaults.

Needs root (mount namespaces) and what test_rt_kernel needs (the driver sets
up real-time CPUs on the cgroup v1 cpuset hierarchy)."""

import os
import shutil
import subprocess

import pytest

from driver import wait_for
from rtnode import CPUSET, restore_node

NCPU = os.cpu_count() or 1
RT_CPU = NCPU - 1

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(CPUSET + "/cpuset.cpus") or NCPU < 2
    or not shutil.which("unshare"),
    reason="skipped: needs root, unshare, the cgroup v1 cpuset hierarchy and two CPUs")

# Run the driver with a tmpfs on /sys/kernel/debug, seeded by the script's $1.
WRAP = ('mount -t tmpfs dra-cpu-fake-debugfs /sys/kernel/debug && '
        'sh -c "$1" && shift && exec "$@"')


def fair(cpu, runtime_ms):
    d = "/sys/kernel/debug/sched/fair_server/cpu%d" % cpu
    return "mkdir -p %s && echo %d > %s/runtime && echo 1000000000 > %s/period" % (
        d, runtime_ms * 1000000, d, d)


def rt_capacity(apiserver):
    for s in apiserver.slices():
        for dev in s["spec"]["devices"]:
            if dev["name"] == "cpurt%03d" % RT_CPU:
                return dev["capacity"]["dra.cpu/rtBandwidth"]["value"]
    return None


def write(d, rel, text):
    """Writes a file of the driver's fake debugfs, as root in its namespace."""
    path = "/proc/%d/root/sys/kernel/debug/%s" % (d.proc.pid, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)




@pytest.fixture
def start_driver(make_driver):
    made = []

    def start(seed, headroom=0):
        d = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--rt-cpus", str(RT_CPU),
                                             "--rt-headroom", str(headroom)])
        argv = d.argv
        d.argv = lambda: ["unshare", "-m", "--propagation", "private", "sh", "-c", WRAP,
                          "wrap", seed] + argv()
        made.append(d)
        return d.start()

    yield start
    for d in made:
        print(d.log()[-6000:])
        d.stop(timeout=5)
    restore_node()


def share():
    with open("/proc/sys/kernel/sched_rt_runtime_us") as r, \
            open("/proc/sys/kernel/sched_rt_period_us") as p:
        rt, period = int(r.read()), int(p.read())
    return 1000 if rt < 0 else rt * 1000 // period


def test_rt_bandwidth_follows_the_servers_written_at_run_time(apiserver, start_driver):
    base = share()
    seed = " && ".join(fair(c, 50) for c in range(NCPU))
    d = start_driver(seed, headroom=10)
    wait_for(lambda: rt_capacity(apiserver) == "%dm" % (base - 50 - 10), 10,
             "the first publication")
    assert "rt_servers_assumed" not in d.log()
    # a BPF scheduler's server appears on the real-time CPU
    write(d, "sched/ext_server/cpu%d/period" % RT_CPU, "1000000000\n")
    write(d, "sched/ext_server/cpu%d/runtime" % RT_CPU, "50000000\n")
    wait_for(lambda: rt_capacity(apiserver) == "%dm" % (base - 100 - 10), 10,
             "rtBandwidth less the ext server")
    assert "event=rt_capacity_changed capacity_milli=%d before=%d" % (
        base - 110, base - 60) in d.log()
    # an admin takes the fair server of the real-time CPU down to 20 ms
    write(d, "sched/fair_server/cpu%d/runtime" % RT_CPU, "20000000\n")
    wait_for(lambda: rt_capacity(apiserver) == "%dm" % (base - 70 - 10), 10,
             "rtBandwidth with the smaller fair server")
    m = d.metrics()
    assert m["dra_cpu_rt_bandwidth_capacity"] == pytest.approx((base - 80) / 1000)


def test_without_debugfs_the_defaults_are_said_once(apiserver, start_driver):
    d = start_driver("true")
    release = tuple(int(x) for x in os.uname().release.split(".")[:2])
    want = share() - (50 if release >= (6, 12) else 0) - (
        50 if release >= (6, 12) and os.path.isdir("/sys/kernel/sched_ext") else 0)
    wait_for(lambda: rt_capacity(apiserver) == "%dm" % want, 10, "the first publication")
    assert d.log().count("event=rt_servers_assumed") == 1
    assert 'reason="debugfs is not mounted at /sys/kernel/debug"' in d.log()
    # debugfs appears: the values in effect replace the defaults
    write(d, "sched/fair_server/cpu%d/period" % RT_CPU, "1000000000\n")
    write(d, "sched/fair_server/cpu%d/runtime" % RT_CPU, "30000000\n")
    wait_for(lambda: rt_capacity(apiserver) == "%dm" % (share() - 30), 10,
             "rtBandwidth from the tree")
    assert d.log().count("event=rt_servers_assumed") == 1

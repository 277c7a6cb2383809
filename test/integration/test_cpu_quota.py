"""No CFS quota on exclusive CPUs (docs/cpu-quota.md), on this machine's real
v1 cpu hierarchy: a claim holder with a 0.5-CPU limit, busy on its one
exclusive CPU, is throttled only when the driver keeps quotas."""

import json
import os

import pytest

from claims import claim, ref
from driver import wait_for

# nice -20: the busy loop must get CPU 1 whatever else of the machine runs
# there (only the simulator's containers are confined; host tasks and other
# test runs are not), or a 0.5-CPU quota is never reached and nothing is
# throttled, dropped or not
BUSY = ["nice", "-n", "-20", "/bin/sh", "-c", "while :; do :; done"]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU time of pid, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def throttled(ctr):
    from sim.nrisim import Cgroups
    return (Cgroups.cpu_stat(ctr.cpu_cgroup)["nr_throttled"]
            + Cgroups.cpu_stat(os.path.dirname(ctr.cpu_cgroup))["nr_throttled"])


def run_busy_claim_holder(apiserver, make_driver, kubelet, driver_dir, args, until):
    """Prepares a one-CPU claim, creates its holder (limit 0.5 CPU) busy on it
    and waits for until(ctr); returns the driver and the cpu.stat of the
    container's and the pod's cgroups."""
    from sim.nrisim import Cgroups, Runtime
    if os.geteuid() != 0 or not Cgroups.available():
        pytest.skip("needs root and a writable cgroup hierarchy")
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock, cgroups=True, cgroup_root=f"quota-{os.getpid()}-{len(args)}").start()
    try:
        if not rt.cg.cpu_available():
            pytest.skip("needs the v1 cpu hierarchy (v2: pools_test's fake cgroupfs)")
        d = make_driver(topology=None, args=["--nri-socket", sock, "--no-bpf",
                                             "--reserved-cpus", "0"] + args).start()
        rt.wait_plugin(timeout=5)
        pod = rt.add_pod("busy", cpu_limit_m=500)
        c = apiserver.put_claim(claim("busy", [("cpu", "cpudevnuma000", "1")],
                                      reserved_for=[pod]))
        assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
        with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json"
                               % c["metadata"]["uid"])) as f:
            line = json.load(f)["devices"][0]["containerEdits"]["env"][0]
        k, v = line.split("=", 1)
        ctr = rt.create_container(pod, "app", env={k: v}, argv=BUSY, cpu_limit_m=500)
        assert ctr.cpus == "1"
        wait_for(lambda: until(ctr), timeout=30, what="the busy claim holder")
        pod_dir = os.path.dirname(ctr.cpu_cgroup)
        stats = (Cgroups.cpu_stat(ctr.cpu_cgroup), Cgroups.cpu_stat(pod_dir),
                 open(os.path.join(pod_dir, "cpu.cfs_quota_us")).read().strip(),
                 open(os.path.join(ctr.cpu_cgroup, "cpu.cfs_quota_us")).read().strip())
        rt.remove_container(ctr)
        return d, stats
    finally:
        rt.close()


def test_exclusive_claim_holder_is_never_throttled(apiserver, make_driver, kubelet, driver_dir):
    # 1 s of CPU: 10 periods of 100 ms at 100 %, 20 at the 50 % limit
    d, (ctr, pod, pod_quota, ctr_quota) = run_busy_claim_holder(
        apiserver, make_driver, kubelet, driver_dir, [], lambda c: cpu_seconds(c.pid) >= 1.0)
    assert (pod_quota, ctr_quota) == ("-1", "-1")
    assert ctr["nr_throttled"] == 0 and pod["nr_throttled"] == 0, (ctr, pod)
    m = d.metrics()
    assert m['dra_cpu_cpu_quota_dropped_total{level="container"}'] == 1
    assert m['dra_cpu_cpu_quota_dropped_total{level="pod"}'] == 1
    assert "event=pod_cpu_quota_dropped" in d.log()


def test_keep_option_leaves_the_quota_that_throttles(apiserver, make_driver, kubelet,
                                                     driver_dir):
    # The first throttled period (on a quiet CPU 1 it comes in the first
    # 100 ms; a machine whose other tasks crowd CPU 1 only delays it)
    d, (ctr, pod, pod_quota, ctr_quota) = run_busy_claim_holder(
        apiserver, make_driver, kubelet, driver_dir, ["--cpu-quota=keep"],
        lambda c: throttled(c) >= 1)
    assert (pod_quota, ctr_quota) == ("50000", "50000")
    # v1 counts a throttle in the group whose quota ran out: either may
    assert ctr["nr_throttled"] + pod["nr_throttled"] >= 1, (ctr, pod)
    assert not any(k.startswith("dra_cpu_cpu_quota_dropped_total{") for k in d.metrics())

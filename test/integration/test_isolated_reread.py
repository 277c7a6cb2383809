"""Isolated CPUs that change under a running driver: cgroup v2 isolated cpuset
partitions come and go at run time, and show in the root cgroup's
cpuset.cpus.isolated (and, on kernels that follow them there, in
/sys/devices/system/cpu/isolated). The real driver reads a copied sysfs
capture (--sysfs-root, so the lists are read again with the online CPUs every
second) while the test writes those two files in it; the API-server simulator
holds the slices and the NRI runtime simulator a running shared container."""

import os
import subprocess

import pytest

from claims import parse_list
from conftest import ROOT
from driver import wait_for

CAPTURE = "32intel64-2p8co2t+8ve"  # 2 nodes of 16 CPUs, siblings N and N+16
ALL = set(range(32))


@pytest.fixture
def sysfs(driver_dir):
    subprocess.run(["tar", "-xjf", os.path.join(ROOT, "test", "data", "topologies",
                                                CAPTURE + ".tar.bz2"), "-C", driver_dir],
                   check=True)
    root = os.path.join(driver_dir, CAPTURE)
    os.makedirs(os.path.join(root, "sys", "fs", "cgroup"), exist_ok=True)
    return root


def put(root, rel, text):
    """Written whole and renamed, as the kernel shows a file: never half."""
    p = os.path.join(root, rel)
    with open(p + ".tmp", "w") as f:
        f.write(text)
    os.rename(p + ".tmp", p)


SYSFS_ISOLATED = "sys/devices/system/cpu/isolated"
PARTITIONS = "sys/fs/cgroup/cpuset.cpus.isolated"


def capacities(apiserver):
    return {d["name"]: int(d["capacity"]["dra.cpu/cpu"]["value"])
            for s in apiserver.slices() for d in s["spec"]["devices"]}


@pytest.mark.parametrize("shared", [False, True], ids=["kept_out", "isolated_cpus_shared"])
def test_isolated_cpus_followed_at_run_time(apiserver, make_driver, sysfs, driver_dir, shared):
    from sim.nrisim import Runtime

    put(sysfs, SYSFS_ISOLATED, "\n")
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    try:
        d = make_driver(topology=None, args=["--sysfs-root", sysfs, "--no-bpf", "--nri-socket",
                                             sock] + (["--isolated-cpus-shared"] if shared
                                                      else [])).start()
        d.wait_ready()
        rt.wait_plugin(timeout=5)
        assert capacities(apiserver) == {"cpudevnuma000": 16, "cpudevnuma001": 16}
        pod = rt.add_pod("web")
        web = rt.create_container(pod, "web")
        assert parse_list(web.cpus) == ALL

        # A partition made isolated: CPUs 4-7 of node 0 leave the ordinary
        # device for one of their own, and the shared pool.
        put(sysfs, PARTITIONS, "4-7\n")
        wait_for(lambda: capacities(apiserver) == {"cpudevnuma000": 12, "cpudevnuma001": 16,
                                                   "cpuisonuma000": 4},
                 what="4-7 published apart")
        line = [l for l in d.log().splitlines() if "event=isolated_cpus_changed" in l]
        assert line and "isolated=4-7 before=none domain=4-7" in line[0], d.log()
        devs = {x["name"]: x for s in apiserver.slices() for x in s["spec"]["devices"]}
        assert devs["cpuisonuma000"]["attributes"]["dra.cpu/isolatedDomain"] == {"bool": True}
        pool = ALL if shared else ALL - {4, 5, 6, 7}
        wait_for(lambda: parse_list(web.cpus) == pool, what="the running container's pool")
        assert parse_list(rt.create_container(pod, "new").cpus) == pool
        assert d.metrics()["dra_cpu_available_cpus"] == len(pool)

        # The kernel's own list (a kernel whose isolated file follows the
        # partitions, or isolcpus at boot in a capture): the union counts.
        put(sysfs, SYSFS_ISOLATED, "20-23\n")
        wait_for(lambda: capacities(apiserver).get("cpuisonuma000") == 8,
                 what="4-7,20-23 published apart")
        assert capacities(apiserver)["cpudevnuma000"] == 8
        pool = ALL if shared else ALL - {4, 5, 6, 7, 20, 21, 22, 23}
        wait_for(lambda: parse_list(web.cpus) == pool, what="the pool shrinks again")

        # Both gone: everything as it was at start.
        put(sysfs, PARTITIONS, "\n")
        put(sysfs, SYSFS_ISOLATED, "\n")
        wait_for(lambda: capacities(apiserver) == {"cpudevnuma000": 16, "cpudevnuma001": 16},
                 what="no isolated device left")
        wait_for(lambda: parse_list(web.cpus) == ALL, what="the pool widened again")
        changes = [l for l in d.log().splitlines() if "event=isolated_cpus_changed" in l]
        assert len(changes) == 3, changes  # one line per change, none for a re-read
        assert "isolated=none before=4-7,20-23" in changes[-1], changes
    finally:
        rt.close()


def test_a_list_that_turns_bad_keeps_the_last_view(apiserver, make_driver, sysfs):
    """A list the driver cannot parse is said once; the published devices stay."""
    put(sysfs, PARTITIONS, "4-7\n")
    d = make_driver(topology=None, args=["--sysfs-root", sysfs, "--no-bpf", "--no-nri"]).start()
    d.wait_ready()
    assert capacities(apiserver)["cpuisonuma000"] == 4
    put(sysfs, PARTITIONS, "4-x\n")
    wait_for(lambda: "event=isolation_unreadable" in d.log(), what="the failure said")
    put(sysfs, PARTITIONS, "4-6\n")
    wait_for(lambda: capacities(apiserver).get("cpuisonuma000") == 3, what="read again")
    assert d.log().count("event=isolation_unreadable") == 1

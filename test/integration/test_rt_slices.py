"""--rt-cpus as the scheduler sees it: the cpurt devices --dry-run prints in
both modes, their capacity read from this kernel, and the API server's
ResourceSlice rules (test/sim/k8svalidate.py --strict --server-rules)."""

import json
import os
import platform
import subprocess

from conftest import BUILD_DIR, ROOT

DRIVER = os.path.join(BUILD_DIR, "dra-cpu-driver")
VALIDATOR = os.path.join(ROOT, "test", "sim", "k8svalidate.py")
TOPO_384 = os.path.join(ROOT, "test", "data", "topo", "synthetic-384.json")


def run(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_CPU_")}
    return subprocess.run([DRIVER, *args], capture_output=True, text=True, env=env, timeout=60)


def kernel_capacity_milli():
    """What the kernel lets deadline tasks use per CPU, computed here on its own:
    the real-time share less every deadline server debugfs lists on the worst
    CPU, or the kernel's defaults where debugfs cannot be read."""
    def num(name):
        with open("/proc/sys/kernel/" + name) as f:
            return int(f.read())
    rt, period = num("sched_rt_runtime_us"), num("sched_rt_period_us")
    share = 1000 if rt < 0 else rt * 1000 // period
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    default = 50 if (major, minor) >= (6, 12) else 0
    if default and os.path.isdir("/sys/kernel/sched_ext"):
        default += 50
    base = "/sys/kernel/debug/sched"
    try:
        per_cpu = {}
        for server in (s for s in os.listdir(base) if s.endswith("_server")):
            for cpu in os.listdir(f"{base}/{server}"):
                with open(f"{base}/{server}/{cpu}/runtime") as r, \
                        open(f"{base}/{server}/{cpu}/period") as p:
                    per_cpu[cpu] = per_cpu.get(cpu, 0) - (-int(r.read()) * 1000 // int(p.read()))
        servers = max(per_cpu.values()) if per_cpu else default
    except OSError:
        servers = default
    return share - servers


def milli_text(m):
    return str(m // 1000) if m % 1000 == 0 else f"{m}m"


def validate(items, tmp_path):
    p = tmp_path / "slices.json"
    p.write_text(json.dumps(items))
    r = subprocess.run(["/usr/bin/python3", VALIDATOR, "--strict", "--server-rules",
                        "--spec", "1.36", "--spec", "1.37", str(p)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def devices(items):
    return [d for s in items for d in s["spec"]["devices"]]


def test_rt_cpus_become_cpurt_devices_in_individual_mode(tmp_path):
    r = run("--topology-file", TOPO_384, "--dry-run", "--cpu-device-mode", "individual",
            "--hostname-override", "big", "--reserved-cpus", "0", "--rt-cpus", "100-199")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    devs = devices(items)
    rt = [d for d in devs if d["name"].startswith("cpurt")]
    assert [d["name"] for d in rt] == ["cpurt%03d" % c for c in range(100, 200)]
    ordinary = [d for d in devs if not d["name"].startswith("cpurt")]
    # 384 CPUs less the reserved one and the hundred real-time ones
    assert [d["name"] for d in ordinary] == ["cpudev%03d" % i for i in range(283)]
    cpu_ids = {d["attributes"]["dra.cpu/cpuID"]["int"] for d in ordinary}
    assert not cpu_ids & set(range(100, 200)) and 0 not in cpu_ids
    want = milli_text(kernel_capacity_milli())
    for d in rt:
        assert d["attributes"]["dra.cpu/realtime"] == {"bool": True}
        assert d["attributes"]["dra.cpu/cpuID"]["int"] == int(d["name"][5:])
        cap = d["capacity"]["dra.cpu/rtBandwidth"]
        assert cap["value"] == want
        assert cap["requestPolicy"]["validRange"]["min"] == "1m"
        assert d["allowMultipleAllocations"] is True
    # 383 devices: three slices of at most 128, every one valid
    assert len(items) == 3
    validate(items, tmp_path)


def test_rt_cpus_in_grouped_mode_leave_the_groups(tmp_path):
    r = run("--topology-file", TOPO_384, "--dry-run", "--hostname-override", "big",
            "--rt-cpus", "5,7")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    devs = devices(items)
    assert [d["name"] for d in devs if d["name"].startswith("cpurt")] == ["cpurt005",
                                                                          "cpurt007"]
    groups = [d for d in devs if d["name"].startswith("cpudevnuma")]
    total = sum(int(d["capacity"]["dra.cpu/cpu"]["value"]) for d in groups)
    assert total == 382
    validate(items, tmp_path)


def test_rt_cpus_errors_exit_2():
    r = run("--topology-file", TOPO_384, "--dry-run", "--rt-cpus", "400")
    assert r.returncode == 2 and "rt-cpus: CPUs 400 are not online" in r.stderr
    r = run("--topology-file", TOPO_384, "--dry-run", "--rt-cpus", "3", "--reserved-cpus", "3")
    assert r.returncode == 2 and "both name CPUs 3" in r.stderr
    r = run("--dry-run", "--rt-cpus", "1-0")
    assert r.returncode == 2 and "rt-cpus: invalid CPU list '1-0'" in r.stderr

"""dra-cpu-driver as a command: flags, exit codes, --print-topology, --dry-run.

Every slice --dry-run prints must pass the resource.k8s.io/v1 OpenAPI documents
of Kubernetes 1.36 and 1.37 with unknown fields rejected, plus the API server's
ResourceSlice rules (test/sim/k8svalidate.py --strict --server-rules).
"""

import json
import os
import subprocess
import shutil
import tempfile

import pytest

from conftest import BUILD_DIR, ROOT
from sim import volume

DRIVER = os.path.join(BUILD_DIR, "dra-cpu-driver")
TOPOS = os.path.join(ROOT, "test", "data", "topologies")
VALIDATOR = os.path.join(ROOT, "test", "sim", "k8svalidate.py")
DATA = os.path.join(ROOT, "test", "data", "topo")


def run(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DRA_CPU_")}
    e.update(env or {})
    return subprocess.run([DRIVER, *args], capture_output=True, text=True, env=e, timeout=60)


def expected():
    with open(os.path.join(TOPOS, "expected.json")) as f:
        return json.load(f)["topologies"]


def fsroot_captures():
    return [t for t in expected() if t["format"] == "linux-fsroot"]


@pytest.fixture(scope="module")
def captures():
    """Every linux-fsroot capture extracted once: {file: root dir}. On tmpfs:
    the captures hold 25k small files, which a disk makes slow to create."""
    base = tempfile.mkdtemp(prefix="dra-cpu-captures.",
                            dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    roots = {}
    for t in fsroot_captures():
        subprocess.run(["tar", "-xjf", os.path.join(TOPOS, t["file"]), "-C", base], check=True)
        roots[t["file"]] = os.path.join(base, t["top_dir"])
    yield roots
    shutil.rmtree(base, ignore_errors=True)


def validate(items, tmp_path):
    """Every slice against both documents, unknown fields rejected, server rules on."""
    p = tmp_path / "slices.json"
    p.write_text(json.dumps(items))
    r = subprocess.run(["/usr/bin/python3", VALIDATOR, "--strict", "--server-rules",
                        "--spec", "1.36", "--spec", "1.37", str(p)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    verdicts = sorted(line.split(": ", 1)[1] for line in r.stdout.splitlines())
    assert verdicts == ["valid (ResourceSlice, 1.36)"] * len(items) + \
        ["valid (ResourceSlice, 1.37)"] * len(items), r.stdout


def test_help_and_version_exit_zero():
    r = run("--help")
    assert r.returncode == 0
    for flag in ("--cpu-device-mode", "--group-by", "--reserved-cpus", "--kubeconfig",
                 "--hostname-override", "--bind-address", "--kubelet-root-dir",
                 "--print-topology", "--dry-run", "--sysfs-root", "--topology-file"):
        assert flag in r.stdout
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("dra-cpu-driver ")


@pytest.mark.parametrize("args,msg", [
    (["--cpu-device-mode", "both"], "unknown value 'both'"),
    (["--group-by=l3"], "unknown value 'l3'"),
    (["--reserved-cpus", "3-1"], "reversed range"),
    (["--reserved-cpus", "abc"], "invalid character"),
    (["--bogus"], "unknown flag 'bogus'"),
    (["--hostname-override", "../../etc", "--dry-run"], "is not a Kubernetes node name"),
    (["--hostname-override", "node\nlevel=error", "--dry-run"],
     "is not a Kubernetes node name"),
    (["--reserved-cpus", "4000", "--print-topology"], "are not online"),
])
def test_bad_flags_exit_2_with_a_clear_message(args, msg):
    r = run(*args)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr
    assert r.stdout == ""


def test_reserving_every_cpu_is_refused():
    topo = json.loads(run("--print-topology").stdout)
    every = ",".join(str(c["cpu"]) for c in topo["cpus"])
    r = run("--reserved-cpus", every, "--dry-run")
    assert r.returncode == 2
    assert "reserves every online CPU" in r.stderr


def test_print_topology_on_this_machine_has_the_format():
    r = run("--print-topology")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1
    t = json.loads(r.stdout)
    assert list(t) == ["cpus", "offline", "sockets", "numaNodes", "cores", "l3Caches",
                       "smtEnabled"]
    assert [c["cpu"] for c in t["cpus"]] == sorted(c["cpu"] for c in t["cpus"])
    assert len(t["cpus"]) == os.cpu_count()
    for c in t["cpus"]:
        assert list(c) == ["cpu", "socket", "numa", "core", "coreId", "l3", "coreType"]
        assert c["coreType"] in ("standard", "p-core", "e-core")


@pytest.mark.parametrize("t", fsroot_captures(), ids=lambda t: t["file"])
def test_print_topology_on_every_capture_matches_expected(t, captures):
    r = run("--sysfs-root", captures[t["file"]], "--print-topology")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert len(got["cpus"]) == t["pus"]
    assert got["cores"] == t["cores"]
    assert got["sockets"] == t["sockets"]
    assert got["numaNodes"] == len([n for n, c in t["numa_cpus"].items() if c])
    assert got["l3Caches"] == t["l3_caches"]
    assert got["smtEnabled"] == (t["smt_width"] > 1)
    by_cpu = {c["cpu"]: c for c in got["cpus"]}
    for row in t["per_cpu"]:
        c = by_cpu[row["cpu"]]
        assert c["numa"] == (row["numa"] if row["numa"] is not None else -1)
        if row["socket"] is not None:
            assert c["socket"] == row["socket"]


def test_topology_file_round_trips(tmp_path):
    out = run("--topology-file", os.path.join(DATA, "synthetic-1024.json"), "--print-topology")
    assert out.returncode == 0, out.stderr
    p = tmp_path / "t.json"
    p.write_text(out.stdout)
    again = run("--topology-file", str(p), "--print-topology")
    assert again.stdout == out.stdout
    t = json.loads(out.stdout)
    assert (len(t["cpus"]), t["sockets"], t["numaNodes"], t["smtEnabled"]) == (1024, 4, 8, True)


@pytest.mark.parametrize("mode", [
    ["--cpu-device-mode", "grouped"],
    ["--cpu-device-mode", "grouped", "--group-by", "socket"],
    ["--cpu-device-mode", "grouped", "--group-by", "machine"],
    ["--cpu-device-mode", "individual"],
])
def test_dry_run_slices_pass_server_rules_on_captures(mode, captures, tmp_path):
    items = []
    for f, root in captures.items():
        r = run("--sysfs-root", root, "--dry-run", "--hostname-override", "worker-1", *mode)
        assert r.returncode == 0, f + r.stderr
        lst = json.loads(r.stdout)
        assert lst["apiVersion"] == "v1" and lst["kind"] == "List"
        items += lst["items"]
    validate(items, tmp_path)  # one validator run: it loads the OpenAPI documents once


def test_dry_run_individual_384_cpus_three_slices_in_order(tmp_path):
    r = run("--topology-file", os.path.join(DATA, "synthetic-384.json"), "--dry-run",
            "--cpu-device-mode", "individual", "--hostname-override", "big")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    assert len(items) == 3
    names = [d["name"] for s in items for d in s["spec"]["devices"]]
    assert names == ["cpudev%03d" % i for i in range(384)]
    for i, s in enumerate(items):
        assert s["metadata"]["generateName"] == "%05x-dra.cpu-big-" % i
        assert s["spec"]["pool"] == {"name": "big", "generation": 1, "resourceSliceCount": 3}
    validate(items, tmp_path)


def test_dry_run_reserved_cpus_never_appear():
    r = run("--topology-file", os.path.join(DATA, "synthetic-384.json"), "--dry-run",
            "--cpu-device-mode", "individual", "--reserved-cpus", "0,192,5-9")
    assert r.returncode == 0, r.stderr
    cpus = [d["attributes"]["dra.cpu/cpuID"]["int"]
            for s in json.loads(r.stdout)["items"] for d in s["spec"]["devices"]]
    assert len(cpus) == 384 - 7
    assert not {0, 192, 5, 6, 7, 8, 9} & set(cpus)
    # the enumeration contract: CPU 0 reserved -> cpudev000 is CPU 1, then its sibling
    assert cpus[:3] == [1, 193, 2]
    g = run("--topology-file", os.path.join(DATA, "synthetic-384.json"), "--dry-run",
            "--reserved-cpus", "0,192,5-9")
    devs = json.loads(g.stdout)["items"][0]["spec"]["devices"]
    assert sum(d["attributes"]["dra.cpu/numCPUs"]["int"] for d in devs) == 384 - 7


def test_bad_topology_file_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"cpus": [{"cpu": 0, "socket": "x"}]}')
    r = run("--topology-file", str(p), "--print-topology")
    assert r.returncode == 2
    assert "topology" in r.stderr


def validate_new_fields(items, tmp_path, new_fields):
    """Slices that carry fields newer than 1.36 (new_fields): valid against
    1.37 with unknown fields rejected, and valid against 1.36 the way a 1.36
    server takes them with its default field validation (Warn): each field it
    drops is one of new_fields, and what is left passes its rules."""
    p = tmp_path / "slices-new.json"
    p.write_text(json.dumps(items))
    r = subprocess.run(["/usr/bin/python3", VALIDATOR, "--strict", "--server-rules",
                        "--spec", "1.37", str(p)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("valid (ResourceSlice, 1.37)") == len(items), r.stdout
    r = subprocess.run(["/usr/bin/python3", VALIDATOR, "--server-rules", "--spec", "1.36",
                        str(p)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("valid (ResourceSlice, 1.36)") == len(items), r.stdout
    dropped = [line for line in r.stdout.splitlines() if "warning:" in line]
    assert dropped, "1.36 should not know %s" % new_fields
    for line in dropped:
        assert any("'%s' was unexpected" % f in line for f in new_fields), line


def conf_file(tmp_path, text):
    """config.yaml in a ConfigMap volume, laid out as the kubelet does."""
    volume.write(str(tmp_path / "configmap"), {"config.yaml": text})
    return volume.path(str(tmp_path / "configmap"), "config.yaml")


@pytest.mark.parametrize("mode,mapping", [
    (["--cpu-device-mode", "grouped"], {"capacityKey": "dra.cpu/cpu", "capacityMultiplier": "1"}),
    (["--cpu-device-mode", "grouped", "--group-by", "socket"],
     {"capacityKey": "dra.cpu/cpu", "capacityMultiplier": "1"}),
    (["--cpu-device-mode", "grouped", "--group-by", "machine"],
     {"capacityKey": "dra.cpu/cpu", "capacityMultiplier": "1"}),
    (["--cpu-device-mode", "individual"], {"deviceMultiplier": "1"}),
], ids=["numanode", "socket", "machine", "individual"])
def test_dry_run_node_allocatable_mapping_on_every_device(mode, mapping, captures, tmp_path):
    conf = conf_file(tmp_path, "publishNodeAllocatableResourceMapping: true\n")
    items = []
    for f, root in captures.items():
        r = run("--sysfs-root", root, "--dry-run", "--hostname-override", "worker-1",
                "--config", conf, *mode)
        assert r.returncode == 0, f + r.stderr
        items += json.loads(r.stdout)["items"]
    devs = [d for s in items for d in s["spec"]["devices"]]
    assert devs and all(d["nodeAllocatableResources"] == {"cpu": {"mapping": mapping}}
                        for d in devs)
    validate_new_fields(items, tmp_path, ["nodeAllocatableResources"])
    # off (the default): not a trace of it
    r = run("--sysfs-root", next(iter(captures.values())), "--dry-run", *mode)
    assert "nodeAllocatableResources" not in r.stdout


def pcie_roots_oracle(root):
    """{root name: set of CPUs} read straight from a capture's sysfs, the
    way the kernel names host bridges (pciDDDD:BB)."""
    import re
    devs = os.path.join(root, "sys", "devices")
    out = {}
    for name in os.listdir(devs):
        if not re.fullmatch(r"pci[0-9a-f]{4}:[0-9a-f]{2}", name):
            continue
        with open(os.path.join(devs, name, "pci_bus", name[3:], "cpulistaffinity")) as f:
            cpus = set()
            for part in f.read().strip().split(","):
                lo, _, hi = part.partition("-")
                cpus.update(range(int(lo), int(hi or lo) + 1))
        out[name] = cpus
    return out


@pytest.mark.parametrize("mode", [
    ["--cpu-device-mode", "individual"],
    ["--cpu-device-mode", "grouped"],
    ["--cpu-device-mode", "grouped", "--group-by", "socket"],
    ["--cpu-device-mode", "grouped", "--group-by", "machine"],
], ids=["individual", "numanode", "socket", "machine"])
def test_dry_run_pcie_roots_match_the_capture(mode, captures, tmp_path):
    root = captures["32intel64-2p8co2t+8ve.tar.bz2"]
    roots = pcie_roots_oracle(root)
    assert len(roots) == 3
    topo = json.loads(run("--sysfs-root", root, "--print-topology").stdout)
    r = run("--sysfs-root", root, "--dry-run", "--expose-pcie-roots", *mode)
    assert r.returncode == 0, r.stderr
    assert "event=pcie_roots roots=3" in r.stderr
    items = json.loads(r.stdout)["items"]
    for s in items:
        assert len(s["spec"]["devices"]) <= 64
    for dev in (d for s in items for d in s["spec"]["devices"]):
        a = dev["attributes"]
        if "dra.cpu/cpuID" in a:
            cpus = {a["dra.cpu/cpuID"]["int"]}
        elif "dra.cpu/numaNodeID" in a:
            cpus = {c["cpu"] for c in topo["cpus"] if c["numa"] == a["dra.cpu/numaNodeID"]["int"]}
        elif "dra.cpu/socketID" in a:
            cpus = {c["cpu"] for c in topo["cpus"] if c["socket"] == a["dra.cpu/socketID"]["int"]}
        else:
            cpus = {c["cpu"] for c in topo["cpus"]}
        want = sorted(n for n, local in roots.items() if local & cpus)
        got = a.get("resource.kubernetes.io/pcieRoot")
        assert got == ({"strings": want} if want else None), (dev["name"], got, want)
    validate(items, tmp_path)


def test_dry_run_pcie_roots_none_found_is_said_and_changes_nothing(captures, tmp_path):
    root = captures["nvidiagpunumanodes.tar.bz2"]
    plain = run("--sysfs-root", root, "--dry-run", "--cpu-device-mode", "individual")
    r = run("--sysfs-root", root, "--dry-run", "--cpu-device-mode", "individual",
            "--expose-pcie-roots")
    assert r.returncode == 0, r.stderr
    assert "event=pcie_roots_none" in r.stderr
    assert r.stdout == plain.stdout
    # a topology file has no PCI tree to go with it
    t = run("--topology-file", os.path.join(DATA, "synthetic-384.json"), "--dry-run",
            "--expose-pcie-roots")
    assert t.returncode == 0 and "event=pcie_roots_unknown" in t.stderr
    assert "pcieRoot" not in t.stdout


def test_dry_run_pcie_roots_of_a_damaged_tree_leave_the_bad_root_out(captures, tmp_path):
    """A root whose affinity is garbage is left out and said once; the
    others are still published."""
    src = captures["32intel64-2p8co2t+8ve.tar.bz2"]
    root = tmp_path / "cap"
    shutil.copytree(os.path.join(src, "sys", "devices", "system"),
                    root / "sys" / "devices" / "system", symlinks=True)
    for name, text in (("pci0000:00", "0-3\n"), ("pci0000:80", "junk\n")):
        bus = root / "sys" / "devices" / name / "pci_bus" / name[3:]
        bus.mkdir(parents=True)
        (bus / "cpulistaffinity").write_text(text)
    r = run("--sysfs-root", str(root), "--dry-run", "--expose-pcie-roots",
            "--cpu-device-mode", "individual")
    assert r.returncode == 0, r.stderr
    assert "event=pcie_roots_skipped count=1" in r.stderr and "pci0000:80" in r.stderr
    devs = [d for s in json.loads(r.stdout)["items"] for d in s["spec"]["devices"]]
    with_root = {d["attributes"]["dra.cpu/cpuID"]["int"] for d in devs
                 if "resource.kubernetes.io/pcieRoot" in d["attributes"]}
    assert with_root == {0, 1, 2, 3}


# ---- topology truth

def copy_capture(captures, name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(captures[name + ".tar.bz2"], dst, symlinks=True)
    return dst


def test_cpus_of_an_offline_numa_node_are_never_published_as_node_0(captures, tmp_path):
    root = copy_capture(captures, "32intel64-2p8co2t+8ve", tmp_path)
    node = root / "sys" / "devices" / "system" / "node"
    shutil.rmtree(node / "node0")
    (node / "online").write_text("1\n")
    (node / "has_cpu").write_text("1\n")
    topo = json.loads(run("--sysfs-root", str(root), "--print-topology").stdout)
    assert {c["cpu"] for c in topo["cpus"] if c["numa"] == -1} == \
        set(range(0, 8)) | set(range(16, 24))
    r = run("--sysfs-root", str(root), "--dry-run")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    devs = {d["name"]: d for s in items for d in s["spec"]["devices"]}
    assert sorted(devs) == ["cpudevnonuma", "cpudevnuma001"]
    assert not any("numaNode" in k or "numaNodeID" in k
                   for k in devs["cpudevnonuma"]["attributes"])
    assert devs["cpudevnonuma"]["capacity"]["dra.cpu/cpu"]["value"] == "16"
    r = run("--sysfs-root", str(root), "--dry-run", "--cpu-device-mode", "individual")
    ind = [d for s in json.loads(r.stdout)["items"] for d in s["spec"]["devices"]]
    for d in ind:
        numa = d["attributes"].get("resource.kubernetes.io/numaNode")
        cpu = d["attributes"]["dra.cpu/cpuID"]["int"]
        assert numa == (None if cpu % 16 < 8 else {"int": 1}), d
    validate(items + json.loads(r.stdout)["items"], tmp_path)


@pytest.mark.parametrize("rel", [
    "cpu/cpu17/topology/core_id", "cpu/cpu5/topology/thread_siblings",
    "cpu/cpu9/topology/physical_package_id", "cpu/cpu20/cache/index3/id",
])
def test_an_empty_per_cpu_file_falls_back_instead_of_refusing(captures, tmp_path, rel):
    clean = run("--sysfs-root", captures["32intel64-2p8co2t+8ve.tar.bz2"], "--print-topology")
    root = copy_capture(captures, "32intel64-2p8co2t+8ve", tmp_path)
    (root / "sys" / "devices" / "system" / rel).write_text("")
    r = run("--sysfs-root", str(root), "--print-topology")
    assert r.returncode == 0, r.stderr
    assert r.stdout == clean.stdout
    assert "event=topology_sysfs_fallback files=1" in r.stderr and rel in r.stderr
    # garbage is still refused: hwloc would misread it silently
    (root / "sys" / "devices" / "system" / rel).write_text("zz\n")
    r = run("--sysfs-root", str(root), "--print-topology")
    assert r.returncode == 2 and rel in r.stderr


def test_big_little_arm_cores_are_p_and_e_cores(captures, tmp_path):
    root = copy_capture(captures, "128arm-2pa2n8cluster4co", tmp_path)
    for cpu in range(128):
        (root / "sys" / "devices" / "system" / "cpu" / ("cpu%d" % cpu) / "cpu_capacity") \
            .write_text("1024\n" if cpu < 32 else "446\n")
    r = run("--sysfs-root", str(root), "--dry-run", "--cpu-device-mode", "individual")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    for d in (d for s in items for d in s["spec"]["devices"]):
        a = d["attributes"]
        want = "p-core" if a["dra.cpu/cpuID"]["int"] < 32 else "e-core"
        assert a["dra.cpu/coreType"] == {"string": want}
    validate(items, tmp_path)

"""The kernel's isolated CPUs as the scheduler sees them: --dry-run over the
capture test/data/topologies/32intel64-2p8co2t+8ve-isolated (isolcpus on
node 0, nohz_full on both nodes) in both modes, every slice checked against
the API server's OpenAPI documents and ResourceSlice rules
(test/sim/k8svalidate.py --strict --server-rules), and the same capture
without isolation publishing exactly what it did before."""

import json
import os
import subprocess

import pytest

from conftest import ROOT
from test_rt_slices import DRIVER, run, validate

TOPOLOGIES = os.path.join(ROOT, "test", "data", "topologies")


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    if not os.access(DRIVER, os.X_OK):
        pytest.skip("build/dra-cpu-driver not built (run make)")
    d = tmp_path_factory.mktemp("captures")
    for name in ("32intel64-2p8co2t+8ve", "32intel64-2p8co2t+8ve-isolated"):
        subprocess.run(["tar", "-xjf", os.path.join(TOPOLOGIES, name + ".tar.bz2"), "-C",
                        str(d)], check=True)
    return {"plain": str(d / "32intel64-2p8co2t+8ve"),
            "isolated": str(d / "32intel64-2p8co2t+8ve-isolated")}


def slices(root, *args):
    r = run("--sysfs-root", root, "--dry-run", "--hostname-override", "node-iso", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["items"], r.stderr


def devices(items):
    return {d["name"]: d for s in items for d in s["spec"]["devices"]}


def test_grouped_isolated_capacity_is_never_counted_with_ordinary(captures, tmp_path):
    items, err = slices(captures["isolated"])
    assert "event=isolated_cpus isolated=4-7,12-15,20-23,28-31 domain=4-7,20-23" in err
    devs = devices(items)
    assert list(devs) == ["cpudevnuma000", "cpudevnuma001", "cpuisonuma000", "cpuisonuma001"]
    cap = {n: int(d["capacity"]["dra.cpu/cpu"]["value"]) for n, d in devs.items()}
    # each node: 16 CPUs, 8 of them isolated (4-7,20-23 on node 0; 12-15,28-31 on node 1)
    assert cap == {"cpudevnuma000": 8, "cpudevnuma001": 8, "cpuisonuma000": 8,
                   "cpuisonuma001": 8}
    for n in ("cpudevnuma000", "cpudevnuma001"):
        assert not any("isolat" in k or "nohz" in k for k in devs[n]["attributes"]), n
    a0, a1 = devs["cpuisonuma000"]["attributes"], devs["cpuisonuma001"]["attributes"]
    assert a0["dra.cpu/isolated"] == a1["dra.cpu/isolated"] == {"bool": True}
    assert a0["dra.cpu/isolatedDomain"] == {"bool": True}
    assert a1["dra.cpu/isolatedDomain"] == {"bool": False}  # nohz_full only
    assert a0["dra.cpu/nohzFull"] == a1["dra.cpu/nohzFull"] == {"bool": True}
    assert a0["dra.cpu/isolatedManagedIRQ"] == {"bool": True}
    assert a0["resource.kubernetes.io/numaNode"] == {"int": 0}
    assert a1["resource.kubernetes.io/numaNode"] == {"int": 1}
    validate(items, tmp_path)


def test_individual_isolated_cpus_carry_the_attributes_names_stay(captures, tmp_path):
    plain = devices(slices(captures["plain"], "--cpu-device-mode", "individual")[0])
    items, _ = slices(captures["isolated"], "--cpu-device-mode", "individual")
    devs = devices(items)
    assert list(devs) == list(plain)
    isolated = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}
    for name, d in devs.items():
        cpu = d["attributes"]["dra.cpu/cpuID"]["int"]
        assert cpu == plain[name]["attributes"]["dra.cpu/cpuID"]["int"]
        extra = {k: v for k, v in d["attributes"].items() if k not in plain[name]["attributes"]}
        if cpu in isolated:
            assert extra["dra.cpu/isolated"] == {"bool": True}, name
            assert extra["dra.cpu/isolatedDomain"] == {"bool": cpu in {4, 5, 6, 7, 20, 21,
                                                                      22, 23}}, name
        else:
            assert extra == {}, name
    validate(items, tmp_path)


def test_a_capture_without_isolation_publishes_what_it_did(captures):
    for mode in ("grouped", "individual"):
        items, err = slices(captures["plain"], "--cpu-device-mode", mode)
        assert "isolated_cpus" not in err
        assert not any(n.startswith("cpuiso") for n in devices(items))
        for d in devices(items).values():
            assert not any("isolat" in k for k in d["attributes"])


def test_isolated_cpus_shared_flag_is_in_help():
    r = run("--help")
    assert "--isolated-cpus-shared" in r.stdout and "file: isolatedCPUsShared" in r.stdout
    assert "--rt-headroom" in r.stdout and "file: rtHeadroom" in r.stdout

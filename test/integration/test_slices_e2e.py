"""ResourceSlice publication: the real driver against the strict API-server
simulator (TLS, bearer token, resourceVersion, watch, faults)."""

import json
import os

import pytest

from driver import wait_for


def ours(apiserver, node="node-1"):
    return [s for s in apiserver.slices() if s["spec"].get("nodeName") == node]


def published(apiserver, n):
    return lambda: len(ours(apiserver)) == n and all(
        s["spec"]["pool"]["resourceSliceCount"] == n for s in ours(apiserver))


def test_first_start_creates_identical_restart_writes_nothing(apiserver, make_driver):
    d = make_driver(args=["--cpu-device-mode", "individual", "--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    assert apiserver.writes() == 3
    slices = ours(apiserver)
    assert sorted(s["metadata"]["name"][:6] for s in slices) == ["00000-", "00001-", "00002-"]
    for s in slices:
        assert s["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Node", "name": "node-1",
            "uid": "0c1d2e3f-0000-4000-8000-00000000aaaa", "controller": True}]
        assert s["spec"]["pool"]["generation"] == 1
    names = [d["name"] for s in sorted(slices, key=lambda s: s["metadata"]["name"])
             for d in s["spec"]["devices"]]
    assert names == ["cpudev%03d" % i for i in range(384)]
    assert d.stop() == 0
    apiserver.reset_stats()
    d.start()
    d.wait_ready()
    assert apiserver.writes() == 0
    assert apiserver.count("list") == 1


def test_external_delete_and_edit_are_repaired(apiserver, make_driver, kube):
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    (s,) = ours(apiserver)
    name = s["metadata"]["name"]
    # someone edits the devices
    s["spec"]["devices"][0]["attributes"]["dra.cpu/numCPUs"] = {"int": 1}
    kube.put("/apis/resource.k8s.io/v1/resourceslices/" + name, s)
    wait_for(lambda: ours(apiserver)[0]["spec"]["devices"][0]["attributes"]
             ["dra.cpu/numCPUs"]["int"] != 1, what="edit repaired")
    # someone deletes it
    kube.delete("/apis/resource.k8s.io/v1/resourceslices/" + name)
    wait_for(published(apiserver, 1), what="delete repaired")
    assert ours(apiserver)[0]["spec"]["devices"][0]["attributes"]["dra.cpu/numCPUs"]["int"] == 192


def test_kubelet_wipe_is_repaired_from_the_watch(apiserver, make_driver):
    d = make_driver(args=["--cpu-device-mode", "individual", "--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    assert d.metrics()["dra_cpu_slices_in_sync"] == 1
    apiserver.wipe_node("node-1")
    assert ours(apiserver) == []
    wait_for(published(apiserver, 3), what="slices back after the wipe")
    wait_for(lambda: d.metrics()["dra_cpu_slices_in_sync"] == 1, what="in sync again")
    gens = {s["spec"]["pool"]["generation"] for s in ours(apiserver)}
    assert len(gens) == 1


def test_expired_watch_relists_and_keeps_repairing(apiserver, make_driver, kube):
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    lists = apiserver.count("list")
    apiserver.expire_watches()
    wait_for(lambda: apiserver.count("list") > lists, what="re-list after 410")
    (s,) = ours(apiserver)
    kube.delete("/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"])
    wait_for(published(apiserver, 1), what="repaired after re-list")


@pytest.mark.parametrize("fault", [{"action": "error", "code": 410}, {"action": "garbage"},
                                   {"action": "garbage", "size": (4 << 20) + 1},
                                   {"action": "drop"}], ids=["410", "garbage", "long-line", "cut"])
def test_a_watch_that_fails_after_every_list_backs_off(apiserver, make_driver, fault):
    """Every slice watch fails at once after its LIST (410, a line that is not
    an event, a line over the 4 MiB cap, a cut connection): the empty sync that follows each LIST must not
    reset the backoff, so the relists slow down (the delays double from 200 ms)
    instead of coming several times a second."""
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    since = len(apiserver.log())
    apiserver.add_fault(verb="watch", resource="resourceslices", **fault)
    apiserver.expire_watches()

    def lists():
        return [e["time"] for e in apiserver.log(since)
                if e["verb"] == "list" and e["resource"] == "resourceslices"]

    times = wait_for(lambda: len(lists()) >= 6 and lists(), timeout=30, what="six relists")
    gaps = [b - a for a, b in zip(times, times[1:])]
    # the fifth delay is at least 1.6 s (equal jitter keeps half of 3.2 s);
    # a backoff reset by every sync keeps each one under 0.2 s
    assert gaps[-1] > 1.0, gaps
    assert gaps == sorted(gaps) or gaps[-1] > 4 * gaps[0], gaps


def test_conflict_on_update_recovers(apiserver, make_driver, kube):
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    (s,) = ours(apiserver)
    s["spec"]["devices"][0]["attributes"]["dra.cpu/smtEnabled"] = {"bool": False}
    kube.put("/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"], s)
    # The driver repairs a second after the event; its first PUT gets a 409:
    # it must re-list and retry.
    apiserver.add_fault(action="error", code=409, verb="update", count=1)
    wait_for(lambda: ours(apiserver)[0]["spec"]["devices"][0]["attributes"]
             ["dra.cpu/smtEnabled"]["bool"] is True, what="repaired despite a 409")
    assert "slice_write_failed" in d.log()


def test_api_down_at_start_publishes_once_up(apiserver, make_driver):
    apiserver.down()
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    # Two attempts refused while the server is down (it retries with backoff).
    wait_for(lambda: d.log().count("event=node_get_failed") >= 2, timeout=20,
             what="retries while the API server is down")
    assert ours(apiserver) == []
    assert d.http("/readyz")[0] == 503
    apiserver.up()
    wait_for(published(apiserver, 1), timeout=20, what="publish after the API came up")
    d.wait_ready()


def test_throttling_is_honoured(apiserver, make_driver):
    apiserver.add_fault(action="throttle", retry_after=1, verb="create", count=1)
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    wait_for(published(apiserver, 1), timeout=15, what="publish after a 429")


def test_token_rotation(apiserver, make_driver, kube):
    d = make_driver(kubeconfig=apiserver.kubeconfig_tokenfile,
                    args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    apiserver.rotate_token()  # the old token is refused from now on
    (s,) = ours(apiserver)
    kube.delete("/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"])
    wait_for(published(apiserver, 1), timeout=15, what="repair with the rotated token")


@pytest.mark.parametrize("group_by,names", [
    ("numanode", ["cpudevnuma%03d" % i for i in range(8)]),
    ("socket", ["cpudevsocket%03d" % i for i in range(4)]),
    ("machine", ["cpudevmachine"]),
])
def test_grouped_modes_publish_one_slice(apiserver, make_driver, group_by, names):
    d = make_driver(topology="synthetic-1024.json",
                    args=["--group-by", group_by, "--reserved-cpus", "0,512",
                          "--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    (s,) = ours(apiserver)
    assert [x["name"] for x in s["spec"]["devices"]] == names
    total = sum(int(x["capacity"]["dra.cpu/cpu"]["value"]) for x in s["spec"]["devices"])
    assert total == 1022


def test_individual_128_cpu_capture_is_one_full_slice(apiserver, make_driver, tmp_path):
    import subprocess
    from test_cli import TOPOS
    root = tmp_path / "cap"
    root.mkdir()
    subprocess.run(["tar", "-xjf", os.path.join(TOPOS, "128arm-2pa2n8cluster4co.tar.bz2"),
                    "-C", str(root)], check=True)
    d = make_driver(topology=None, args=["--sysfs-root", str(root / "128arm-2pa2n8cluster4co"),
                                         "--cpu-device-mode", "individual",
                                         "--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    (s,) = ours(apiserver)
    assert len(s["spec"]["devices"]) == 128
    assert s["spec"]["pool"]["resourceSliceCount"] == 1


def test_bad_kubeconfig_bad_token_bad_ca(apiserver, make_driver, tmp_path):
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nope\n")
    d = make_driver(kubeconfig=str(bad), args=["--no-nri", "--no-bpf"])
    d.start(wait=None)
    assert d.proc.wait(10) != 0
    assert "kubeconfig" in d.log() and "nope" in d.log()

    with open(apiserver.kubeconfig) as f:
        kc = f.read()
    badtok = tmp_path / "kc-token"
    badtok.write_text(kc.replace(apiserver.token, "not-the-token"))
    d = make_driver(kubeconfig=str(badtok), args=["--no-nri", "--no-bpf"]).start()
    wait_for(lambda: "401" in d.log() or "Unauthorized" in d.log(), what="401 logged")
    assert apiserver.token not in d.log() and "not-the-token" not in d.log()

    import base64
    import re
    other_ca = base64.b64encode(open(__file__, "rb").read()[:64]).decode()
    badca = tmp_path / "kc-ca"
    badca.write_text(re.sub(r"certificate-authority(-data)?: .*",
                            "certificate-authority: /etc/ssl/certs/ca-certificates.crt", kc))
    d = make_driver(kubeconfig=str(badca), args=["--no-nri", "--no-bpf"]).start()
    wait_for(lambda: "certificate" in d.log().lower() or "tls" in d.log().lower(),
             what="TLS verification failure logged")
    assert ours(apiserver) == []


def test_running_daemon_keeps_only_the_capabilities_it_needs(apiserver, make_driver):
    if os.geteuid() != 0:
        pytest.skip("needs root to have capabilities to drop")
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    with open("/proc/%d/status" % d.proc.pid) as f:
        caps = dict(line.split(":\t") for line in f if line.startswith("Cap"))
    keep = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 23)
    assert int(caps["CapEff"], 16) == keep
    assert int(caps["CapBnd"], 16) == keep
    assert "capabilities_dropped" in d.log()


def test_fields_dropped_by_the_server_are_logged_once_and_adopted(apiserver, make_driver, kube):
    """A cluster without DRAConsumableCapacity drops capacity, requestPolicy
    and allowMultipleAllocations silently: the driver notices after its write,
    says so once, and does not fight the server with endless rewrites."""
    apiserver.set_gates(DRAConsumableCapacity=False)
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    (s,) = ours(apiserver)
    assert "allowMultipleAllocations" not in s["spec"]["devices"][0]
    writes = apiserver.writes()
    # Someone labels the slice: the watch event makes the driver compare
    # again. Once it has, the dropped fields must not have been written back.
    def driver_writes():
        return sum(v for k, v in d.metrics().items()
                   if k.startswith("dra_cpu_slice_writes_total"))

    syncs, ours_before = d.metrics()["dra_cpu_slice_syncs_total"], driver_writes()
    s["metadata"].setdefault("labels", {})["team"] = "infra"
    assert kube.put("/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"],
                    s).status == 200
    wait_for(lambda: d.metrics()["dra_cpu_slice_syncs_total"] >= syncs + 1, timeout=10,
             what="the driver comparing its slices again")
    assert driver_writes() == ours_before
    assert apiserver.writes() == writes + 1  # the label, nothing from the driver
    assert d.log().count("slice_fields_dropped") == 1
    assert "DRAConsumableCapacity" in d.log()
    assert d.metrics()["dra_cpu_slice_fields_dropped"] == 1


def test_node_allocatable_mapping_dropped_by_a_1_36_server_is_named_and_adopted(
        apiserver, make_driver, driver_dir, kube):
    """The simulator is a 1.36 server: nodeAllocatableResources (1.37) is an
    unknown field it drops with a warning. The driver names the feature once,
    keeps what the server kept, and does not fight it: a sync that repairs one
    edited slice writes that slice alone."""
    conf = os.path.join(driver_dir, "config.yaml")
    with open(conf, "w") as f:
        f.write("publishNodeAllocatableResourceMapping: true\n")
    d = make_driver(args=["--config", conf, "--cpu-device-mode", "individual",
                          "--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    slices = sorted(ours(apiserver), key=lambda s: s["metadata"]["name"])
    assert len(slices) == 3 and apiserver.writes() == 3
    assert all("nodeAllocatableResources" not in dev
               for s in slices for dev in s["spec"]["devices"])
    s = slices[1]
    s["spec"]["devices"][0]["attributes"]["dra.cpu/coreID"] = {"int": 9999}
    kube.put("/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"], s)
    wait_for(lambda: apiserver.writes() == 5, what="the edit and its repair")
    wait_for(lambda: d.metrics()["dra_cpu_slices_in_sync"] == 1, what="in sync again")
    assert apiserver.writes() == 5
    log = d.log()
    assert log.count("feature=DRANodeAllocatableResources") == 1, log
    assert log.count("slice_fields_dropped") == 1
    assert "1.37" in log
    assert d.metrics()["dra_cpu_slice_fields_dropped"] == 1


@pytest.fixture
def pci_capture(driver_dir):
    """The capture of test/data/topologies that has a PCI tree, extracted."""
    import subprocess
    from conftest import ROOT
    subprocess.run(["tar", "-xjf", os.path.join(ROOT, "test", "data", "topologies",
                                                "32intel64-2p8co2t+8ve.tar.bz2"),
                    "-C", driver_dir], check=True)
    return os.path.join(driver_dir, "32intel64-2p8co2t+8ve")


@pytest.mark.parametrize("gate", [True, False], ids=["gate-on", "gate-off"])
def test_pcie_roots_published_or_named_when_the_server_drops_them(
        apiserver, make_driver, pci_capture, gate):
    apiserver.set_gates(DRAListTypeAttributes=gate)
    d = make_driver(topology=None, args=["--sysfs-root", pci_capture, "--expose-pcie-roots",
                                         "--cpu-device-mode", "individual",
                                         "--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    slices = ours(apiserver)
    assert len(slices) == 1 and len(slices[0]["spec"]["devices"]) == 32
    roots = [dev["attributes"].get("resource.kubernetes.io/pcieRoot")
             for dev in slices[0]["spec"]["devices"]]
    log = d.log()
    if gate:
        assert roots.count({"strings": ["pci0000:17", "pci0000:3a", "pci0000:5d"]}) == 16
        assert "slice_fields_dropped" not in log
    else:
        assert roots == [None] * 32  # the server deletes list attributes whole
        assert log.count("feature=DRAListTypeAttributes") == 1, log
        assert d.metrics()["dra_cpu_slice_fields_dropped"] == 1


def readyz(d):
    return d.http("/readyz")


def test_readyz_stays_ready_through_a_slow_repair(apiserver, make_driver):
    """The kubelet wipes the node's slices at its start; the repair takes the
    server 2 s. Known out of sync meanwhile (the gauge), but ready throughout:
    a repair that works is no reason to take the node out."""
    import time

    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    d.wait_ready()
    apiserver.add_fault(action="delay", seconds=2, verb="create", resource="resourceslices")
    apiserver.wipe_node("node-1")
    codes, gauges = [], []
    end = time.monotonic() + 20
    while time.monotonic() < end and not published(apiserver, 1)():
        codes.append(readyz(d)[0])
        gauges.append(d.metrics()["dra_cpu_slices_in_sync"])
        time.sleep(0.05)
    assert published(apiserver, 1)()
    assert 0 in gauges  # it did know
    assert set(codes) == {200}, codes
    wait_for(lambda: d.metrics()["dra_cpu_slices_in_sync"] == 1, what="in sync")


def test_readyz_unready_while_repairs_keep_failing_then_ready(apiserver, make_driver):
    """Slices gone and every write refused (403): ready for the repair
    timeout (3 s here), then 503 naming the check and a log line with the
    server's answer; ready again once the writes go through and the slices
    are back."""
    import time

    d = make_driver(args=["--no-nri", "--no-bpf", "--slice-repair-timeout", "3"]).start()
    d.wait_ready()
    apiserver.add_fault(action="error", code=403, verb="write", resource="resourceslices")
    t0 = time.monotonic()
    apiserver.wipe_node("node-1")
    wait_for(lambda: d.metrics()["dra_cpu_slices_in_sync"] == 0, what="known out of sync")
    assert readyz(d)[0] == 200
    wait_for(lambda: readyz(d)[0] == 503, timeout=15, what="/readyz 503")
    assert time.monotonic() - t0 >= 3
    code, body = readyz(d)
    assert code == 503 and "resourceslices" in body
    assert d.http("/healthz")[0] == 200  # alive: not a reason to restart it
    line = [ln for ln in d.log().splitlines() if "event=slices_unrepaired" in ln]
    assert line and "403" in line[0], d.log()[-2000:]
    assert ours(apiserver) == []
    apiserver.clear_faults()
    wait_for(lambda: readyz(d)[0] == 200, timeout=40, what="/readyz 200 again")
    assert published(apiserver, 1)()
    assert "event=slices_repaired" in d.log()

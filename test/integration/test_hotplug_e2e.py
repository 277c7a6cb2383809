"""CPU hotplug and device health end to end: the real driver reads a copied
sysfs capture (--sysfs-root) while the test flips cpuN/online in it, as
`echo 0 > /sys/devices/system/cpu/cpuN/online` does on a node; a real gRPC
kubelet watches health (v1 and v1alpha1) and the API-server simulator holds
the slices."""

import os
import socket
import subprocess
import threading

import pytest

import h2raw
from claims import claim, ref
from conftest import BUILD_DIR, ROOT
from driver import wait_for

CAPTURE = "32intel64-2p8co2t+8ve"  # 2 sockets x 8 cores x 2 threads, siblings N and N+16
HEALTHY, UNHEALTHY = 1, 2


@pytest.fixture
def sysfs(driver_dir):
    subprocess.run(["tar", "-xjf", os.path.join(ROOT, "test", "data", "topologies",
                                                CAPTURE + ".tar.bz2"), "-C", driver_dir],
                   check=True)
    return os.path.join(driver_dir, CAPTURE)


def set_online(sysfs, cpu, on):
    with open(os.path.join(sysfs, "sys", "devices", "system", "cpu", "cpu%d" % cpu, "online"),
              "w") as f:
        f.write("1\n" if on else "0\n")


def devices(apiserver):
    return {d["name"]: d for s in apiserver.slices() for d in s["spec"]["devices"]}


class Watch:
    """The kubelet's health stream, read on a thread."""

    def __init__(self, kubelet, sock, api):
        self.stream = kubelet.watch_resources(sock, timeout=60, api=api)
        self.got = []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for r in self.stream:
                self.got.append({h.device.device_name: (h.health, h.message,
                                                        h.health_check_timeout_seconds)
                                 for h in r.devices})
        except Exception:
            pass

    def last(self):
        return self.got[-1] if self.got else {}

    def close(self):
        self.stream.cancel()


def start(make_driver, sysfs, *args, registration=False):
    return make_driver(topology=None, registration=registration,
                       args=["--sysfs-root", sysfs, "--no-nri", "--no-bpf", *args]).start()


def test_health_services_advertised_and_both_stream_full_snapshots(make_driver, sysfs, kubelet):
    d = start(make_driver, sysfs, "--cpu-device-mode", "individual", registration=True)
    reg = kubelet.register(d.reg_sock, "dra.cpu")
    assert reg.health == "v1"  # kubelet 1.37 picks v1 when both are listed
    assert {"v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"} <= \
        set(reg.info.supported_versions)
    for api in ("v1", "v1alpha1"):
        w = Watch(kubelet, d.dra_sock, api)
        wait_for(lambda: w.got, what="a %s snapshot" % api)
        w.close()
        snap = w.got[0]
        assert len(snap) == 32
        assert all(h == (HEALTHY, "ok", 20) for h in snap.values())


def test_individual_cpu_offline_then_back(apiserver, make_driver, sysfs, kubelet):
    d = start(make_driver, sysfs, "--cpu-device-mode", "individual")
    d.wait_ready()
    devs = devices(apiserver)
    assert len(devs) == 32
    by_cpu = {v["attributes"]["dra.cpu/cpuID"]["int"]: k for k, v in devs.items()}
    name5 = by_cpu[5]
    c = apiserver.put_claim(claim("pinned", [("cpus", name5, None), ("cpus", by_cpu[6], None)]))
    assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
    spec_before = open(os.path.join(d.cdi_dir, d.cdi_specs()[0])).read()
    w = Watch(kubelet, d.dra_sock, "v1")
    wait_for(lambda: w.got, what="first snapshot")

    set_online(sysfs, 5, False)
    wait_for(lambda: w.last().get(name5, (0,))[0] == UNHEALTHY, what="CPU 5 unhealthy")
    health, msg, _ = w.last()[name5]
    assert "CPU 5 is offline" in msg and "default/pinned" in msg and "not moved" in msg
    assert all(h[0] == HEALTHY for k, h in w.last().items() if k != name5)
    wait_for(lambda: name5 not in devices(apiserver), what="the device leaves the slices")
    assert len(devices(apiserver)) == 31
    assert sorted(devices(apiserver)) == sorted(n for n in devs if n != name5)  # names kept
    m = d.metrics()
    assert m["dra_cpu_online_cpus"] == 31 and m["dra_cpu_claims_on_offline_cpus"] == 1
    log = d.log()
    assert "event=claim_cpus_offline claim=default/pinned" in log and "offline=5" in log
    # the claim keeps its CPUs: its CDI spec is untouched
    assert open(os.path.join(d.cdi_dir, d.cdi_specs()[0])).read() == spec_before
    # the scheduler may still hand out the device (a stale slice): refused
    x = apiserver.put_claim(claim("late", [("cpus", name5, None)]))
    assert "CPU 5 is offline" in kubelet.prepare(d.dra_sock, [ref(x)]).claims[
        x["metadata"]["uid"]].error

    set_online(sysfs, 5, True)
    wait_for(lambda: w.last().get(name5, (0,))[0] == HEALTHY, what="CPU 5 healthy again")
    wait_for(lambda: len(devices(apiserver)) == 32, what="the device comes back")
    assert devices(apiserver)[name5]["attributes"]["dra.cpu/cpuID"]["int"] == 5
    assert d.metrics()["dra_cpu_claims_on_offline_cpus"] == 0
    w.close()


def test_grouped_capacity_follows_the_online_cpus(apiserver, make_driver, sysfs, kubelet):
    d = start(make_driver, sysfs)
    d.wait_ready()

    def cap():
        return {k: int(v["capacity"]["dra.cpu/cpu"]["value"])
                for k, v in devices(apiserver).items()}

    assert cap() == {"cpudevnuma000": 16, "cpudevnuma001": 16}
    w = Watch(kubelet, d.dra_sock, "v1alpha1")
    for cpu in (3, 19):
        set_online(sysfs, cpu, False)
    wait_for(lambda: cap() == {"cpudevnuma000": 14, "cpudevnuma001": 16},
             what="node 0 shrinks to 14")
    numcpus = devices(apiserver)["cpudevnuma000"]["attributes"]["dra.cpu/numCPUs"]["int"]
    assert numcpus == 14
    # free CPUs went: the group stays healthy and says so
    wait_for(lambda: "CPUs 3,19 are offline" in w.last().get("cpudevnuma000", (0, ""))[1],
             what="the message")
    assert w.last()["cpudevnuma000"][0] == HEALTHY
    # a new claim never gets an offline CPU: all 14 left, none of 3 and 19
    c = apiserver.put_claim(claim("all", [("cpu", "cpudevnuma000", "14")]))
    r = kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]]
    assert r.error == ""
    spec = open(os.path.join(d.cdi_dir, d.cdi_specs()[0])).read()
    assert "DRA_CPUSET_" in spec
    from claims import parse_list
    import json as _json
    env = _json.loads(spec)["devices"][0]["containerEdits"]["env"][0].split("=", 1)[1]
    cpus = parse_list(env)
    assert len(cpus) == 14 and not cpus & {3, 19}
    # a CPU held by that claim goes: the group is unhealthy, the claim named
    set_online(sysfs, 4, False)
    wait_for(lambda: w.last().get("cpudevnuma000", (0,))[0] == UNHEALTHY, what="unhealthy")
    assert "default/all" in w.last()["cpudevnuma000"][1]
    wait_for(lambda: cap()["cpudevnuma000"] == 13, what="13 left")
    for cpu in (3, 4, 19):
        set_online(sysfs, cpu, True)
    wait_for(lambda: cap() == {"cpudevnuma000": 16, "cpudevnuma001": 16}, what="back to 16")
    wait_for(lambda: w.last().get("cpudevnuma000", (0,))[0] == HEALTHY, what="healthy")
    w.close()


def test_live_sysfs_is_followed_by_uevents_a_capture_by_polling(make_driver, sysfs):
    """On the live machine the driver reads the online CPUs again when the
    kernel says a CPU came or went (a uevent), not every second: a synthetic
    "online" uevent of CPU 0 (no CPU changes state) makes it read once. A
    capture sends no uevents: it is polled every second."""
    live = make_driver(topology=None, args=["--no-nri", "--no-bpf"]).start()
    assert "event=cpu_hotplug_followed by=uevents check_every_s=60" in live.log(), live.log()
    key = 'dra_cpu_hotplug_checks_total{trigger="uevent"}'
    before = live.metrics().get(key, 0)
    try:
        with open("/sys/devices/system/cpu/cpu0/uevent", "w") as f:
            f.write("online")
    except OSError as e:
        pytest.skip("cannot ask the kernel for a uevent here: %s" % e)
    wait_for(lambda: live.metrics().get(key, 0) > before, what="a read after the uevent")
    assert live.metrics().get('dra_cpu_hotplug_checks_total{trigger="timer"}', 0) == 0
    assert "event=cpus_hotplugged" not in live.log()  # nothing changed, nothing said

    capture = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--sysfs-root", sysfs])
    capture.start()
    assert ('event=cpu_hotplug_followed by=polling every_ms=1000 '
            'reason="a sysfs capture sends no uevents"') in capture.log(), capture.log()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([ln for ln in f if ln.startswith("VmRSS")][0].split()[1])


WATCH = "/v1.DRAResourceHealth/NodeWatchResources"


def test_health_watchers_that_never_read_stay_small_and_leave_room_for_the_kubelet(
        apiserver, make_driver, sysfs, kubelet):
    """64 connections open 100 health watch streams each and never read (nor open
    a window for them), while CPU 5 goes offline and back four times (a
    snapshot to every stream each time). Each stream holds the latest snapshot only, a connection at most
    four streams, watches at most 63 connections: the driver stays small and
    the kubelet, connecting as the 65th peer, still prepares a claim."""
    d = start(make_driver, sysfs, "--cpu-device-mode", "individual")
    d.wait_ready()
    rss0 = rss_kib(d.proc.pid)
    peers = []
    for _ in range(64):
        s = h2raw.connect(d.dra_sock)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        out = h2raw.client_start(initial_window_size=0)  # no stream may send to it
        for j in range(100):
            out += h2raw.grpc_request(2 * j + 1, WATCH, b"")
        s.sendall(out)
        peers.append(s)
    refused_key = 'dra_cpu_grpc_calls_total{method="%s",code="8"}' % WATCH

    def answered():
        m = d.metrics()
        return m.get("dra_cpu_health_streams", 0) + m.get(refused_key, 0)

    wait_for(lambda: answered() == 6400, timeout=30, what="every watch held or refused")
    m = d.metrics()
    assert m["dra_cpu_health_streams"] == 63 * 4, m["dra_cpu_health_streams"]
    for k in range(4):
        set_online(sysfs, 5, k % 2 == 1)
        want = 32 if k % 2 == 1 else 31
        wait_for(lambda: d.metrics()["dra_cpu_online_cpus"] == want, what="hotplug %d seen" % k)
    # each stream holds its first snapshot and the latest: the others were replaced
    assert d.metrics()["dra_cpu_health_updates_coalesced_total"] >= 63 * 4 * 3
    grown = rss_kib(d.proc.pid) - rss0
    if "san" not in os.path.basename(os.path.normpath(BUILD_DIR)):  # ASan's quarantine
        assert grown < 16 * 1024, "RSS grew %d KiB" % grown
    c = apiserver.put_claim(claim("meanwhile", [("cpus", "cpudev000", None)]))
    assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
    for s in peers:
        s.close()
    wait_for(lambda: d.metrics()["dra_cpu_health_streams"] == 0, what="the streams gone")


def test_the_shared_pool_never_holds_an_offline_cpu(make_driver, sysfs, driver_dir):
    """On cgroup v1 the kernel refuses an offline CPU in cpuset.cpus, and runc
    then fails the container ("unable to apply cgroup configuration: failed
    to write"): measured here with runc 1.1.5 on a real v1 cpuset (ERANGE for
    a CPU past the last one, EACCES outside the parent's set). So the pool
    the runtime hands to a shared container follows the online CPUs."""
    from claims import parse_list
    from sim.nrisim import Runtime

    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    try:
        d = make_driver(topology=None, args=["--sysfs-root", sysfs, "--no-bpf",
                                             "--nri-socket", sock]).start()
        rt.wait_plugin(timeout=5)
        pod = rt.add_pod("web")
        before = rt.create_container(pod, "before")
        assert parse_list(before.cpus) == set(range(32))
        set_online(sysfs, 5, False)
        wait_for(lambda: d.metrics()["dra_cpu_online_cpus"] == 31, what="CPU 5 offline")
        assert parse_list(rt.create_container(pod, "offline").cpus) == set(range(32)) - {5}
        # a running shared container gets the new pool pushed (NRI >= 0.12.1)
        wait_for(lambda: 5 not in parse_list(before.cpus), what="the pool pushed")
        assert d.metrics()["dra_cpu_available_cpus"] == 31
        set_online(sysfs, 5, True)
        wait_for(lambda: d.metrics()["dra_cpu_online_cpus"] == 32, what="CPU 5 back")
        assert parse_list(rt.create_container(pod, "back").cpus) == set(range(32))
        wait_for(lambda: parse_list(before.cpus) == set(range(32)), what="widened again")
    finally:
        rt.close()

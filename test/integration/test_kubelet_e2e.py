"""The kubelet plugin end to end: a real gRPC kubelet (grpcio) drives the real
driver, which reads claims from the API-server simulator."""

import json
import os
import socket
import threading

import grpc
import pytest

from claims import claim, cpu_config, parse_list, ref
from driver import wait_for

NODE = "node-1"


def spec_cpus(d, uid):
    with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json" % uid)) as f:
        spec = json.load(f)
    (env,) = spec["devices"][0]["containerEdits"]["env"]
    key, val = env.split("=", 1)
    assert key == "DRA_CPUSET_" + uid
    return parse_list(val)


def prepare(kubelet, d, c, api="v1"):
    r = kubelet.prepare(d.dra_sock, [ref(c)], api=api)
    return r.claims[c["metadata"]["uid"]]


@pytest.fixture
def grouped(apiserver, make_driver):
    return make_driver(args=["--no-nri", "--no-bpf"]).start()


@pytest.fixture
def individual(apiserver, make_driver):
    return make_driver(args=["--no-nri", "--no-bpf", "--cpu-device-mode", "individual",
                             "--reserved-cpus", "0"]).start()


def test_registration_then_healthz(make_driver, kubelet):
    d = make_driver(registration=True, args=["--no-nri", "--no-bpf"]).start()
    assert d.http("/healthz")[0] == 503
    reg = kubelet.register(d.reg_sock, "dra.cpu")
    assert reg.endpoint == d.dra_sock
    assert list(reg.info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin",
                                                 "v1.DRAResourceHealth",
                                                 "v1alpha1.DRAResourceHealth"]
    wait_for(lambda: d.http("/healthz")[0] == 200, what="healthz after registration")
    assert os.stat(d.reg_sock).st_mode & 0o777 == 0o600


@pytest.mark.parametrize("api", ["v1", "v1beta1"])
def test_grouped_prepare_unprepare(apiserver, grouped, kubelet, api):
    d = grouped
    c = apiserver.put_claim(claim("db", [("cpu", "cpudevnuma001", "10")]))
    uid = c["metadata"]["uid"]
    r = prepare(kubelet, d, c, api)
    assert r.error == ""
    (dev,) = r.devices
    assert list(dev.request_names) == ["cpu"] and dev.pool_name == NODE
    assert dev.device_name == "cpudevnuma001"
    assert list(dev.cdi_device_ids) == ["dra.k8s.io/cpu=claim-" + uid]
    if api == "v1":
        assert dev.share_id == c["status"]["allocation"]["devices"]["results"][0]["shareID"]
    cpus = spec_cpus(d, uid)
    assert len(cpus) == 10 and cpus <= set(range(96, 192)) | set(range(288, 384))
    # packed on whole cores: 5 cores with both siblings
    assert all((x + 192 if x < 192 else x - 192) in cpus for x in cpus)
    m = d.metrics()
    assert m['dra_cpu_prepare_claims_total{result="success"}'] == 1
    assert m["dra_cpu_allocated_cpus"] == 10 and m["dra_cpu_resource_claims_active"] == 1
    # idempotent
    assert prepare(kubelet, d, c, api).error == ""
    assert spec_cpus(d, uid) == cpus
    u = kubelet.unprepare(d.dra_sock, [ref(c)], api=api)
    assert u.claims[uid].error == ""
    assert d.cdi_specs() == []
    assert d.metrics()["dra_cpu_allocated_cpus"] == 0
    # unknown claims unprepare fine
    assert kubelet.unprepare(d.dra_sock, [ref(c)], api=api).claims[uid].error == ""


def test_individual_prepare_maps_devices(apiserver, individual, kubelet):
    d = individual
    # CPU 0 reserved: cpudev000 = 1, cpudev001 = 193 (its sibling), cpudev002 = 2
    c = apiserver.put_claim(claim("w", [("cpus", "cpudev000", None), ("cpus", "cpudev001", None),
                                        ("cpus", "cpudev002", None)]))
    r = prepare(kubelet, d, c)
    assert r.error == "" and len(r.devices) == 3
    assert spec_cpus(d, c["metadata"]["uid"]) == {1, 193, 2}
    other = apiserver.put_claim(claim("x", [("cpus", "cpudev002", None)]))
    r = prepare(kubelet, d, other)
    assert "overlapping device assignment" in r.error
    assert len(d.cdi_specs()) == 1


def test_multi_request_claim_gets_disjoint_cpus(apiserver, grouped, kubelet):
    c = apiserver.put_claim(claim("two", [("a", "cpudevnuma000", "4"), ("b", "cpudevnuma000", "4"),
                                          ("c", "cpudevnuma001", "2")]))
    r = prepare(kubelet, grouped, c)
    assert r.error == "" and [x.device_name for x in r.devices] == [
        "cpudevnuma000", "cpudevnuma000", "cpudevnuma001"]
    cpus = spec_cpus(grouped, c["metadata"]["uid"])
    assert len(cpus) == 10


def test_claim_without_our_results_is_an_error(apiserver, grouped, kubelet):
    c = claim("gpu", [])
    c["status"]["allocation"]["devices"]["results"] = [
        {"request": "g", "driver": "gpu.example.com", "pool": NODE, "device": "gpu0"}]
    c["spec"]["devices"]["requests"] = [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]
    c = apiserver.put_claim(c)
    r = prepare(kubelet, grouped, c)
    assert "no results for driver dra.cpu" in r.error and len(r.devices) == 0
    assert grouped.cdi_specs() == []
    assert grouped.metrics()['dra_cpu_prepare_claims_total{result="error"}'] == 1


@pytest.mark.parametrize("consumed,msg", [
    ("0.5", '"0.5" is not a whole number'),
    ("1500m", '"1500m" is not a whole number'),
    ("0", '"0" must be at least 1'),
    ("-1", '"-1" must be at least 1'),
    ("abc", None),
    ("193", '"193" exceeds 192'),
])
def test_bad_consumed_capacity_is_a_claim_error(apiserver, grouped, kubelet, consumed, msg):
    c = claim("bad", [("cpu", "cpudevnuma000", "1")])
    c["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["dra.cpu/cpu"] = consumed
    try:
        c = apiserver.put_claim(c)
    except ValueError:
        pytest.skip("the schema itself refuses %r" % consumed)
    r = prepare(kubelet, grouped, c)
    assert r.error
    if msg:
        assert msg in r.error
    assert grouped.cdi_specs() == []
    assert grouped.metrics()["dra_cpu_allocated_cpus"] == 0


def test_more_than_the_group_has_free(apiserver, grouped, kubelet):
    a = apiserver.put_claim(claim("a", [("cpu", "cpudevnuma000", "150")]))
    assert prepare(kubelet, grouped, a).error == ""
    b = apiserver.put_claim(claim("b", [("cpu", "cpudevnuma000", "50")]))
    r = prepare(kubelet, grouped, b)
    assert '"50" is more than the 42 CPUs cpudevnuma000 has free' in r.error


@pytest.mark.parametrize("mutate,msg", [
    (lambda c: c["status"].pop("allocation"), "not allocated"),
    (lambda c: c["status"]["allocation"]["devices"]["results"][0].update(pool="node-2"),
     "not this node's pool"),
    (lambda c: c["status"]["allocation"]["devices"]["results"][0].update(device="cpudevnuma042"),
     "is not a device of this node"),
    (lambda c: c["status"]["allocation"]["devices"].update(
        config=[cpu_config(policy="random")]), "policy must be"),
    (lambda c: c["status"]["allocation"]["devices"].update(
        config=[cpu_config(fullcores=True)]), 'unknown field "fullcores"'),
])
def test_bad_claims_get_errors_and_allocate_nothing(apiserver, grouped, kubelet, mutate, msg):
    c = claim("bad", [("cpu", "cpudevnuma000", "2")])
    mutate(c)
    c = apiserver.put_claim(c)
    r = prepare(kubelet, grouped, c)
    assert msg in r.error
    assert grouped.cdi_specs() == []


def test_uid_mismatch_and_missing_claim(apiserver, grouped, kubelet):
    c = apiserver.put_claim(claim("c", [("cpu", "cpudevnuma000", "2")]))
    ns, name, _ = ref(c)
    r = kubelet.prepare(grouped.dra_sock, [(ns, name, "00000000-0000-4000-8000-000000000000")])
    assert "deleted and recreated" in r.claims["00000000-0000-4000-8000-000000000000"].error
    r = kubelet.prepare(grouped.dra_sock, [(ns, "nope", "11111111-0000-4000-8000-000000000000")])
    assert "nope" in r.claims["11111111-0000-4000-8000-000000000000"].error


def test_cpuconfig_full_cores_and_spread(apiserver, grouped, kubelet):
    c = apiserver.put_claim(claim("fc", [("cpu", "cpudevnuma000", "3")],
                                  configs=[cpu_config(fullCores=True)]))
    r = prepare(kubelet, grouped, c)
    assert "SMT Alignment Error" in r.error
    s = apiserver.put_claim(claim("sp", [("cpu", "cpudevnuma000", "4")],
                                  configs=[cpu_config(policy="spread-cores")]))
    assert prepare(kubelet, grouped, s).error == ""
    cpus = spec_cpus(grouped, s["metadata"]["uid"])
    cores = {x % 192 for x in cpus}
    assert len(cores) == 4  # one thread per core


def sibling(x):
    return x + 192 if x < 192 else x - 192


def test_full_cores_claim_never_gets_a_thread_whose_sibling_another_claim_holds(
        apiserver, grouped, kubelet):
    """NUMA node 0 (CPUs 0-95 and their siblings 192-287) is filled so that its
    only free CPUs are two threads whose siblings other claims hold. The
    scheduler counts 2 free CPUs and allocates a fullCores claim of 2: the
    driver refuses it in the kubelet's words instead of handing out half cores."""
    def put(name, n, **cfg):
        c = apiserver.put_claim(claim(name, [("cpu", "cpudevnuma000", str(n))],
                                      configs=[cpu_config(**cfg)] if cfg else None))
        assert prepare(kubelet, grouped, c).error == ""
        return c

    a, b = put("a", 1), put("b", 1)
    c, e = put("c", 1), put("e", 1)
    put("d", 188)
    held = {n: spec_cpus(grouped, x["metadata"]["uid"])
            for n, x in (("a", a), ("b", b), ("c", c), ("e", e))}
    for x in (a, c):
        assert kubelet.unprepare(grouped.dra_sock, [ref(x)]).claims[
            x["metadata"]["uid"]].error == ""
    free = held["a"] | held["c"]
    # every free CPU of the node's first device has its sibling held by b or e
    assert {sibling(x) for x in free} <= held["b"] | held["e"], held
    f = apiserver.put_claim(claim("f", [("cpu", "cpudevnuma000", "2")],
                                  configs=[cpu_config(fullCores=True)]))
    r = prepare(kubelet, grouped, f)
    assert r.error.endswith("SMT Alignment Error: not enough free physical CPUs: available "
                            "physical CPUs = 0, requested CPUs = 2, CPUs per core = 2"), (
        r.error, r.error or spec_cpus(grouped, f["metadata"]["uid"]))
    # a claim that does not ask for whole cores takes those threads
    g = put("g", 2)
    assert spec_cpus(grouped, g["metadata"]["uid"]) == free


def test_kill9_after_prepare_then_restart_gives_disjoint_cpus(apiserver, grouped, kubelet):
    a = apiserver.put_claim(claim("a", [("cpu", "cpudevnuma000", "8")]))
    assert prepare(kubelet, grouped, a).error == ""
    cpus_a = spec_cpus(grouped, a["metadata"]["uid"])
    grouped.kill9()
    grouped.start()
    kubelet.close()  # a new process behind the socket: new connections, as the kubelet does
    b = apiserver.put_claim(claim("b", [("cpu", "cpudevnuma000", "8")]))
    assert prepare(kubelet, grouped, b).error == ""
    assert not cpus_a & spec_cpus(grouped, b["metadata"]["uid"])
    assert "claim_restored" in grouped.log()
    # the restored claim re-prepares to the same CPUs
    assert prepare(kubelet, grouped, a).error == ""
    assert spec_cpus(grouped, a["metadata"]["uid"]) == cpus_a


def test_50_concurrent_prepares_never_overlap(apiserver, grouped, kubelet):
    cs = [apiserver.put_claim(claim("c%d" % i, [("cpu", "cpudevnuma%03d" % (i % 2), "3")]))
          for i in range(50)]
    errors = []

    def one(c):
        try:
            r = prepare(kubelet, grouped, c)
            if r.error:
                errors.append(r.error)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ts = [threading.Thread(target=one, args=(c,)) for c in cs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    seen = set()
    for c in cs:
        cpus = spec_cpus(grouped, c["metadata"]["uid"])
        assert len(cpus) == 3 and not cpus & seen
        seen |= cpus
    assert grouped.metrics()["dra_cpu_allocated_cpus"] == 150


def test_unknown_method_and_garbage(grouped):
    ch = grpc.insecure_channel("unix://" + grouped.dra_sock)
    fn = ch.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/Nope")
    with pytest.raises(grpc.RpcError) as e:
        fn(b"", timeout=5)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    ch.close()
    ch = grpc.insecure_channel("unix://" + grouped.dra_sock)
    big = ch.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources")
    with pytest.raises(grpc.RpcError) as e:
        big(b"\x0a" * (5 << 20), timeout=10)
    # RESOURCE_EXHAUSTED; under load grpcio may still be writing the body
    # when the stream is refused and report the closed socket instead.
    assert e.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)
    ch.close()
    for junk in (b"GET / HTTP/1.1\r\n\r\n", os.urandom(4096), b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(grouped.dra_sock)
        s.sendall(junk)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
        s.close()
    assert grouped.proc.poll() is None
    assert grouped.http("/metrics")[0] == 200


def test_health_stream_reports_every_device(grouped, kubelet):
    stream = kubelet.watch_resources(grouped.dra_sock, timeout=5)
    first = next(iter(stream))
    stream.cancel()
    names = sorted(h.device.device_name for h in first.devices)
    assert names == ["cpudevnuma000", "cpudevnuma001"]
    assert all(h.health == 1 for h in first.devices)  # HEALTHY


# ---- timing: nothing of a Prepare outlives its call or an Unprepare ----


def claim_gets(apiserver):
    return apiserver.count("get", "resourceclaims")


def barrier(apiserver, d, kubelet):
    """One full Prepare round trip through the driver's loop: whatever it had
    received before has been handled when this returns."""
    b = apiserver.put_claim(claim("barrier", [("cpu", "cpudevnuma001", "1")]))
    assert prepare(kubelet, d, b).error == ""
    return b


def test_unprepare_during_a_slow_prepare_wins(apiserver, grouped, kubelet):
    c = apiserver.put_claim(claim("slow", [("cpu", "cpudevnuma000", "4")]))
    uid = c["metadata"]["uid"]
    apiserver.add_fault(action="delay", seconds=3, verb="get", resource="resourceclaims", count=1)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", prepare(kubelet, grouped, c)))
    t.start()
    wait_for(lambda: claim_gets(apiserver) == 1, what="the claim fetch at the API server")
    u = kubelet.unprepare(grouped.dra_sock, [ref(c)])
    assert u.claims[uid].error == ""
    t.join(10)
    # the Prepare answered at Unprepare time, not when the fetch came back
    assert "arrived while it was being prepared" in out["r"].error
    # the late answer of the API server reaches nothing
    wait_for(lambda: "duration" in apiserver.log()[0], what="the delayed GET to end")
    b = barrier(apiserver, grouped, kubelet)
    assert grouped.cdi_specs() == ["dra.k8s.io-cpu_claim-%s.json" % b["metadata"]["uid"]]
    assert grouped.metrics()["dra_cpu_allocated_cpus"] == 1


def test_prepare_answers_before_the_deadline_when_throttled(apiserver, grouped, kubelet):
    c = apiserver.put_claim(claim("throttled", [("cpu", "cpudevnuma000", "2")]))
    uid = c["metadata"]["uid"]
    # The API server asks for a 10-minute wait; the kubelet waits 3 s.
    apiserver.add_fault(action="throttle", retry_after=600, verb="get", resource="resourceclaims")
    r = kubelet.prepare(grouped.dra_sock, [ref(c)], timeout=3).claims[uid]
    assert "before the kubelet's deadline" in r.error
    assert claim_gets(apiserver) == 1
    m = grouped.metrics()
    assert m['dra_cpu_claim_fetches_total{result="cancelled"}'] == 1
    apiserver.clear_faults()
    assert prepare(kubelet, grouped, c).error == ""
    assert claim_gets(apiserver) == 2  # the cancelled fetch never retried


def test_reset_prepare_streams_cost_no_api_requests(apiserver, grouped, kubelet):
    """A peer opening and resetting thousands of Prepare streams. nghttp2 ends
    a connection after about 1000 quick resets, so the peer spreads them
    over several connections, as an attacker would."""
    import h2raw

    conns, per_conn = 4, 500
    n = conns * per_conn
    pb = kubelet.pb.v1
    path = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
    apiserver.add_fault(action="delay", seconds=0.5, verb="get", resource="resourceclaims")
    for c in range(conns):
        s = h2raw.connect(grouped.dra_sock)
        s.sendall(h2raw.client_start() + h2raw.frame(h2raw.SETTINGS, h2raw.ACK, 0))
        batch = b""
        for i in range(per_conn):
            sid = 2 * i + 1
            req = pb.NodePrepareResourcesRequest(claims=[pb.Claim(
                namespace="default", name="c%d" % i,
                uid="00000000-0000-4000-%04d-%012d" % (c, i))]).SerializeToString()
            batch += h2raw.grpc_request(sid, path, req) + \
                h2raw.frame(h2raw.RST_STREAM, 0, sid, b"\x00\x00\x00\x08")  # CANCEL
            if i % 50 == 49:
                s.sendall(batch)
                batch = b""
                h2raw.read_frames(s, timeout=0.01)  # keep the server's output moving
        s.close()
    wait_for(lambda: grouped.metrics().get(
        'dra_cpu_prepare_claims_total{result="cancelled"}', 0) == n, timeout=30,
        what="every reset Prepare to be dropped")
    apiserver.clear_faults()
    barrier(apiserver, grouped, kubelet)
    gets = claim_gets(apiserver) - 1
    assert gets < n // 20, "%d API requests for %d reset streams" % (gets, n)
    assert grouped.metrics()["dra_cpu_allocated_cpus"] == 1


def test_grouped_reprepare_with_another_allocation_is_refused(apiserver, grouped, kubelet):
    c = apiserver.put_claim(claim("moved", [("cpu", "cpudevnuma000", "4")]))
    uid = c["metadata"]["uid"]
    assert prepare(kubelet, grouped, c).error == ""
    held = spec_cpus(grouped, uid)
    # deallocated and allocated again elsewhere while the kubelet kept it prepared
    c2 = claim("moved", [("cpu", "cpudevnuma001", "4")], uid=uid)
    apiserver.put_claim(c2)
    r = prepare(kubelet, grouped, c)
    assert "already prepared with another allocation" in r.error and len(r.devices) == 0
    assert spec_cpus(grouped, uid) == held
    apiserver.put_claim(claim("moved", [("cpu", "cpudevnuma000", "4")], uid=uid))
    assert prepare(kubelet, grouped, c).error == ""  # the same allocation: idempotent


def test_names_from_the_kubelet_are_checked(apiserver, grouped, kubelet):
    bad = [("Default", "db"), ("default", "db\nts=2026-01-01T00:00:00Z level=error event=forged"),
           ("default", "../../../api/v1/nodes/node-1"), ("a" * 64, "db"), ("default", "x" * 254)]
    claims = [(ns, name, "00000000-0000-4000-8000-%012d" % i) for i, (ns, name) in enumerate(bad)]
    r = kubelet.prepare(grouped.dra_sock, claims)
    for _, _, uid in claims:
        assert "is not a Kubernetes" in r.claims[uid].error
    assert claim_gets(apiserver) == 0
    assert not any(line.startswith("ts=2026-01-01") or "event=forged" in line
                   for line in grouped.log().splitlines())


def test_machine_grouping_with_an_exact_cpuset(apiserver, make_driver, kubelet):
    """--group-by machine with the reference's override: the claim names its
    CPUs; the driver checks them and prepares exactly those, or says why not."""
    from claims import cpuset_override
    d = make_driver(args=["--no-nri", "--no-bpf", "--group-by", "machine",
                          "--reserved-cpus", "0"]).start()
    c = apiserver.put_claim(claim("exact", [("cpus", "cpudevmachine", "6")],
                                  configs=[cpuset_override("10-12,202-204", ["cpus"])]))
    r = prepare(kubelet, d, c)
    assert r.error == "" and [x.device_name for x in r.devices] == ["cpudevmachine"]
    assert spec_cpus(d, c["metadata"]["uid"]) == {10, 11, 12, 202, 203, 204}
    for name, cpuset, consumed, src, msg in [
        ("busy", "12-13", "2", "FromClaim", "CPUs 12 are held by another claim"),
        ("reserved", "0-1", "2", "FromClaim", "CPUs 0 are reserved (--reserved-cpus)"),
        ("offline", "384-385", "2", "FromClaim", "CPUs 384-385 are not online"),
        ("count", "20-22", "2", "FromClaim", "has 3 CPUs, the allocation consumed 2"),
        ("class", "20-21", "2", "FromClass", "configuration from DeviceClass is not supported"),
    ]:
        x = apiserver.put_claim(claim(name, [("cpus", "cpudevmachine", consumed)],
                                      configs=[cpuset_override(cpuset, source=src)]))
        assert msg in prepare(kubelet, d, x).error, name
    two = apiserver.put_claim(claim("two", [("cpus", "cpudevmachine", "2")],
                                    configs=[cpuset_override("20-21"),
                                             cpuset_override("22-23", ["cpus"])]))
    assert "targeted by 2 cpuset configurations" in prepare(kubelet, d, two).error
    assert len(d.cdi_specs()) == 1
    assert d.metrics()["dra_cpu_allocated_cpus"] == 6


def idle_peers(path, n):
    """n peers on the socket that ask for nothing; half never even send the
    HTTP/2 preface."""
    import h2raw

    out = []
    for i in range(n):
        s = h2raw.connect(path)
        if i % 2 == 0:
            s.sendall(h2raw.client_start())
        out.append(s)
    return out


def closed_now(s):
    import h2raw

    return h2raw.wait_closed(s, 0.01)


def test_idle_peers_cannot_lock_the_kubelet_out(apiserver, make_driver, kubelet):
    """Hundreds of peers connect to the DRA socket and never send a request.
    The kubelet still gets its answers: at the connection cap the idlest peer
    yields to the kubelet's new connection, and the crowd is closed once the
    first-request timeout runs out (1 s here), not after minutes, down to the
    quarter of the 64 slots below which a silent peer is merely idle."""
    import time

    d = make_driver(args=["--no-nri", "--no-bpf", "--kubelet-first-request-timeout", "1"]).start()
    c = apiserver.put_claim(claim("db", [("cpu", "cpudevnuma000", "2")]))
    uid = c["metadata"]["uid"]
    crowd = idle_peers(d.dra_sock, 250)
    t0 = time.monotonic()
    assert prepare(kubelet, d, c).error == ""
    # the kubelet's connection is idle now too, but it has asked before: the
    # peers that never did yield first
    more = idle_peers(d.dra_sock, 250)
    assert kubelet.unprepare(d.dra_sock, [ref(c)]).claims[uid].error == ""
    # beyond the cap (64 connections), peers were closed to make room
    early = sum(closed_now(s) for s in crowd + more)
    assert early >= 500 - 64, early
    # and the rest go when their first-request timeout runs out
    deadline = t0 + 8
    while True:
        left = [s for s in crowd + more if not closed_now(s)]
        if len(left) < 64 // 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(left) < 64 // 4, "%d idle peers still connected" % len(left)
    for s in crowd + more:
        s.close()
    assert "conn_evicted" in d.log()
    # a peer that asks is served as before
    assert prepare(kubelet, d, c).error == ""

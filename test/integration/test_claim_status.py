"""Claim device status (KEP-4817) end to end: after Prepare the claim's
status.devices says, per device of this driver, what was decided; Unprepare
removes it; a restart does not write again what is already right; a failing
API server never fails a Prepare. The simulator enforces the server's rules
for the status subresource (test/sim/visible.py); the stored claims are
checked against the 1.36 and 1.37 resource.k8s.io documents."""

import os

import pytest
import yaml

from claims import claim, cpu_config, ref
from conftest import ROOT
from driver import wait_for
from sim import k8svalidate as V

DOCS = [V.ApiDocument(V.API_DOCS[v]) for v in ("1.36", "1.37")]
ARGS = ["--no-nri", "--no-bpf"]


def valid(c):
    for doc in DOCS:
        errs = doc.errors(V.strip_nulls(c), "io.k8s.api.resource.v1.ResourceClaim", strict=True)
        assert errs == [], (doc.version, errs)
    return c


def stored(apiserver, c):
    with apiserver.store.lock:
        return valid(apiserver.store.claims[(c["metadata"]["namespace"], c["metadata"]["name"])])


def ours(apiserver, c):
    return [x for x in (stored(apiserver, c).get("status") or {}).get("devices") or []
            if x["driver"] == "dra.cpu"]


def status_writes(apiserver):
    return apiserver.count("patch", "resourceclaims/status")


def prepare(kubelet, d, c):
    assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""


def test_prepare_writes_what_was_decided_and_unprepare_clears_it(apiserver, make_driver,
                                                                kubelet):
    d = make_driver(args=ARGS).start()
    c = apiserver.put_claim(claim("db", [("cpus", "cpudevnuma001", "4"),
                                         ("more", "cpudevnuma000", "2")],
                                  configs=[cpu_config(["more"], policy="spread-cores")]))
    # another driver's entry in the same claim stays as it is
    with apiserver.store.lock:
        other = {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu0",
                 "conditions": [{"type": "Ready", "status": "True", "reason": "Up",
                                 "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        cur = apiserver.store.claims[("default", "db")]
        cur["status"]["allocation"]["devices"]["results"].append(
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu0"})
        cur["status"]["devices"] = [other]
    prepare(kubelet, d, c)
    wait_for(lambda: len(ours(apiserver, c)) == 2, what="status.devices written")
    by_dev = {x["device"]: x for x in ours(apiserver, c)}
    results = {r["device"]: r for r in c["status"]["allocation"]["devices"]["results"]}
    for dev, req, n, policy in (("cpudevnuma001", "cpus", 4, "packed"),
                                ("cpudevnuma000", "more", 2, "spread-cores")):
        e = by_dev[dev]
        assert e["pool"] == "node-1" and e["shareID"] == results[dev]["shareID"]
        data = e["data"]
        assert data["request"] == req and data["policy"] == policy
        from claims import parse_list
        assert len(parse_list(data["cpus"])) == n
        assert data["numaNodes"] == ("1" if dev == "cpudevnuma001" else "0")
        assert data["sockets"] in ("0", "1")
        (cond,) = e["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "True", "Prepared")
    assert other in stored(apiserver, c)["status"]["devices"]
    assert d.metrics()['dra_cpu_claim_status_writes_total{result="written"}'] == 1
    # the write is the status subresource, a server-side apply by dra.cpu
    (w,) = [x for x in apiserver.log() if x["resource"] == "resourceclaims/status"]
    assert w["method"] == "PATCH" and "fieldManager=dra.cpu" in w["path"]
    # Unprepare removes ours, only ours
    assert kubelet.unprepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
    wait_for(lambda: ours(apiserver, c) == [], what="status.devices cleared")
    assert stored(apiserver, c)["status"]["devices"] == [other]


def test_a_restart_does_not_rewrite_what_is_right(apiserver, make_driver, kubelet):
    d = make_driver(args=ARGS).start()
    c = apiserver.put_claim(claim("web", [("cpus", "cpudevnuma000", "4")]))
    prepare(kubelet, d, c)
    wait_for(lambda: ours(apiserver, c), what="written")
    before = stored(apiserver, c)["metadata"]["resourceVersion"]
    d.kill9()
    d.start()
    kubelet.close()
    prepare(kubelet, d, c)  # the kubelet prepares again after a restart
    wait_for(lambda: d.metrics().get('dra_cpu_claim_status_writes_total{result="unchanged"}')
             == 1, what="seen as unchanged")
    assert status_writes(apiserver) == 1
    assert stored(apiserver, c)["metadata"]["resourceVersion"] == before


def test_a_failing_status_write_never_fails_prepare(apiserver, make_driver, kubelet):
    d = make_driver(args=ARGS).start()
    apiserver.add_fault(action="error", code=500, resource="resourceclaims/status")
    c = apiserver.put_claim(claim("db", [("cpus", "cpudevnuma000", "2")]))
    prepare(kubelet, d, c)
    wait_for(lambda: d.metrics().get('dra_cpu_claim_status_writes_total{result="failed"}') == 1,
             timeout=30, what="given up")
    assert status_writes(apiserver) == 5  # bounded: five tries with backoff
    assert "event=claim_status_write_failed" in d.log()
    ts = [x["time"] for x in apiserver.log() if x["resource"] == "resourceclaims/status"]
    assert all(b - a >= 0.2 for a, b in zip(ts, ts[1:]))  # backed off between tries


def install_rules(path=os.path.join(ROOT, "deploy", "install.yaml")):
    with open(path) as f:
        docs = [x for x in yaml.safe_load_all(f) if x]
    (role,) = [x for x in docs if x["kind"] == "ClusterRole"]
    return role["rules"]


@pytest.mark.parametrize("bound", ["node-1", None])
def test_the_shipped_rbac_is_enough_and_scoped_to_this_node(apiserver, make_driver, kubelet,
                                                          bound):
    """The ClusterRole of deploy/install.yaml, enforced: a token bound to
    this node may write status.devices (associated-node:patch), a token
    bound to no node may not, and a refusal never fails the Prepare."""
    apiserver.set_rbac(install_rules(), node=bound)
    d = make_driver(args=ARGS + ["--events-series-interval", "1"]).start()
    d.wait_ready()
    c = apiserver.put_claim(claim("db", [("cpus", "cpudevnuma000", "2")]))
    prepare(kubelet, d, c)
    bad = apiserver.put_claim(claim("bad", [("cpus", "cpudevnuma099", "2")]))
    assert kubelet.prepare(d.dra_sock, [ref(bad)]).claims[bad["metadata"]["uid"]].error
    wait_for(lambda: apiserver.events(), what="the event (create is granted)")
    if bound:
        wait_for(lambda: ours(apiserver, c), what="status written")
    else:
        wait_for(lambda: d.metrics().get(
            'dra_cpu_claim_status_writes_total{result="failed"}') == 1, what="refused")
        (w,) = [x for x in apiserver.log() if x["resource"] == "resourceclaims/status"]
        assert w["code"] == 403 and ours(apiserver, c) == []
    assert all(x["code"] != 403 for x in apiserver.log()
               if x["resource"] != "resourceclaims/status")

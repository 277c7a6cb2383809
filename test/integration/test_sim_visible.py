"""The API-server simulator's rules for what dra-cpu shows users, checked
directly (no driver): Events create and patch, the ResourceClaim status
subresource written by server-side apply, and the RBAC check. Each rule is
the kube-apiserver's (test/sim/visible.py names them); each answer here is
what the real server answers."""

import json

import pytest

from claims import claim

EV = "/apis/events.k8s.io/v1/namespaces/default/events"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def event(**kw):
    e = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
         "metadata": {"name": "db.1", "namespace": "default"},
         "eventTime": "2026-11-27T10:00:00.000000Z", "reportingController": "dra.cpu",
         "reportingInstance": "dra-cpu-node-1", "action": "Prepare", "reason": "PrepareRefused",
         "type": "Warning", "note": "why",
         "regarding": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "namespace": "default", "name": "db", "uid": "u1"}}
    e.update(kw)
    return e


@pytest.mark.parametrize("change,field", [
    ({"reportingController": ""}, "reportingController"),
    ({"reportingController": "Dra Cpu"}, "reportingController"),
    ({"reportingInstance": "x" * 129}, "reportingInstance"),
    ({"reason": "R" * 129}, "reason"),
    ({"action": ""}, "action"),
    ({"note": "n" * 1025}, "message"),
    ({"type": "Error"}, "type"),
    ({"eventTime": None}, "eventTime"),
    ({"series": {"count": 1, "lastObservedTime": "2026-11-27T10:00:00.000000Z"}}, "series.count"),
    ({"regarding": {"kind": "Pod", "namespace": "other", "name": "p"}}, "involvedObject.namespace"),
    ({"deprecatedCount": 3}, "count"),
])
def test_an_invalid_event_is_422_naming_the_field(apiserver, kube, change, field):
    e = event(**change)
    e = {k: v for k, v in e.items() if v is not None}
    r = kube.post(EV, e)
    assert r.status == 422, r
    assert field in [c["field"] for c in r.json["details"]["causes"]], r.json


def test_event_create_patch_and_their_errors(apiserver, kube):
    r = kube.post(EV, event())
    assert r.status == 201 and r.json["metadata"]["uid"]
    assert kube.post(EV, event()).status == 409  # the name is taken
    assert kube.post(EV.replace("default", "other"), event()).status == 400  # namespace
    series = {"series": {"count": 2, "lastObservedTime": "2026-11-27T10:00:05.000000Z"}}
    r = kube.request("PATCH", EV + "/db.1", json.dumps(series).encode(), headers=MERGE)
    assert r.status == 200 and r.json["series"]["count"] == 2
    r = kube.request("PATCH", EV + "/db.1", json.dumps({"reason": "Other"}).encode(),
                     headers=MERGE)
    assert r.status == 422 and "field is immutable" in r.json["message"]
    r = kube.request("PATCH", EV + "/db.1", json.dumps({"series": {"count": 1}}).encode(),
                     headers=MERGE)
    assert r.status == 422
    r = kube.request("PATCH", EV + "/nope", json.dumps(series).encode(), headers=MERGE)
    assert r.status == 404
    assert [e["metadata"]["name"] for e in apiserver.events()] == ["db.1"]


def status_path(name):
    return "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/%s/status" % name


def entry(dev="cpudevnuma000", **kw):
    e = {"driver": "dra.cpu", "pool": "node-1", "device": dev,
         "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared", "message": "",
                         "lastTransitionTime": "2026-11-27T10:00:00Z"}],
         "data": {"cpus": "1-2"}}
    e.update(kw)
    return e


def apply(kube, c, devices, manager="dra.cpu", force=True, uid=None, ctype=APPLY):
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": c["metadata"]["name"], "namespace": "default",
                         "uid": uid or c["metadata"]["uid"]},
            "status": {"devices": devices}}
    params = {"fieldManager": manager} if manager else {}
    if force:
        params["force"] = "true"
    return kube.request("PATCH", status_path(c["metadata"]["name"]), json.dumps(body).encode(),
                        headers=ctype, params=params)


@pytest.fixture
def db(apiserver):
    c = claim("db", [("cpus", "cpudevnuma000", None)])
    return apiserver.put_claim(c)


def test_claim_status_apply_and_the_servers_checks(apiserver, kube, db):
    assert apply(kube, db, [entry()]).status == 200
    assert apply(kube, db, [entry()], ctype=MERGE).status == 415  # only apply is simulated
    assert apply(kube, db, [entry()], manager=None).status == 422  # apply needs a manager
    assert apply(kube, db, [entry("cpudevnuma001")]).status == 422  # not allocated
    many = [dict(entry()["conditions"][0], type="T%d" % i) for i in range(9)]
    assert apply(kube, db, [entry(conditions=many)]).status == 422  # at most 8
    assert apply(kube, db, [entry(data={"x": "y" * 10240})]).status == 422  # data <= 10 KiB
    bad = [dict(entry()["conditions"][0], reason="not ok")]
    assert apply(kube, db, [entry(conditions=bad)]).status == 422
    r = apply(kube, db, [entry()], uid="00000000-0000-4000-8000-000000000000")
    assert r.status == 409 and "Precondition failed" in r.json["message"]
    # another manager may not take our entry without force
    r = apply(kube, db, [entry(data={"cpus": "9"})], manager="other", force=False)
    assert r.status == 409 and 'conflict with "dra.cpu"' in r.json["message"]
    # an apply without the entries removes them
    r = apply(kube, db, [])
    assert r.status == 200 and "devices" not in r.json["status"]


def test_claim_status_dropped_with_the_gate_off(apiserver, kube, db):
    apiserver.set_gates(DRAResourceClaimDeviceStatus=False)
    r = apply(kube, db, [entry()])
    assert r.status == 200 and "devices" not in r.json["status"]


RULES = [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"],
          "verbs": ["patch"]},
         {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
          "resourceNames": ["dra.cpu"], "verbs": ["associated-node:patch"]}]


def test_rbac_needs_the_status_subresource_and_the_per_driver_verb(apiserver, kube, db):
    apiserver.set_rbac(RULES[:1], node="node-1")
    r = apply(kube, db, [entry()])
    assert r.status == 403 and 'resource "resourceclaims/driver"' in r.json["message"]
    apiserver.set_rbac(RULES, node="node-2")  # a token of another node
    assert apply(kube, db, [entry()]).status == 403
    apiserver.set_rbac(RULES, node="node-1")
    assert apply(kube, db, [entry()]).status == 200
    assert kube.get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/db").status == 403
    assert kube.post(EV, event()).status == 403
    apiserver.set_gates(DRAResourceClaimGranularStatusAuthorization=False)  # 1.34, 1.35
    apiserver.set_rbac(RULES[:1], node=None)
    assert apply(kube, db, [entry(data={"cpus": "3"})]).status == 200

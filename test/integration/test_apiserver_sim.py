"""The kube-apiserver simulator is strict: it answers like the real server.

Each test drives the simulator with a plain http.client-based client
(sim.apiserver.SimClient) and checks status codes, Status bodies, watch
streams and counters against the kube-apiserver's documented behaviour
(resource.k8s.io/v1 validation, watch and Status conventions).
"""

import copy
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request

import pytest

from sim.apiserver import SimClient, V, canonical_quantity

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def make_slice(node="node-1", driver="dra.cpu", name=None, generate=None, devices=1, labels=None):
    obj = V.sample_slice()
    obj["metadata"] = {}
    if name:
        obj["metadata"]["name"] = name
    if generate or not name:
        obj["metadata"]["generateName"] = generate or "00000-%s-%s-" % (driver, node)
    if labels:
        obj["metadata"]["labels"] = labels
    obj["spec"]["driver"] = driver
    obj["spec"]["nodeName"] = node
    obj["spec"]["pool"]["name"] = node
    dev = obj["spec"]["devices"][0]
    obj["spec"]["devices"] = [dict(copy.deepcopy(dev), name="cpudevnuma%03d" % i) for i in range(devices)]
    return obj


def create(kube, obj, code=201):
    r = kube.post(SLICES, obj)
    assert r.status == code, r
    return r.json


def assert_status(r, code, reason):
    assert r.status == code, r
    st = r.json
    assert st["kind"] == "Status" and st["apiVersion"] == "v1"
    assert st["status"] == "Failure" and st["code"] == code and st["reason"] == reason, st
    return st


# ------------------------------------------------------------------ auth, TLS


def test_requests_without_a_valid_bearer_token_get_401_status(apiserver, kube):
    assert_status(kube.get(SLICES, token=False), 401, "Unauthorized")
    assert_status(kube.get(SLICES, token="wrong"), 401, "Unauthorized")
    assert_status(kube.get(SLICES, token=False, headers={"Authorization": "Basic " + apiserver.token}),
                  401, "Unauthorized")
    assert kube.get(SLICES).status == 200


def test_rotated_token_replaces_the_old_one_and_rewrites_the_token_file(apiserver, kube):
    old = apiserver.token
    new = apiserver.rotate_token()["token"]
    assert_status(kube.get(SLICES, token=old), 401, "Unauthorized")
    assert kube.get(SLICES, token=new).status == 200
    assert open(apiserver.token_file).read() == new
    apiserver.add_token(old)  # grace period: both valid
    assert kube.get(SLICES, token=old).status == 200


def test_tls_verification_needs_the_test_ca(apiserver):
    with pytest.raises(ssl.SSLError):
        SimClient(apiserver.url, ca=None, token=apiserver.token).get(SLICES)
    ctx = ssl.create_default_context(cafile=apiserver.ca)
    with socket.create_connection(("127.0.0.1", apiserver.port)) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:  # SAN has localhost too
            assert tls.selected_alpn_protocol() in (None, "http/1.1")


def test_keep_alive_reuses_one_connection(apiserver, kube):
    for _ in range(3):
        assert kube.get(SLICES).status == 200
    sock = kube.conn.sock
    assert kube.get(SLICES).status == 200 and kube.conn.sock is sock


# ------------------------------------------------------------------- create


def test_create_with_generate_name_appends_five_random_chars(kube):
    out = create(kube, make_slice())
    meta = out["metadata"]
    assert re.fullmatch(r"00000-dra\.cpu-node-1-[bcdfghjklmnpqrstvwxz2456789]{5}", meta["name"])
    assert meta["generation"] == 1
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert int(meta["resourceVersion"]) > 0 and meta["creationTimestamp"].endswith("Z")
    assert kube.get(SLICES + "/" + meta["name"]).json == out


def test_generate_name_prefix_is_cut_to_58_chars(kube):
    obj = make_slice(generate="p" * 70 + "-")
    name = create(kube, obj)["metadata"]["name"]
    assert len(name) == 63 and name.startswith("p" * 58)


def test_create_of_an_existing_name_is_409_already_exists(apiserver, kube):
    create(kube, make_slice(name="s1"))
    st = assert_status(kube.post(SLICES, make_slice(name="s1")), 409, "AlreadyExists")
    assert st["details"] == {"name": "s1", "group": "resource.k8s.io", "kind": "resourceslices"}
    apiserver.queue_name_suffixes(["abcde", "abcde"])
    create(kube, make_slice(generate="gen-"))
    assert_status(kube.post(SLICES, make_slice(generate="gen-")), 409, "AlreadyExists")


def test_server_owned_metadata_from_the_client_is_ignored_on_create(kube):
    obj = make_slice(name="s1")
    obj["metadata"].update(uid="u", resourceVersion="5", generation=7, creationTimestamp="2000-01-01T00:00:00Z")
    meta = create(kube, obj)["metadata"]
    assert meta["uid"] != "u" and meta["resourceVersion"] != "5" and meta["generation"] == 1


def test_dry_run_validates_but_does_not_persist(apiserver, kube):
    r = kube.post(SLICES + "?dryRun=All", make_slice(name="dry"))
    assert r.status == 201
    assert kube.get(SLICES + "/dry").status == 404 and apiserver.slices() == []


# ------------------------------------------------------------------- update


def test_update_with_a_stale_resource_version_is_409_conflict(kube):
    v1 = create(kube, make_slice(name="s1"))
    v2 = copy.deepcopy(v1)
    v2["spec"]["pool"]["generation"] = 2
    r = kube.put(SLICES + "/s1", v2)
    assert r.status == 200 and r.json["metadata"]["resourceVersion"] != v1["metadata"]["resourceVersion"]
    v1["spec"]["pool"]["generation"] = 3
    st = assert_status(kube.put(SLICES + "/s1", v1), 409, "Conflict")
    assert "the object has been modified" in st["message"]
    assert st["details"]["name"] == "s1"


def test_generation_counts_spec_changes_only(kube):
    v1 = create(kube, make_slice(name="s1"))
    v1["metadata"]["labels"] = {"a": "b"}
    v2 = kube.put(SLICES + "/s1", v1).json
    assert v2["metadata"]["generation"] == 1 and v2["metadata"]["labels"] == {"a": "b"}
    assert int(v2["metadata"]["resourceVersion"]) > int(v1["metadata"]["resourceVersion"])
    v2["spec"]["devices"][0]["attributes"]["dra.cpu/numCPUs"] = {"int": 8}
    v3 = kube.put(SLICES + "/s1", v2).json
    assert v3["metadata"]["generation"] == 2


def test_identical_update_writes_nothing(apiserver, kube):
    v1 = create(kube, make_slice(name="s1"))
    r = kube.put(SLICES + "/s1", v1)
    assert r.status == 200 and r.json["metadata"]["resourceVersion"] == v1["metadata"]["resourceVersion"]
    assert apiserver.resource_version == v1["metadata"]["resourceVersion"]
    assert apiserver.count("update") == 1  # still counted as a request


def test_update_without_resource_version_is_unconditional(kube):
    v1 = create(kube, make_slice(name="s1"))
    del v1["metadata"]["resourceVersion"]
    v1["spec"]["pool"]["generation"] = 5
    assert kube.put(SLICES + "/s1", v1).status == 200


def test_update_of_immutable_fields_is_422(kube):
    v1 = create(kube, make_slice(name="s1"))
    v1["spec"]["driver"] = "other.example.com"
    v1["spec"]["pool"]["name"] = "other"
    st = assert_status(kube.put(SLICES + "/s1", v1), 422, "Invalid")
    fields = {c["field"] for c in st["details"]["causes"]}
    assert {"spec.driver", "spec.pool.name"} <= fields
    assert all(c["message"] == "field is immutable" for c in st["details"]["causes"])


def test_update_of_a_missing_slice_is_404_and_name_mismatch_400(kube):
    obj = make_slice(name="ghost")
    assert_status(kube.put(SLICES + "/ghost", obj), 404, "NotFound")
    create(kube, make_slice(name="s1"))
    assert_status(kube.put(SLICES + "/s1", obj), 400, "BadRequest")


# ------------------------------------------------------------------- delete


def test_delete_preconditions_must_match(kube):
    v1 = create(kube, make_slice(name="s1"))
    meta = v1["metadata"]
    pre = lambda uid, rv: {"kind": "DeleteOptions", "apiVersion": "v1",  # noqa: E731
                           "preconditions": {"uid": uid, "resourceVersion": rv}}
    st = assert_status(kube.delete(SLICES + "/s1", pre("0000", meta["resourceVersion"])), 409, "Conflict")
    assert "UID in precondition" in st["message"]
    st = assert_status(kube.delete(SLICES + "/s1", pre(meta["uid"], "1")), 409, "Conflict")
    assert "ResourceVersion in precondition" in st["message"]
    r = kube.delete(SLICES + "/s1", pre(meta["uid"], meta["resourceVersion"]))
    assert r.status == 200 and r.json["metadata"]["uid"] == meta["uid"]
    assert_status(kube.delete(SLICES + "/s1"), 404, "NotFound")


def test_delete_collection_honours_field_selectors(apiserver, kube):
    create(kube, make_slice(node="n1"))
    create(kube, make_slice(node="n2"))
    r = kube.delete(SLICES + "?fieldSelector=spec.nodeName%3Dn1")
    assert r.status == 200 and len(r.json["items"]) == 1
    assert [s["spec"]["nodeName"] for s in apiserver.slices()] == ["n2"]


# -------------------------------------------------------------- validation


def _mutate(f):
    obj = make_slice(name="bad")
    f(obj)
    return obj


INVALID = [
    ("129 devices", lambda o: o["spec"].__setitem__("devices", make_slice(devices=129)["spec"]["devices"]),
     "spec.devices", "FieldValueTooMany"),
    ("device name not a DNS label", lambda o: o["spec"]["devices"][0].__setitem__("name", "CPU_0"),
     "spec.devices[0].name", "FieldValueInvalid"),
    ("duplicate device names", lambda o: o["spec"]["devices"].append(copy.deepcopy(o["spec"]["devices"][0])),
     "spec.devices[1]", "FieldValueDuplicate"),
    ("attribute key with two slashes", lambda o: o["spec"]["devices"][0]["attributes"].__setitem__(
        "a/b/c", {"int": 1}), "spec.devices[0].attributes[a/b/c]", "FieldValueInvalid"),
    ("no node selection", lambda o: o["spec"].pop("nodeName"), "spec", "FieldValueRequired"),
    ("requestPolicy without allowMultipleAllocations",
     lambda o: o["spec"]["devices"][0].pop("allowMultipleAllocations"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy", "FieldValueForbidden"),
    ("resourceSliceCount 0", lambda o: o["spec"]["pool"].__setitem__("resourceSliceCount", 0),
     "spec.pool.resourceSliceCount", "FieldValueInvalid"),
    ("driver missing", lambda o: o["spec"].pop("driver"), "spec.driver", "FieldValueRequired"),
    ("slice name invalid", lambda o: o["metadata"].__setitem__("name", "Bad_Name"),
     "metadata.name", "FieldValueInvalid"),
]


@pytest.mark.parametrize("mutate,field,reason", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_slices_are_422_with_causes(apiserver, kube, mutate, field, reason):
    obj = _mutate(mutate)
    st = assert_status(kube.post(SLICES, obj), 422, "Invalid")
    assert st["message"].startswith('ResourceSlice.resource.k8s.io "%s" is invalid: ' % obj["metadata"]["name"])
    assert st["details"]["kind"] == "ResourceSlice" and st["details"]["group"] == "resource.k8s.io"
    assert {"field": field, "reason": reason} in [{"field": c["field"], "reason": c["reason"]}
                                                  for c in st["details"]["causes"]], st
    assert apiserver.slices() == []


def test_128_devices_are_accepted(kube):
    create(kube, make_slice(devices=128))


def test_decode_errors_are_400(kube):
    bad_int = make_slice(name="x")
    bad_int["spec"]["devices"][0]["attributes"]["dra.cpu/n"] = {"int": "1"}
    bad_q = make_slice(name="x")
    bad_q["spec"]["devices"][0]["capacity"]["dra.cpu/cpu"]["value"] = "64 cores"
    wrong_kind = make_slice(name="x")
    wrong_kind["kind"] = "DeviceClass"
    for obj in (bad_int, bad_q, wrong_kind):
        assert_status(kube.post(SLICES, obj), 400, "BadRequest")
    assert_status(kube.post(SLICES, b"{not json"), 400, "BadRequest")
    r = kube.post(SLICES, json.dumps(make_slice()).encode(), headers={"Content-Type": "application/yaml"})
    assert_status(r, 415, "UnsupportedMediaType")


def test_unknown_fields_are_dropped_with_a_warning(kube):
    obj = make_slice(name="s1")
    obj["spec"]["devices"][0]["numaNode"] = 0
    obj["spec"]["color"] = "blue"
    r = kube.post(SLICES, obj)
    assert r.status == 201
    assert "numaNode" not in r.json["spec"]["devices"][0] and "color" not in r.json["spec"]
    assert sorted(r.warnings()) == ['299 - "unknown field \\"spec.color\\""',
                                    '299 - "unknown field \\"spec.devices[0].numaNode\\""']
    obj["metadata"]["name"] = "s2"
    st = assert_status(kube.post(SLICES + "?fieldValidation=Strict", obj), 400, "BadRequest")
    assert 'unknown field "spec.devices[0].numaNode"' in st["message"]
    obj["metadata"]["name"] = "s3"
    assert kube.post(SLICES + "?fieldValidation=Ignore", obj).warnings() == []


def test_fields_of_disabled_gates_are_dropped_silently(apiserver, kube):
    apiserver.set_gates(DRAConsumableCapacity=False)
    obj = make_slice(name="s1")
    r = kube.post(SLICES, obj)
    # requestPolicy and allowMultipleAllocations vanish without a warning
    assert r.status == 201 and r.warnings() == []
    dev = r.json["spec"]["devices"][0]
    assert "allowMultipleAllocations" not in dev and "requestPolicy" not in dev["capacity"]["dra.cpu/cpu"]
    # list-type attributes are alpha (off) in 1.36: the attribute goes whole,
    # scalar attributes stay
    obj = make_slice(name="s2")
    obj["spec"]["devices"][0]["attributes"]["dra.cpu/cpus"] = {"ints": [0, 1]}
    r = kube.post(SLICES, obj)
    assert r.status == 201 and r.warnings() == []
    attrs = r.json["spec"]["devices"][0]["attributes"]
    assert "dra.cpu/cpus" not in attrs and attrs


def test_quantities_come_back_canonical(kube):
    obj = make_slice(name="s1")
    cap = obj["spec"]["devices"][0]["capacity"]
    cap["dra.cpu/cpu"]["value"] = "1000"
    cap["dra.cpu/cpu"]["requestPolicy"] = {"default": "0.5", "validRange": {"min": "0.5", "step": "0.5"}}
    cap["dra.cpu/mem"] = {"value": "1.5Gi"}
    out = create(kube, obj)["spec"]["devices"][0]["capacity"]
    assert out["dra.cpu/cpu"]["value"] == "1k" and out["dra.cpu/mem"]["value"] == "1536Mi"
    assert out["dra.cpu/cpu"]["requestPolicy"]["default"] == "500m"
    assert [canonical_quantity(q) for q in ("1024", "1Ki", 64, "1e3", "0.1m")] == ["1024", "1Ki", "64", "1e3", "100u"]


# ---------------------------------------------------------------------- list


def test_list_field_and_label_selectors(kube):
    create(kube, make_slice(node="n1", labels={"team": "a"}))
    create(kube, make_slice(node="n2", labels={"team": "b"}))
    create(kube, make_slice(node="n1", driver="other.example.com"))

    def names(q):
        r = kube.get(SLICES + "?" + q)
        assert r.status == 200, r
        assert all("kind" not in i for i in r.json["items"])  # typed list items carry no TypeMeta
        return sorted((i["spec"]["nodeName"], i["spec"]["driver"]) for i in r.json["items"])

    assert names("fieldSelector=spec.nodeName%3Dn1") == [("n1", "dra.cpu"), ("n1", "other.example.com")]
    assert names("fieldSelector=spec.driver%3Ddra.cpu,spec.nodeName%3Dn1") == [("n1", "dra.cpu")]
    assert names("fieldSelector=spec.nodeName!%3Dn1") == [("n2", "dra.cpu")]
    assert names("fieldSelector=spec.nodeName%3D") == []
    assert names("labelSelector=team%3Da") == [("n1", "dra.cpu")]
    assert names("labelSelector=team+in+(a,b),team!%3Db") == [("n1", "dra.cpu")]
    assert names("labelSelector=!team") == [("n1", "other.example.com")]
    st = assert_status(kube.get(SLICES + "?fieldSelector=spec.pool.name%3Dn1"), 400, "BadRequest")
    assert "field label not supported" in st["message"]


def test_list_limit_and_continue_are_consistent(apiserver, kube):
    for i in range(5):
        create(kube, make_slice(name="s%d" % i))
    r1 = kube.get(SLICES + "?limit=2").json
    assert [i["metadata"]["name"] for i in r1["items"]] == ["s0", "s1"]
    assert r1["metadata"]["remainingItemCount"] == 3
    kube.delete(SLICES + "/s3")  # later pages still show the snapshot of the first
    r2 = kube.get(SLICES + "?limit=10&continue=" + r1["metadata"]["continue"]).json
    assert [i["metadata"]["name"] for i in r2["items"]] == ["s2", "s3", "s4"]
    assert r2["metadata"]["resourceVersion"] == r1["metadata"]["resourceVersion"]
    r3 = kube.get(SLICES + "?limit=1").json
    create(kube, make_slice(name="s9"))
    apiserver.compact()  # like etcd: the token's revision is now below the compacted one
    assert_status(kube.get(SLICES + "?continue=" + r3["metadata"]["continue"]), 410, "Expired")


def test_list_options_are_validated(kube):
    assert_status(kube.get(SLICES + "?resourceVersionMatch=Exact"), 422, "Invalid")
    assert_status(kube.get(SLICES + "?resourceVersion=0&resourceVersionMatch=Exact"), 422, "Invalid")
    assert_status(kube.get(SLICES + "?watch=1&resourceVersionMatch=NotOlderThan"), 422, "Invalid")
    assert_status(kube.get(SLICES + "?resourceVersion=abc"), 400, "BadRequest")


# --------------------------------------------------------------------- watch


def _events(w, n):
    out = []
    for _ in range(n):
        ev = w.next()
        assert ev is not None, "stream ended after %s" % out
        out.append(ev)
    return out


def test_watch_delivers_added_modified_deleted_in_order(apiserver, kube):
    rv0 = kube.get(SLICES).json["metadata"]["resourceVersion"]
    with kube.watch(SLICES, {"resourceVersion": rv0}) as w:
        assert w.status == 200 and w.resp.getheader("Transfer-Encoding") == "chunked"
        v1 = create(kube, make_slice(name="s1"))
        v1["spec"]["pool"]["generation"] = 2
        v2 = kube.put(SLICES + "/s1", v1).json
        kube.delete(SLICES + "/s1")
        evs = _events(w, 3)
    assert [e["type"] for e in evs] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3 and rvs[0] > int(rv0)
    assert evs[1]["object"] == v2
    assert evs[2]["object"]["spec"] == v2["spec"] and evs[2]["object"]["kind"] == "ResourceSlice"


def test_watch_without_resource_version_starts_with_synthetic_added(kube):
    create(kube, make_slice(name="s1"))
    create(kube, make_slice(name="s2"))
    with kube.watch(SLICES) as w:
        evs = _events(w, 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "s1"), ("ADDED", "s2")]


def test_watch_from_an_old_rv_replays_history_and_honours_selectors(kube):
    rv0 = kube.get(SLICES).json["metadata"]["resourceVersion"]
    create(kube, make_slice(node="n1", name="a"))
    create(kube, make_slice(node="n2", name="b"))
    create(kube, make_slice(node="n1", name="c"))
    with kube.watch(SLICES, {"resourceVersion": rv0, "fieldSelector": "spec.nodeName=n1"}) as w:
        evs = _events(w, 2)
    assert [e["object"]["metadata"]["name"] for e in evs] == ["a", "c"]


def test_watch_bookmarks_carry_only_the_resource_version(apiserver, kube):
    apiserver.set_bookmark_interval(0.05)
    rv = create(kube, make_slice(name="s1"))["metadata"]["resourceVersion"]
    with kube.watch(SLICES, {"resourceVersion": rv, "allowWatchBookmarks": "true"}) as w:
        ev = w.next()
    assert ev == {"type": "BOOKMARK", "object": {"kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
                                                 "metadata": {"resourceVersion": rv}}}
    with kube.watch(SLICES, {"resourceVersion": rv, "timeoutSeconds": "1"}) as w:
        assert list(w) == []  # no bookmarks unless asked for


def test_watch_from_a_compacted_rv_gets_410_expired_error_event(apiserver, kube):
    rv0 = kube.get(SLICES).json["metadata"]["resourceVersion"]
    create(kube, make_slice(name="s1"))
    apiserver.compact()
    with kube.watch(SLICES, {"resourceVersion": rv0}) as w:
        assert w.status == 200
        evs = list(w)
    assert len(evs) == 1 and evs[0]["type"] == "ERROR"
    st = evs[0]["object"]
    assert (st["kind"], st["code"], st["reason"]) == ("Status", 410, "Expired")
    assert st["message"].startswith("too old resource version: %s" % rv0)
    # a fresh list gives a resourceVersion that can be watched again
    rv = kube.get(SLICES).json["metadata"]["resourceVersion"]
    with kube.watch(SLICES, {"resourceVersion": rv, "timeoutSeconds": "1"}) as w:
        assert list(w) == []


def test_history_limit_compacts_old_events(tmp_path, sim_certs):
    from sim.apiserver import ApiServer
    with ApiServer(str(tmp_path), certs=sim_certs, history_limit=2) as s:
        c = SimClient.for_server(s)
        rv0 = c.get(SLICES).json["metadata"]["resourceVersion"]
        for i in range(3):
            create(c, make_slice(name="s%d" % i))
        with c.watch(SLICES, {"resourceVersion": rv0}) as w:
            assert w.next()["object"]["code"] == 410


def test_expire_watches_ends_open_watches_with_410(apiserver, kube):
    rv = kube.get(SLICES).json["metadata"]["resourceVersion"]
    with kube.watch(SLICES, {"resourceVersion": rv}) as w:
        apiserver.wait_for(lambda: apiserver.open_watches() == 1, what="watch open")
        apiserver.expire_watches()
        evs = list(w)
    assert [(e["type"], e["object"]["code"]) for e in evs] == [("ERROR", 410)]
    assert apiserver.open_watches() == 0
    with kube.watch(SLICES, {"resourceVersion": apiserver.resource_version}) as w:
        apiserver.wait_for(lambda: apiserver.open_watches() == 1, what="watch open")
        apiserver.expire_watches(reason="Gone")
        assert w.next()["object"]["reason"] == "Gone"


def test_watch_timeout_seconds_ends_the_stream_cleanly(kube):
    t0 = time.monotonic()
    with kube.watch(SLICES, {"timeoutSeconds": "1", "allowWatchBookmarks": "true"}) as w:
        evs = list(w)
    assert 0.9 < time.monotonic() - t0 < 3
    assert evs and evs[-1]["type"] == "BOOKMARK"  # a bookmark shortly before the end


def test_label_change_moves_objects_in_and_out_of_a_watch(kube):
    v1 = create(kube, make_slice(name="s1"))
    rv = v1["metadata"]["resourceVersion"]
    with kube.watch(SLICES, {"resourceVersion": rv, "labelSelector": "pick"}) as w:
        v1["metadata"]["labels"] = {"pick": "yes"}
        v2 = kube.put(SLICES + "/s1", v1).json
        del v2["metadata"]["labels"]
        kube.put(SLICES + "/s1", v2)
        assert [e["type"] for e in _events(w, 2)] == ["ADDED", "DELETED"]


def test_send_initial_events_ends_with_an_annotated_bookmark(kube):
    create(kube, make_slice(name="s1"))
    q = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"}
    with kube.watch(SLICES, q) as w:
        evs = _events(w, 2)
    assert evs[0]["type"] == "ADDED"
    assert evs[1]["type"] == "BOOKMARK"
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_wipe_node_deletes_its_slices_like_a_kubelet_restart(apiserver, kube):
    create(kube, make_slice(node="n1", name="a"))
    create(kube, make_slice(node="n2", name="b"))
    rv = kube.get(SLICES).json["metadata"]["resourceVersion"]
    with kube.watch(SLICES, {"resourceVersion": rv}) as w:
        assert apiserver.wipe_node("n1") == {"deleted": 1}
        ev = w.next()
    assert ev["type"] == "DELETED" and ev["object"]["metadata"]["name"] == "a"
    assert [s["metadata"]["name"] for s in apiserver.slices()] == ["b"]


# --------------------------------------------------------- nodes, claims, 404


def test_nodes_and_claims_can_be_read(apiserver, kube):
    apiserver.put_node("node-1", uid="11111111-2222-3333-4444-555555555555")
    r = kube.get("/api/v1/nodes/node-1")
    assert r.status == 200 and r.json["metadata"]["uid"] == "11111111-2222-3333-4444-555555555555"
    st = assert_status(kube.get("/api/v1/nodes/nope"), 404, "NotFound")
    assert st["details"] == {"name": "nope", "kind": "nodes"}
    claim = {"metadata": {"name": "c1", "namespace": "ns1"}, "spec": {"devices": {"requests": []}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "req", "driver": "dra.cpu", "pool": "node-1", "device": "cpudevnuma000",
                  "shareID": "9d2c64cb-8f0e-4f4b-9f63-6f3b8e0c3c1e", "consumedCapacity": {"dra.cpu/cpu": "4"}}]}}}}
    stored = apiserver.put_claim(claim)
    r = kube.get("/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims/c1")
    assert r.status == 200 and r.json == stored and r.json["metadata"]["uid"]
    assert_status(kube.get("/apis/resource.k8s.io/v1/namespaces/ns2/resourceclaims/c1"), 404, "NotFound")


def test_claims_keep_the_api_rules_for_reserved_for(apiserver, kube):
    import pytest
    from claims import claim as make_claim
    c = apiserver.put_claim(make_claim("c1", [("cpu", "cpudevnuma000", "1")],
                                       reserved_for=[("web-0", "u-1")]))
    c2 = apiserver.reserve_claim("default", "c1", [("web-1", "u-2")])
    assert [r["uid"] for r in c2["status"]["reservedFor"]] == ["u-1", "u-2"]
    assert int(c2["metadata"]["resourceVersion"]) > int(c["metadata"]["resourceVersion"])
    r = kube.get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1")
    assert r.json["status"]["reservedFor"][1] == {"resource": "pods", "name": "web-1", "uid": "u-2"}
    with pytest.raises(ValueError, match="Duplicate value"):
        apiserver.reserve_claim("default", "c1", [("web-2", "u-1")])
    with pytest.raises(ValueError, match="at most 256"):
        apiserver.reserve_claim("default", "c1", [("p%d" % i, "x-%d" % i) for i in range(255)])
    bad = make_claim("c2", [("cpu", "cpudevnuma000", "1")], reserved_for=[("web-0", "u-1")])
    del bad["status"]["allocation"]
    with pytest.raises(ValueError, match="allocation is not"):
        apiserver.put_claim(bad)
    bad = make_claim("c3", [("cpu", "cpudevnuma000", "1")], reserved_for=[("", "u-1")])
    with pytest.raises(ValueError, match="Required value"):
        apiserver.put_claim(bad)


def test_owned_slices_are_garbage_collected_with_their_node(apiserver, kube):
    node = apiserver.put_node("n1")
    obj = make_slice(node="n1", name="s1")
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                           "uid": node["metadata"]["uid"], "controller": True}]
    create(kube, obj)
    create(kube, make_slice(node="n1", name="s2"))
    apiserver.delete_node("n1")
    assert [s["metadata"]["name"] for s in apiserver.slices()] == ["s2"]


def test_unknown_paths_and_methods_get_status_bodies(kube):
    assert_status(kube.get("/apis/resource.k8s.io/v1/deviceclasses"), 404, "NotFound")
    assert_status(kube.get("/api/v1/pods"), 404, "NotFound")
    assert_status(kube.post("/api/v1/nodes/n1", {}), 405, "MethodNotAllowed")
    assert kube.get("/apis/resource.k8s.io/v1").json["kind"] == "APIResourceList"


# -------------------------------------------------------------------- faults


def test_error_faults_fail_the_next_n_requests(apiserver, kube):
    apiserver.add_fault(action="error", code=500, count=2, verb="list")
    assert_status(kube.get(SLICES), 500, "InternalError")
    assert_status(kube.get(SLICES), 500, "InternalError")
    assert kube.get(SLICES).status == 200
    apiserver.add_fault(action="error", code=409, count=1, verb="update", resource="resourceslices")
    v1 = create(kube, make_slice(name="s1"))
    assert_status(kube.put(SLICES + "/s1", v1), 409, "Conflict")
    assert kube.put(SLICES + "/s1", v1).status == 200
    apiserver.set_faults([{"action": "error", "code": 503, "percent": 50}])
    codes = [kube.get(SLICES).status for _ in range(40)]
    assert 5 < codes.count(503) < 35 and codes.count(200) == 40 - codes.count(503)


def test_throttle_fault_is_429_with_retry_after(apiserver, kube):
    apiserver.add_fault(action="throttle", retry_after=3, count=1, verb="write")
    assert kube.get(SLICES).status == 200  # reads are not affected
    r = kube.post(SLICES, make_slice())
    st = assert_status(r, 429, "TooManyRequests")
    assert dict(r.headers)["Retry-After"] == "3" and st["details"]["retryAfterSeconds"] == 3
    assert kube.post(SLICES, make_slice()).status == 201


def test_drop_fault_closes_the_connection_without_a_response(apiserver, kube):
    assert kube.get(SLICES).status == 200
    apiserver.add_fault(action="drop", count=1)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        SimClient.for_server(apiserver).get(SLICES)
    assert kube.get(SLICES).status == 200
    assert [e["fault"] for e in apiserver.log()] == [None, "drop", None]


def test_delay_fault_slows_answers(apiserver, kube):
    apiserver.add_fault(action="delay", seconds=0.3, count=1)
    t0 = time.monotonic()
    assert kube.get(SLICES).status == 200
    assert time.monotonic() - t0 >= 0.3


def test_down_refuses_connections_and_up_keeps_the_state(apiserver, kube):
    create(kube, make_slice(name="s1"))
    rv = kube.get(SLICES).json["metadata"]["resourceVersion"]
    w = kube.watch(SLICES, {"resourceVersion": rv})
    apiserver.wait_for(lambda: apiserver.open_watches() == 1, what="watch open")
    apiserver.down()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", apiserver.port), timeout=2)
    with pytest.raises(Exception):  # the open watch is cut, not ended cleanly
        w.resp.read()
    w.close()
    apiserver.up()
    kube.close()
    assert [i["metadata"]["name"] for i in kube.get(SLICES).json["items"]] == ["s1"]
    apiserver.down(seconds=0.3)
    time.sleep(0.05)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", apiserver.port), timeout=2)
    apiserver.wait_for(lambda: not apiserver.is_down, what="automatic up")
    assert kube.get(SLICES).status == 200


# ------------------------------------------------------------ stats, control


def test_counters_count_requests_by_verb_and_resource(apiserver, kube):
    v1 = create(kube, make_slice(name="s1"))
    kube.get(SLICES)
    kube.get(SLICES + "/s1")
    kube.put(SLICES + "/s1", v1)
    kube.get(SLICES, token=False)
    kube.delete(SLICES + "/s1")
    st = apiserver.stats()
    assert st["counts"] == {"create resourceslices": 1, "list resourceslices": 2, "get resourceslices": 1,
                            "update resourceslices": 1, "delete resourceslices": 1}
    assert st["writes"] == 3 and apiserver.writes() == 3 and st["codes"]["401"] == 1
    apiserver.reset_stats()
    kube.get(SLICES)
    assert apiserver.writes() == 0 and apiserver.count("list") == 1
    assert [(e["verb"], e["code"]) for e in apiserver.log()] == [("list", 200)]


def test_http_control_endpoints_drive_the_same_state(apiserver, kube):
    def ctl(method, name, body=None):
        req = urllib.request.Request(apiserver.url + "/_sim/" + name, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        ctx = ssl.create_default_context(cafile=apiserver.ca)
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            return json.loads(r.read())

    ctl("POST", "add_fault", {"action": "error", "code": 500, "count": 1})
    assert ctl("GET", "faults")[0]["code"] == 500
    assert kube.get(SLICES).status == 500
    ctl("POST", "put_node", {"name": "n1", "uid": "u-1"})
    assert kube.get("/api/v1/nodes/n1").json["metadata"]["uid"] == "u-1"
    tok = ctl("POST", "rotate_token", {})["token"]
    assert kube.get(SLICES).status == 401 and kube.get(SLICES, token=tok).status == 200
    assert ctl("GET", "stats")["counts"]["list resourceslices"] == 3  # 500, 401, 200: all count
    with pytest.raises(urllib.error.HTTPError):
        ctl("POST", "no_such_thing", {})


def test_standalone_process_writes_a_kubeconfig_and_serves(apiserver_process):
    p = apiserver_process
    import yaml
    cfg = yaml.safe_load(open(p.kubeconfig))
    cluster = cfg["clusters"][0]["cluster"]
    # The CA as a pod reads it: a link in the projected service-account volume.
    assert cluster["server"] == p.url
    assert cluster["certificate-authority"].endswith("/serviceaccount/ca.crt")
    assert os.path.islink(cluster["certificate-authority"])
    assert open(cluster["certificate-authority"], "rb").read() == open(p.ca, "rb").read()
    assert cfg["users"][0]["user"] == {"token": p.token}
    c = p.client()
    assert create(c, make_slice(name="s1"))["metadata"]["name"] == "s1"
    p.call("down")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(p.url.rsplit(":", 1)[1])), timeout=2)
    p.call("up")
    c.close()
    assert [s["metadata"]["name"] for s in p.get("slices")] == ["s1"]
    assert p.get("stats")["counts"]["create resourceslices"] == 1
    assert p.stop() == 0


def test_a_watch_whose_client_left_is_unregistered(apiserver, kube):
    w = kube.watch(SLICES, {"resourceVersion": apiserver.resource_version})
    apiserver.wait_for(lambda: apiserver.open_watches() == 1, what="watch open")
    w.close()
    apiserver.wait_for(lambda: apiserver.open_watches() == 0, timeout=3, what="watch gone")


@pytest.mark.skipif(not shutil.which("curl"), reason="curl not installed")
def test_curl_lists_and_watches_over_one_tls_connection(apiserver, kube):
    create(kube, make_slice(name="s1"))
    auth = ["-H", "Authorization: Bearer " + apiserver.token, "--cacert", apiserver.ca]
    r = subprocess.run(["curl", "-sS", "-v", "-N"] + auth +
                       [apiserver.url + SLICES, apiserver.url + SLICES + "?watch=1&timeoutSeconds=1"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert json.loads(lines[0])["kind"] == "ResourceSliceList"
    assert json.loads(lines[1])["type"] == "ADDED"
    assert "Re-using existing connection" in r.stderr and "server accepted http/1.1" in r.stderr

"""Device metadata in the container (KEP-5304) end to end: the real driver,
a real gRPC kubelet, claims from the API-server simulator; the CDI specs
checked against the CDI schema and the metadata against the DeviceMetadata
shape."""

import json
import os
import subprocess

import pytest

from claims import claim, ref
from conftest import ROOT

VALIDATOR = os.path.join(ROOT, "test", "sim", "k8svalidate.py")
BASE = "/var/run/kubernetes.io/dra-device-attributes"


@pytest.fixture
def driver(make_driver):
    return make_driver(args=["--no-nri", "--no-bpf", "--device-metadata"]).start()


def prepare(kubelet, d, c):
    r = kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]]
    assert r.error == ""
    return r


def meta_specs(d):
    return sorted(f for f in os.listdir(d.cdi_dir) if f.startswith("dra.cpu_metadata_"))


def test_prepare_writes_metadata_and_a_cdi_spec_per_request(apiserver, driver, kubelet,
                                                            tmp_path):
    d = driver
    c = claim("db", [("cpus", "cpudevnuma001", "10"), ("more", "cpudevnuma000", "2")])
    c["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "db-cpus"}
    c = apiserver.put_claim(c)
    uid = c["metadata"]["uid"]
    r = prepare(kubelet, d, c)
    for dev in r.devices:
        req = dev.request_names[0]
        assert list(dev.cdi_device_ids) == ["dra.k8s.io/cpu=claim-" + uid,
                                            "dra.cpu/metadata=%s_%s" % (uid, req)]
    assert meta_specs(d) == ["dra.cpu_metadata_%s_cpus.json" % uid,
                             "dra.cpu_metadata_%s_more.json" % uid]
    # every spec is a valid CDI spec
    paths = [os.path.join(d.cdi_dir, f) for f in meta_specs(d)]
    v = subprocess.run(["/usr/bin/python3", VALIDATOR, "--cdi", *paths], capture_output=True,
                       text=True, timeout=60)
    assert v.returncode == 0, v.stdout + v.stderr
    with open(paths[0]) as f:
        spec = json.load(f)
    assert spec["kind"] == "dra.cpu/metadata" and spec["cdiVersion"] == "0.5.0"
    (dev,) = spec["devices"]
    assert dev["name"] == uid + "_cpus"
    mounts = dev["containerEdits"]["mounts"]
    assert [m["containerPath"] for m in mounts] == [
        BASE + "/resourceclaims/db/cpus/dra.cpu-metadata.json",
        BASE + "/resourceclaimtemplates/db-cpus/cpus/dra.cpu-metadata.json"]
    assert all(m["options"] == ["ro", "bind"] for m in mounts)
    host = mounts[0]["hostPath"]
    assert host == os.path.join(d.kubelet_root, "plugins", "dra.cpu", "dra-device-metadata",
                                uid, "cpus", "metadata.json")
    with open(host) as f:
        text = f.read()
    assert text.endswith("}\n")
    meta = json.loads(text)
    assert meta["apiVersion"] == "metadata.resource.k8s.io/v1beta1"
    assert meta["kind"] == "DeviceMetadata"
    assert meta["metadata"] == {"name": "db", "namespace": "default", "uid": uid,
                                "generation": 1}
    assert meta["podClaimName"] == "db-cpus"
    (req,) = meta["requests"]
    assert req["name"] == "cpus"
    (mdev,) = req["devices"]
    assert (mdev["driver"], mdev["pool"], mdev["name"]) == ("dra.cpu", "node-1", "cpudevnuma001")
    # every attribute the slice carries, and the CPUs this request holds
    d.wait_ready()
    (s,) = [s for s in apiserver.slices() if s["spec"]["nodeName"] == "node-1"]
    pub = {x["name"]: x for x in s["spec"]["devices"]}["cpudevnuma001"]["attributes"]
    assert {k: v for k, v in mdev["attributes"].items()
            if k != "dra.cpu/allocatedNumCPUs"} == pub
    assert mdev["attributes"]["dra.cpu/allocatedNumCPUs"] == {"int": 10}
    u = kubelet.unprepare(d.dra_sock, [ref(c)]).claims[uid]
    assert u.error == ""
    assert meta_specs(d) == [] and d.cdi_specs() == []
    assert not os.path.exists(os.path.join(d.kubelet_root, "plugins", "dra.cpu",
                                           "dra-device-metadata", uid))


def test_metadata_survives_a_crash_and_orphans_are_swept(apiserver, make_driver, kubelet):
    d = make_driver(args=["--no-nri", "--no-bpf", "--device-metadata"]).start()
    c = apiserver.put_claim(claim("web", [("cpus", "cpudevnuma000", "4")]))
    uid = c["metadata"]["uid"]
    prepare(kubelet, d, c)
    d.kill9()
    # what a crash between writing metadata and committing a claim leaves
    orphan = "6f0c1c4e-0000-4000-8000-00000000dead"
    with open(os.path.join(d.cdi_dir, "dra.cpu_metadata_%s_cpus.json" % orphan), "w") as f:
        f.write("{}")
    os.makedirs(os.path.join(d.kubelet_root, "plugins", "dra.cpu", "dra-device-metadata",
                             orphan, "cpus"))
    d.start()
    kubelet.close()  # a new process behind the socket: new connections, as the kubelet does
    assert meta_specs(d) == ["dra.cpu_metadata_%s_cpus.json" % uid]
    assert "event=metadata_swept claims=1" in d.log()
    # the retry after the crash answers the same, metadata included
    r = prepare(kubelet, d, c)
    assert r.devices[0].cdi_device_ids[1] == "dra.cpu/metadata=%s_cpus" % uid


def test_metadata_off_by_default(apiserver, make_driver, kubelet):
    d = make_driver(args=["--no-nri", "--no-bpf"]).start()
    c = apiserver.put_claim(claim("plain", [("cpus", "cpudevnuma000", "2")]))
    r = prepare(kubelet, d, c)
    assert list(r.devices[0].cdi_device_ids) == ["dra.k8s.io/cpu=claim-" + c["metadata"]["uid"]]
    assert meta_specs(d) == []

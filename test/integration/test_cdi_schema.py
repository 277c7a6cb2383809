"""The CDI spec files the driver writes, as a container runtime reads them: they
pass the CDI project's JSON schema (test/data/cdi) and the rules that schema
leaves to CDI's own library (known cdiVersion, kind and device-name syntax,
NAME=value environment entries)."""

import json
import os
import re

import pytest

from claims import claim, ref
from sim import k8svalidate as V

# specs-go/version.go of the CDI commit the schema comes from
CDI_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0",
                "1.0.0", "1.1.0")
# CDI's name rules (pkg/parser): kind "<vendor>/<class>" of letters, digits,
# '_', '-', '.'; device names may also hold ':'
KIND_PART = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
DEVICE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
# CDI accepts any "NAME=value" with a non-empty NAME; ours carry a CPU list
ENV = re.compile(r"^[^=]+=[0-9,-]+$")


def specs(d):
    out = {}
    for name in d.cdi_specs():
        with open(os.path.join(d.cdi_dir, name)) as f:
            out[name] = json.load(f)
    return out


def check_spec(name, spec):
    assert V.cdi_errors(spec) == [], (name, spec)
    assert spec["cdiVersion"] in CDI_VERSIONS, spec
    vendor, _, cls = spec["kind"].partition("/")
    assert KIND_PART.match(vendor) and KIND_PART.match(cls), spec["kind"]
    for dev in spec["devices"]:
        assert DEVICE.match(dev["name"]), dev
        for e in dev["containerEdits"].get("env", []):
            assert isinstance(e, str) and ENV.match(e), e


@pytest.mark.parametrize("mode,results", [
    (["--cpu-device-mode", "grouped"], [("cpu", "cpudevnuma001", "10")]),
    (["--cpu-device-mode", "grouped"], [("cpu", "cpudevnuma000", "2"), ("cpu", "cpudevnuma001", "4")]),
    (["--cpu-device-mode", "individual", "--reserved-cpus", "0"],
     [("cpus", "cpudev000", None), ("cpus", "cpudev001", None)]),
], ids=["grouped", "grouped two devices", "individual"])
def test_prepared_claims_write_specs_the_cdi_schema_accepts(apiserver, make_driver, kubelet,
                                                             mode, results):
    d = make_driver(args=["--no-nri", "--no-bpf", *mode]).start()
    c = apiserver.put_claim(claim("db", results))
    r = kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]]
    assert r.error == ""
    got = specs(d)
    assert len(got) == 1, got
    for name, spec in got.items():
        check_spec(name, spec)
        ids = {"%s=%s" % (spec["kind"], dev["name"]) for dev in spec["devices"]}
        assert {i for dev in r.devices for i in dev.cdi_device_ids} <= ids


def test_the_checks_catch_a_spec_the_runtime_would_refuse():
    good = {"cdiVersion": "0.8.0", "kind": "dra.k8s.io/cpu",
            "devices": [{"name": "claim-1", "containerEdits": {"env": ["DRA_CPUSET_1=0-3"]}}]}
    check_spec("good", good)
    for bad in ({"cdiVersion": "0.8.0", "kind": "dra.k8s.io/cpu", "devices": [{"name": "x"}]},
                dict(good, cdiVersion="9.9.9"),
                dict(good, kind="dra.k8s.io"),
                dict(good, devices=[{"name": "claim-1", "containerEdits": {"env": ["=0-3"]}}])):
        with pytest.raises(AssertionError):
            check_spec("bad", bad)

"""test/sim/k8svalidate.py, the checker the simulator and the other tests trust:
the OpenAPI schema layer against both documents in test/data/api, every
ResourceSlice server rule with a failing case and its message, quantities and
names, the CDI schema, and the command line (exit 0/1/2)."""

import copy
import json
import os
import subprocess

import pytest

from conftest import ROOT
from sim import k8svalidate as V

CLI = os.path.join(ROOT, "test", "sim", "k8svalidate.py")
PYTHON = "/usr/bin/python3"
VERSIONS = sorted(V.API_DOCS)


@pytest.fixture(scope="module", params=VERSIONS)
def doc(request):
    return V.ApiDocument(V.API_DOCS[request.param])


@pytest.fixture(scope="module")
def doc136():
    return V.ApiDocument(V.API_DOCS["1.36"])


def dev(o, i=0):
    return o["spec"]["devices"][i]


def cap(o):
    return dev(o)["capacity"]["dra.cpu/cpu"]


def mutated(f):
    o = V.sample_slice()
    f(o)
    return o


def devices(n, **extra):
    def f(o):
        o["spec"]["devices"] = [dict(copy.deepcopy(dev(o)), name="cpu%03d" % i, **extra)
                                for i in range(n)]
    return f


# ------------------------------------------------------------------- schema


def test_both_documents_are_the_versions_they_claim(doc):
    spec = doc.schemas["io.k8s.api.resource.v1.ResourceSliceSpec"]["properties"]
    device = doc.schemas["io.k8s.api.resource.v1.Device"]["properties"]
    if doc.version == "1.37":
        assert "partitionTypeAttribute" in spec and "nodeAllocatableResources" in device
    else:
        assert "partitionTypeAttribute" not in spec
        assert "nodeAllocatableResourceMappings" in device


def test_sample_slice_is_valid_strict_and_with_server_rules(doc):
    o = V.sample_slice()
    name = doc.schema_name(o)
    assert name == "io.k8s.api.resource.v1.ResourceSlice"
    assert doc.errors(o, name, strict=True) == []
    assert V.slice_errors(o) == []


def test_a_1_37_field_is_unknown_to_1_36_only(doc):
    o = mutated(lambda o: o["spec"].__setitem__("partitionTypeAttribute", "dra.cpu/numaNodeID"))
    errs = doc.errors(o, doc.schema_name(o), strict=True)
    if doc.version == "1.37":
        assert errs == []
    else:
        assert errs == [("spec", "Additional properties are not allowed "
                         "('partitionTypeAttribute' was unexpected)")]
        assert doc.errors(o, doc.schema_name(o)) == []  # the default (Warn) drops it


@pytest.mark.parametrize("mutate,path,needle", [
    (lambda o: dev(o)["attributes"].__setitem__("dra.cpu/x", {"int": "1"}),
     "spec.devices[0].attributes[dra.cpu/x].int", "is not of type 'integer'"),
    (lambda o: dev(o)["attributes"].__setitem__("dra.cpu/x", {"int": 1 << 63}),
     "spec.devices[0].attributes[dra.cpu/x].int", "is not a 'int64'"),
    (lambda o: o["spec"]["pool"].__setitem__("generation", "1"),
     "spec.pool.generation", "is not of type 'integer'"),
    (lambda o: cap(o).__setitem__("value", {"n": 64}),
     "spec.devices[0].capacity[dra.cpu/cpu].value", "is not valid under any of the given schemas"),
    (lambda o: dev(o).pop("name"), "spec.devices[0]", "'name' is a required property"),
    (lambda o: dev(o).__setitem__("taints", [{"key": "k", "effect": "NoSchedule",
                                              "timeAdded": "yesterday"}]),
     "spec.devices[0].taints[0].timeAdded", "is not a 'date-time'"),
])
def test_schema_rejects_wrong_types_and_missing_keys(doc, mutate, path, needle):
    o = mutated(mutate)
    errs = doc.errors(o, doc.schema_name(o))
    assert [p for p, _ in errs] == [path], errs
    assert needle in errs[0][1]


def test_integer_formats_are_checked(doc):
    status = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
    assert doc.errors({"code": 422}, status) == []
    assert doc.errors({"code": 1 << 31}, status) == [("code", "2147483648 is not a 'int32'")]
    assert doc.errors({"code": -(1 << 31)}, status) == []
    opts = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
    assert doc.errors({"gracePeriodSeconds": (1 << 63) - 1}, opts) == []
    assert [p for p, _ in doc.errors({"gracePeriodSeconds": 1 << 63}, opts)] == ["gracePeriodSeconds"]


def test_nulls_are_unset_as_the_apiserver_decodes_them(doc):
    o = mutated(lambda o: o["spec"].__setitem__("nodeSelector", None))
    name = doc.schema_name(o)
    assert doc.errors(V.strip_nulls(o), name) == []
    assert [p for p, _ in doc.errors(o, name)] == ["spec.nodeSelector"]


def test_unknown_fields_fail_only_in_strict_mode(doc):
    o = mutated(lambda o: dev(o).__setitem__("numaNode", 0))
    name = doc.schema_name(o)
    assert doc.errors(o, name) == []
    assert doc.errors(o, name, strict=True) == [
        ("spec.devices[0]", "Additional properties are not allowed ('numaNode' was unexpected)")]


def test_raw_extension_stays_open_in_strict_mode(doc):
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}],
                                  "config": [{"opaque": {"driver": "dra.cpu", "parameters": {
                                      "apiVersion": "dra.cpu/v1alpha1", "anything": [1]}}}]}}}
    assert doc.errors(claim, doc.schema_name(claim), strict=True) == []


def test_schema_name_lookup(doc):
    assert doc.schema_name({}, "DeviceClass") == "io.k8s.api.resource.v1.DeviceClass"
    assert doc.schema_name({}, "io.k8s.api.core.v1.NodeSelector") == \
        "io.k8s.api.core.v1.NodeSelector"
    for obj, kind in (({"kind": "ResourceSlice"}, None),
                      ({"apiVersion": "v1", "kind": "Pod"}, None),
                      ({}, "Pod")):
        with pytest.raises(LookupError):
            doc.schema_name(obj, kind)


def test_a_file_that_is_not_openapi_is_refused(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"openapi": "3.0.0"}')
    with pytest.raises(ValueError, match="no components.schemas"):
        V.ApiDocument(str(p))


# ------------------------------------------------------------- server rules

BIG = {"dra.cpu/a%02d" % i: {"int": i} for i in range(28)}  # + 5 attrs + 1 capacity = 34

SERVER = [
    # (id, mutation, field, message start)
    ("name not a subdomain", lambda o: o["metadata"].__setitem__("name", "Bad_Name"),
     "metadata.name", 'Invalid value: "Bad_Name"'),
    ("no name nor generateName", lambda o: o.__setitem__("metadata", {}),
     "metadata.name", "Required value"),
    ("generateName not a prefix", lambda o: o.__setitem__("metadata", {"generateName": "-x-"}),
     "metadata.generateName", 'Invalid value: "-x-"'),
    ("driver missing", lambda o: o["spec"].pop("driver"), "spec.driver", "Required value"),
    ("driver of 64 bytes", lambda o: o["spec"].__setitem__("driver", "d" * 56 + ".example"),
     "spec.driver", "Too long: may not be more than 63 bytes"),
    ("driver not a subdomain", lambda o: o["spec"].__setitem__("driver", "dra_cpu"),
     "spec.driver", 'Invalid value: "dra_cpu"'),
    ("pool name missing", lambda o: o["spec"]["pool"].__setitem__("name", ""),
     "spec.pool.name", "Required value"),
    ("pool name with an empty part", lambda o: o["spec"]["pool"].__setitem__("name", "a//b"),
     "spec.pool.name", 'Invalid value: "a//b"'),
    ("pool name of 254", lambda o: o["spec"]["pool"].__setitem__("name", "a/" * 126 + "ab"),
     "spec.pool.name", "Too long: may not be more than 253 bytes"),
    ("generation negative", lambda o: o["spec"]["pool"].__setitem__("generation", -1),
     "spec.pool.generation", "Invalid value: -1: must be greater than or equal to zero"),
    ("resourceSliceCount 0", lambda o: o["spec"]["pool"].__setitem__("resourceSliceCount", 0),
     "spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero"),
    ("no node selection", lambda o: o["spec"].pop("nodeName"), "spec",
     "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
     "`perDeviceNodeSelection` is required"),
    ("nodeName and allNodes", lambda o: o["spec"].__setitem__("allNodes", True), "spec",
     'Invalid value: "{nodeName, allNodes}": only one of'),
    ("allNodes false", lambda o: (o["spec"].pop("nodeName"), o["spec"].__setitem__("allNodes", False)),
     "spec.allNodes", "Invalid value: false: must be either unset or set to true"),
    ("perDeviceNodeSelection false", lambda o: (o["spec"].pop("nodeName"),
                                                o["spec"].__setitem__("perDeviceNodeSelection", False)),
     "spec.perDeviceNodeSelection", "Invalid value: false"),
    ("nodeName empty", lambda o: o["spec"].__setitem__("nodeName", ""),
     "spec.nodeName", "Required value: must not be empty"),
    ("nodeName not a subdomain", lambda o: o["spec"].__setitem__("nodeName", "Node_1"),
     "spec.nodeName", 'Invalid value: "Node_1"'),
    ("nodeSelector with two terms", lambda o: (o["spec"].pop("nodeName"), o["spec"].__setitem__(
        "nodeSelector", {"nodeSelectorTerms": [{}, {}]})),
     "spec.nodeSelector.nodeSelectorTerms", "Invalid value: 2: must have exactly one"),
    ("nodeSelector operator", lambda o: (o["spec"].pop("nodeName"), o["spec"].__setitem__(
        "nodeSelector", {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "Near", "values": ["a"]}]}]})),
     "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
     'Unsupported value: "Near"'),
    ("nodeSelector In without values", lambda o: (o["spec"].pop("nodeName"), o["spec"].__setitem__(
        "nodeSelector", {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In"}]}]})),
     "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values", "Required value"),
    ("devices and sharedCounters", lambda o: o["spec"].__setitem__(
        "sharedCounters", [{"name": "cs", "counters": {"c": {"value": "1"}}}]),
     "spec", "Forbidden: `devices` and `sharedCounters` cannot both be set"),
    ("129 devices", devices(129), "spec.devices", "Too many: 129: must have at most 128 items"),
    ("65 devices with taints", devices(65, taints=[{"key": "k", "effect": "NoSchedule"}]),
     "spec.devices", "Too many: 65: must have at most 64 items"),
    ("65 devices consuming counters", devices(65, consumesCounters=[
        {"counterSet": "cs", "counters": {"c": {"value": "1"}}}]),
     "spec.devices", "Too many: 65: must have at most 64 items"),
    ("65 devices with a list attribute", lambda o: (devices(65)(o), dev(o, 7)["attributes"].__setitem__(
        "dra.cpu/cpus", {"ints": [1, 2]})),
     "spec.devices", "Too many: 65: must have at most 64 items"),
    ("device name missing", lambda o: dev(o).__setitem__("name", ""),
     "spec.devices[0].name", "Required value"),
    ("device name not a label", lambda o: dev(o).__setitem__("name", "cpu.0"),
     "spec.devices[0].name", 'Invalid value: "cpu.0"'),
    ("duplicate device names", lambda o: o["spec"]["devices"].append(copy.deepcopy(dev(o))),
     "spec.devices[1]", 'Duplicate value: "cpudevnuma000"'),
    ("34 attributes and capacities", lambda o: dev(o)["attributes"].update(BIG),
     "spec.devices[0]", "Invalid value: 34: the total number of attributes and capacities"),
    ("49 attribute values", lambda o: dev(o)["attributes"].update(
        {"dra.cpu/l%d" % i: {"ints": list(range(11))} for i in range(4)}),
     "spec.devices[0]", "Invalid value: 49: the total number of attribute values"),
    ("key with two slashes", lambda o: dev(o)["attributes"].__setitem__("a/b/c", {"int": 1}),
     "spec.devices[0].attributes[a/b/c]", "Invalid value: \"a/b/c\": a qualified name must not"),
    ("key not a C identifier", lambda o: dev(o)["attributes"].__setitem__("dra.cpu/numa-node", {"int": 1}),
     "spec.devices[0].attributes[dra.cpu/numa-node]", "Invalid value: \"dra.cpu/numa-node\": the identifier"),
    ("key identifier of 33", lambda o: dev(o)["attributes"].__setitem__("x" * 33, {"int": 1}),
     "spec.devices[0].attributes[%s]" % ("x" * 33), "Too long: may not be more than 32 bytes"),
    ("key with an empty domain", lambda o: dev(o)["attributes"].__setitem__("/x", {"int": 1}),
     "spec.devices[0].attributes[/x]", "Invalid value: \"/x\": the domain must not be empty"),
    ("key with a bad domain", lambda o: dev(o)["attributes"].__setitem__("dra_cpu/x", {"int": 1}),
     "spec.devices[0].attributes[dra_cpu/x]", "domain: Invalid value: \"dra_cpu\""),
    ("attribute with two values", lambda o: dev(o)["attributes"].__setitem__(
        "dra.cpu/x", {"int": 1, "bool": True}),
     "spec.devices[0].attributes[dra.cpu/x]", "Invalid value: \"{int, bool}\": exactly one value"),
    ("attribute with no value", lambda o: dev(o)["attributes"].__setitem__("dra.cpu/x", {}),
     "spec.devices[0].attributes[dra.cpu/x]", "Invalid value: \"{}\": exactly one value"),
    ("empty list attribute", lambda o: dev(o)["attributes"].__setitem__("dra.cpu/x", {"strings": []}),
     "spec.devices[0].attributes[dra.cpu/x].strings", "Required value"),
    ("string of 65 bytes in 33 characters", lambda o: dev(o)["attributes"].__setitem__(
        "dra.cpu/x", {"string": "\u00e9" * 32 + "x"}),
     "spec.devices[0].attributes[dra.cpu/x]", "Too long: may not be more than 64 bytes"),
    ("version not semver", lambda o: dev(o)["attributes"].__setitem__("dra.cpu/x", {"version": "v1.2"}),
     "spec.devices[0].attributes[dra.cpu/x]", 'Invalid value: "v1.2": must be a string compatible'),
    ("version with a leading zero", lambda o: dev(o)["attributes"].__setitem__(
        "dra.cpu/x", {"versions": ["1.2.3", "1.02.3"]}),
     "spec.devices[0].attributes[dra.cpu/x]", 'Invalid value: "1.02.3"'),
    ("version of 65", lambda o: dev(o)["attributes"].__setitem__(
        "dra.cpu/x", {"version": "1.2.3-" + "a" * 59}),
     "spec.devices[0].attributes[dra.cpu/x]", "Too long: may not be more than 64 bytes"),
    ("capacity key invalid", lambda o: dev(o)["capacity"].__setitem__("a/b/c", {"value": "1"}),
     "spec.devices[0].capacity[a/b/c]", "Invalid value: \"a/b/c\""),
    ("capacity not a quantity", lambda o: cap(o).__setitem__("value", "64 cores"),
     "spec.devices[0].capacity[dra.cpu/cpu].value", 'Invalid value: "64 cores": must be a quantity'),
    ("requestPolicy without allowMultipleAllocations", lambda o: dev(o).pop("allowMultipleAllocations"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy",
     "Forbidden: allowMultipleAllocations must be true"),
    ("validValues and validRange", lambda o: cap(o)["requestPolicy"].__setitem__("validValues", ["1"]),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy", "Forbidden: exactly one policy"),
    ("validValues without default", lambda o: cap(o).__setitem__(
        "requestPolicy", {"validValues": ["1", "2"]}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.default", "Required value"),
    ("validValues unsorted", lambda o: cap(o).__setitem__(
        "requestPolicy", {"default": "2", "validValues": ["4", "2"]}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validValues[1]",
     'Invalid value: "2": values must be sorted in ascending order'),
    ("validValues repeated", lambda o: cap(o).__setitem__(
        "requestPolicy", {"default": "2", "validValues": ["2", "2000m"]}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validValues[1]",
     'Duplicate value: "2000m"'),
    ("validValues above the capacity", lambda o: cap(o).__setitem__(
        "requestPolicy", {"default": "2", "validValues": ["2", "65"]}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validValues[1]",
     'Invalid value: "65": option is larger than capacity value'),
    ("11 validValues", lambda o: cap(o).__setitem__(
        "requestPolicy", {"default": "1", "validValues": [str(i) for i in range(1, 12)]}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validValues",
     "Too many: 11: must have at most 10 items"),
    ("default not a valid value", lambda o: cap(o).__setitem__(
        "requestPolicy", {"default": "3", "validValues": ["2", "4"]}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.default",
     'Invalid value: "3": default value is not one of validValues'),
    ("validRange without default", lambda o: cap(o)["requestPolicy"].pop("default"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.default", "Required value"),
    ("min above the capacity", lambda o: cap(o).__setitem__(
        "requestPolicy", {"default": "65", "validRange": {"min": "65"}}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.min",
     'Invalid value: "65": min is larger than capacity value'),
    ("default below min", lambda o: cap(o)["requestPolicy"].__setitem__("default", "0"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.default",
     'Invalid value: "0": default is less than min'),
    ("max below min", lambda o: cap(o)["requestPolicy"]["validRange"].update(min="8", max="4"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.max",
     'Invalid value: "4": min is larger than max'),
    ("max above the capacity", lambda o: cap(o)["requestPolicy"]["validRange"].__setitem__("max", "128"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.max",
     'Invalid value: "128": max is larger than capacity value'),
    ("default above max", lambda o: cap(o)["requestPolicy"].update(
        default="32", validRange={"min": "1", "max": "16"}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.default",
     'Invalid value: "32": default is more than max'),
    ("step zero", lambda o: cap(o)["requestPolicy"]["validRange"].__setitem__("step", "0"),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.step",
     'Invalid value: "0": must be greater than zero'),
    ("step larger than the capacity", lambda o: cap(o)["requestPolicy"].update(
        default="1", validRange={"min": "1", "step": "64"}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.step",
     'Invalid value: "64": one step is larger than capacity value'),
    ("default off the step", lambda o: cap(o)["requestPolicy"].update(
        default="1250m", validRange={"min": "1", "step": "500m"}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.step",
     'Invalid value: "500m": default is not a multiple of step from min'),
    ("max off the step", lambda o: cap(o)["requestPolicy"].update(
        default="2", validRange={"min": "0", "max": "63", "step": "2"}),
     "spec.devices[0].capacity[dra.cpu/cpu].requestPolicy.validRange.step",
     'Invalid value: "2": max is not a multiple of step from min'),
    ("17 taints", lambda o: dev(o).__setitem__(
        "taints", [{"key": "k%d" % i, "effect": "None"} for i in range(17)]),
     "spec.devices[0].taints", "Too many: 17: must have at most 16 items"),
    ("taint key invalid", lambda o: dev(o).__setitem__("taints", [{"key": "a b", "effect": "None"}]),
     "spec.devices[0].taints[0].key", 'Invalid value: "a b"'),
    ("taint value invalid", lambda o: dev(o).__setitem__(
        "taints", [{"key": "k", "value": "-v", "effect": "None"}]),
     "spec.devices[0].taints[0].value", 'Invalid value: "-v"'),
    ("taint effect missing", lambda o: dev(o).__setitem__("taints", [{"key": "k", "effect": ""}]),
     "spec.devices[0].taints[0].effect", "Required value"),
    ("taint effect unsupported", lambda o: dev(o).__setitem__(
        "taints", [{"key": "k", "effect": "PreferNoSchedule"}]),
     "spec.devices[0].taints[0].effect", 'Unsupported value: "PreferNoSchedule"'),
    ("3 counter sets consumed", lambda o: dev(o).__setitem__("consumesCounters", [
        {"counterSet": "s%d" % i, "counters": {"c": {"value": "1"}}} for i in range(3)]),
     "spec.devices[0].consumesCounters", "Too many: 3: must have at most 2 items"),
    ("counter set consumed twice", lambda o: dev(o).__setitem__("consumesCounters", [
        {"counterSet": "s", "counters": {"c": {"value": "1"}}}] * 2),
     "spec.devices[0].consumesCounters[1].counterSet", 'Duplicate value: "s"'),
    ("consumed counter set not a label", lambda o: dev(o).__setitem__("consumesCounters", [
        {"counterSet": "S", "counters": {"c": {"value": "1"}}}]),
     "spec.devices[0].consumesCounters[0].counterSet", 'Invalid value: "S"'),
    ("no counters consumed", lambda o: dev(o).__setitem__("consumesCounters", [
        {"counterSet": "s", "counters": {}}]),
     "spec.devices[0].consumesCounters[0].counters", "Required value"),
    ("33 counters consumed", lambda o: dev(o).__setitem__("consumesCounters", [
        {"counterSet": "s", "counters": {"c%d" % i: {"value": "1"} for i in range(33)}}]),
     "spec.devices[0].consumesCounters[0].counters", "Too many: 33: must have at most 32 items"),
    ("counter name not a label", lambda o: dev(o).__setitem__("consumesCounters", [
        {"counterSet": "s", "counters": {"C": {"value": "1"}}}]),
     "spec.devices[0].consumesCounters[0].counters[C]", 'Invalid value: "C"'),
    ("9 counter sets", lambda o: o["spec"].update(devices=[], sharedCounters=[
        {"name": "s%d" % i, "counters": {"c": {"value": "1"}}} for i in range(9)]),
     "spec.sharedCounters", "Too many: 9: must have at most 8 items"),
    ("counter set twice", lambda o: o["spec"].update(devices=[], sharedCounters=[
        {"name": "s", "counters": {"c": {"value": "1"}}}] * 2),
     "spec.sharedCounters[1].name", 'Duplicate value: "s"'),
    ("counter set name not a label", lambda o: o["spec"].update(devices=[], sharedCounters=[
        {"name": "s_1", "counters": {"c": {"value": "1"}}}]),
     "spec.sharedCounters[0].name", 'Invalid value: "s_1"'),
    ("counter set without counters", lambda o: o["spec"].update(devices=[], sharedCounters=[
        {"name": "s", "counters": {}}]),
     "spec.sharedCounters[0].counters", "Required value"),
    ("device nodeName without perDeviceNodeSelection", lambda o: dev(o).__setitem__("nodeName", "n"),
     "spec.devices[0].nodeName", "Forbidden: only allowed when `perDeviceNodeSelection`"),
    ("perDeviceNodeSelection, device without a node", lambda o: (
        o["spec"].pop("nodeName"), o["spec"].__setitem__("perDeviceNodeSelection", True)),
     "spec.devices[0]", "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`"),
    ("perDeviceNodeSelection, device with two", lambda o: (
        o["spec"].pop("nodeName"), o["spec"].__setitem__("perDeviceNodeSelection", True),
        dev(o).update(nodeName="n", allNodes=True)),
     "spec.devices[0]", 'Invalid value: "{nodeName, allNodes}"'),
    ("5 binding conditions", lambda o: dev(o).update(
        bindingConditions=["c%d" % i for i in range(5)], bindingFailureConditions=["f"]),
     "spec.devices[0].bindingConditions", "Too many: 5: must have at most 4 items"),
    ("binding condition repeated", lambda o: dev(o).update(
        bindingConditions=["c", "c"], bindingFailureConditions=["f"]),
     "spec.devices[0].bindingConditions[1]", 'Duplicate value: "c"'),
    ("binding condition not a label name", lambda o: dev(o).update(
        bindingConditions=["c!"], bindingFailureConditions=["f"]),
     "spec.devices[0].bindingConditions[0]", 'Invalid value: "c!"'),
    ("binding conditions overlap", lambda o: dev(o).update(
        bindingConditions=["c"], bindingFailureConditions=["c"]),
     "spec.devices[0].bindingFailureConditions", 'Invalid value: "c": must not also be in'),
    ("binding conditions without failure conditions", lambda o: dev(o).update(
        bindingConditions=["c"]),
     "spec.devices[0]", "Invalid value: null: bindingConditions and bindingFailureConditions "
     "must be set together"),
]


@pytest.mark.parametrize("mutate,field,message", [c[1:] for c in SERVER], ids=[c[0] for c in SERVER])
def test_server_rule_rejects_with_the_apiservers_message(mutate, field, message):
    o = mutated(mutate)
    errs = V.slice_errors(o)
    hits = [m for f, m in errs if f == field]
    assert hits, errs
    assert any(m.startswith(message) for m in hits), errs


# The schema itself rejects this one: "driver" is a required property.
SCHEMA_TOO = ("driver missing",)


@pytest.mark.parametrize("mutate", [c[1] for c in SERVER if c[0] not in SCHEMA_TOO],
                         ids=[c[0] for c in SERVER if c[0] not in SCHEMA_TOO])
def test_server_rule_cases_pass_the_schema(doc136, mutate):
    """Each case is the server's to catch: the schema lets it through, so a
    schema-only check would have missed it."""
    o = V.strip_nulls(mutated(mutate))
    assert doc136.errors(o, doc136.schema_name(o)) == []


@pytest.mark.parametrize("mutate", [
    devices(128),
    devices(64, taints=[{"key": "example.com/k", "value": "v", "effect": "NoExecute"}]),
    lambda o: o.__setitem__("metadata", {"generateName": "00000-dra.cpu-node-1-"}),
    lambda o: o["spec"].update(driver="DRA.cpu"),  # the server lower-cases, then warns
    lambda o: dev(o)["attributes"].update({"DRA.cpu/x": {"int": 1}, "plain_key": {"int": 2}}),
    lambda o: dev(o)["attributes"].__setitem__("dra.cpu/v", {"version": "1.0.0-rc.1+build.05"}),
    lambda o: dev(o)["attributes"].__setitem__("dra.cpu/s", {"string": "\u00e9" * 32}),
    lambda o: cap(o).__setitem__("requestPolicy", {"default": "2", "validValues": ["1", "2", "64"]}),
    lambda o: cap(o)["requestPolicy"].update(default="1500m",
                                             validRange={"min": "500m", "step": "500m"}),
    lambda o: o["spec"].update(devices=[], sharedCounters=[
        {"name": "numa0", "counters": {"cpu": {"value": "64"}}}]),
    lambda o: (o["spec"].pop("nodeName"), o["spec"].__setitem__("nodeSelector", {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]},
            {"key": "cpus", "operator": "Gt", "values": ["8"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]})),
    lambda o: (o["spec"].pop("nodeName"), o["spec"].__setitem__("perDeviceNodeSelection", True),
               dev(o).__setitem__("allNodes", True)),
    lambda o: dev(o).update(bindingConditions=["example.com/ready"],
                            bindingFailureConditions=["failed"]),
    lambda o: o["spec"].__setitem__("devices", []),  # an empty pool
], ids=["128 devices", "64 with taints", "generateName", "upper-case driver",
        "keys", "semver with pre-release and build", "64-byte string", "validValues",
        "fractional range", "counter sets only", "node selector", "per-device node",
        "binding conditions", "no devices"])
def test_valid_variants_pass_both_layers(doc, mutate):
    o = V.strip_nulls(mutated(mutate))
    assert doc.errors(o, doc.schema_name(o), strict=True) == []
    assert V.slice_errors(o) == []


def test_too_many_devices_stops_before_per_device_checks():
    o = mutated(devices(129))
    dev(o, 5)["name"] = "BAD"
    assert V.slice_errors(o) == [("spec.devices", "Too many: 129: must have at most 128 items")]


def test_label_errors():
    assert V.label_errors({"app": "x", "example.com/tier": "", "a.b": "c-d_e.f"}) == []
    assert [f for f, _ in V.label_errors({"a/b/c": "x", "ok": "-bad", "x" * 64: "y"})] == [
        "metadata.labels", "metadata.labels[ok]", "metadata.labels"]


# --------------------------------------------------------- quantities, names


@pytest.mark.parametrize("text,value,suffix", [
    ("64", 64, ""), ("1.5Gi", 1536 * 2**20, "Gi"), ("500m", V.Fraction(1, 2), "m"),
    ("1e3", 1000, "e3"), ("1E-3", V.Fraction(1, 1000), "E-3"), (".5", V.Fraction(1, 2), ""),
    ("1.", 1, ""), ("+2k", 2000, "k"), ("-1Ki", -1024, "Ki"), ("100n", V.Fraction(1, 10**7), "n"),
])
def test_split_quantity(text, value, suffix):
    assert V.split_quantity(text) == (value, suffix)
    assert V.parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "k", "1.2.3", "1 k", "64 cores", "1KI", "1Kb", "--1", "0x10",
                                 "1e", "1e1.5", ".", True, None, {}, []])
def test_parse_quantity_rejects(bad):
    assert V.parse_quantity(bad) is None


def test_parse_quantity_of_numbers():
    assert V.parse_quantity(64) == 64
    assert V.parse_quantity(0.5) == V.Fraction(1, 2)


@pytest.mark.parametrize("v,ok", [
    ("1.2.3", True), ("0.0.0", True), ("1.2.3-alpha.1", True), ("1.2.3-0a", True),
    ("1.2.3+build.007", True), ("1.2.3-x-y.1+z", True),
    ("1.2", False), ("1.2.3.4", False), ("v1.2.3", False), ("01.2.3", False), ("1.2.3-01", False), ("1.2.3-", False),
    ("1.2.3+", False), ("1.2.3-a..b", False), ("1.2.3 ", False), ("\u0661.2.3", False), (1, False),
])
def test_is_semver(v, ok):
    assert V.is_semver(v) is ok


@pytest.mark.parametrize("v,ok", [
    ("app", True), ("example.com/app", True), ("a_b.c-d", True), ("x" * 63, True),
    ("", False), ("x" * 64, False), ("-a", False), ("a/b/c", False), ("Example.com/a", False),
    ("/a", False), ("a/", False),
])
def test_is_label_name(v, ok):
    assert V.is_label_name(v) is ok


def test_dns_names():
    assert V.is_dns_label("a-1") and not V.is_dns_label("a.1") and not V.is_dns_label("x" * 64)
    assert V.is_dns_subdomain("a.b-c") and not V.is_dns_subdomain("a..b")
    assert not V.is_dns_subdomain("node-1-") and V.is_dns_subdomain("node-1-", prefix=True)
    assert not V.is_dns_subdomain("")


# ---------------------------------------------------------------- CDI


CDI_SPEC = {"cdiVersion": "0.8.0", "kind": "dra.k8s.io/cpu", "devices": [
    {"name": "claim-1", "containerEdits": {"env": ["DRA_CPUSET_1=0-3"]}}]}


def test_cdi_spec_as_dra_cpu_writes_it_passes():
    assert V.cdi_errors(CDI_SPEC) == []


@pytest.mark.parametrize("mutate,path", [
    (lambda s: s.pop("devices"), "<object>"),
    (lambda s: s["devices"][0].pop("containerEdits"), "devices[0]"),
    (lambda s: s["devices"][0]["containerEdits"].__setitem__("env", "A=1"),
     "devices[0].containerEdits.env"),
    (lambda s: s["devices"][0]["containerEdits"].__setitem__("deviceNodes", [{"major": 1}]),
     "devices[0].containerEdits.deviceNodes[0]"),
    (lambda s: s.__setitem__("cdiVersion", 8), "cdiVersion"),
])
def test_cdi_schema_rejects(mutate, path):
    s = copy.deepcopy(CDI_SPEC)
    mutate(s)
    assert [p for p, _ in V.cdi_errors(s)] == [path]


# ---------------------------------------------------------------- CLI


def cli(*args, stdin=None):
    return subprocess.run([PYTHON, CLI, *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def test_cli_valid_slice_against_both_documents(tmp_path):
    p = write(tmp_path, "s.json", V.sample_slice())
    r = cli("--strict", "--server-rules", "--spec", "1.36", "--spec", V.API_DOCS["1.37"], p)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["%s: valid (ResourceSlice, 1.36)" % p,
                                     "%s: valid (ResourceSlice, 1.37)" % p]
    assert cli(p).stdout == "%s: valid (ResourceSlice, 1.36)\n" % p  # the default document


def test_cli_server_rule_failure_exits_1(tmp_path):
    o = mutated(lambda o: o["spec"]["pool"].__setitem__("resourceSliceCount", 0))
    p = write(tmp_path, "s.json", [V.sample_slice(), o])
    r = cli("--server-rules", p)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "%s[0]: valid (ResourceSlice, 1.36)" % p, "%s[1]: INVALID (ResourceSlice, 1.36)" % p,
        "  server: spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"]
    assert cli(p).returncode == 0  # without --server-rules only the schema judges


def test_cli_unknown_field_warns_and_fails_only_strict(tmp_path):
    o = mutated(lambda o: dev(o).__setitem__("numaNode", 0))
    p = write(tmp_path, "s.json", {"apiVersion": "v1", "kind": "List", "items": [o]})
    r = cli(p)
    assert r.returncode == 0 and "warning: spec.devices[0]: unknown field" in r.stdout, r.stdout
    r = cli("--strict", p)
    assert r.returncode == 1
    assert "  schema: spec.devices[0]: Additional properties are not allowed ('numaNode'" in r.stdout


def test_cli_reads_stdin_and_takes_a_kind():
    sel = json.dumps({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n"]}]}]})
    r = cli("--kind", "io.k8s.api.core.v1.NodeSelector", "-", stdin=sel)
    assert r.returncode == 0 and r.stdout == "-: valid (NodeSelector, 1.36)\n", r.stdout + r.stderr
    r = cli("--kind", "io.k8s.api.core.v1.NodeSelector", "-", stdin='{"nodeSelectorTerms": 1}')
    assert r.returncode == 1


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not valid JSON: Expecting property name enclosed in double quotes"),
    ("", "not valid JSON: Expecting value: line 1 column 1"),
    ('{"a": 1} x', "not valid JSON: Extra data"),
])
def test_cli_bad_json_exits_2_with_a_clear_message(tmp_path, content, needle):
    p = write(tmp_path, "bad.json", content)
    r = cli("--server-rules", p)
    assert r.returncode == 2
    assert r.stderr == "k8svalidate: %s: %s" % (p, r.stderr.split(": ", 2)[2])
    assert needle in r.stderr and r.stdout == ""


def test_cli_bad_json_among_good_files_still_checks_the_rest(tmp_path):
    good = write(tmp_path, "good.json", V.sample_slice())
    bad = write(tmp_path, "bad.json", "[")
    r = cli(bad, good)
    assert r.returncode == 2
    assert r.stdout == "%s: valid (ResourceSlice, 1.36)\n" % good


def test_cli_unusable_inputs_exit_2(tmp_path):
    p = write(tmp_path, "s.json", V.sample_slice())
    r = cli(str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "cannot read: No such file or directory" in r.stderr
    r = cli(write(tmp_path, "pod.json", {"apiVersion": "v1", "kind": "Pod"}))
    assert r.returncode == 2 and "v1 Pod is not in" in r.stderr
    r = cli(write(tmp_path, "anon.json", {"spec": {}}))
    assert r.returncode == 2 and "no apiVersion and kind" in r.stderr
    r = cli("--spec", write(tmp_path, "notapi.json", {"openapi": "3.0.0"}), p)
    assert r.returncode == 2 and "no components.schemas" in r.stderr
    r = cli("--spec", str(tmp_path / "nothere.json"), p)
    assert r.returncode == 2 and "cannot load OpenAPI document" in r.stderr
    assert cli().returncode == 2  # no files: usage


def test_cli_cdi(tmp_path):
    good = write(tmp_path, "good.json", CDI_SPEC)
    bad = write(tmp_path, "bad.json", {"cdiVersion": "0.8.0", "kind": "x"})
    r = cli("--cdi", good)
    assert r.returncode == 0 and r.stdout == "%s: valid (CDI spec)\n" % good
    r = cli("--cdi", bad)
    assert r.returncode == 1 and "  schema: <object>: 'devices' is a required property" in r.stdout


# ---- 1.37 nodeAllocatableResources (KEP-5517)

def _with_mapping(mapping, name="cpu"):
    return lambda o: dev(o).__setitem__("nodeAllocatableResources", {name: {"mapping": mapping}})


@pytest.mark.parametrize("mutate", [
    _with_mapping({"capacityKey": "dra.cpu/cpu", "capacityMultiplier": "1"}),
    _with_mapping({"deviceMultiplier": "1"}),
    _with_mapping({"deviceMultiplier": "2Gi"}, name="memory"),
], ids=["capacity", "device", "memory"])
def test_node_allocatable_mapping_is_1_37_only_and_valid(doc, mutate):
    o = V.strip_nulls(mutated(mutate))
    errs = doc.errors(o, doc.schema_name(o), strict=True)
    if doc.version == "1.37":
        assert errs == []
    else:  # 1.36 knows it as nodeAllocatableResourceMappings: its default drops it
        assert errs == [("spec.devices[0]", "Additional properties are not allowed "
                         "('nodeAllocatableResources' was unexpected)")]
        assert doc.errors(o, doc.schema_name(o)) == []
    assert V.slice_errors(o) == []


@pytest.mark.parametrize("mapping,name,field,needle", [
    ({"capacityKey": "dra.cpu/cores", "capacityMultiplier": "1"}, "cpu",
     "mapping.capacityKey", "must name a capacity of the device"),
    ({"capacityKey": "dra.cpu/cpu"}, "cpu", "mapping.capacityMultiplier", "Required value"),
    ({"capacityKey": "dra.cpu/cpu", "capacityMultiplier": "1", "deviceMultiplier": "1"}, "cpu",
     "mapping.deviceMultiplier", "Forbidden"),
    ({"capacityMultiplier": "1"}, "cpu", "mapping.capacityMultiplier", "Forbidden"),
    ({}, "cpu", "", "Required value: one of mapping or overhead"),
    ({"deviceMultiplier": "0"}, "cpu", "mapping.deviceMultiplier", "must be a positive quantity"),
    ({"deviceMultiplier": "1"}, "example.com/widgets", "", "not an extended resource"),
])
def test_node_allocatable_mapping_server_rules(mapping, name, field, needle):
    o = mutated(_with_mapping(mapping, name))
    want = "spec.devices[0].nodeAllocatableResources[%s]%s" % (name, "." + field if field else "")
    hits = [m for f, m in V.slice_errors(o) if f == want]
    assert any(needle in m for m in hits), V.slice_errors(o)

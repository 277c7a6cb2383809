#!/usr/bin/env python3
"""Checks Kubernetes resource.k8s.io/v1 objects and CDI spec files the way their
consumers do, for dra-cpu's tests and its API-server simulator.

A kube-apiserver judges a ResourceSlice in two steps, and so does this module:

  schema        the OpenAPI document of the group (test/data/api/): JSON types,
                required keys, integer ranges and, with strict=True, unknown
                fields (the server's fieldValidation=Strict). The document's
                components.schemas become a JSON Schema draft-7 "definitions"
                block; python3-jsonschema does the rest.
  server rules  what the apiserver checks in code and no schema expresses:
                limits, name formats, one-of fields, request policies
                (slice_errors()). Errors read like the apiserver's field errors,
                "Too many: 129: must have at most 128 items", so the simulator
                can turn each into a Status cause.

Reference: kubernetes/kubernetes pkg/apis/resource/validation (ResourceSlice),
apimachinery's name and label validation, the Quantity grammar of
apimachinery/pkg/api/resource, semver.org 2.0.0. Written from those
descriptions; where 1.36 and 1.37 differ the module follows 1.36 except for
fractional request-policy steps, which it checks exactly (1.37's
DRAFractionalCapacityRange) rather than on rounded integers.

CDI spec files are checked against the CDI project's JSON schema
(test/data/cdi/): cdi_errors().

Every file read lives under test/data. Needs python3-jsonschema (Debian 12:
4.10.3; also works with 4.2x).

Command line: k8svalidate.py --help. Exit 0 = every object valid, 1 = some
object invalid, 2 = the input or the document could not be used.
"""

import argparse
import functools
import json
import os
import re
import sys
from fractions import Fraction

import jsonschema

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
API_DOCS = {
    "1.36": os.path.join(DATA, "api", "resource.k8s.io_v1_openapi_1.36.json"),
    "1.37": os.path.join(DATA, "api", "resource.k8s.io_v1_openapi_1.37.json"),
}
DEFAULT_DOC = API_DOCS["1.36"]
# events.k8s.io/v1 (Event), a separate document (test/data/api/README.md)
EVENTS_DOC = os.path.join(DATA, "api", "events.k8s.io_v1_openapi.json")
CDI_DIR = os.path.join(DATA, "cdi")

# ------------------------------------------------------------------ schema

_COMPONENT = "#/components/schemas/"
# keys whose values are data, not schemas: copied as they are
_VALUE_KEYS = ("default", "enum", "example")


def _to_draft7(node, closed):
    """An OpenAPI schema node as draft-7 JSON Schema.

    References move from components.schemas to definitions; x-kubernetes-*
    extensions go (draft 7 ignores unknown keywords, but they are noise in
    error output and some carry schema-looking values). closed: objects that
    declare properties admit no others.
    """
    if isinstance(node, list):
        return [_to_draft7(x, closed) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, val in node.items():
        if key.startswith("x-kubernetes-"):
            continue
        if key in _VALUE_KEYS:
            out[key] = val
        elif key == "properties":  # names here are field names, not keywords
            out[key] = {name: _to_draft7(sub, closed) for name, sub in val.items()}
        elif key == "$ref" and val.startswith(_COMPONENT):
            out[key] = "#/definitions/" + val[len(_COMPONENT):]
        else:
            out[key] = _to_draft7(val, closed)
    # Objects without properties (RawExtension, FieldsV1) hold arbitrary JSON
    # and stay open even when closed.
    if closed and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


def _format_checker():
    """The OpenAPI formats this group uses: int32, int64, date-time."""
    fc = jsonschema.FormatChecker(formats=())

    def int_range(bits):
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return lambda v: not isinstance(v, int) or lo <= v <= hi

    fc.checks("int32")(int_range(32))
    fc.checks("int64")(int_range(64))
    fc.checks("date-time")(lambda v: not isinstance(v, str) or bool(_RFC3339.match(v)))
    return fc


class ApiDocument:
    """One OpenAPI document: its schemas by name and by group/version/kind.

    schemas is the document's components.schemas, unconverted (callers may
    walk it; do not modify). Validators are built on first use and cached.
    """

    def __init__(self, path=DEFAULT_DOC):
        self.path = path
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        try:
            self.schemas = doc["components"]["schemas"]
        except (KeyError, TypeError):
            raise ValueError("%s: no components.schemas: not an OpenAPI v3 document" % path)
        self.version = next((v for v, p in API_DOCS.items()
                             if os.path.abspath(p) == os.path.abspath(path)),
                            os.path.basename(path))
        self.kinds = {}
        for name, sch in self.schemas.items():
            for gvk in sch.get("x-kubernetes-group-version-kind") or []:
                key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                # meta types (DeleteOptions, WatchEvent) repeat for many groups
                self.kinds.setdefault(key, name)
        self._definitions = {}
        self._validators = {}

    def schema_name(self, obj, kind=None):
        """The schema that validates obj: from kind (a kind of this group or a
        full schema name) if given, else from obj's apiVersion and kind.
        Raises LookupError when there is none."""
        if kind:
            if kind in self.schemas:
                return kind
            found = [n for (g, _, k), n in sorted(self.kinds.items()) if k == kind]
            ours = [n for n in found if n.startswith("io.k8s.api.resource.")]
            if ours or found:
                return (ours or found)[0]
            raise LookupError("kind %s is not in %s" % (kind, self.path))
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            raise LookupError("the object has no apiVersion and kind (name one with --kind)")
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        name = self.kinds.get((group, version, obj["kind"]))
        if name is None:
            raise LookupError("%s %s is not in %s" % (obj["apiVersion"], obj["kind"], self.path))
        return name

    def validator(self, name, strict=False):
        """A jsonschema validator for schema name; strict rejects unknown fields."""
        key = (name, strict)
        if key not in self._validators:
            if strict not in self._definitions:
                defs = {n: _to_draft7(s, strict) for n, s in self.schemas.items()}
                jsonschema.Draft7Validator.check_schema({"definitions": defs})
                self._definitions[strict] = defs
            root = {"allOf": [{"$ref": "#/definitions/" + name}],
                    "definitions": self._definitions[strict]}
            self._validators[key] = jsonschema.Draft7Validator(
                root, format_checker=_format_checker())
        return self._validators[key]

    def iter_errors(self, obj, name, strict=False):
        """jsonschema errors of obj against schema name (obj as given: see strip_nulls)."""
        return self.validator(name, strict).iter_errors(obj)

    def errors(self, obj, name, strict=False):
        """[(field path, message)] of obj against schema name, in path order."""
        errs = sorted(self.iter_errors(obj, name, strict),
                      key=lambda e: [str(p) for p in e.absolute_path])
        return [(field_path(e.absolute_path), e.message) for e in errs]


def strip_nulls(node):
    """A copy of node without null members: the apiserver decodes JSON null as
    "unset", so the schema must not see it as a value of the wrong type."""
    if isinstance(node, dict):
        return {k: strip_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [strip_nulls(v) for v in node]
    return node


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def field_path(parts):
    """Path parts as the apiserver writes them: spec.devices[0].attributes[dra.cpu/x]."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += "[%d]" % p
        elif _IDENT.match(p):
            out += "." + p if out else p
        else:
            out += "[%s]" % p
    return out or "<object>"


# ---------------------------------------------------------------- quantities

# <sign><digits>[.<digits>]<suffix>: binary SI, decimal SI or a decimal exponent
_QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                       r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_SCALE = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3),
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def split_quantity(text):
    """(exact value as a Fraction, suffix text) of a quantity string, or None if
    it does not follow the grammar. The suffix is "" / "Ki" / "m" / "e3"."""
    m = _QUANTITY.match(text) if isinstance(text, str) else None
    if not m:
        return None
    sign, number, suffix = m.group(1), m.group(2), m.group(3) or ""
    value = Fraction(number.rstrip(".") or "0")
    if suffix[:1] in ("e", "E"):
        value *= Fraction(10) ** int(suffix[1:])
    else:
        value *= _SCALE[suffix]
    return (-value if sign == "-" else value), suffix


def parse_quantity(q):
    """Exact value of a quantity (a JSON string or number), or None if malformed."""
    if isinstance(q, bool):
        return None
    if isinstance(q, int):
        return Fraction(q)
    if isinstance(q, float):
        return Fraction(getattr(q, "text", repr(q)))
    parsed = split_quantity(q)
    return parsed[0] if parsed else None


# ---------------------------------------------------------------- names

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SEMVER_NUM = re.compile(r"^(0|[1-9][0-9]*)$")
_SEMVER_ID = re.compile(r"^[0-9A-Za-z-]+$")


def is_dns_label(v):
    """RFC 1123 label: lower-case alphanumerics and '-', at most 63."""
    return isinstance(v, str) and len(v) <= 63 and bool(_DNS_LABEL.match(v))


def is_dns_subdomain(v, prefix=False):
    """RFC 1123 subdomain: labels joined by '.', at most 253. prefix: v is a
    generateName, which may end in '-' (the server appends to it)."""
    if not isinstance(v, str):
        return False
    if prefix and len(v) > 1 and v.endswith("-"):
        v = v[:-1] + "a"
    return 0 < len(v) <= 253 and all(_DNS_LABEL.match(p) for p in v.split("."))


def is_label_name(v):
    """A label key (also taint keys, binding conditions): [prefix/]name, the
    prefix a DNS subdomain, the name at most 63 alphanumerics, '-', '_', '.'."""
    if not isinstance(v, str):
        return False
    parts = v.split("/")
    if len(parts) > 2 or (len(parts) == 2 and not is_dns_subdomain(parts[0])):
        return False
    return len(parts[-1]) <= 63 and bool(_LABEL_NAME.match(parts[-1]))


def is_label_value(v):
    """A label value: empty, or like a label name without prefix."""
    return isinstance(v, str) and (v == "" or (len(v) <= 63 and bool(_LABEL_NAME.match(v))))


def is_semver(v):
    """semver.org 2.0.0: MAJOR.MINOR.PATCH[-pre.release][+build.meta], numbers
    without leading zeros (also numeric pre-release identifiers)."""
    if not isinstance(v, str):
        return False
    v, plus, build = v.partition("+")
    if plus and not all(_SEMVER_ID.match(p) for p in build.split(".")):
        return False
    v, dash, pre = v.partition("-")
    if dash:
        for p in pre.split("."):
            if not _SEMVER_ID.match(p) or (p.isdigit() and not _SEMVER_NUM.match(p)):
                return False
    nums = v.split(".")
    return len(nums) == 3 and all(_SEMVER_NUM.match(n) for n in nums)


# ------------------------------------------------------- field errors

def _show(v):
    return json.dumps(v, default=str)


def _required(path, why=""):
    return (path, "Required value" + (": " + why if why else ""))


def _invalid(path, value, why):
    return (path, "Invalid value: %s: %s" % (_show(value), why))


def _too_many(path, n, limit):
    return (path, "Too many: %d: must have at most %d items" % (n, limit))


def _too_long(path, limit):
    return (path, "Too long: may not be more than %d bytes" % limit)


def _duplicate(path, value):
    return (path, "Duplicate value: %s" % _show(value))


def _forbidden(path, why):
    return (path, "Forbidden: " + why)


def _unsupported(path, value, allowed):
    return (path, "Unsupported value: %s: supported values: %s"
            % (_show(value), ", ".join(json.dumps(a) for a in allowed)))


def _key(path, k):
    return "%s[%s]" % (path, k)


# --------------------------------------------------- ResourceSlice rules

MAX_DEVICES = 128
MAX_DEVICES_WITH_EXTRAS = 64  # any device with taints, counters or list attributes
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
MAX_STRING_BYTES = 64
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMED_SETS = 2
MAX_BINDING_CONDITIONS = 4
MAX_VALID_VALUES = 10
LIST_KINDS = ("ints", "bools", "strings", "versions")
VALUE_KINDS = ("int", "bool", "string", "version") + LIST_KINDS
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")
NODE_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _driver_name_errors(v, path):
    if not v:
        return [_required(path)]
    errs = []
    if len(v) > 63:
        errs.append(_too_long(path, 63))
    if not is_dns_subdomain(v.lower()):
        errs.append(_invalid(path, v, "a lowercase RFC 1123 subdomain must consist of lower case "
                             "alphanumeric characters, '-' or '.'"))
    return errs


def _qualified_name_errors(key, path):
    """Attribute and capacity keys: a C identifier of at most 32, optionally
    behind a domain that follows the driver-name rules."""
    parts = key.split("/")
    if len(parts) > 2:
        return [_invalid(path, key, "a qualified name must not contain more than one '/'")]
    errs = []
    if len(parts) == 2:
        if not parts[0]:
            errs.append(_invalid(path, key, "the domain must not be empty"))
        else:
            errs += [(p, "domain: " + m) for p, m in _driver_name_errors(parts[0], path)]
    ident = parts[-1]
    if not ident:
        errs.append(_required(path, "the identifier must not be empty"))
    elif len(ident) > 32:
        errs.append(_too_long(path, 32))
    elif not _IDENT.match(ident):
        errs.append(_invalid(path, key, "the identifier must be a C identifier "
                             "([A-Za-z_][A-Za-z0-9_]*)"))
    return errs


def _node_selector_errors(sel, path):
    terms = (sel.get("nodeSelectorTerms") or []) if isinstance(sel, dict) else []
    if len(terms) != 1:
        return [_invalid(path + ".nodeSelectorTerms", len(terms), "must have exactly one node "
                         "selector term")]
    errs = []
    term, tp = terms[0], path + ".nodeSelectorTerms[0]"
    for i, r in enumerate(term.get("matchExpressions") or []):
        rp = "%s.matchExpressions[%d]" % (tp, i)
        op, vals = r.get("operator"), r.get("values") or []
        if not is_label_name(r.get("key")):
            errs.append(_invalid(rp + ".key", r.get("key"), "must be a valid label name"))
        if op not in NODE_SELECTOR_OPS:
            errs.append(_unsupported(rp + ".operator", op, NODE_SELECTOR_OPS))
        elif op in ("In", "NotIn") and not vals:
            errs.append(_required(rp + ".values", "must be specified when `operator` is 'In' "
                                  "or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and vals:
            errs.append(_forbidden(rp + ".values", "may not be specified when `operator` is "
                                   "'Exists' or 'DoesNotExist'"))
        elif op in ("Gt", "Lt") and (len(vals) != 1 or not re.match(r"^-?[0-9]+$", vals[0])):
            errs.append(_required(rp + ".values", "must be specified single integer value when "
                                  "`operator` is 'Lt' or 'Gt'"))
    for i, r in enumerate(term.get("matchFields") or []):
        rp = "%s.matchFields[%d]" % (tp, i)
        if r.get("key") != "metadata.name":
            errs.append(_invalid(rp + ".key", r.get("key"), "not a valid field selector key"))
        if r.get("operator") not in ("In", "NotIn"):
            errs.append(_unsupported(rp + ".operator", r.get("operator"), ("In", "NotIn")))
        if len(r.get("values") or []) != 1:
            errs.append(_required(rp + ".values", "must be only one value when `operator` is "
                                  "'In' or 'NotIn' for node field selector"))
    return errs


def _node_selection_errors(obj, path, per_device):
    """Exactly one of the node-selection fields; per_device: the device form
    (nodeName, nodeSelector, allNodes) under perDeviceNodeSelection."""
    names = ("nodeName", "nodeSelector", "allNodes") if per_device else \
        ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
    which = "`, `".join(names)
    present = [n for n in names if n in obj]
    if not present:
        return [_required(path, "exactly one of `%s` is required" % which)]
    errs = []
    if len(present) > 1:
        errs.append(_invalid(path, "{%s}" % ", ".join(present),
                             "only one of `%s` may be set" % which))
    if "nodeName" in obj:
        if obj["nodeName"] == "":
            errs.append(_required(path + ".nodeName", "must not be empty when set"))
        elif not is_dns_subdomain(obj["nodeName"]):
            errs.append(_invalid(path + ".nodeName", obj["nodeName"],
                                 "must be a lowercase RFC 1123 subdomain"))
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if flag in obj and obj[flag] is not True:
            errs.append(_invalid(path + "." + flag, obj[flag], "must be either unset or set to true"))
    if "nodeSelector" in obj:
        errs += _node_selector_errors(obj["nodeSelector"], path + ".nodeSelector")
    return errs


def _counters_errors(counters, path):
    errs = []
    if not counters:
        errs.append(_required(path, "must have at least one counter"))
    elif len(counters) > MAX_COUNTERS:
        errs.append(_too_many(path, len(counters), MAX_COUNTERS))
    for name, c in (counters or {}).items():
        if not is_dns_label(name):
            errs.append(_invalid(_key(path, name), name, "must be a DNS label"))
        if parse_quantity((c or {}).get("value")) is None:
            errs.append(_invalid(_key(path, name) + ".value", (c or {}).get("value"),
                                 "must be a quantity"))
    return errs


def _attribute_errors(key, a, path):
    """Errors of one attribute and how many values it holds."""
    errs = _qualified_name_errors(key, path)
    kinds = [k for k in VALUE_KINDS if k in a]
    if len(kinds) != 1:
        errs.append(_invalid(path, "{%s}" % ", ".join(kinds), "exactly one value must be specified"))
    values = 0
    for k in kinds:
        vals = a[k] if k in LIST_KINDS else [a[k]]
        if k in LIST_KINDS and not vals:
            errs.append(_required(path + "." + k, "must not be empty when set"))
        values += len(vals)
        for v in vals:
            if k in ("string", "strings") and len(str(v).encode()) > MAX_STRING_BYTES:
                errs.append(_too_long(path, MAX_STRING_BYTES))
            if k in ("version", "versions"):
                if len(str(v)) > MAX_STRING_BYTES:
                    errs.append(_too_long(path, MAX_STRING_BYTES))
                elif not is_semver(v):
                    errs.append(_invalid(path, v, "must be a string compatible with semver.org "
                                         "spec 2.0.0"))
    return errs, values


def _request_policy_errors(policy, capacity, path):
    """A consumable capacity's requestPolicy: the default lies inside the
    allowed values or range, which lie inside the capacity."""
    errs = []
    default = parse_quantity(policy["default"]) if "default" in policy else None
    values, rng = policy.get("validValues"), policy.get("validRange")
    if values and rng is not None:
        return [_forbidden(path, "exactly one policy can be specified, cannot specify "
                           "\"validValues\" and \"validRange\" at the same time")]
    if (values or rng is not None) and "default" not in policy:
        errs.append(_required(path + ".default", "required when validValues or validRange is "
                              "defined"))
    if "default" in policy and default is None:
        errs.append(_invalid(path + ".default", policy["default"], "must be a quantity"))
    if values:
        vp = path + ".validValues"
        if len(values) > MAX_VALID_VALUES:
            return errs + [_too_many(vp, len(values), MAX_VALID_VALUES)]
        parsed = [parse_quantity(v) for v in values]
        for i, v in enumerate(parsed):
            if v is None:
                errs.append(_invalid("%s[%d]" % (vp, i), values[i], "must be a quantity"))
            elif v in parsed[:i]:
                errs.append(_duplicate("%s[%d]" % (vp, i), values[i]))
            elif i and parsed[i - 1] is not None and v < parsed[i - 1]:
                errs.append(_invalid("%s[%d]" % (vp, i), values[i], "values must be sorted in "
                                     "ascending order"))
            elif capacity is not None and v > capacity:
                errs.append(_invalid("%s[%d]" % (vp, i), values[i], "option is larger than "
                                     "capacity value"))
        if default is not None and default not in parsed:
            errs.append(_invalid(path + ".default", policy["default"], "default value is not "
                                 "one of validValues"))
    if rng is not None:
        rp = path + ".validRange"
        lo = parse_quantity(rng["min"]) if "min" in rng else None
        if lo is None:
            return errs + [_required(rp + ".min", "required when validRange is defined")]
        hi = parse_quantity(rng["max"]) if "max" in rng else None
        step = parse_quantity(rng["step"]) if "step" in rng else None
        if capacity is not None and lo > capacity:
            errs.append(_invalid(rp + ".min", rng["min"], "min is larger than capacity value"))
        if default is not None and default < lo:
            errs.append(_invalid(path + ".default", policy["default"], "default is less than "
                                 "min"))
        if hi is not None:
            if lo > hi:
                errs.append(_invalid(rp + ".max", rng["max"], "min is larger than max"))
            if capacity is not None and hi > capacity:
                errs.append(_invalid(rp + ".max", rng["max"], "max is larger than capacity "
                                     "value"))
            if default is not None and default > hi:
                errs.append(_invalid(path + ".default", policy["default"], "default is more "
                                     "than max"))
        if step is not None:
            if step <= 0:
                errs.append(_invalid(rp + ".step", rng["step"], "must be greater than zero"))
            else:
                if capacity is not None and lo + step > capacity:
                    errs.append(_invalid(rp + ".step", rng["step"], "one step is larger than "
                                         "capacity value"))
                for what, v in (("default", default), ("max", hi)):
                    if v is not None and (v - lo) % step:
                        errs.append(_invalid(rp + ".step", rng["step"], "%s is not a multiple "
                                             "of step from min" % what))
    return errs


_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _node_allocatable_errors(d, path):
    """1.37 Device.nodeAllocatableResources (KEP-5517), from the field
    descriptions of the 1.37 document: keys are node-allocatable resource
    names, not extended resources; each entry has a mapping or an overhead; a
    mapping is either deviceMultiplier alone or capacityKey (a capacity of the
    device) with capacityMultiplier; multipliers are positive quantities. The
    server's exact wording was not read: messages follow its usual forms."""
    errs = []
    res = d.get("nodeAllocatableResources")
    if res is None:
        return errs
    caps = d.get("capacity") or {}
    for name, r in res.items():
        rp = _key(path + ".nodeAllocatableResources", name)
        if name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
            errs.append(_invalid(rp, name, "must be a node allocatable resource name "
                                 "(cpu, memory, ephemeral-storage, hugepages-<size>), not an "
                                 "extended resource"))
        if not isinstance(r, dict) or not (r.get("mapping") or r.get("overhead")):
            errs.append(_required(rp, "one of mapping or overhead must be specified"))
            continue
        m = r.get("mapping")
        if not m:
            continue
        mp = rp + ".mapping"
        key, cmul, dmul = m.get("capacityKey"), m.get("capacityMultiplier"), m.get("deviceMultiplier")
        if key is not None:
            if key not in caps:
                errs.append(_invalid(mp + ".capacityKey", key, "must name a capacity of the device"))
            if cmul is None:
                errs.append(_required(mp + ".capacityMultiplier", "required with capacityKey"))
            if dmul is not None:
                errs.append(_forbidden(mp + ".deviceMultiplier", "may not be set together with "
                                       "capacityKey"))
        else:
            if cmul is not None:
                errs.append(_forbidden(mp + ".capacityMultiplier", "only valid with capacityKey"))
            if dmul is None:
                errs.append(_required(mp, "one of deviceMultiplier or capacityKey must be set"))
        for f, q in (("capacityMultiplier", cmul), ("deviceMultiplier", dmul)):
            if q is not None:
                v = parse_quantity(q)
                if v is None or v <= 0:
                    errs.append(_invalid(mp + "." + f, q, "must be a positive quantity"))
    return errs


def _device_errors(d, path, per_device):
    errs = []
    if not d.get("name"):
        errs.append(_required(path + ".name"))
    elif not is_dns_label(d["name"]):
        errs.append(_invalid(path + ".name", d["name"], "a lowercase RFC 1123 label of at most "
                             "63 characters"))
    attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
    if len(attrs) + len(caps) > MAX_ATTRIBUTES_AND_CAPACITIES:
        errs.append(_invalid(path, len(attrs) + len(caps), "the total number of attributes and "
                             "capacities must not exceed %d" % MAX_ATTRIBUTES_AND_CAPACITIES))
    values = 0
    for k, a in attrs.items():
        e, n = _attribute_errors(k, a, _key(path + ".attributes", k))
        errs += e
        values += n
    if values > MAX_ATTRIBUTE_VALUES:
        errs.append(_invalid(path, values, "the total number of attribute values must not "
                             "exceed %d" % MAX_ATTRIBUTE_VALUES))
    multi = d.get("allowMultipleAllocations") is True
    for k, c in caps.items():
        cp = _key(path + ".capacity", k)
        errs += _qualified_name_errors(k, cp)
        value = parse_quantity(c.get("value"))
        if value is None:
            errs.append(_invalid(cp + ".value", c.get("value"), "must be a quantity"))
        if "requestPolicy" not in c:
            continue
        if not multi:
            errs.append(_forbidden(cp + ".requestPolicy", "allowMultipleAllocations must be true "
                                   "for a capacity with a requestPolicy"))
        else:
            errs += _request_policy_errors(c["requestPolicy"], value, cp + ".requestPolicy")
    errs += _node_allocatable_errors(d, path)
    taints = d.get("taints") or []
    if len(taints) > MAX_TAINTS:
        errs.append(_too_many(path + ".taints", len(taints), MAX_TAINTS))
    for i, t in enumerate(taints):
        tp = "%s.taints[%d]" % (path, i)
        if not t.get("key"):
            errs.append(_required(tp + ".key"))
        elif not is_label_name(t["key"]):
            errs.append(_invalid(tp + ".key", t["key"], "must be a valid label name"))
        if not is_label_value(t.get("value", "")):
            errs.append(_invalid(tp + ".value", t["value"], "must be a valid label value"))
        if not t.get("effect"):
            errs.append(_required(tp + ".effect"))
        elif t["effect"] not in TAINT_EFFECTS:
            errs.append(_unsupported(tp + ".effect", t["effect"], TAINT_EFFECTS))
    uses = d.get("consumesCounters") or []
    if len(uses) > MAX_CONSUMED_SETS:
        errs.append(_too_many(path + ".consumesCounters", len(uses), MAX_CONSUMED_SETS))
    seen = set()
    for i, u in enumerate(uses):
        up = "%s.consumesCounters[%d]" % (path, i)
        cs = u.get("counterSet")
        if not is_dns_label(cs):
            errs.append(_invalid(up + ".counterSet", cs, "must be a DNS label"))
        elif cs in seen:
            errs.append(_duplicate(up + ".counterSet", cs))
        seen.add(cs)
        errs += _counters_errors(u.get("counters"), up + ".counters")
    if per_device:
        errs += _node_selection_errors(d, path, True)
    else:
        for f in ("nodeName", "nodeSelector", "allNodes"):
            if f in d:
                errs.append(_forbidden(path + "." + f, "only allowed when "
                                       "`perDeviceNodeSelection` is set to true"))
    conds = {}
    for f in ("bindingConditions", "bindingFailureConditions"):
        lst, fp = d.get(f) or [], path + "." + f
        conds[f] = set(lst)
        if len(lst) > MAX_BINDING_CONDITIONS:
            errs.append(_too_many(fp, len(lst), MAX_BINDING_CONDITIONS))
        for i, c in enumerate(lst):
            if not is_label_name(c):
                errs.append(_invalid("%s[%d]" % (fp, i), c, "must be a valid label name"))
            elif c in lst[:i]:
                errs.append(_duplicate("%s[%d]" % (fp, i), c))
    both = conds["bindingConditions"] & conds["bindingFailureConditions"]
    if both:
        errs.append(_invalid(path + ".bindingFailureConditions", sorted(both)[0],
                             "must not also be in bindingConditions"))
    if bool(conds["bindingConditions"]) != bool(conds["bindingFailureConditions"]):
        errs.append(_invalid(path, None, "bindingConditions and bindingFailureConditions must "
                             "be set together"))
    return errs


def _has_extras(d):
    """Devices that lower the slice's device limit to 64."""
    return bool(d.get("taints") or d.get("consumesCounters") or
                any(isinstance(a, dict) and any(k in a for k in LIST_KINDS)
                    for a in (d.get("attributes") or {}).values()))


def slice_errors(obj):
    """[(field, message)]: the apiserver's ResourceSlice validation of obj, an
    object that already passed the schema (types are not re-checked) and
    whose nulls are stripped. Rules not covered: immutability on update
    (the caller has the old object) and ratcheting of unchanged capacities."""
    errs = []
    meta = obj.get("metadata") or {}
    if meta.get("name"):
        if not is_dns_subdomain(meta["name"]):
            errs.append(_invalid("metadata.name", meta["name"], "a lowercase RFC 1123 subdomain "
                                 "must consist of lower case alphanumeric characters, '-' or '.'"))
    elif meta.get("generateName"):
        if not is_dns_subdomain(meta["generateName"], prefix=True):
            errs.append(_invalid("metadata.generateName", meta["generateName"],
                                 "a lowercase RFC 1123 subdomain prefix"))
    else:
        errs.append(_required("metadata.name", "name or generateName is required"))
    spec = obj.get("spec") or {}
    errs += _driver_name_errors(spec.get("driver"), "spec.driver")
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        errs.append(_required("spec.pool.name"))
    elif len(pool["name"]) > 253:
        errs.append(_too_long("spec.pool.name", 253))
    elif not all(is_dns_subdomain(p) for p in pool["name"].split("/")):
        errs.append(_invalid("spec.pool.name", pool["name"], "each '/'-separated part must be a "
                             "lowercase RFC 1123 subdomain"))
    if pool.get("generation", 0) < 0:
        errs.append(_invalid("spec.pool.generation", pool["generation"], "must be greater than "
                             "or equal to zero"))
    if pool.get("resourceSliceCount", 0) <= 0:
        errs.append(_invalid("spec.pool.resourceSliceCount", pool.get("resourceSliceCount", 0),
                             "must be greater than zero"))
    errs += _node_selection_errors(spec, "spec", False)
    devices, sets = spec.get("devices") or [], spec.get("sharedCounters") or []
    if devices and sets:
        errs.append(_forbidden("spec", "`devices` and `sharedCounters` cannot both be set in "
                               "one slice"))
    if len(sets) > MAX_COUNTER_SETS:
        errs.append(_too_many("spec.sharedCounters", len(sets), MAX_COUNTER_SETS))
    names = set()
    for i, s in enumerate(sets):
        sp = "spec.sharedCounters[%d]" % i
        if not is_dns_label(s.get("name")):
            errs.append(_invalid(sp + ".name", s.get("name"), "must be a DNS label"))
        elif s["name"] in names:
            errs.append(_duplicate(sp + ".name", s["name"]))
        names.add(s.get("name"))
        errs += _counters_errors(s.get("counters"), sp + ".counters")
    limit = MAX_DEVICES_WITH_EXTRAS if any(_has_extras(d) for d in devices) else MAX_DEVICES
    if len(devices) > limit:
        # the server stops here: per-device errors of a slice this large are noise
        return errs + [_too_many("spec.devices", len(devices), limit)]
    per_device = spec.get("perDeviceNodeSelection") is True
    names = set()
    for i, d in enumerate(devices):
        p = "spec.devices[%d]" % i
        if d.get("name") in names:
            errs.append(_duplicate(p, d["name"]))
        names.add(d.get("name"))
        errs += _device_errors(d, p, per_device)
    return errs


def label_errors(labels, path="metadata.labels"):
    """[(field, message)] for a metadata.labels map."""
    errs = []
    for k, v in (labels or {}).items():
        if not is_label_name(k):
            errs.append(_invalid(path, k, "a label key must be [prefix/]name, the name at most "
                                 "63 alphanumerics, '-', '_' or '.'"))
        if not is_label_value(v):
            errs.append(_invalid(_key(path, k), v, "a label value must be empty or at most 63 "
                                 "alphanumerics, '-', '_' or '.'"))
    return errs


# ------------------------------------------------------------------ CDI

@functools.lru_cache(maxsize=None)
def cdi_validator(directory=CDI_DIR):
    """Validator of CDI spec files. schema.json refers to defs.json beside it;
    the two become one document, so no reference resolver is needed (its API
    differs between jsonschema releases)."""
    with open(os.path.join(directory, "schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    with open(os.path.join(directory, "defs.json"), encoding="utf-8") as f:
        defs = json.load(f)

    def inline(node):
        if isinstance(node, list):
            return [inline(x) for x in node]
        if not isinstance(node, dict):
            return node
        return {k: "#" + v[len("defs.json#"):]
                if k == "$ref" and isinstance(v, str) and v.startswith("defs.json#")
                else inline(v) for k, v in node.items()}

    schema = inline(schema)
    schema["definitions"] = defs["definitions"]
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def cdi_errors(spec):
    """[(field, message)] of a parsed CDI spec file against the CDI schema."""
    errs = sorted(cdi_validator().iter_errors(spec), key=lambda e: [str(p) for p in e.absolute_path])
    return [(field_path(e.absolute_path), e.message) for e in errs]


# ------------------------------------------------------------------ samples

def sample_slice():
    """A valid ResourceSlice with one consumable CPU device, as dra-cpu
    publishes in grouped mode; tests mutate copies of it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "00000-dra.cpu-node-1-bcdfg"},
        "spec": {
            "driver": "dra.cpu",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{
                "name": "cpudevnuma000",
                "allowMultipleAllocations": True,
                "attributes": {
                    "dra.cpu/numaNodeID": {"int": 0},
                    "resource.kubernetes.io/numaNode": {"int": 0},
                    "dra.cpu/smtEnabled": {"bool": True},
                    "dra.cpu/cpuModel": {"string": "Sample CPU 64-Core"},
                    "dra.cpu/driverVersion": {"version": "0.4.1"},
                },
                "capacity": {
                    "dra.cpu/cpu": {"value": "64", "requestPolicy": {
                        "default": "1", "validRange": {"min": "1", "max": "64", "step": "1"}}},
                },
            }],
        },
    }


# ------------------------------------------------------------------ CLI

def _read_objects(path):
    """The objects in a file ('-' = stdin): one object, a JSON array of them,
    or a List. Raises OSError or ValueError."""
    if path == "-":
        data = json.load(sys.stdin)
    else:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
        return data["items"]
    return data if isinstance(data, list) else [data]


def _check(doc, obj, args):
    """(what, problems, warnings) of one object against one document.

    Server rules run only on what the schema accepts: the apiserver's decoder
    turns the rest away (400) before its validation runs."""
    if not args.keep_null:
        obj = strip_nulls(obj)
    name = doc.schema_name(obj, args.kind)
    problems = [("schema", p, m) for p, m in doc.errors(obj, name, args.strict)]
    warnings = []
    if not args.strict:
        warnings = [(p, m) for p, m in doc.errors(obj, name, True) if "Additional properties" in m]
    if args.server_rules and name.endswith(".ResourceSlice") and not problems:
        problems += [("server", p, m) for p, m in slice_errors(obj)]
    return "%s, %s" % (name.rsplit(".", 1)[-1], doc.version), problems, warnings


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Validate resource.k8s.io/v1 objects against the Kubernetes OpenAPI "
        "document (and the apiserver's ResourceSlice rules), or CDI spec files against the "
        "CDI schema. Exit 0: all valid; 1: something invalid; 2: unusable input.")
    ap.add_argument("files", nargs="+", metavar="FILE",
                    help="JSON file ('-' = stdin): an object, an array of objects or a List")
    ap.add_argument("--spec", action="append", metavar="FILE",
                    help="OpenAPI document, or 1.36 / 1.37 for the ones in test/data/api "
                    "(default 1.36); repeat to check against several")
    ap.add_argument("--kind", help="schema to use (a kind or a full schema name) instead of "
                    "the object's apiVersion/kind")
    ap.add_argument("--strict", action="store_true",
                    help="reject unknown fields (the apiserver's fieldValidation=Strict)")
    ap.add_argument("--server-rules", action="store_true",
                    help="also apply the apiserver's ResourceSlice validation rules")
    ap.add_argument("--keep-null", action="store_true",
                    help="validate null members instead of dropping them like the apiserver")
    ap.add_argument("--cdi", action="store_true", help="the files are CDI spec files")
    ap.add_argument("--quiet", action="store_true", help="print only what is invalid")
    args = ap.parse_args(argv)

    docs = []
    for s in ([] if args.cdi else args.spec or ["1.36"]):
        try:
            docs.append(ApiDocument(API_DOCS.get(s, s)))
        except (OSError, ValueError) as e:
            print("k8svalidate: cannot load OpenAPI document %s: %s" % (s, e), file=sys.stderr)
            return 2
    rc = 0
    for path in args.files:
        try:
            objs = _read_objects(path)
        except OSError as e:
            print("k8svalidate: %s: cannot read: %s" % (path, e.strerror), file=sys.stderr)
            rc = 2
            continue
        except ValueError as e:
            print("k8svalidate: %s: not valid JSON: %s" % (path, e), file=sys.stderr)
            rc = 2
            continue
        for i, obj in enumerate(objs):
            label = path if len(objs) == 1 else "%s[%d]" % (path, i)
            results = []
            if args.cdi:
                results.append(("CDI spec", [("schema", p, m) for p, m in cdi_errors(obj)], []))
            for doc in docs:
                try:
                    results.append(_check(doc, obj, args))
                except LookupError as e:
                    print("k8svalidate: %s: %s" % (label, e.args[0]), file=sys.stderr)
                    rc = 2
            for what, problems, warnings in results:
                if problems:
                    rc = max(rc, 1)
                    print("%s: INVALID (%s)" % (label, what))
                elif not args.quiet:
                    print("%s: valid (%s)" % (label, what))
                for layer, p, m in problems:
                    print("  %s: %s: %s" % (layer, p, m))
                for p, m in [] if args.quiet else warnings:
                    print("  warning: %s: unknown field, dropped by the apiserver: %s" % (p, m))
    return rc


if __name__ == "__main__":
    sys.exit(main())

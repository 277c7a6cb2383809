#!/usr/bin/env python3
"""A strict kube-apiserver simulator for dra-cpu's integration tests.

The driver's C client talks to this over HTTPS exactly as it would to a real
kube-apiserver: bearer-token auth, ResourceSlice
list/watch/get/create/update/delete with a global resourceVersion, 409/410/422
Status bodies, server-side ResourceSlice validation (k8svalidate.py beside
this file, against the resource.k8s.io/v1 OpenAPI document of Kubernetes 1.36
in test/data/api), gate-dependent and unknown-field dropping, canonical
quantities, nodes and claims GET. Tests steer it at runtime (faults, token
rotation, watch expiry, outages, kubelet-style wipes) through the Python API
or the HTTP control endpoints under /_sim/.

Facts come from Kubernetes 1.36: the resource.k8s.io/v1 types and their
validation (kubernetes/kubernetes pkg/apis/resource), apimachinery's watch
and Status types, client-go's in-cluster config. Tags in brackets name the
topic a comment relies on: [s1] feature gates, [s2] ResourceSlice fields,
[s4] validation rules, [s5] slice ownership and publishing, [s8] REST
endpoints and update semantics, [s9] the watch protocol, [s10] Status bodies,
[s11] in-cluster tokens, [s12] decoding. Where the real server's behaviour is
not pinned down, the simulator picks the stricter reading and says so in a
comment.

Concurrency: one ThreadingHTTPServer, one thread per connection. All state
lives in Store under one lock; every committed change is fanned out to the
open watches while that lock is held, so each watch sees events in
resourceVersion order with no gaps. Stored objects are never mutated after
commit (updates build new dicts), so readers may share them.

Run modes:
    from sim.apiserver import ApiServer
    s = ApiServer(tmpdir).start()      # s.url, s.ca, s.token, s.kubeconfig
    /usr/bin/python3 test/sim/apiserver.py --port 0 --dir DIR
"""

import argparse
import base64
import collections
import copy
import datetime
import http.client
import http.server
import json
import os
import queue
import random
import re
import secrets
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

# ------------------------------------------------------------- validator

if __package__:
    from . import k8svalidate as V
    from . import visible as VIS
    from . import volume
else:  # run as a script: this directory is sys.path[0]
    import k8svalidate as V
    import visible as VIS
    import volume

# The release simulated: its schema decodes every request body.
_SPEC = V.ApiDocument(V.API_DOCS["1.36"])

GROUP, VERSION = "resource.k8s.io", "v1"
API_VERSION = GROUP + "/" + VERSION
SLICE_SCHEMA = "io.k8s.api.resource.v1.ResourceSlice"
CLAIM_SCHEMA = "io.k8s.api.resource.v1.ResourceClaim"
DELETE_OPTIONS_SCHEMA = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
QUANTITY_SCHEMA = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# [s2] generateName: prefix cut to 58 chars + 5 chars from this alphabet
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_BODY = 3 * 1024 * 1024
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

# [s1] gates as of 1.36; tests may flip them (set_gates) to exercise the
# client's dropped-field detection.
DEFAULT_GATES = {
    "DRAConsumableCapacity": True,
    "DRAPartitionableDevices": True,
    "DRADeviceTaints": True,
    "DRADeviceBindingConditions": True,
    "DRAResourceClaimDeviceStatus": True,
    "DRAResourceClaimGranularStatusAuthorization": True,
    "DRAListTypeAttributes": False,
    "DRANodeAllocatableResources": False,
    "WatchList": True,
}


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------- certificates


class Certs:
    """Paths of a test CA and a server certificate signed by it."""

    def __init__(self, directory):
        self.dir = directory
        self.ca = os.path.join(directory, "ca.crt")
        self.ca_key = os.path.join(directory, "ca.key")
        self.cert = os.path.join(directory, "server.crt")
        self.key = os.path.join(directory, "server.key")

    def exist(self):
        return all(os.path.exists(p) for p in (self.ca, self.ca_key, self.cert, self.key))


def make_certs(directory, hosts=("127.0.0.1", "::1", "localhost"), name="dra-cpu-sim"):
    """Create (or reuse) a CA and a server cert for hosts in directory; returns Certs.

    EC P-256 keys (fast to make), CA with basicConstraints CA:TRUE, server cert
    with the hosts as subjectAltName and extendedKeyUsage serverAuth, which is
    what a strict TLS client verifies (the driver's checks the IP or DNS name).
    """
    os.makedirs(directory, exist_ok=True)
    c = Certs(directory)
    if c.exist():
        return c
    san = ",".join(("IP:" if re.match(r"^[0-9.:]+$", h) else "DNS:") + h for h in hosts)
    ext = os.path.join(directory, "server.ext")
    csr = os.path.join(directory, "server.csr")
    with open(ext, "w") as fh:
        fh.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                 "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % san)

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", c.ca_key, "-out", c.ca, "-days", "2",
        "-subj", "/CN=%s-ca" % name, "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-new", *ec, "-keyout", c.key, "-out", csr, "-subj", "/CN=%s" % name)
    run("x509", "-req", "-in", csr, "-CA", c.ca, "-CAkey", c.ca_key, "-CAcreateserial",
        "-out", c.cert, "-days", "2", "-extfile", ext)
    return c


# ----------------------------------------------------------------- errors

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}


def status_obj(code, message, reason=None, details=None):
    """A meta/v1 Status failure body [s10]."""
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason or REASONS.get(code, "Unknown"), "code": code}
    if details is not None:
        s["details"] = details
    return s


class ApiError(Exception):
    def __init__(self, code, message, reason=None, details=None, headers=()):
        super().__init__(message)
        self.code = code
        self.status = status_obj(code, message, reason, details)
        self.headers = list(headers)


def _details(name, resource, group=GROUP):
    d = {"name": name, "kind": resource}
    if group:
        d["group"] = group
    return d


def _qualified(resource, group=GROUP):
    return resource + "." + group if group else resource


def not_found(resource, name, group=GROUP):
    return ApiError(404, '%s "%s" not found' % (_qualified(resource, group), name),
                    details=_details(name, resource, group))


def conflict(resource, name, why, group=GROUP):
    return ApiError(409, 'Operation cannot be fulfilled on %s "%s": %s'
                    % (_qualified(resource, group), name, why),
                    details=_details(name, resource, group))


STALE = "the object has been modified; please apply your changes to the latest version and try again"

# ------------------------------------------------------------- quantities

_BIN_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_DEC_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


class _RawFloat(float):
    """A JSON float that remembers its text, so 1e3 stays an exponent quantity."""


def _parse_float(text):
    f = _RawFloat(text)
    f.text = text
    return f


def canonical_quantity(q):
    """Canonical string form of a Kubernetes quantity [s2], or None if malformed.

    The suffix family is kept (binary, decimal SI, decimal exponent); values
    are rounded up to nano precision; decimal exponents are multiples of 3;
    binary values in (-1024, 1024) or with a fraction fall back to decimal SI.
    """
    if isinstance(q, bool):
        return None
    if isinstance(q, int):
        text = str(q)
    elif isinstance(q, float):
        text = getattr(q, "text", repr(q))
    elif isinstance(q, str):
        text = q
    else:
        return None
    parsed = V.split_quantity(text)
    if parsed is None:
        return None
    value, suffix = parsed
    if suffix in _BIN_SUFFIX[1:] and value.denominator == 1 and abs(value) >= 1024:
        n, k = value.numerator, 0
        while k < 6 and n % 1024 == 0:
            n //= 1024
            k += 1
        return "%d%s" % (n, _BIN_SUFFIX[k])
    exp_form = suffix[:1] in ("e", "E")
    scaled = value * 10 ** 9
    n = -((-abs(scaled)) // 1)  # ceil of |value| in nano units: round away from zero
    n = int(n) * (1 if value >= 0 else -1)
    if n == 0:
        return "0"
    exp = -9
    while n % 10 == 0:
        n //= 10
        exp += 1
    while exp % 3:
        n *= 10
        exp -= 1
    if not exp_form and exp > 18:
        n *= 10 ** (exp - 18)
        exp = 18
    if exp_form:
        return "%d%s" % (n, "e%d" % exp if exp else "")
    return "%d%s" % (n, _DEC_SUFFIX[exp])


# --------------------------------------------------- decoding like the server


def decode_json(body):
    """Parse a request body; returns (object, duplicate keys). 400 on bad JSON."""
    dups = []

    def pairs(items):
        d = {}
        for k, v in items:
            if k in d:
                dups.append(k)
            d[k] = v
        return d

    def bad_constant(c):
        raise ValueError("invalid JSON constant %s" % c)

    try:
        obj = json.loads(body.decode("utf-8"), object_pairs_hook=pairs,
                         parse_float=_parse_float, parse_constant=bad_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise ApiError(400, "json parse error: %s" % e)
    return obj, dups


def _resolve(sch, spec=None):
    while isinstance(sch, dict):
        ref = sch.get("$ref")
        if ref:
            name = ref.rsplit("/", 1)[1]
            return name, (spec or _SPEC).schemas[name]
        all_of = sch.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            sch = all_of[0]
            continue
        break
    return None, sch


def _join(path, key):
    return "%s.%s" % (path, key) if path else key


def prune(node, sch, path, unknown, bad_quantities, spec=None):
    """Copy node keeping only fields the schema knows; canonicalize quantities.

    Unknown field paths go to unknown, malformed quantities to bad_quantities.
    Objects without declared properties (RawExtension, FieldsV1) are kept whole.
    spec: the OpenAPI document (default: the resource.k8s.io one).
    """
    name, s = _resolve(sch, spec)
    if name == QUANTITY_SCHEMA:
        c = canonical_quantity(node)
        if c is None:
            bad_quantities.append(path)
            return node
        return c
    if isinstance(node, dict):
        props = s.get("properties")
        if props is not None:
            out = {}
            for k, v in node.items():
                if k in props:
                    out[k] = prune(v, props[k], _join(path, k), unknown, bad_quantities, spec)
                else:
                    unknown.append(_join(path, k))
            return out
        ap = s.get("additionalProperties")
        if isinstance(ap, dict):
            return {k: prune(v, ap, "%s[%s]" % (path, k), unknown, bad_quantities, spec)
                    for k, v in node.items()}
        return node
    if isinstance(node, list) and isinstance(s.get("items"), dict):
        return [prune(v, s["items"], "%s[%d]" % (path, i), unknown, bad_quantities, spec)
                for i, v in enumerate(node)]
    return node


def decode_object(body_obj, schema, kind, api_version, field_validation, dups, warnings, also=(),
                  spec=None):
    """Turn a parsed body into a typed object the way the apiserver decoder does.

    400 for type errors, malformed quantities, wrong apiVersion/kind and (with
    fieldValidation=Strict) unknown or duplicate fields; otherwise unknown fields
    are dropped with a Warning [s12]. Missing required fields are not decode
    errors: the Go decoder leaves zero values that validation then rejects.
    """
    if field_validation not in ("", "Ignore", "Warn", "Strict"):
        raise ApiError(400, "fieldValidation parameter unsupported: %s" % field_validation)
    if not isinstance(body_obj, dict):
        raise ApiError(400, "Object 'Kind' is missing in request body")
    what = '%s in version "%s" cannot be handled as a %s' % (kind, api_version.split("/")[-1], kind)
    av, k = body_obj.get("apiVersion"), body_obj.get("kind")
    if av not in (None, "", api_version) + tuple(also):
        raise ApiError(400, "the API version in the data (%s) does not match the expected API version (%s)"
                       % (av, api_version))
    if k not in (None, "") and k != kind:
        raise ApiError(400, "%s: the kind in the data (%s) does not match the expected kind (%s)" % (what, k, kind))
    obj = V.strip_nulls(body_obj)
    errs = [e for e in (spec or _SPEC).iter_errors(obj, schema) if e.validator != "required"]
    if errs:
        e = errs[0]
        raise ApiError(400, "%s: %s: %s" % (what, V.field_path(e.absolute_path), e.message))
    unknown, badq = [], []
    obj = prune(obj, {"$ref": "#/components/schemas/" + schema}, "", unknown, badq, spec)
    if badq:
        raise ApiError(400, "%s: %s: quantities must match the regular expression "
                       "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" % (what, badq[0]))
    problems = ['unknown field "%s"' % p for p in unknown] + ['duplicate field "%s"' % d for d in dups]
    if problems and field_validation == "Strict":
        raise ApiError(400, "strict decoding error: " + ", ".join(problems))
    if field_validation in ("", "Warn"):
        warnings.extend(problems)
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj


# ---------------------------------------------------------- gate dropping


def _devices(spec):
    return [d for d in spec.get("devices") or [] if isinstance(d, dict)]


def _uses(spec, feature):
    devs = _devices(spec)
    if feature == "DRAConsumableCapacity":
        return any("allowMultipleAllocations" in d or any(
            isinstance(c, dict) and "requestPolicy" in c for c in (d.get("capacity") or {}).values())
            for d in devs)
    if feature == "DRAPartitionableDevices":
        return "sharedCounters" in spec or "perDeviceNodeSelection" in spec or any(
            k in d for d in devs for k in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"))
    if feature == "DRADeviceTaints":
        return any("taints" in d for d in devs)
    if feature == "DRADeviceBindingConditions":
        return any(k in d for d in devs for k in ("bindingConditions", "bindingFailureConditions", "bindsToNode"))
    if feature == "DRAListTypeAttributes":
        return any(isinstance(a, dict) and any(x in a for x in ("ints", "bools", "strings", "versions"))
                   for d in devs for a in (d.get("attributes") or {}).values())
    if feature == "DRANodeAllocatableResources":
        return any("nodeAllocatableResourceMappings" in d for d in devs)
    return False


def _drop(spec, feature):
    devs = _devices(spec)
    if feature == "DRAConsumableCapacity":
        for d in devs:
            d.pop("allowMultipleAllocations", None)
            for c in (d.get("capacity") or {}).values():
                if isinstance(c, dict):
                    c.pop("requestPolicy", None)
    elif feature == "DRAPartitionableDevices":
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
        for d in devs:
            for k in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                d.pop(k, None)
    elif feature == "DRADeviceTaints":
        for d in devs:
            d.pop("taints", None)
    elif feature == "DRADeviceBindingConditions":
        for d in devs:
            for k in ("bindingConditions", "bindingFailureConditions", "bindsToNode"):
                d.pop(k, None)
    elif feature == "DRAListTypeAttributes":
        # The whole attribute goes, not just its list value (the 1.36
        # strategy deletes attributes whose value is a list: kubernetes
        # PR 137190, dropDisableDRAListTypeAttributesFields).
        for d in devs:
            attrs = d.get("attributes")
            if isinstance(attrs, dict):
                for k in [k for k, a in attrs.items() if isinstance(a, dict) and any(
                        x in a for x in ("ints", "bools", "strings", "versions"))]:
                    del attrs[k]
    elif feature == "DRANodeAllocatableResources":
        for d in devs:
            d.pop("nodeAllocatableResourceMappings", None)


def drop_disabled_fields(obj, old, gates):
    """[s1] silently drop fields of disabled gates unless the old object used them."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    old_spec = (old or {}).get("spec") or {}
    for feature in ("DRAConsumableCapacity", "DRAPartitionableDevices", "DRADeviceTaints",
                    "DRADeviceBindingConditions", "DRAListTypeAttributes", "DRANodeAllocatableResources"):
        on = gates.get(feature, False)
        if feature == "DRADeviceBindingConditions":
            on = on and gates.get("DRAResourceClaimDeviceStatus", False)
        if not on and not _uses(old_spec, feature):
            _drop(spec, feature)


# -------------------------------------------------------------- selectors

_FS_TERM = re.compile(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$")
SLICE_FIELDS = ("metadata.name", "spec.nodeName", "spec.driver")


def parse_field_selector(text, supported):
    """[s8] 'a=b,c!=d' -> [(field, op, value)]; 400 on syntax or unsupported label."""
    terms = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        m = _FS_TERM.match(part)
        if not m:
            raise ApiError(400, "invalid field selector: %s" % part)
        field, op, value = m.groups()
        if field not in supported:
            raise ApiError(400, 'field label not supported: %s' % field)
        terms.append((field, "!=" if op == "!=" else "=", value))
    return terms


def _field_value(obj, field):
    cur = obj
    for p in field.split("."):
        cur = cur.get(p) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_match(obj, terms):
    for field, op, value in terms:
        if (_field_value(obj, field) == value) != (op == "="):
            return False
    return True


_LS_SET = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_LS_EQ = re.compile(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)\s*$")
_LS_EXISTS = re.compile(r"^\s*(!?)\s*([^=!\s(),]+)\s*$")


def parse_label_selector(text):
    """Minimal label selector: k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b)."""
    parts, depth, cur = [], 0, ""
    for ch in text or "":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    terms = []
    for p in parts:
        if not p.strip():
            continue
        m = _LS_SET.match(p)
        if m:
            vals = {v.strip() for v in m.group(3).split(",") if v.strip()}
            terms.append((m.group(1), m.group(2), vals))
            continue
        m = _LS_EQ.match(p)
        if m:
            terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", {m.group(3)}))
            continue
        m = _LS_EXISTS.match(p)
        if m:
            terms.append((m.group(2), "!" if m.group(1) else "exists", set()))
            continue
        raise ApiError(400, "unable to parse requirement: invalid label selector: %s" % p)
    return terms


def label_match(obj, terms):
    labels = ((obj.get("metadata") or {}).get("labels")) or {}
    for key, op, vals in terms:
        has, v = key in labels, labels.get(key)
        ok = {"=": has and v in vals, "in": has and v in vals,
              "!=": not has or v not in vals, "notin": not has or v not in vals,
              "exists": has, "!": not has}[op]
        if not ok:
            return False
    return True


# ------------------------------------------------------------------ store


class _Watch:
    def __init__(self, match, last_rv):
        self.match = match
        self.q = queue.Queue()
        self.last_rv = last_rv


def _strip_type(obj):
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def _with_rv(obj, rv):
    o = dict(obj)
    o["metadata"] = dict(o["metadata"], resourceVersion=str(rv))
    return o


class Store:
    """Objects, the global resourceVersion, slice history and the open watches."""

    def __init__(self, first_rv=1000, history_limit=1000):
        self.lock = threading.RLock()
        self.rv = first_rv
        self.floor = first_rv  # watches from rv >= floor can be served from history
        self.history = collections.deque()  # (rv, type, old, new) for resourceslices
        self.history_limit = history_limit
        self.slices = {}
        self.nodes = {}
        self.claims = {}
        self.watches = set()

    def next_rv(self):
        self.rv += 1
        return self.rv

    # slice events: called with the lock held
    def record(self, rv, etype, old, new):
        self.history.append((rv, etype, old, new))
        while len(self.history) > self.history_limit:
            self.floor = self.history.popleft()[0]
        for w in list(self.watches):
            ev = self._event_for(w.match, etype, old, new)
            if ev:
                w.q.put(("event",) + ev + (rv,))

    @staticmethod
    def _event_for(match, etype, old, new):
        """The event one watch sees; objects moving across its selector become ADDED/DELETED."""
        if etype == "ADDED":
            return ("ADDED", new) if match(new) else None
        if etype == "DELETED":
            return ("DELETED", new) if match(old) else None
        was, now = match(old), match(new)
        if was and now:
            return ("MODIFIED", new)
        if now:
            return ("ADDED", new)
        if was:
            return ("DELETED", _with_rv(old, new["metadata"]["resourceVersion"]))
        return None

    def slices_at(self, rv):
        """Slice map as of rv, rebuilt by undoing history; None if compacted."""
        if rv < self.floor:
            return None
        state = dict(self.slices)
        for erv, etype, old, new in reversed(self.history):
            if erv <= rv:
                break
            name = (new or old)["metadata"]["name"]
            if etype == "ADDED":
                state.pop(name, None)
            else:
                state[name] = old
        return state

    def compact(self):
        self.history.clear()
        self.floor = self.rv


# ----------------------------------------------------------------- faults


class Faults:
    """Runtime fault rules. Each rule: action (error|throttle|drop|delay|garbage),
    percent (default 100), count (None = unlimited), verb / resource filters
    (string or list; verb "write" = any write), code (error), retry_after
    (throttle), seconds (delay). garbage answers 200 with a body that is not
    JSON (one line, then the end: a broken watch stream), of size bytes if given. Delays add up; the
    first firing error/throttle/drop/garbage wins."""

    ACTIONS = ("error", "throttle", "drop", "delay", "garbage")

    def __init__(self, seed=None):
        self.lock = threading.Lock()
        self.rules = []
        self.rand = random.Random(seed)

    @staticmethod
    def check(rule):
        r = dict(rule)
        if r.get("action") not in Faults.ACTIONS:
            raise ValueError("fault action must be one of %s" % (Faults.ACTIONS,))
        r.setdefault("percent", 100)
        r.setdefault("count", None)
        for k in ("verb", "resource"):
            if isinstance(r.get(k), str):
                r[k] = [r[k]]
        return r

    def set(self, rules):
        rules = [self.check(r) for r in rules]
        with self.lock:
            self.rules = rules

    def add(self, rule):
        r = self.check(rule)
        with self.lock:
            self.rules.append(r)

    def list(self):
        with self.lock:
            return [dict(r) for r in self.rules]

    def pick(self, verb, resource):
        """Returns (delay seconds, terminal rule or None) for one request."""
        delay, terminal = 0.0, None
        with self.lock:
            for r in list(self.rules):
                verbs = r.get("verb")
                if verbs and verb not in verbs and not ("write" in verbs and verb in WRITE_VERBS):
                    continue
                if r.get("resource") and resource not in r["resource"]:
                    continue
                if r["action"] != "delay" and terminal is not None:
                    continue
                if self.rand.random() * 100 >= r["percent"]:
                    continue
                if r["count"] is not None:
                    r["count"] -= 1
                    if r["count"] <= 0:
                        self.rules.remove(r)
                if r["action"] == "delay":
                    delay += float(r.get("seconds", 0.5))
                else:
                    terminal = r
        return delay, terminal


# ----------------------------------------------------------- HTTP server


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, handler, sim, ssl_ctx, control_only=False):
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.sim = sim
        self.ssl_ctx = ssl_ctx
        self.control_only = control_only
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)

    def handle_error(self, request, client_address):
        # TLS handshake failures and peers vanishing are expected in fault tests
        self.sim._note_conn_error(sys.exc_info()[1])

    def kill_connections(self):
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120  # idle keep-alive connections
    server_version = "dra-cpu-apiserver-sim"
    sys_version = ""

    def setup(self):
        raw = self.request
        # like Go's net/http: no Nagle, or header and body writes stall on delayed ACKs
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.conns_lock:
            self.server.conns.add(raw)
        if self.server.ssl_ctx is not None:
            raw.settimeout(10)
            try:
                self.request = self.server.ssl_ctx.wrap_socket(raw, server_side=True)
            finally:
                with self.server.conns_lock:
                    self.server.conns.discard(raw)
            with self.server.conns_lock:
                self.server.conns.add(self.request)
        super().setup()

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        with self.server.conns_lock:
            self.server.conns.discard(self.request)

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.server.sim._serve(self, "GET")

    def do_POST(self):
        self.server.sim._serve(self, "POST")

    def do_PUT(self):
        self.server.sim._serve(self, "PUT")

    def do_PATCH(self):
        self.server.sim._serve(self, "PATCH")

    def do_DELETE(self):
        self.server.sim._serve(self, "DELETE")

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline(16)
                if len(data) > MAX_BODY:
                    self.close_connection = True
                    raise ApiError(413, "Request entity too large: limit is %d" % MAX_BODY)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, "Request entity too large: limit is %d" % MAX_BODY)
        return self.rfile.read(n) if n else b""

    log_entry = None

    def send_response(self, code, message=None):
        # recorded before anything reaches the client, so a test that just got
        # its answer always finds it in the log and counters
        self.server.sim._note_code(self.log_entry, code)
        super().send_response(code, message)

    def send_json(self, code, obj, headers=()):
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def drop(self):
        """Close without any response, like a crashed or unreachable server."""
        self.server.sim._note_code(self.log_entry, -1)
        self.log_entry = None
        self.close_connection = True
        try:
            self.request.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# ---------------------------------------------------------------- routing

_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_WATCH_SLICES = "/apis/resource.k8s.io/v1/watch/resourceslices"
_RE_SLICE = re.compile(r"^/apis/resource\.k8s\.io/v1/resourceslices/([^/]+)$")
_RE_NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")
_RE_CLAIM = re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)(/status)?$")


def classify(method, path, query):
    """(verb, resource, name, namespace) of a request, Kubernetes audit style."""
    watch = query.get("watch", "") in ("1", "true")
    ev = VIS.classify(method, path, query)
    if ev:
        return ev
    if path == _WATCH_SLICES:
        return "watch", "resourceslices", None, None
    if path == _SLICES:
        if method == "GET":
            return ("watch" if watch else "list"), "resourceslices", None, None
        return {"POST": "create", "DELETE": "deletecollection"}.get(method, method.lower()), \
            "resourceslices", None, None
    m = _RE_SLICE.match(path)
    if m:
        return {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete",
                "POST": "create"}.get(method, method.lower()), "resourceslices", m.group(1), None
    m = _RE_NODE.match(path)
    if m:
        return ("get" if method == "GET" else method.lower()), "nodes", m.group(1), None
    m = _RE_CLAIM.match(path)
    if m:
        res = "resourceclaims" + (m.group(3) or "")
        return ({"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
                .get(method, method.lower())), res, m.group(2), m.group(1)
    return method.lower(), path, None, None


def _discovery():
    def res(name, kind, namespaced, verbs):
        return {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs}
    all_verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION, "resources": [
        res("deviceclasses", "DeviceClass", False, all_verbs),
        res("resourceclaims", "ResourceClaim", True, all_verbs),
        res("resourceclaims/status", "ResourceClaim", True, ["get", "patch", "update"]),
        res("resourceclaimtemplates", "ResourceClaimTemplate", True, all_verbs),
        res("resourceslices", "ResourceSlice", False, all_verbs)]}


# ------------------------------------------------------------- simulator


class ApiServer:
    """The simulator. State survives down()/up(); see the module docstring.

    Attributes after start(): url, host, port, ca, token, token_file,
    kubeconfig (inline token), kubeconfig_tokenfile (tokenFile: reference),
    control_url (only if a separate control port was asked for).
    """

    CONTROL_METHODS = ("set_faults", "add_fault", "clear_faults", "set_tokens", "add_token",
                       "revoke_token", "rotate_token", "expire_watches", "compact",
                       "close_watches", "send_bookmarks", "down", "up", "wipe_node",
                       "put_node", "delete_node", "put_claim", "delete_claim", "put_slice",
                       "set_gates", "set_bookmark_interval", "queue_name_suffixes",
                       "reset_stats", "set_rbac", "expire_events")

    def __init__(self, directory, host="127.0.0.1", port=0, token=None, tls=True, certs=None,
                 control_port=None, bookmark_interval=1.0, min_request_timeout=1800,
                 history_limit=1000, first_rv=1000, gates=None, seed=None):
        self.dir = os.path.abspath(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.host, self.port = host, port
        self.tls = tls
        self.certs = certs
        self.control_port = control_port
        self.bookmark_interval = bookmark_interval
        self.min_request_timeout = min_request_timeout
        self.gates = dict(DEFAULT_GATES, **(gates or {}))
        self.store = Store(first_rv=first_rv, history_limit=history_limit)
        self.faults = Faults(seed)
        self.rand = random.Random(seed)
        self.name_suffixes = []
        self.token = token or secrets.token_urlsafe(24)
        self.tokens = {self.token}
        # The projected service-account volume, laid out as the kubelet does.
        self.sa_dir = os.path.join(self.dir, "serviceaccount")
        self.token_file = volume.path(self.sa_dir, "token")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.kubeconfig_tokenfile = os.path.join(self.dir, "kubeconfig-tokenfile")
        self.stats_lock = threading.Lock()
        self.counts = collections.Counter()
        self.codes = collections.Counter()
        self.requests_log = []
        self.conn_errors = 0
        self._httpd = None
        self._ctl = None
        self._down_timer = None
        self._life = threading.Lock()
        self.ca = None
        self.url = None
        self.control_url = None
        self.store.events = {}         # (ns, name) -> Event
        self.store.device_owners = {}  # (ns, claim) -> {status.devices key: field manager}
        self.rbac = None               # None: every authenticated request is allowed
        self.rbac_node = None
        self.rbac_user = "system:serviceaccount:dra-cpu:dra-cpu"

    # ---- lifecycle

    def start(self):
        ctx = None
        if self.tls:
            if self.certs is None:
                self.certs = make_certs(os.path.join(self.dir, "pki"))
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.certs.cert, self.certs.key)
            ctx.set_alpn_protocols(["http/1.1"])
            self.ca = self.certs.ca
        self._ssl_ctx = ctx
        self._listen()
        self.url = "%s://%s:%d" % ("https" if self.tls else "http", self._url_host(), self.port)
        if self.control_port is not None:
            self._ctl = _HTTPServer((self.host, self.control_port), _Handler, self, None, control_only=True)
            threading.Thread(target=self._ctl.serve_forever, args=(0.05,), name="sim-control",
                             daemon=True).start()
            self.control_url = "http://%s:%d" % (self._url_host(), self._ctl.server_address[1])
        self._write_token_file(self.token)
        self._write_kubeconfigs()
        return self

    def _url_host(self):
        return "[%s]" % self.host if ":" in self.host else self.host

    def _listen(self):
        httpd = _HTTPServer((self.host, self.port), _Handler, self, self._ssl_ctx)
        self.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, args=(0.05,), name="sim-api", daemon=True).start()
        self._httpd = httpd

    def stop(self):
        if self._down_timer:
            self._down_timer.cancel()
        self.down()
        if self._ctl:
            self._ctl.shutdown()
            self._ctl.server_close()
            self._ctl.kill_connections()
            self._ctl = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def down(self, seconds=None):
        """Stop listening and cut every open connection (watches included).
        With seconds, come back up by itself after that long."""
        with self._life:
            httpd, self._httpd = self._httpd, None
            if httpd is not None:
                httpd.shutdown()
                httpd.server_close()
                self.close_watches(abrupt=True)
                httpd.kill_connections()
            if seconds:
                self._down_timer = threading.Timer(float(seconds), self.up)
                self._down_timer.daemon = True
                self._down_timer.start()
        return {"down": True}

    def up(self):
        """Listen again on the same port."""
        with self._life:
            if self._httpd is None:
                self._listen()
        return {"down": False}

    @property
    def is_down(self):
        return self._httpd is None

    def env(self):
        """In-cluster environment variables pointing at this simulator [s11]."""
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self.port)}

    def info(self):
        return {"url": self.url, "host": self.host, "port": self.port, "ca": self.ca,
                "token": self.token, "token_file": self.token_file, "kubeconfig": self.kubeconfig,
                "kubeconfig_tokenfile": self.kubeconfig_tokenfile, "control_url": self.control_url,
                "dir": self.dir, "pid": os.getpid()}

    # ---- tokens [s11]

    def _write_token_file(self, tok):
        """Rotation as the kubelet does it: a new ..data for the whole volume."""
        files = {"token": tok, "namespace": "dra-cpu"}
        if self.ca:
            with open(self.ca, "rb") as fh:
                files["ca.crt"] = fh.read()
        volume.write(self.sa_dir, files)

    def _write_kubeconfigs(self):
        q = json.dumps  # a JSON string is a valid YAML scalar
        for path, user in ((self.kubeconfig, "token: %s" % q(self.token)),
                           (self.kubeconfig_tokenfile, "tokenFile: %s" % q(self.token_file))):
            lines = ["apiVersion: v1", "kind: Config", "clusters:", "- name: sim", "  cluster:",
                     "    server: %s" % q(self.url)]
            if self.ca:  # the CA as a pod sees it: a link in the projected volume
                lines.append("    certificate-authority: %s" % q(volume.path(self.sa_dir, "ca.crt")))
            lines += ["users:", "- name: sim", "  user:", "    " + user, "contexts:", "- name: sim",
                      "  context:", "    cluster: sim", "    user: sim", "current-context: sim", ""]
            with open(path, "w") as fh:
                fh.write("\n".join(lines))

    def set_tokens(self, tokens):
        self.tokens = set(tokens)
        return {"tokens": len(self.tokens)}

    def add_token(self, token):
        self.tokens.add(token)
        return {"tokens": len(self.tokens)}

    def revoke_token(self, token):
        self.tokens.discard(token)
        return {"tokens": len(self.tokens)}

    def rotate_token(self, token=None, keep_old=False):
        """New valid token, written to token_file (kubeconfig-tokenfile follows it).
        keep_old=False invalidates every earlier token at once."""
        token = token or secrets.token_urlsafe(24)
        self.tokens = (self.tokens | {token}) if keep_old else {token}
        self.token = token
        self._write_token_file(token)
        self._write_kubeconfigs()
        return {"token": token}

    # ---- faults and runtime controls

    def set_faults(self, rules):
        self.faults.set(rules)
        return {"rules": self.faults.list()}

    def add_fault(self, **rule):
        self.faults.add(rule)
        return {"rules": self.faults.list()}

    def clear_faults(self):
        self.faults.set([])
        return {"rules": []}

    def set_gates(self, **gates):
        unknown = set(gates) - set(DEFAULT_GATES)
        if unknown:
            raise ValueError("unknown gates %s" % sorted(unknown))
        self.gates.update(gates)
        return dict(self.gates)

    def set_bookmark_interval(self, seconds):
        self.bookmark_interval = float(seconds)
        return {"bookmark_interval": self.bookmark_interval}

    def queue_name_suffixes(self, suffixes):
        """The next generateName creates use these suffixes (to force collisions)."""
        self.name_suffixes.extend(suffixes)
        return {"queued": len(self.name_suffixes)}

    def compact(self):
        """Forget the event history: watches from any older resourceVersion get 410."""
        with self.store.lock:
            self.store.compact()
            return {"floor": str(self.store.floor)}

    def expire_watches(self, reason="Expired"):
        """Compact and end every open watch with an ERROR 410 event [s9]
        (reason Expired, or Gone which clients must treat the same)."""
        if reason not in ("Expired", "Gone"):
            raise ValueError("reason must be Expired or Gone")
        with self.store.lock:
            self.store.compact()
            n = len(self.store.watches)
            for w in list(self.store.watches):
                w.q.put(("error", status_obj(410, "too old resource version: %d (%d)"
                                             % (w.last_rv, self.store.floor), reason)))
            return {"expired": n, "floor": str(self.store.floor)}

    def close_watches(self, abrupt=False):
        """End open watches: cleanly (final chunk, like a server timeout) or abruptly (cut)."""
        with self.store.lock:
            for w in list(self.store.watches):
                w.q.put(("abort",) if abrupt else ("close",))
            return {"closed": len(self.store.watches)}

    def send_bookmarks(self):
        """Ask every open watch that allows bookmarks to send one now."""
        with self.store.lock:
            for w in list(self.store.watches):
                w.q.put(("bookmark",))
            return {"watches": len(self.store.watches)}

    def open_watches(self):
        with self.store.lock:
            return len(self.store.watches)

    # ---- objects the tests own

    def put_node(self, name, uid=None, labels=None):
        with self.store.lock:
            old = self.store.nodes.get(name)
            node = {"kind": "Node", "apiVersion": "v1", "metadata": {
                "name": name, "uid": uid or (old and old["metadata"]["uid"]) or str(uuid.uuid4()),
                "resourceVersion": str(self.store.next_rv()),
                "creationTimestamp": old["metadata"]["creationTimestamp"] if old else now_rfc3339()},
                "spec": {}, "status": {}}
            if labels:
                node["metadata"]["labels"] = dict(labels)
            self.store.nodes[name] = node
            return node

    def delete_node(self, name, gc=True):
        """Delete a node; with gc, also its slices (ownerReferences -> node uid) [s5]."""
        with self.store.lock:
            node = self.store.nodes.pop(name, None)
            if node is None:
                return {"deleted": 0}
            uid = node["metadata"]["uid"]
            n = 0
            if gc:
                for s in list(self.store.slices.values()):
                    if any(r.get("uid") == uid for r in s["metadata"].get("ownerReferences") or []):
                        self._delete_slice_locked(s)
                        n += 1
            return {"deleted": n}

    @staticmethod
    def _check_reserved_for(claim):
        """The API server's rules for status.reservedFor (k8s-api-facts 4):
        only with an allocation, at most 256, unique by uid, resource/name/uid
        required."""
        status = claim.get("status") or {}
        rf = status.get("reservedFor")
        if rf is None:
            return
        if rf and not status.get("allocation"):
            raise ValueError("status.reservedFor: may not be set when status.allocation is not")
        if len(rf) > 256:
            raise ValueError("status.reservedFor: must have at most 256 items")
        seen = set()
        for i, r in enumerate(rf):
            for k in ("resource", "name", "uid"):
                if not r.get(k):
                    raise ValueError("status.reservedFor[%d].%s: Required value" % (i, k))
            if r["uid"] in seen:
                raise ValueError("status.reservedFor[%d]: Duplicate value: uid %r" % (i, r["uid"]))
            seen.add(r["uid"])

    def put_claim(self, claim):
        """Store a ResourceClaim (tests set status.allocation and
        status.reservedFor); schema-checked."""
        claim = copy.deepcopy(claim)
        claim.setdefault("apiVersion", API_VERSION)
        claim.setdefault("kind", "ResourceClaim")
        errs = _SPEC.errors(V.strip_nulls(claim), CLAIM_SCHEMA, strict=True)
        if errs:
            raise ValueError("claim does not match the schema: %s" % errs)
        self._check_reserved_for(claim)
        meta = claim.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        key = (meta["namespace"], meta["name"])
        with self.store.lock:
            old = self.store.claims.get(key)
            meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"] if old else now_rfc3339())
            meta["resourceVersion"] = str(self.store.next_rv())
            meta.setdefault("generation", 1)
            if old is None or old["metadata"]["uid"] != meta["uid"]:
                self.store.device_owners.pop(key, None)
            self.store.claims[key] = claim
            return claim

    def reserve_claim(self, namespace, name, pods):
        """Add consumers to a stored claim, as the scheduler does when another
        pod gets a shared claim: pods are (name, uid) pairs or objects with
        .name and .uid (an NRI PodSandbox). Returns the new claim."""
        with self.store.lock:
            old = self.store.claims.get((namespace, name))
            if old is None:
                raise KeyError((namespace, name))
            c = copy.deepcopy(old)
        rf = c["status"].setdefault("reservedFor", [])
        for p in pods:
            pname, puid = (p if isinstance(p, tuple) else (p.name, p.uid))
            rf.append({"resource": "pods", "name": pname, "uid": puid})
        return self.put_claim(c)

    def delete_claim(self, namespace, name):
        with self.store.lock:
            self.store.device_owners.pop((namespace, name), None)
            return {"deleted": int(self.store.claims.pop((namespace, name), None) is not None)}

    def put_slice(self, obj):
        """Create a slice as another actor would (not counted as a client request)."""
        body = json.dumps(obj).encode()
        code, out, _ = self._slice_create(body, {}, "application/json")
        return out

    def wipe_node(self, node, driver=None):
        """Delete all slices of a node (and driver), as a kubelet restart does [s5]."""
        terms = [("spec.nodeName", "=", node)] + ([("spec.driver", "=", driver)] if driver else [])
        with self.store.lock:
            victims = [s for s in self.store.slices.values() if field_match(s, terms)]
            for s in victims:
                self._delete_slice_locked(s)
            return {"deleted": len(victims)}

    # ---- inspection

    def slices(self):
        with self.store.lock:
            return [copy.deepcopy(s) for _, s in sorted(self.store.slices.items())]

    def slice(self, name):
        with self.store.lock:
            s = self.store.slices.get(name)
            return copy.deepcopy(s) if s else None

    @property
    def resource_version(self):
        with self.store.lock:
            return str(self.store.rv)

    def count(self, verb, resource="resourceslices"):
        with self.stats_lock:
            return self.counts["%s %s" % (verb, resource)]

    def writes(self, resource="resourceslices"):
        with self.stats_lock:
            return sum(self.counts["%s %s" % (v, resource)] for v in WRITE_VERBS)

    def stats(self):
        with self.stats_lock:
            return {"counts": dict(self.counts), "codes": {str(k): v for k, v in self.codes.items()},
                    "writes": sum(n for k, n in self.counts.items() if k.split(" ")[0] in WRITE_VERBS),
                    "total": sum(self.counts.values()), "open_watches": self.open_watches(),
                    "connection_errors": self.conn_errors, "resourceVersion": self.resource_version}

    def log(self, since=0):
        with self.stats_lock:
            return [dict(e) for e in self.requests_log[since:]]

    def reset_stats(self):
        with self.stats_lock:
            self.counts.clear()
            self.codes.clear()
            self.requests_log.clear()
        return {"reset": True}

    def wait_for(self, predicate, timeout=10.0, interval=0.02, what="condition"):
        """Poll predicate() until truthy; returns its value or raises TimeoutError."""
        end = time.monotonic() + timeout
        while True:
            v = predicate()
            if v:
                return v
            if time.monotonic() >= end:
                raise TimeoutError("timed out after %.1fs waiting for %s" % (timeout, what))
            time.sleep(interval)

    def _note_code(self, entry, code):
        if entry is None or entry.get("code") is not None:
            return
        with self.stats_lock:
            entry["code"] = code
            self.codes[code] += 1

    def _note_conn_error(self, exc):
        with self.stats_lock:
            self.conn_errors += 1

    # ---- request entry point

    def _serve(self, h, method):
        t0 = time.monotonic()
        url = urllib.parse.urlsplit(h.path)
        path = url.path
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        if path.startswith("/_sim/") or h.server.control_only:
            return self._serve_control(h, method, path, query)
        verb, resource, name, ns = classify(method, path, query)
        entry = {"method": method, "path": h.path, "verb": verb, "resource": resource, "name": name,
                 "user_agent": h.headers.get("User-Agent", ""), "time": time.time(),
                 "code": None, "fault": None}
        with self.stats_lock:
            self.counts["%s %s" % (verb, resource)] += 1
            entry["seq"] = len(self.requests_log)
            self.requests_log.append(entry)
        h.log_entry = entry
        try:
            try:
                body = h.read_body()
            except ApiError:
                raise
            except (ValueError, OSError):
                h.drop()
                return
            if path in ("/healthz", "/readyz", "/livez"):
                h.send_text(200, "ok")
                return
            if path == "/version":
                h.send_json(200, {"major": "1", "minor": "36", "gitVersion": "v1.36.3-dra-cpu-sim",
                                  "platform": "linux/amd64"})
                return
            auth = h.headers.get("Authorization", "")
            if not (auth.startswith("Bearer ") and auth[7:].strip() in self.tokens):
                raise ApiError(401, "Unauthorized")
            self._authorize(verb, resource, name, ns, path)
            delay, rule = self.faults.pick(verb, resource)
            if delay:
                entry["fault"] = "delay"
                time.sleep(delay)
            if rule is not None:
                entry["fault"] = rule["action"]
                if rule["action"] == "drop":
                    h.drop()
                    return
                if rule["action"] == "garbage":
                    size = int(rule.get("size", 0))  # a line this long, else a short one
                    data = (b"x" * size if size else b"this is not a watch event") + b"\n"
                    h.send_response(200)
                    h.send_header("Content-Type", "application/json;stream=watch")
                    h.send_header("Transfer-Encoding", "chunked")
                    h.end_headers()
                    h.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
                    entry["code"] = 200
                    return
                if rule["action"] == "throttle":
                    ra = int(rule.get("retry_after", 1))
                    raise ApiError(429, rule.get("message", "Too many requests, please try again later."),
                                   details={"retryAfterSeconds": ra}, headers=[("Retry-After", str(ra))])
                c = int(rule.get("code", 500))
                default = "Internal error occurred: injected fault" if c == 500 else \
                    "injected fault (%s)" % REASONS.get(c, c)
                raise ApiError(c, rule.get("message", default), rule.get("reason"),
                               details={"causes": [{"message": "injected by the simulator"}]} if c == 500 else None)
            accept = h.headers.get("Accept", "")
            if accept and not any(a.split(";")[0].strip() in ("application/json", "*/*", "application/*")
                                  for a in accept.split(",")):
                raise ApiError(406, "only the following media types are accepted: application/json")
            self._dispatch(h, method, path, query, verb, resource, name, ns, body)
        except ApiError as e:
            h.send_json(e.code, e.status, e.headers)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
            h.close_connection = True
            self._note_code(entry, -1)
        finally:
            h.log_entry = None
            entry["duration"] = round(time.monotonic() - t0, 4)

    def _dispatch(self, h, method, path, query, verb, resource, name, ns, body):
        if path.rstrip("/") == "/apis/resource.k8s.io/v1" and method == "GET":
            h.send_json(200, _discovery())
            return 200
        ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
        if resource == "resourceslices":
            warnings = []
            if verb == "list":
                code, out = 200, self._slice_list(query)
            elif verb == "watch":
                return self._slice_watch(h, query)
            elif verb == "get":
                code, out = 200, self._slice_get(name)
            elif verb == "create" and name is None:
                code, out, warnings = self._slice_create(body, query, ctype)
            elif verb == "update":
                code, out, warnings = self._slice_update(name, body, query, ctype)
            elif verb == "delete":
                code, out = self._slice_delete(name, body, query, ctype)
            elif verb == "deletecollection":
                code, out = self._slice_delete_collection(body, query, ctype)
            elif verb == "patch":
                raise ApiError(415, "the simulator does not implement PATCH (the official "
                               "publishing controller uses PUT); content type %s" % (ctype or "(none)"))
            else:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            h.send_json(code, out, [("Warning", '299 - "%s"' % w.replace('"', '\\"')) for w in warnings])
            return code
        if resource == "nodes":
            if verb != "get":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            with self.store.lock:
                node = self.store.nodes.get(name)
            if node is None:
                raise not_found("nodes", name, group="")
            h.send_json(200, node)
            return 200
        if resource == "events":
            code, out = self._events(verb, name, ns, body, query, ctype)
            h.send_json(code, out)
            return code
        if resource == "resourceclaims/status" and verb == "patch":
            code, out = self._claim_status_apply(name, ns, body, query, ctype)
            h.send_json(code, out)
            return code
        if resource in ("resourceclaims", "resourceclaims/status"):
            if verb != "get":
                raise ApiError(405, "the simulator only implements GET for resourceclaims")
            with self.store.lock:
                claim = self.store.claims.get((ns, name))
            if claim is None:
                raise not_found("resourceclaims", name)
            h.send_json(200, claim)
            return 200
        raise ApiError(404, "the server could not find the requested resource", details={})

    # ---- RBAC (visible.py [r1])

    def set_rbac(self, rules, node=None, user=None):
        """Authorize every request against rules (a ClusterRole's rules; None:
        allow all). node: the node the caller's token is bound to."""
        self.rbac = copy.deepcopy(rules) if rules is not None else None
        self.rbac_node = node
        if user:
            self.rbac_user = user
        return {"rbac": rules is not None}

    @staticmethod
    def _group_of(resource, path):
        if resource == "events":
            return VIS.EVENTS_GROUP
        if resource == "nodes" or path.startswith("/api/"):
            return ""
        return GROUP

    def _authorize(self, verb, resource, name, ns, path):
        if self.rbac is None or resource.startswith("/"):
            return
        group = self._group_of(resource, path)
        if not VIS.allowed(self.rbac, group, resource, verb, name):
            code, text, details = VIS.forbidden(self.rbac_user, group, resource, verb, name, ns)
            raise ApiError(code, text, "Forbidden", details=details)

    def _authorize_drivers(self, claim, drivers, verb):
        """[r1] the per-driver check of a status.devices change."""
        if self.rbac is None or not self.gates.get("DRAResourceClaimGranularStatusAuthorization"):
            return
        node = VIS.claim_node(claim)
        for drv in drivers:
            prefixes = (["associated-node"] if self.rbac_node and node == self.rbac_node else []) + \
                ["arbitrary-node"]
            if any(VIS.allowed(self.rbac, GROUP, "resourceclaims/driver", "%s:%s" % (p, verb), drv)
                   for p in prefixes):
                continue
            code, text, details = VIS.forbidden(self.rbac_user, GROUP, "resourceclaims/driver",
                                                "%s:%s" % (prefixes[0], verb), drv, None)
            raise ApiError(code, text, "Forbidden", details=details)

    # ---- events.k8s.io/v1 Events (visible.py [e1] [e2])

    def events(self, namespace=None):
        """Every stored Event (of a namespace), oldest first."""
        with self.store.lock:
            evs = [copy.deepcopy(e) for (ns, _), e in self.store.events.items()
                   if namespace in (None, ns)]
        return sorted(evs, key=lambda e: int(e["metadata"]["resourceVersion"]))

    def expire_events(self):
        """Delete every Event, as their time-to-live does."""
        with self.store.lock:
            n = len(self.store.events)
            self.store.events.clear()
        return {"expired": n}

    def _decode_event(self, obj, query, dups):
        warnings = []
        return decode_object(obj, VIS.EVENT_SCHEMA, "Event", VIS.EVENTS_API_VERSION,
                             query.get("fieldValidation", ""), dups, warnings, spec=VIS.events_spec())

    def _events(self, verb, name, ns, body, query, ctype):
        if verb == "create" and name is None:
            if ctype != "application/json":
                raise ApiError(415, "the body of the request was in an unknown format - accepted "
                               "media types include: application/json (content type %s)" % (ctype or "(none)"))
            obj, dups = decode_json(body)
            ev = self._decode_event(obj, query, dups)
            meta = ev.setdefault("metadata", {})
            if meta.get("namespace") not in (None, "", ns):
                raise ApiError(400, "the namespace of the provided object does not match the "
                               "namespace sent on the request")
            meta["namespace"] = ns
            for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
                meta.pop(k, None)
            errs = VIS.event_errors(ev, ns)
            if errs:
                code, text, details = VIS.invalid("Event", VIS.EVENTS_GROUP, meta.get("name", ""), errs)
                raise ApiError(code, text, "Invalid", details=details)
            with self.store.lock:
                if (ns, meta["name"]) in self.store.events:
                    raise ApiError(409, 'events.events.k8s.io "%s" already exists' % meta["name"],
                                   "AlreadyExists", details=_details(meta["name"], "events", VIS.EVENTS_GROUP))
                meta["uid"] = str(uuid.uuid4())
                meta["creationTimestamp"] = now_rfc3339()
                meta["resourceVersion"] = str(self.store.next_rv())
                self.store.events[(ns, meta["name"])] = ev
            return 201, ev
        if verb == "patch":
            if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                raise ApiError(415, "the simulator implements merge and strategic-merge patches of "
                               "events only (content type %s)" % (ctype or "(none)"))
            patch, dups = decode_json(body)
            with self.store.lock:
                old = self.store.events.get((ns, name))
                if old is None:
                    raise not_found("events", name, group=VIS.EVENTS_GROUP)
                new = VIS.merge_patch(old, patch)
                ev = self._decode_event(new, query, dups)
                errs = [(VIS._INTERNAL.get(f, f), "Invalid value: field is immutable")
                        for f in VIS.IMMUTABLE if ev.get(f) != old.get(f)]
                if ev.get("series") != old.get("series"):
                    errs.extend(VIS.series_errors(ev))
                if (ev.get("metadata") or {}).get("name") != name:
                    errs.append(("metadata.name", "Invalid value: field is immutable"))
                if errs:
                    code, text, details = VIS.invalid("Event", VIS.EVENTS_GROUP, name, errs)
                    raise ApiError(code, text, "Invalid", details=details)
                ev["metadata"] = dict(old["metadata"], resourceVersion=str(self.store.next_rv()))
                self.store.events[(ns, name)] = ev
            return 200, ev
        if verb == "get":
            with self.store.lock:
                ev = self.store.events.get((ns, name))
            if ev is None:
                raise not_found("events", name, group=VIS.EVENTS_GROUP)
            return 200, ev
        if verb == "list":
            return 200, {"kind": "EventList", "apiVersion": VIS.EVENTS_API_VERSION,
                         "metadata": {"resourceVersion": self.resource_version},
                         "items": self.events(ns)}
        raise ApiError(405, "the simulator implements create, patch, get and list of events")

    # ---- ResourceClaim status.devices (visible.py [c1] [c2])

    def _claim_status_apply(self, name, ns, body, query, ctype):
        if ctype != "application/apply-patch+yaml":
            raise ApiError(415, "the simulator implements server-side apply "
                           "(application/apply-patch+yaml) of resourceclaims/status only "
                           "(content type %s)" % (ctype or "(none)"))
        manager = query.get("fieldManager", "")
        if not manager:
            raise ApiError(422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required '
                           "value: is required for apply patch", "Invalid")
        force = query.get("force", "false")
        if force not in ("true", "false"):
            raise ApiError(400, "force: invalid value %r" % force)
        try:
            obj = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            try:
                import yaml
                obj = yaml.safe_load(body.decode("utf-8"))
            except Exception as e:  # noqa: BLE001 - any YAML error is a 400
                raise ApiError(400, "error decoding YAML: %s" % e)
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            raise ApiError(400, "invalid object type: /, Kind=")
        warnings = []
        obj = decode_object(obj, CLAIM_SCHEMA, "ResourceClaim", API_VERSION,
                            query.get("fieldValidation", ""), [], warnings)
        meta = obj.get("metadata") or {}
        if meta.get("name") != name:
            raise ApiError(400, "the name of the object (%s) does not match the name on the URL (%s)"
                           % (meta.get("name", ""), name))
        if meta.get("namespace") not in (None, "", ns):
            raise ApiError(400, "the namespace of the provided object does not match the namespace "
                           "sent on the request")
        status = obj.get("status") or {}
        if any(k in status for k in ("allocation", "reservedFor")):
            raise ApiError(415, "the simulator applies status.devices only")
        applied = status.get("devices") or []
        with self.store.lock:
            cur = self.store.claims.get((ns, name))
            if cur is None:
                raise not_found("resourceclaims", name)
            if meta.get("uid") and meta["uid"] != cur["metadata"]["uid"]:
                raise conflict("resourceclaims", name, "Precondition failed: UID in precondition: %s, "
                               "UID in object meta: %s" % (cur["metadata"]["uid"], meta["uid"]))
            owners = copy.deepcopy(self.store.device_owners.get((ns, name), {}))
            devices, conflicts = VIS.apply_devices(cur, owners, manager, applied, force == "true")
            if conflicts:
                owner, key = conflicts[0]
                raise ApiError(409, 'Apply failed with %d conflict: conflict with "%s": '
                               ".status.devices[driver=%s,device=%s,pool=%s,shareID=%s]"
                               % (len(conflicts), owner, *key), "Conflict",
                               details=_details(name, "resourceclaims"))
            if not self.gates.get("DRAResourceClaimDeviceStatus"):
                devices = []
            errs = VIS.status_devices_errors(cur, devices)
            if errs:
                code, text, details = VIS.invalid("ResourceClaim", GROUP, name, errs)
                raise ApiError(code, text, "Invalid", details=details)
            old = (cur.get("status") or {}).get("devices") or []
            self._authorize_drivers(cur, VIS.changed_drivers(old, devices), "patch")
            new = copy.deepcopy(cur)
            if devices:
                new.setdefault("status", {})["devices"] = devices
            else:
                new.setdefault("status", {}).pop("devices", None)
            if devices != old:
                new["metadata"]["resourceVersion"] = str(self.store.next_rv())
            self.store.claims[(ns, name)] = new
            self.store.device_owners[(ns, name)] = owners
        return 200, new

    # ---- ResourceSlice

    def _decode_slice(self, body, query, ctype, old, warnings):
        if ctype != "application/json":
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types "
                           "include: application/json (content type %s)" % (ctype or "(none)"))
        obj, dups = decode_json(body)
        obj = decode_object(obj, SLICE_SCHEMA, "ResourceSlice", API_VERSION,
                            query.get("fieldValidation", ""), dups, warnings)
        drop_disabled_fields(obj, old, self.gates)
        spec = obj.get("spec")
        if isinstance(spec, dict):
            pool = spec.get("pool")
            if isinstance(pool, dict):
                pool.setdefault("generation", 0)  # [s12] absent decodes as 0
            for d in _devices(spec):
                for t in d.get("taints") or []:
                    if isinstance(t, dict):
                        t.setdefault("timeAdded", now_rfc3339())  # [s2]
            if isinstance(spec.get("driver"), str) and spec["driver"] != spec["driver"].lower():
                warnings.append("driver names should be lowercase")  # [s4] rule 19
        return obj

    @staticmethod
    def _dry_run(query):
        dr = query.get("dryRun", "")
        if dr not in ("", "All"):
            raise ApiError(400, "Invalid dryRun value: %s (only All is supported)" % dr)
        return dr == "All"

    @staticmethod
    def _invalid(name, errs):
        causes = []
        # messages open with the field error's type, as the apiserver writes them
        kinds = (("Required value", "FieldValueRequired"), ("Too many", "FieldValueTooMany"),
                 ("Too long", "FieldValueTooLong"), ("Duplicate value", "FieldValueDuplicate"),
                 ("Forbidden", "FieldValueForbidden"), ("Unsupported value", "FieldValueNotSupported"))
        for field, msg in errs:
            reason = next((r for p, r in kinds if msg.startswith(p)), "FieldValueInvalid")
            causes.append({"reason": reason, "message": msg, "field": field})
        text = ", ".join("%s: %s" % (c["field"], c["message"]) for c in causes)
        if len(causes) > 1:
            text = "[" + text + "]"
        return ApiError(422, 'ResourceSlice.resource.k8s.io "%s" is invalid: %s' % (name or "", text),
                        details={"name": name or "", "group": GROUP, "kind": "ResourceSlice", "causes": causes})

    @staticmethod
    def _meta_errors(meta):
        errs = V.label_errors(meta.get("labels"))
        for i, ref in enumerate(meta.get("ownerReferences") or []):
            for f in ("apiVersion", "kind", "name", "uid"):
                if not ref.get(f):
                    errs.append(("metadata.ownerReferences[%d].%s" % (i, f), "Required value"))
        return errs

    @staticmethod
    def _managed_fields(query):
        # simplified: real entries list every field the manager set
        return [{"manager": query.get("fieldManager") or "dra-cpu-sim-client", "operation": "Update",
                 "apiVersion": API_VERSION, "time": now_rfc3339(), "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {}}}]

    def _slice_get(self, name):
        with self.store.lock:
            s = self.store.slices.get(name)
        if s is None:
            raise not_found("resourceslices", name)
        return s

    def _slice_create(self, body, query, ctype):
        warnings = []
        dry = self._dry_run(query)
        obj = self._decode_slice(body, query, ctype, None, warnings)
        meta = obj.setdefault("metadata", {})
        for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                  "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "namespace"):
            meta.pop(k, None)
        with self.store.lock:
            if not meta.get("name") and meta.get("generateName"):
                suffix = self.name_suffixes.pop(0) if self.name_suffixes else \
                    "".join(self.rand.choice(NAME_ALPHABET) for _ in range(5))
                meta["name"] = meta["generateName"][:58] + suffix
            errs = V.slice_errors(obj) + self._meta_errors(meta)
            if errs:
                raise self._invalid(meta.get("name"), errs)
            name = meta["name"]
            if name in self.store.slices:
                raise ApiError(409, 'resourceslices.resource.k8s.io "%s" already exists' % name, "AlreadyExists",
                               details=_details(name, "resourceslices"))
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            meta["managedFields"] = self._managed_fields(query)
            if dry:
                meta["resourceVersion"] = str(self.store.rv)  # not persisted
                return 201, obj, warnings
            rv = self.store.next_rv()
            meta["resourceVersion"] = str(rv)
            self.store.slices[name] = obj
            self.store.record(rv, "ADDED", None, obj)
        return 201, obj, warnings

    def _slice_update(self, name, body, query, ctype):
        warnings = []
        dry = self._dry_run(query)
        with self.store.lock:
            cur = self.store.slices.get(name)
            obj = self._decode_slice(body, query, ctype, cur, warnings)
            meta = obj.setdefault("metadata", {})
            if meta.get("name") != name:
                raise ApiError(400, "the name of the object (%s) does not match the name on the URL (%s)"
                               % (meta.get("name", ""), name))
            if cur is None:
                raise not_found("resourceslices", name)  # [s8] no create-on-update
            cmeta = cur["metadata"]
            if meta.get("resourceVersion") and meta["resourceVersion"] != cmeta["resourceVersion"]:
                raise conflict("resourceslices", name, STALE)
            if meta.get("uid") and meta["uid"] != cmeta["uid"]:
                raise conflict("resourceslices", name, "Precondition failed: UID in precondition: %s, "
                               "UID in object meta: %s" % (meta["uid"], cmeta["uid"]))
            errs = V.slice_errors(obj) + self._meta_errors(meta)
            spec, cspec = obj.get("spec") or {}, cur.get("spec") or {}
            for f, get in (("spec.driver", lambda s: s.get("driver")),
                           ("spec.pool.name", lambda s: (s.get("pool") or {}).get("name")),
                           ("spec.nodeName", lambda s: s.get("nodeName"))):
                if get(spec) != get(cspec):  # [s4] rule 18
                    errs.append((f, "field is immutable"))
            if errs:
                raise self._invalid(name, errs)
            for k in ("uid", "creationTimestamp"):
                meta[k] = cmeta[k]
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "namespace"):
                meta.pop(k, None)
            meta["generation"] = cmeta["generation"] + (1 if spec != cspec else 0)
            meta["resourceVersion"] = cmeta["resourceVersion"]
            meta["managedFields"] = cmeta.get("managedFields")
            if obj == cur:
                # Nothing changed: the real server skips the storage write, so no
                # new resourceVersion and no watch event (a no-op PUT is still
                # counted as an update request in the stats).
                return 200, cur, warnings
            meta["managedFields"] = self._managed_fields(query)
            if dry:
                return 200, obj, warnings
            rv = self.store.next_rv()
            meta["resourceVersion"] = str(rv)
            self.store.slices[name] = obj
            self.store.record(rv, "MODIFIED", cur, obj)
        return 200, obj, warnings

    def _delete_options(self, body, ctype):
        if not body.strip():
            return {}
        if ctype not in ("application/json", ""):
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types "
                           "include: application/json")
        obj, dups = decode_json(body)
        # DeleteOptions is registered in core, meta and every API group
        return decode_object(obj, DELETE_OPTIONS_SCHEMA, "DeleteOptions", "v1", "", dups, [],
                             also=("meta.k8s.io/v1", API_VERSION))

    def _delete_slice_locked(self, cur):
        rv = self.store.next_rv()
        name = cur["metadata"]["name"]
        del self.store.slices[name]
        self.store.record(rv, "DELETED", cur, _with_rv(cur, rv))

    def _slice_delete(self, name, body, query, ctype):
        opts = self._delete_options(body, ctype)
        dry = self._dry_run(query) or "All" in (opts.get("dryRun") or [])
        pre = opts.get("preconditions") or {}
        with self.store.lock:
            cur = self.store.slices.get(name)
            if cur is None:
                raise not_found("resourceslices", name)
            cmeta = cur["metadata"]
            if pre.get("uid") and pre["uid"] != cmeta["uid"]:
                raise conflict("resourceslices", name, "Precondition failed: UID in precondition: %s, "
                               "UID in object meta: %s" % (pre["uid"], cmeta["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != cmeta["resourceVersion"]:
                raise conflict("resourceslices", name, "Precondition failed: ResourceVersion in precondition: "
                               "%s, ResourceVersion in object meta: %s"
                               % (pre["resourceVersion"], cmeta["resourceVersion"]))
            if not dry:
                self._delete_slice_locked(cur)
        return 200, cur

    def _selectors(self, query):
        fterms = parse_field_selector(query.get("fieldSelector", ""), SLICE_FIELDS)
        lterms = parse_label_selector(query.get("labelSelector", ""))
        return lambda o: field_match(o, fterms) and label_match(o, lterms)

    def _slice_delete_collection(self, body, query, ctype):
        self._delete_options(body, ctype)
        match = self._selectors(query)
        dry = self._dry_run(query)
        with self.store.lock:
            victims = [s for _, s in sorted(self.store.slices.items()) if match(s)]
            if not dry:
                for s in victims:
                    self._delete_slice_locked(s)
            rv = self.store.rv
        return 200, {"kind": "ResourceSliceList", "apiVersion": API_VERSION,
                     "metadata": {"resourceVersion": str(rv)}, "items": [_strip_type(s) for s in victims]}

    @staticmethod
    def _parse_rv(text, what="resourceVersion"):
        try:
            v = int(text)
            if v < 0:
                raise ValueError
            return v
        except ValueError:
            raise ApiError(400, "invalid %s: %s" % (what, text))

    def _list_options_errors(self, query, watch):
        """[s9] ListOptions rules: 422 Invalid on kind ListOptions."""
        errs = []
        rv, rvm = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
        sie = query.get("sendInitialEvents", "")
        if watch:
            if sie in ("true", "1"):
                if not self.gates.get("WatchList"):
                    errs.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for watch "
                                 "unless the WatchList feature gate is enabled"))
                if rvm != "NotOlderThan":
                    errs.append(("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting "
                                 "resourceVersionMatch to NotOlderThan"))
                if query.get("allowWatchBookmarks", "") not in ("true", "1"):
                    errs.append(("allowWatchBookmarks", "Forbidden: sendInitialEvents requires setting "
                                 "allowWatchBookmarks to true"))
            elif rvm:
                errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch "
                             "unless sendInitialEvents is provided"))
        else:
            if sie:
                errs.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
            if rvm:
                if not rv:
                    errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                                 "unless resourceVersion is provided"))
                if rvm not in ("Exact", "NotOlderThan"):
                    errs.append(("resourceVersionMatch", 'Unsupported value: "%s": supported values: '
                                 '"Exact", "NotOlderThan"' % rvm))
                if rvm == "Exact" and rv == "0":
                    errs.append(("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is '
                                 'forbidden for resourceVersion "0"'))
                if query.get("continue"):
                    errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                                 "when continue is provided"))
        if errs:
            causes = [{"reason": "FieldValueForbidden" if "Forbidden" in m else "FieldValueNotSupported",
                       "message": m, "field": f} for f, m in errs]
            raise ApiError(422, "ListOptions.meta.k8s.io \"\" is invalid: " +
                           ", ".join("%s: %s" % e for e in errs),
                           details={"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes})

    def _slice_list(self, query):
        self._list_options_errors(query, False)
        match = self._selectors(query)
        limit = self._parse_rv(query["limit"], "limit") if query.get("limit") else 0
        cont = query.get("continue", "")
        with self.store.lock:
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode()).decode())
                    at, start = int(tok["rv"]), str(tok["start"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "continue key is not valid: %s" % cont)
                state = self.store.slices_at(at)
                if state is None:
                    raise ApiError(410, "The provided continue parameter is too old to display a consistent "
                                   "list result. You can start a new list without the continue parameter.",
                                   "Expired")
            else:
                start = None
                rv, rvm = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
                at = self.store.rv
                if rv and rv != "0":
                    want = self._parse_rv(rv)
                    if want > self.store.rv:
                        # Not described in the facts: a list from the future cannot be
                        # served; fail fast instead of the real server's wait.
                        raise ApiError(504, "Too large resource version: %d, current: %d"
                                       % (want, self.store.rv), "Timeout",
                                       details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                            "message": "Too large resource version"}]})
                    if rvm == "Exact":
                        at = want
                state = self.store.slices_at(at)
                if state is None:
                    raise ApiError(410, "too old resource version: %s (%d)" % (rv, self.store.floor), "Expired")
        names = sorted(n for n in state if start is None or n > start)
        items = [state[n] for n in names if match(state[n])]
        meta = {"resourceVersion": str(at)}
        if limit and len(items) > limit:
            items = items[:limit]
            last = items[-1]["metadata"]["name"]
            meta["continue"] = base64.urlsafe_b64encode(json.dumps({"rv": at, "start": last}).encode()).decode()
            if not query.get("fieldSelector") and not query.get("labelSelector"):
                meta["remainingItemCount"] = sum(1 for n in names if n > last)
        return {"kind": "ResourceSliceList", "apiVersion": API_VERSION, "metadata": meta,
                "items": [_strip_type(s) for s in items]}

    # ---- watch [s9]

    def _slice_watch(self, h, query):
        self._list_options_errors(query, True)
        match = self._selectors(query)
        bookmarks = query.get("allowWatchBookmarks", "") in ("true", "1")
        initial_events = query.get("sendInitialEvents", "") in ("true", "1")
        if query.get("timeoutSeconds"):
            timeout = self._parse_rv(query["timeoutSeconds"], "timeoutSeconds")
        else:
            timeout = self.rand.uniform(self.min_request_timeout, 2 * self.min_request_timeout)
        rv_text = query.get("resourceVersion", "")
        start_rv = None if rv_text in ("", "0") else self._parse_rv(rv_text)
        with self.store.lock:
            st = self.store
            w = _Watch(match, st.rv)
            if start_rv is not None and start_rv < st.floor and not initial_events:
                w.q.put(("error", status_obj(410, "too old resource version: %d (%d)"
                                             % (start_rv, st.floor), "Expired")))
            elif start_rv is None or initial_events:
                # synthetic ADDED for the current state, then live events
                for _, s in sorted(st.slices.items()):
                    if match(s):
                        w.q.put(("event", "ADDED", s, None))
                if initial_events:
                    w.q.put(("bookmark", {"k8s.io/initial-events-end": "true"}, st.rv))
                st.watches.add(w)
            else:
                for erv, etype, old, new in st.history:
                    if erv > start_rv:
                        ev = st._event_for(match, etype, old, new)
                        if ev:
                            w.q.put(("event",) + ev + (erv,))
                w.last_rv = start_rv
                st.watches.add(w)
            # queued under the lock, before any later commit can reach w.q: no reordering
        h.send_response(200)
        h.send_header("Content-Type", "application/json;stream=watch")
        h.send_header("Cache-Control", "no-cache, private")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        try:
            self._pump(h, w, bookmarks, time.monotonic() + timeout)
        finally:
            with self.store.lock:
                self.store.watches.discard(w)
        return 200

    def _pump(self, h, w, bookmarks, deadline):
        """Write queued items as chunked JSON lines until the watch ends.

        Queue items: ("event", type, obj, rv|None), ("bookmark",) = send one now,
        ("bookmark", annotations, rv) = initial-events end marker,
        ("error", status), ("close",), ("abort",).
        """
        def send(obj):
            data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def bookmark(rv, annotations=None):
            meta = {"resourceVersion": str(rv)}
            if annotations:
                meta["annotations"] = annotations
            send({"type": "BOOKMARK", "object": {"kind": "ResourceSlice", "apiVersion": API_VERSION,
                                                 "metadata": meta}})

        def end():
            # unregister first: once the client sees the end, the watch is gone
            with self.store.lock:
                self.store.watches.discard(w)
            h.wfile.write(b"0\r\n\r\n")

        def caught_up_bookmark():
            # Events are queued under the store lock, so an empty queue means
            # every event up to the current rv has already been written.
            with self.store.lock:
                rv = self.store.rv if w.q.empty() else None
            if rv is not None:
                w.last_rv = rv
                bookmark(rv)

        def peer_gone():
            # An HTTP/1.1 client sends nothing while it reads a watch (the
            # driver does not pipeline), so a readable socket means EOF or a reset.
            try:
                return bool(select.select([h.connection], [], [], 0)[0])
            except (OSError, ValueError):
                return True

        next_bm = time.monotonic() + self.bookmark_interval
        try:
            while True:
                wake = min(deadline, next_bm) if bookmarks else deadline
                try:
                    item = w.q.get(timeout=min(0.2, max(0.0, wake - time.monotonic())))
                except queue.Empty:
                    item = None
                    if peer_gone():
                        with self.store.lock:
                            self.store.watches.discard(w)
                        h.close_connection = True
                        return
                    if time.monotonic() < min(wake, deadline):
                        continue
                if item is None:
                    if time.monotonic() >= deadline:
                        if bookmarks:  # the real server bookmarks shortly before it ends a watch
                            caught_up_bookmark()
                        end()
                        return
                    if bookmarks and time.monotonic() >= next_bm:
                        caught_up_bookmark()
                        next_bm = time.monotonic() + self.bookmark_interval
                    continue
                kind = item[0]
                if kind == "event":
                    send({"type": item[1], "object": item[2]})
                    if item[3] is not None:
                        w.last_rv = item[3]
                elif kind == "bookmark" and len(item) == 3:
                    w.last_rv = item[2]
                    bookmark(item[2], item[1])
                elif kind == "bookmark":
                    if bookmarks:
                        caught_up_bookmark()
                        next_bm = time.monotonic() + self.bookmark_interval
                elif kind == "error":
                    with self.store.lock:
                        self.store.watches.discard(w)
                    send({"type": "ERROR", "object": item[1]})
                    end()
                    return
                elif kind == "close":
                    end()
                    return
                else:  # abort: cut the stream mid-way, no final chunk
                    with self.store.lock:
                        self.store.watches.discard(w)
                    h.drop()
                    return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            h.close_connection = True

    # ---- control endpoints (no auth; for tests only)

    def _serve_control(self, h, method, path, query):
        try:
            body = h.read_body()
            name = path[len("/_sim/"):] if path.startswith("/_sim/") else path.lstrip("/")
            if method == "GET":
                getters = {"stats": self.stats, "log": lambda: self.log(int(query.get("since", 0))),
                           "slices": self.slices, "faults": self.faults.list, "info": self.info,
                           "events": self.events,
                           "gates": lambda: dict(self.gates)}
                if name not in getters:
                    raise ApiError(404, "no such control endpoint: %s" % path)
                return h.send_json(200, getters[name]())
            if method != "POST" or name not in self.CONTROL_METHODS:
                raise ApiError(404, "no such control endpoint: %s %s" % (method, path))
            args = json.loads(body.decode() or "{}") if body.strip() else {}
            if not isinstance(args, dict):
                raise ApiError(400, "control body must be a JSON object of keyword arguments")
            if name == "down" and not h.server.control_only:
                # answer before this very connection is cut
                h.send_json(200, {"down": True})
                h.close_connection = True
                self.down(**args)
                return
            try:
                out = getattr(self, name)(**args)
            except (TypeError, ValueError, KeyError) as e:
                raise ApiError(400, "%s: %s" % (name, e))
            h.send_json(200, out if out is not None else {})
        except ApiError as e:
            h.send_json(e.code, e.status)


# ------------------------------------------------------------ test client


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    @property
    def json(self):
        return json.loads(self.body) if self.body else None

    def warnings(self):
        return [v for k, v in self.headers if k.lower() == "warning"]

    def __repr__(self):
        return "<Response %d %s>" % (self.status, self.body[:200])


class SimClient:
    """Minimal Kubernetes JSON client over http.client, for tests (one keep-alive connection)."""

    def __init__(self, url, ca=None, token=None, timeout=10.0):
        u = urllib.parse.urlsplit(url)
        self.tls = u.scheme == "https"
        self.host, self.port = u.hostname, u.port
        self.ca, self.token, self.timeout = ca, token, timeout
        self.conn = None

    @classmethod
    def for_server(cls, s, **kw):
        return cls(s.url, s.ca, s.token, **kw)

    def _connect(self, timeout=None):
        t = timeout or self.timeout
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.ca)
            return http.client.HTTPSConnection(self.host, self.port, timeout=t, context=ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, headers=None, token=None, params=None):
        """One request; body may be a dict (sent as JSON) or bytes. token=False sends none."""
        if params:
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(params)
        hdrs = {"Accept": "application/json"}
        tok = self.token if token is None else token
        if tok:
            hdrs["Authorization"] = "Bearer " + tok
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        if body is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        for attempt in (0, 1):
            fresh = self.conn is None
            if fresh:
                self.conn = self._connect()
            try:
                self.conn.request(method, path, body=body, headers=hdrs)
                r = self.conn.getresponse()
                data = r.read()
                if r.will_close:
                    self.close()
                return Response(r.status, r.getheaders(), data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # the server closed an idle keep-alive connection: retry once on a new one
                self.close()
                if fresh:
                    raise
        raise AssertionError("unreachable")

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def watch(self, path, params=None, timeout=10.0):
        """Open a watch; returns a Watch (iterate events, .close())."""
        q = dict(params or {})
        q.setdefault("watch", "true")
        conn = self._connect(timeout)
        hdrs = {"Accept": "application/json"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        conn.request("GET", path + "?" + urllib.parse.urlencode(q), headers=hdrs)
        return Watch(conn, conn.getresponse())


class Watch:
    def __init__(self, conn, resp):
        self.conn, self.resp, self.status = conn, resp, resp.status

    def next(self):
        """The next event dict, or None at the end of the stream."""
        line = self.resp.readline()
        if not line:
            return None
        return json.loads(line)

    def __iter__(self):
        while True:
            ev = self.next()
            if ev is None:
                return
            yield ev

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------- simulator as a process


class SimProcess:
    """A standalone simulator process (see main()); control it over HTTP."""

    def __init__(self, proc, info):
        self.proc, self.info = proc, info
        self.url, self.ca, self.token = info["url"], info["ca"], info["token"]
        self.kubeconfig, self.control_url = info["kubeconfig"], info["control_url"]

    def _control(self, method, name, body=None):
        u = urllib.parse.urlsplit(self.control_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, "/_sim/" + name, body=data,
                         headers={"Content-Type": "application/json"} if data else {})
            r = conn.getresponse()
            out = json.loads(r.read() or b"null")
            if r.status != 200:
                raise RuntimeError("control %s %s: %d %s" % (method, name, r.status, out))
            return out
        finally:
            conn.close()

    def call(self, name, **kwargs):
        """POST /_sim/<name> with kwargs as the JSON body (ApiServer.CONTROL_METHODS)."""
        return self._control("POST", name, kwargs)

    def get(self, name):
        """GET /_sim/<name>: stats, log, slices, faults, info, gates."""
        return self._control("GET", name)

    def client(self, **kw):
        return SimClient(self.url, self.ca, self.token, **kw)

    def stop(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_process(directory, *args, python="/usr/bin/python3", timeout=20):
    """Run this file as a separate process in directory; waits until it serves."""
    os.makedirs(directory, exist_ok=True)
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--dir", str(directory)] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + timeout
    lines = []
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("{"):
            return SimProcess(proc, json.loads(line))
    proc.kill()
    raise RuntimeError("simulator did not start: %s %s" % ("".join(lines), proc.stderr.read()))


# --------------------------------------------------------------------- CLI


def main(argv=None):
    ap = argparse.ArgumentParser(description="dra-cpu kube-apiserver simulator")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dir", required=True, help="state dir: pki/, kubeconfig, token, sim.json")
    ap.add_argument("--token", help="initial bearer token (default: random)")
    ap.add_argument("--control-port", type=int, default=0,
                    help="plain-HTTP control listener (0 = any free port, -1 = none); "
                         "/_sim/ is also served on the main port")
    ap.add_argument("--plain-http", action="store_true", help="no TLS (debugging only)")
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--min-request-timeout", type=float, default=1800)
    ap.add_argument("--node", action="append", default=[], help="create a node NAME[=UID] at start")
    args = ap.parse_args(argv)
    s = ApiServer(args.dir, host=args.host, port=args.port, token=args.token, tls=not args.plain_http,
                  control_port=None if args.control_port < 0 else args.control_port,
                  bookmark_interval=args.bookmark_interval, min_request_timeout=args.min_request_timeout)
    s.start()
    for n in args.node:
        name, _, uid = n.partition("=")
        s.put_node(name, uid or None)
    info = s.info()
    tmp = os.path.join(s.dir, "sim.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(info, fh)
    os.replace(tmp, os.path.join(s.dir, "sim.json"))
    print(s.url)
    print(json.dumps(info), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

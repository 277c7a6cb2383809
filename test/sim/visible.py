"""What the API-server simulator does for what dra-cpu shows users: Events
(events.k8s.io/v1 create and patch) and ResourceClaim status.devices (the
status subresource, server-side apply), plus an optional RBAC check.

Facts (Kubernetes 1.36/1.37; the project's docs/events.md and
docs/claim-status.md give the sources):
[e1] events.k8s.io/v1 create: metadata.name a DNS subdomain, eventTime
     required, type Normal or Warning, reportingController required and a
     qualified name, reportingInstance required and at most 128 characters,
     action and reason required and at most 128, note at most 1024,
     deprecated* fields unset, series.count >= 2 with lastObservedTime, and
     regarding.namespace equal to the event's namespace (empty only in
     default and kube-system). Field paths are the internal names
     (message, involvedObject, source), as the server writes them.
[e2] update or patch: regarding, related, reason, note, type, eventTime,
     action, reportingController and reportingInstance are immutable.
[c1] status.devices: written through resourceclaims/{name}/status; a list
     map keyed by (driver, device, pool, shareID); every entry an allocated
     device of the claim; conditions at most 8 (type, status, reason,
     lastTransitionTime as metav1.Condition requires); data at most 10 KiB.
     Gate DRAResourceClaimDeviceStatus (beta and on from 1.33, GA in 1.37):
     off, the field is dropped.
[c2] server-side apply (application/apply-patch+yaml) needs fieldManager; an
     applier owns the entries it applied; entries it owned and no longer
     applies are removed; an entry owned by another manager with a different
     value is a 409 conflict unless force=true. A uid in the body that is
     not the stored one is a 409 precondition failure.
[r1] RBAC (when a test turns it on with set_rbac): each request needs its
     verb on its resource (subresources as "resource/sub"); from 1.36
     (DRAResourceClaimGranularStatusAuthorization) a change of status.devices
     also needs, per driver whose entries change, associated-node:<verb> on
     resourceclaims/driver with that driver as resourceName when the claim is
     allocated to the node the caller's token is bound to, else
     arbitrary-node:<verb>.
"""

import copy
import json
import re

if __package__:
    from . import k8svalidate as V
else:
    import k8svalidate as V

EVENTS_GROUP = "events.k8s.io"
EVENTS_API_VERSION = EVENTS_GROUP + "/v1"
EVENT_SCHEMA = "io.k8s.api.events.v1.Event"
_EVENTS_SPEC = None

RE_EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events(?:/([^/]+))?$")
_REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
IMMUTABLE = ("regarding", "related", "reason", "note", "type", "eventTime", "action",
             "reportingController", "reportingInstance")
# internal field names the server's messages use [e1]
_INTERNAL = {"regarding": "involvedObject", "note": "message"}


_QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def qualified_name_errors(v, path):
    """apimachinery IsQualifiedName: [DNS subdomain prefix "/"] name, the
    name at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends (label keys,
    reportingController, condition types)."""
    prefix, slash, name = v.rpartition("/")
    errs = []
    if slash and (not prefix or not V.is_dns_subdomain(prefix)):
        errs.append((path, 'Invalid value: "%s": prefix part must be a lowercase RFC 1123 '
                     "subdomain" % v))
    if not name or len(name) > 63 or not _QNAME.match(name):
        errs.append((path, 'Invalid value: "%s": name part must consist of alphanumeric '
                     "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                     "character (max 63)" % v))
    return errs


def events_spec():
    global _EVENTS_SPEC
    if _EVENTS_SPEC is None:
        _EVENTS_SPEC = V.ApiDocument(V.EVENTS_DOC)
    return _EVENTS_SPEC


def classify(method, path, query):
    m = RE_EVENTS.match(path)
    if not m:
        return None
    ns, name = m.group(1), m.group(2)
    if name is None:
        verb = {"GET": "watch" if query.get("watch") in ("1", "true") else "list",
                "POST": "create", "DELETE": "deletecollection"}.get(method, method.lower())
    else:
        verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
            method, method.lower())
    return verb, "events", name, ns


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def event_errors(ev, ns):
    """[(field, message)] of the server's validation of an Event [e1]."""
    errs = []
    meta = ev.get("metadata") or {}
    name = meta.get("name") or ""
    if not name:
        errs.append(("metadata.name", "Required value: name or generateName is required"))
    elif not V.is_dns_subdomain(name):
        errs.append(("metadata.name", 'Invalid value: "%s": a lowercase RFC 1123 subdomain '
                     "must consist of lower case alphanumeric characters, '-' or '.'" % name))
    if not ev.get("eventTime"):
        errs.append(("eventTime", "Required value"))
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(("type", 'Invalid value: "": has invalid value: %s' % ev.get("type", "")))
    for f in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        if ev.get(f):
            errs.append((f.replace("deprecatedF", "f").replace("deprecatedL", "l"),
                         'Invalid value: "": needs to be unset'))
    if ev.get("deprecatedCount"):
        errs.append(("count", 'Invalid value: "": needs to be unset'))
    if ev.get("deprecatedSource"):
        errs.append(("source", 'Invalid value: "": needs to be unset'))
    reg_ns = (ev.get("regarding") or {}).get("namespace", "")
    if (not reg_ns and ns not in ("default", "kube-system")) or (reg_ns and reg_ns != ns):
        errs.append(("involvedObject.namespace", 'Invalid value: "%s": does not match event.namespace' % reg_ns))
    rc = ev.get("reportingController") or ""
    if not rc:
        errs.append(("reportingController", "Required value"))
    else:
        errs.extend(qualified_name_errors(rc, "reportingController"))
    ri = ev.get("reportingInstance") or ""
    if not ri:
        errs.append(("reportingInstance", "Required value"))
    elif len(ri) > 128:
        errs.append(("reportingInstance", 'Invalid value: "": can have at most 128 characters'))
    for f in ("action", "reason"):
        v = ev.get(f) or ""
        if not v:
            errs.append((f, "Required value"))
        elif len(v) > 128:
            errs.append((f, 'Invalid value: "": can have at most 128 characters'))
    if len((ev.get("note") or "").encode()) > 1024:
        errs.append(("message", 'Invalid value: "": can have at most 1024 characters'))
    errs.extend(series_errors(ev))
    return errs


def series_errors(ev):
    s = ev.get("series")
    if s is None:
        return []
    errs = []
    if not isinstance(s.get("count"), int) or s["count"] < 2:
        errs.append(("series.count", 'Invalid value: "": should be at least 2'))
    if not s.get("lastObservedTime"):
        errs.append(("series.lastObservedTime", "Required value"))
    return errs


def invalid(kind, group, name, errs):
    """A 422 Status as the server writes it."""
    text = ", ".join("%s: %s" % e for e in errs)
    if len(errs) > 1:
        text = "[" + text + "]"
    return 422, '%s.%s "%s" is invalid: %s' % (kind, group, name, text), {
        "name": name, "group": group, "kind": kind,
        "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in errs]}


# ------------------------------------------------------------ claim status


def device_key(d):
    return (d.get("driver", ""), d.get("device", ""), d.get("pool", ""), d.get("shareID", ""))


def _allocated(claim):
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return {(r.get("driver", ""), r.get("device", ""), r.get("pool", ""), r.get("shareID", ""))
            for r in (alloc.get("devices") or {}).get("results") or []}


def condition_errors(c, path):
    errs = []
    t = c.get("type") or ""
    if not t:
        errs.append((path + ".type", "Required value"))
    else:
        errs.extend(qualified_name_errors(t, path + ".type"))
    if c.get("status") not in ("True", "False", "Unknown"):
        errs.append((path + ".status", 'Unsupported value: "%s": supported values: "False", "True", '
                     '"Unknown"' % c.get("status", "")))
    if not c.get("lastTransitionTime"):
        errs.append((path + ".lastTransitionTime", "Required value: must be set"))
    r = c.get("reason") or ""
    if not r:
        errs.append((path + ".reason", "Required value"))
    elif len(r) > 1024:
        errs.append((path + ".reason", "Too long: may not be more than 1024 bytes"))
    elif not _REASON_RE.match(r):
        errs.append((path + ".reason", 'Invalid value: "%s": a condition reason must start with '
                     "alphabetic character, optionally followed by a string of alphanumeric "
                     "characters or '_,:', and must end with an alphanumeric character or '_'" % r))
    if len(c.get("message") or "") > 32768:
        errs.append((path + ".message", "Too long: may not be more than 32768 bytes"))
    if c.get("observedGeneration", 0) < 0:
        errs.append((path + ".observedGeneration", "Invalid value: must be greater than or equal to zero"))
    return errs


def status_devices_errors(claim, devices):
    """The server's checks of status.devices [c1]."""
    errs = []
    allocated = _allocated(claim)
    seen = set()
    for i, d in enumerate(devices):
        path = "status.devices[%d]" % i
        k = device_key(d)
        if k in seen:
            errs.append((path, "Duplicate value: %s" % "/".join(x for x in k if x)))
        seen.add(k)
        if k not in allocated:
            errs.append((path, 'Invalid value: "%s": must be an allocated device in the claim'
                         % "/".join(x for x in k if x)))
        conds = d.get("conditions") or []
        if len(conds) > 8:
            errs.append((path + ".conditions", "Too many: %d: must have at most 8 items" % len(conds)))
        for j, c in enumerate(conds):
            errs.extend(condition_errors(c, "%s.conditions[%d]" % (path, j)))
        if "data" in d and len(json.dumps(d["data"], separators=(",", ":")).encode()) > 10240:
            errs.append((path + ".data", "Too long: may not be more than 10240 bytes"))
    return errs


def apply_devices(claim, owners, manager, applied, force):
    """The new status.devices after manager applied its list [c2]; owners
    (key -> manager) is updated in place. Returns (devices, conflicts)."""
    cur = list((claim.get("status") or {}).get("devices") or [])
    by_key = {device_key(d): d for d in cur}
    new_keys = [device_key(d) for d in applied]
    conflicts = []
    for d in applied:
        k = device_key(d)
        owner = owners.get(k)
        if owner not in (None, manager) and by_key.get(k) != d and not force:
            conflicts.append((owner, k))
    if conflicts:
        return None, conflicts
    out = []
    for d in cur:
        k = device_key(d)
        if owners.get(k) == manager and k not in new_keys:
            owners.pop(k, None)
            continue
        if k not in new_keys:
            out.append(d)
    for d in applied:
        out.append(copy.deepcopy(d))
        owners[device_key(d)] = manager
    return out, []


def changed_drivers(old, new):
    o = {device_key(d): d for d in old}
    n = {device_key(d): d for d in new}
    return sorted({k[0] for k in set(o) | set(n) if o.get(k) != n.get(k)})


def claim_node(claim):
    """The node a claim is allocated to (node-local allocations), or None."""
    sel = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
    for term in sel.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values") or []) == 1:
                return f["values"][0]
    return None


# ------------------------------------------------------------ RBAC


def rule_allows(rule, group, resource, verb, name):
    def has(key, want):
        vals = rule.get(key) or []
        return "*" in vals or want in vals
    if not (has("apiGroups", group) and has("resources", resource) and has("verbs", verb)):
        return False
    names = rule.get("resourceNames") or []
    return not names or name in names


def allowed(rules, group, resource, verb, name):
    return any(rule_allows(r, group, resource, verb, name) for r in rules or [])


def forbidden(user, group, resource, verb, name, ns):
    res, _, sub = resource.partition("/")
    what = "%s.%s" % (res, group) if group else res
    text = '%s "%s" is forbidden: User "%s" cannot %s resource "%s" in API group "%s"' % (
        what, name or "", user, verb, resource, group)
    if ns:
        text += ' in the namespace "%s"' % ns
    return 403, text, {"name": name or "", "group": group, "kind": res}

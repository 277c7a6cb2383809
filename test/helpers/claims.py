"""ResourceClaim objects as the scheduler leaves them (allocated), for tests."""

import uuid


def claim(name, results, node="node-1", ns="default", configs=None, uid=None,
          reserved_for=()):
    """results: [(request, device, consumed or None)]; reserved_for: the pods
    the scheduler reserved it for, (name, uid) pairs or objects with .name and
    .uid (an NRI simulator PodSandbox)."""
    reqs = []
    for r, _, consumed in results:
        base = r.split("/")[0]
        if any(x["name"] == base for x in reqs):
            continue
        ex = {"deviceClassName": "dra.cpu"}
        if consumed:
            ex["capacity"] = {"requests": {"dra.cpu/cpu": consumed}}
        reqs.append({"name": base, "exactly": ex})
    res = []
    for r, dev, consumed in results:
        e = {"request": r, "driver": "dra.cpu", "pool": node, "device": dev}
        if consumed is not None:
            e["consumedCapacity"] = {"dra.cpu/cpu": consumed}
            e["shareID"] = str(uuid.uuid4())
        res.append(e)
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": name, "namespace": ns, "uid": uid or str(uuid.uuid4())},
         "spec": {"devices": {"requests": reqs}},
         "status": {"allocation": {
             "devices": {"results": res},
             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                 {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}
    if configs:
        c["status"]["allocation"]["devices"]["config"] = configs
    if reserved_for:
        c["status"]["reservedFor"] = [
            {"resource": "pods", "name": p[0] if isinstance(p, tuple) else p.name,
             "uid": p[1] if isinstance(p, tuple) else p.uid} for p in reserved_for]
    return c


def cpu_config(requests=None, **params):
    p = {"apiVersion": "dra.cpu/v1alpha1", "kind": "CPUConfig"}
    p.update(params)
    e = {"source": "FromClaim", "opaque": {"driver": "dra.cpu", "parameters": p}}
    if requests:
        e["requests"] = requests
    return e


def ref(c):
    m = c["metadata"]
    return (m["namespace"], m["name"], m["uid"])


def parse_list(s):
    out = set()
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def cpuset_override(cpuset, requests=None, source="FromClaim"):
    """The reference driver's opaque parameters naming a request's exact CPUs
    (what a scheduler plugin, or the user in the claim's spec, writes)."""
    e = {"source": source, "opaque": {"driver": "dra.cpu", "parameters": {
        "apiVersion": "v1alpha1", "cpuConfig": {"cpuset": cpuset}}}}
    if requests:
        e["requests"] = requests
    return e


def realtime_claim(name, device, bandwidth, budget, node="node-1", reserved_for=(), **params):
    """A claim allocated one real-time device (cpurtNNN) that consumes
    `bandwidth` of its dra.cpu/rtBandwidth, with `budget` as its
    CPUConfig.realtime (policy, runtimeNs, deadlineNs, periodNs, ...) and
    params as the rest of that CPUConfig (irq, ...)."""
    c = claim(name, [("rt", device, None)], node=node, reserved_for=reserved_for)
    c["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {
        "dra.cpu/rtBandwidth": bandwidth}
    c["status"]["allocation"]["devices"]["config"] = [cpu_config(realtime=budget, **params)]
    return c

"""Issue 24: Events and claim status stay off the critical path. The same
Prepare calls (through the grpcio kubelet client, claims read from the
API-server simulator) with a healthy API server and with every Event and
claim-status request stalled for 4 s: half the claims are refused (each
refusal records a Warning Event), half prepared (each writes its
status.devices). Prepare must not notice; what does not fit the bounded
queues is dropped and counted."""

import time

from benchlib import Env, http_status, quiet_gc, summary, wait_until

STALL_S = 4


def _round(api, k, d, prefix, n):
    from claims import claim
    good = [api.put_claim(claim("%s-ok-%d" % (prefix, i),
                                [("cpu", "cpudevnuma%03d" % (i % 8), "1")])) for i in range(n)]
    bad = [api.put_claim(claim("%s-bad-%d" % (prefix, i), [("cpu", "cpudevnuma999", "1")]))
           for i in range(n)]
    times = []
    with quiet_gc():
        for g, b in zip(good, bad):
            for c in (g, b):
                m = c["metadata"]
                t = time.perf_counter()
                k.prepare(d.dra_sock, [(m["namespace"], m["name"], m["uid"])])
                times.append(time.perf_counter() - t)
    for c in good:
        m = c["metadata"]
        k.unprepare(d.dra_sock, [(m["namespace"], m["name"], m["uid"])])
    return times


def run(build_dir, claims=100):
    env = Env(build_dir)
    try:
        api = env.api
        d = env.driver(args=["--no-nri", "--no-bpf"])
        d.start(wait=None)
        wait_until(lambda: http_status(d.port, "/readyz") == 200, 15, "/readyz", proc=d.proc)
        k = env.kubelet_client()
        _round(api, k, d, "warm", 10)
        healthy = _round(api, k, d, "healthy", claims)
        for res in ("events", "resourceclaims/status"):
            api.add_fault(action="delay", seconds=STALL_S, resource=res)
        stalled = _round(api, k, d, "stalled", claims)
        m = d.metrics()
        dropped = sum(v for key, v in m.items() if key.startswith("dra_cpu_events_dropped_total"))
        cs_dropped = m.get('dra_cpu_claim_status_writes_total{result="dropped"}', 0)
    finally:
        env.close()
    h, s = summary(healthy, 1e3), summary(stalled, 1e3)
    return {"calls": len(healthy), "stall_s": STALL_S, "healthy_ms": h, "stalled_ms": s,
            "events_dropped": dropped, "status_dropped": cs_dropped}

"""Issue 3: publishing a 1024-CPU node in individual mode (8 slices of <= 128
devices) against the API-server simulator: time, requests, memory,
/metrics.

One run = a fresh driver process on a node whose slices were wiped, so every
run creates all 8 slices. The simulator logs, per request, when its handler
started (time.time()) and how long it took; from that:

  wall    driver exec -> end of the handler of the last create
  sim     sum of the handler times of every request but the watch (the
          simulator is Python + jsonschema: about 30 ms per 128-device create)
  driver  wall - sim: what the driver (and the TLS handshakes, kernel, client
          side of each request) adds; this is what the target is about
  cpu     the driver's own CPU time from exec to publication (schedstat)
"""

import time

from benchlib import (NODE, BenchError, Env, cpu_ns, http_status, measure_metrics, median,
                      memory, memory_by_mapping, wait_until)

ARGS = ["--cpu-device-mode", "individual", "--no-nri", "--no-bpf"]
SLICES = 8


def one_run(env, scrapes):
    api = env.api
    api.wipe_node(NODE)
    api.reset_stats()
    d = env.driver(topology="synthetic-1024.json", args=ARGS)
    t0 = time.time()
    d.start(wait=None)

    def published():
        log = api.log()
        creates = [e for e in log if e["verb"] == "create"]
        if len(creates) >= SLICES and all(e.get("duration") is not None for e in creates):
            return log
        return None

    log = wait_until(published, 30, "8 slices created", proc=d.proc)
    cpu_ms = cpu_ns(d.proc.pid) / 1e6
    wait_until(lambda: _ready(d), 10, "/readyz", proc=d.proc)
    # the watch events of our own creates arrive and are processed, and the
    # daemon's 1 Hz heap check (cmd/daemon.c) gives back what publishing freed
    time.sleep(1.2)
    mem = memory(d.proc.pid)
    mem_top = memory_by_mapping(d.proc.pid)
    log = api.log()
    creates = [e for e in log if e["verb"] == "create"]
    end = max(e["time"] + e["duration"] for e in creates)
    sim = sum(e["duration"] or 0 for e in log if e["verb"] != "watch" and e["time"] < end)
    # in flight at once: creates whose handler intervals overlap
    spans = sorted((e["time"], e["time"] + e["duration"]) for e in creates)
    overlap = max(sum(1 for a, b in spans if a <= s < b) for s, _ in spans)
    counts = api.stats()["counts"]
    mx = measure_metrics(d.port, scrapes)
    d.stop()
    return {
        "wall_ms": round((end - t0) * 1e3, 2),
        "sim_ms": round(sim * 1e3, 2),
        "driver_ms": round((end - t0 - sim) * 1e3, 2),
        "cpu_ms": round(cpu_ms, 2),
        "first_request_ms": round((log[0]["time"] - t0) * 1e3, 2),
        "create_ms": [round(e["duration"] * 1e3, 2) for e in creates],
        "creates_in_flight_max": overlap,
        "requests": sum(counts.values()),
        "counts": counts,
        "memory_kib": mem,
        "dirty_top_kib": mem_top,
        "metrics": mx,
        "slices": len([s for s in api.slices() if s["spec"].get("nodeName") == NODE]),
    }


def _ready(d):
    return http_status(d.port, "/readyz") == 200


def run(build_dir, runs=5, scrapes=30):
    env = Env(build_dir)
    try:
        res = [one_run(env, scrapes) for _ in range(runs)]
    finally:
        env.close()
    if any(r["slices"] != SLICES for r in res):
        raise BenchError("expected %d slices, got %s" % (SLICES, [r["slices"] for r in res]))
    med = lambda k: median(r[k] for r in res)  # noqa: E731
    out = {
        "runs": res,
        "wall_ms": med("wall_ms"), "sim_ms": med("sim_ms"), "driver_ms": med("driver_ms"),
        "cpu_ms": med("cpu_ms"), "first_request_ms": med("first_request_ms"),
        "requests": max(r["requests"] for r in res),
        "creates_in_flight_max": max(r["creates_in_flight_max"] for r in res),
        "vmrss_kib": median(r["memory_kib"]["VmRSS"] for r in res),
        "rss_anon_kib": median(r["memory_kib"].get("RssAnon", 0) for r in res),
        "rss_file_kib": median(r["memory_kib"].get("RssFile", 0) for r in res),
        "pss_kib": median(r["memory_kib"].get("Pss", 0) for r in res),
        "uss_kib": median(r["memory_kib"].get("USS", 0) for r in res),
        "private_clean_kib": median(r["memory_kib"].get("Private_Clean", 0) for r in res),
        "private_dirty_kib": median(r["memory_kib"].get("Private_Dirty", 0) for r in res),
        "dirty_top_kib": res[-1]["dirty_top_kib"],
        "render_ms_p50": median(r["metrics"]["render_ms"]["p50"] for r in res),
        "render_ms_p99": median(r["metrics"]["render_ms"]["p99"] for r in res),
        "http_get_ms_p50": median(r["metrics"]["http_get_ms"]["p50"] for r in res),
        "http_get_ms_p99": median(r["metrics"]["http_get_ms"]["p99"] for r in res),
        "metrics_bytes": res[-1]["metrics"]["bytes"],
    }
    return out

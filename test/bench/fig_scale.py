"""Issue 9: a full node. 1024-CPU topology file, grouped mode, 1000 claims of
one CPU each prepared through gRPC and 1000 claim-holding containers created
through the NRI simulator; BPF checks loaded when we are root (as deployed).

  memory    private dirty memory of the daemon holding all of that (RSS, PSS,
            USS beside it)
  prepare   per-call daemon histogram over the 1000 prepares (the claim count
            grows 0 -> 1000 while measuring), plus client and CPU views
  NRI       CreateContainer round trip / plugin CPU as in fig_nri.py
  /metrics  render time with 1000 claims and their per-CPU owner series
  restart   kill -9, start again: exec -> /readyz 200 (1000 claims restored
            from CDI specs + checkpoint, slices listed and found current),
            taken from the daemon's own log line for the last readiness check
            (ms resolution, same clock as time.time()); polling /readyz from
            Python sees it later, because the NRI simulator in this process
            holds the GIL while it builds the 1000-container Synchronize.
            Also exec -> NRI Synchronize done, and a timeline of log events
"""

import os
import time

from benchlib import (BenchError, Env, cpu_ns, histogram, histogram_delta, histogram_quantile,
                      http_status, log_events, measure_metrics, median, memory,
                      memory_by_mapping, quiet_gc, summary, wait_until)
from fig_nri import NriProbe, creates_summary, start

HIST = "dra_cpu_prepare_claim_duration_seconds"
# daemon log events on the way to ready, "mod event" (first occurrence, ms after exec)
TIMELINE = ("cfg config", "state state_loaded", "daemon bpf_loaded", "daemon started",
            "publisher node_found", "publisher slices_synced", "nri nri_registered",
            "pools nri_synchronized", "nri nri_synchronized")


def run(build_dir, claims=1000, restarts=3, scrapes=30):
    from claims import claim
    from benchlib import claim_env_line
    bpf = os.geteuid() == 0
    env = Env(build_dir)
    probe = None
    try:
        rt, d = start(env, [] if bpf else ["--no-bpf"])
        probe = NriProbe(lambda: d.proc.pid)
        k = env.kubelet_client()
        api = env.api
        pods = [rt.add_pod("p%d" % i) for i in range(claims)]
        objs = [api.put_claim(claim("s%d" % i, [("cpu", "cpudevnuma%03d" % (i % 8), "1")],
                                    reserved_for=[pods[i]]))
                for i in range(claims)]
        refs = [(c["metadata"]["namespace"], c["metadata"]["name"], c["metadata"]["uid"])
                for c in objs]
        pid = d.proc.pid
        h0 = histogram(d.metrics(), HIST)
        client, cpu = [], []
        with quiet_gc():
            for ref in refs:
                c0 = cpu_ns(pid)
                t = time.perf_counter()
                r = k.prepare(d.dra_sock, [ref])
                client.append(time.perf_counter() - t)
                cpu.append(cpu_ns(pid) - c0)
                if r.claims[ref[2]].error:
                    raise BenchError("prepare %s: %s" % (ref[1], r.claims[ref[2]].error))
        h = histogram_delta(histogram(d.metrics(), HIST), h0)
        with quiet_gc():
            for i, ref in enumerate(refs):
                kk, v = claim_env_line(d.cdi_dir, ref[2]).split("=", 1)
                rt.create_container(pods[i], "app", env={kk: v})
        nri = creates_summary(probe.creates)
        m = d.metrics()
        if m.get("dra_cpu_resource_claims_active") != claims or \
                m.get("dra_cpu_nri_containers_exclusive") != claims:
            raise BenchError("after setup: claims_active=%s exclusive containers=%s"
                             % (m.get("dra_cpu_resource_claims_active"),
                                m.get("dra_cpu_nri_containers_exclusive")))
        bpf_loaded = m.get('dra_cpu_bpf_loaded{program="pinning"}',
                           m.get("dra_cpu_bpf_loaded")) == 1
        time.sleep(0.2)
        mem = memory(pid)
        mem_top = memory_by_mapping(pid)
        mx = measure_metrics(d.port, scrapes)
        rs = []
        for _ in range(restarts):
            serial = max((c.serial for c in rt.conns), default=0)
            d.kill9()
            t0 = time.time()
            d.start(wait=None)
            wait_until(lambda: http_status(d.port, "/readyz") == 200, 30, "/readyz after restart",
                       proc=d.proc)
            t_poll = time.time() - t0
            rt.wait_plugin(timeout=30, after=serial)
            active = d.metrics().get("dra_cpu_resource_claims_active")
            if active != claims:
                raise BenchError("after restart %s claims active, want %d" % (active, claims))
            tl = {}
            for t, ev, _ in log_events(d.logs[-1]):
                tl.setdefault(ev, round((t - t0) * 1e3, 1))
            # /readyz turns 200 when the last check passes (logged with ms)
            ready = max((round((t - t0) * 1e3, 1) for t, ev, line in log_events(d.logs[-1])
                         if ev == "httpd check_passing"), default=None)
            if ready is None:
                raise BenchError("no check_passing in the daemon log after restart")
            rs.append({"ready_ms": ready, "ready_polled_ms": round(t_poll * 1e3, 1),
                       "nri_synced_ms": tl.get("nri nri_synchronized"),
                       "timeline_ms": {k: tl[k] for k in TIMELINE if k in tl},
                       "cpu_ms": round(cpu_ns(d.proc.pid) / 1e6, 2)})
        # past the daemon's 1 Hz heap check (cmd/daemon.c): the heap the NRI
        # resync and the restore freed is given back by then
        time.sleep(1.2)
        mem_restarted = memory(d.proc.pid)
    finally:
        if probe:
            probe.close()
        env.close()
    return {
        "claims": claims, "containers": claims, "bpf_loaded": bpf_loaded,
        "memory_kib": mem, "memory_after_restart_kib": mem_restarted,
        "dirty_top_kib": mem_top,
        "vmrss_kib": mem["VmRSS"],
        "prepare_hist_ms": {"p50": _ms(histogram_quantile(0.5, h)),
                            "p99": _ms(histogram_quantile(0.99, h)),
                            "mean": _ms(h[1] / h[2] if h[2] else None)},
        "prepare_client_ms": summary(client, 1e3),
        "prepare_cpu_ms": summary(cpu, 1e-6),
        "prepare_cpu_last100_ms": summary(cpu[-100:], 1e-6),
        "nri_create": nri,
        "metrics": mx,
        "restarts": rs,
        "ready_ms": median(r["ready_ms"] for r in rs),
        "ready_polled_ms": median(r["ready_polled_ms"] for r in rs),
        "nri_synced_ms": median(r["nri_synced_ms"] for r in rs),
        "timeline_ms": {k: median(r["timeline_ms"].get(k) for r in rs) for k in TIMELINE},
    }


def _ms(s):
    return None if s is None else round(s * 1e3, 4)

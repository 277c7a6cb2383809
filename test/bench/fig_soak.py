"""Months of churn in a few minutes: distinct pods, each with its own claim,
go through the whole life a kubelet and a runtime give them -- claim created,
Prepare over gRPC, container created and started through NRI, stopped,
removed, pod sandbox removed, Unprepare, claim deleted -- with a fixed number
alive at any time, and /metrics scraped as Prometheus would meanwhile.

After the warm-up nothing the driver holds may grow with the number of pods
it has seen: private dirty memory (Private_Dirty of smaps_rollup, see
private_kib), open file descriptors, /metrics series, checkpoint size and
CDI spec files are sampled
at 10 % and at 100 % of the run and must agree within 5 %. At the end every
claim is gone: no CPU reserved, the shared pool whole, no CDI spec left.
"""

import os
import time

from benchlib import BenchError, Env, claim_env_line, http_status, parse_metrics, quiet_gc
from fig_nri import start

FLAT = 0.05


def private_kib(pid):
    """(USS, its dirty part) in KiB. The clean part of USS is library text
    that no other process maps at that moment: it comes and goes with what
    else runs on the machine (a compiler, the simulators), so growth is
    judged on the dirty part, the memory the driver itself wrote."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Private_Clean", "Private_Dirty"):
                out[k] = int(v.split()[0])
    return out["Private_Clean"] + out["Private_Dirty"], out["Private_Dirty"]


def series(port):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    return sum(1 for l in text.splitlines() if l and not l.startswith("#")), parse_metrics(text)


def sample(d):
    pid = d.proc.pid
    ckpt = os.path.join(d.state_dir, "checkpoint.json")
    n_series, m = series(d.port)
    uss, dirty = private_kib(pid)
    return {
        "uss_kib": uss,
        "private_dirty_kib": dirty,
        "fds": len(os.listdir("/proc/%d/fd" % pid)),
        "series": n_series,
        "checkpoint_bytes": os.path.getsize(ckpt) if os.path.exists(ckpt) else 0,
        "cdi_files": len([f for f in os.listdir(d.cdi_dir) if f.endswith(".json")]),
        "claims_active": m.get("dra_cpu_resource_claims_active"),
    }


def flat(a, b):
    """b has not grown past a by more than FLAT. Shrinking is not growth:
    memory that start-up used and the allocator gave back later (glibc trims
    the heap after large frees) makes the 100 % figure lower, never a leak."""
    return b <= a or (a > 0 and b - a <= FLAT * a)


def run(build_dir, pods=20000, live=32, scrape_every=25):
    from claims import claim
    bpf = os.geteuid() == 0
    env = Env(build_dir)
    try:
        rt, d = start(env, [] if bpf else ["--no-bpf"])
        k = env.kubelet_client()
        alive = []  # (ref, pod, container)
        samples = {}
        marks = {pods // 10: "10%", pods: "100%"}
        t0 = time.monotonic()

        def retire(entry):
            ref, pod, ctr = entry
            rt.remove_container(ctr)
            rt.remove_pod(pod)
            r = k.unprepare(d.dra_sock, [ref])
            if r.claims[ref[2]].error:
                raise BenchError("unprepare %s: %s" % (ref[1], r.claims[ref[2]].error))
            env.api.delete_claim(ref[0], ref[1])

        with quiet_gc():
            for i in range(1, pods + 1):
                pod = rt.add_pod("soak%d" % i)
                c = env.api.put_claim(claim("soak%d" % i,
                                            [("cpu", "cpudevnuma%03d" % (i % 8), "2")],
                                            reserved_for=[pod]))
                m = c["metadata"]
                ref = (m["namespace"], m["name"], m["uid"])
                r = k.prepare(d.dra_sock, [ref])
                if r.claims[ref[2]].error:
                    raise BenchError("prepare %s: %s" % (ref[1], r.claims[ref[2]].error))
                key, val = claim_env_line(d.cdi_dir, ref[2]).split("=", 1)
                ctr = rt.create_container(pod, "app", env={key: val})
                alive.append((ref, pod, ctr))
                if len(alive) > live:
                    retire(alive.pop(0))
                if i % scrape_every == 0:  # Prometheus scrapes while pods come and go
                    series(d.port)
                if i in marks:
                    samples[marks[i]] = sample(d)
                if d.proc.poll() is not None:
                    raise BenchError("driver exited %s after %d pods" % (d.proc.returncode, i))
            while alive:
                retire(alive.pop(0))
        seconds = time.monotonic() - t0
        end = sample(d)
        _, m = series(d.port)
        ok_end = (end["cdi_files"] == 0 and end["claims_active"] == 0 and
                  m.get("dra_cpu_allocated_cpus") == 0 and m.get("dra_cpu_exclusive_cpus") == 0
                  and m.get("dra_cpu_shared_pool_cpus") == m.get("dra_cpu_available_cpus"))
        if http_status(d.port, "/healthz") != 200:
            raise BenchError("driver unhealthy after the soak")
        a, b = samples["10%"], samples["100%"]
        return {
            "pods": pods, "live": live, "seconds": seconds,
            "at_10": a, "at_100": b,
            "flat": {k2: flat(a[k2], b[k2]) for k2 in
                     ("private_dirty_kib", "fds", "series", "checkpoint_bytes", "cdi_files")},
            "end": end, "end_ok": ok_end,
            "shared_pool_cpus": m.get("dra_cpu_shared_pool_cpus"),
            "bpf": bpf,
        }
    finally:
        env.close()

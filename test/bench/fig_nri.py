"""Issue 5: the NRI plugin under 500 live containers, driven by the runtime
simulator (test/sim/nrisim.py, no real cgroups: the cgroup writes are the
runtime's cost, not the plugin's).

  round trip  perf_counter inside the simulator around Conn.call
              ("CreateContainer"): request encode, socket, the plugin, reply
              decode, one Python thread hand-off (about 0.05-0.1 ms)
  plugin      the daemon's CPU time across that call (schedstat): the part of
              the round trip that is the plugin's own work
  push        Unprepare of a claim whose container is gone -> the daemon
              widens the shared pool with UpdateContainers: time from the
              gRPC call to the request arriving (decoded) at the simulator,
              and to the simulator having applied it to every container

Two kinds of CreateContainer: a shared container (no claim: pinned to the
shared pool, nothing else changes) and a claim holder (pinned to its claim;
the shared pool shrinks, so the reply carries an update for every shared
container).
"""

import time

from benchlib import (BenchError, Env, claim_env_line, cpu_ns, http_status, median, quiet_gc,
                      summary, wait_until)


class NriProbe:
    """Wraps the simulator's Conn.call (CreateContainer only) and
    Conn._update_containers to time them; close() restores both."""

    def __init__(self, pid_fn):
        from sim import nrisim
        self.nrisim = nrisim
        self.pid_fn = pid_fn
        self.creates = []   # (seconds, daemon cpu ns, updates in the reply)
        self.arrivals = []  # (perf_counter at arrival, number of updates)
        self._call = nrisim.Conn.call
        self._upd = nrisim.Conn._update_containers
        probe = self

        def call(conn, method, req, resp_cls, timeout=None):
            if method != "CreateContainer":
                return probe._call(conn, method, req, resp_cls, timeout)
            pid = probe.pid_fn()
            c0 = cpu_ns(pid)
            t0 = time.perf_counter()
            r = probe._call(conn, method, req, resp_cls, timeout)
            dt = time.perf_counter() - t0
            probe.creates.append((dt, cpu_ns(pid) - c0, len(r.update)))
            return r

        def update(conn, stream, payload):
            t = time.perf_counter()
            req = nrisim.api.UpdateContainersRequest.FromString(payload)
            probe.arrivals.append((t, len(req.update)))
            return probe._upd(conn, stream, payload)

        nrisim.Conn.call = call
        nrisim.Conn._update_containers = update

    def close(self):
        self.nrisim.Conn.call = self._call
        self.nrisim.Conn._update_containers = self._upd


def start(env, args, plugin_timeout=10):
    """A runtime, then a driver plugged into it, ready."""
    rt = env.runtime()
    d = env.driver(args=["--nri-socket", rt.socket_path, "--reserved-cpus", "0"] + list(args))
    d.start(wait=None)
    wait_until(lambda: http_status(d.port, "/readyz") == 200, 15, "/readyz", proc=d.proc)
    rt.wait_plugin(timeout=plugin_timeout)
    return rt, d


def prepare(env, d, name, dev, pod):
    from claims import claim
    c = env.api.put_claim(claim(name, [("cpu", dev, "1")], reserved_for=[pod]))
    m = c["metadata"]
    r = env.kubelet_client().prepare(d.dra_sock, [(m["namespace"], m["name"], m["uid"])])
    if r.claims[m["uid"]].error:
        raise BenchError("prepare %s: %s" % (name, r.claims[m["uid"]].error))
    k, v = claim_env_line(d.cdi_dir, m["uid"]).split("=", 1)
    return c, {k: v}


def creates_summary(rows):
    return {"round_trip_ms": summary([r[0] for r in rows], 1e3),
            "plugin_cpu_ms": summary([r[1] for r in rows], 1e-6),
            "updates": median(r[2] for r in rows)}


def run(build_dir, shared=500, shared_creates=200, claim_creates=60):
    env = Env(build_dir)
    probe = None
    try:
        rt, d = start(env, ["--no-bpf"])
        probe = NriProbe(lambda: d.proc.pid)
        k = env.kubelet_client()
        for i in range(shared):
            rt.create_container(rt.add_pod("s%d" % i), "c")
        probe.creates.clear()
        # A: a shared container comes and goes; 500 stay
        with quiet_gc():
            for i in range(shared_creates):
                ctr = rt.create_container(rt.add_pod("x%d" % i), "c")
                rt.remove_container(ctr)
        a = list(probe.creates)
        probe.creates.clear()
        # B: a claim holder starts (pool shrinks), goes, its claim is unprepared (pool widens)
        push, applied, unprep = [], [], []
        for i in range(claim_creates):
            pod = rt.add_pod("e%d" % i)
            c, envv = prepare(env, d, "n%d" % i, "cpudevnuma%03d" % (1 + i % 7), pod)
            with quiet_gc():
                ctr = rt.create_container(pod, "app", env=envv)
                rt.stop_container(ctr)
                rt.remove_container(ctr)
                probe.arrivals.clear()
                n = len(rt.applied)
                m = c["metadata"]
                t0 = time.perf_counter()
                k.unprepare(d.dra_sock, [(m["namespace"], m["name"], m["uid"])])
                t1 = time.perf_counter()
                rt.wait_for(lambda: len(rt.applied) >= n + shared, timeout=10)
                t2 = time.perf_counter()
            if not probe.arrivals:
                raise BenchError("no UpdateContainers after Unprepare")
            push.append(probe.arrivals[0][0] - t0)
            applied.append(t2 - t0)
            unprep.append(t1 - t0)
        b = list(probe.creates)
        pushed = median(x[1] for x in probe.arrivals)
        live = d.metrics()
    finally:
        if probe:
            probe.close()
        env.close()
    if median(r[2] for r in b) < shared:
        raise BenchError("claim holder creates carried %s updates, want %d"
                         % (median(r[2] for r in b), shared))
    return {
        "live_shared": shared,
        "shared_create": creates_summary(a),
        "claim_create": creates_summary(b),
        "push_arrival_ms": summary(push, 1e3),
        "push_applied_ms": summary(applied, 1e3),
        "unprepare_client_ms": summary(unprep, 1e3),
        "push_updates": pushed,
        "nri_containers_shared": live.get("dra_cpu_nri_containers_shared"),
    }

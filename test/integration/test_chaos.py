"""Chaos: claims and containers churn while the driver is killed with SIGKILL
at random moments, the API server fails 10% of requests and drops watches,
and the NRI runtime restarts. The kubelet and the runtime behave as the real
ones do: the kubelet retries Prepare/Unprepare until they succeed, the
runtime keeps creating containers while the plugin is away.

Checked all along: no CPU ever belongs to two claims' CDI specs at once.
Checked at the end: every prepared claim has exactly its CDI spec, nothing
else is in the CDI dir, every live container has the right cpuset, the
node's slices are right. The run prints what it checked and the counts.
"""

import json
import os
import random
import time

import grpc

from claims import claim, parse_list, ref
from driver import wait_for

N_CLAIMS = 300
N_KILLS = 20
N_RUNTIME_RESTARTS = 2
ALL = set(range(384))


def specs(d):
    out = {}
    for f in d.cdi_specs():
        with open(os.path.join(d.cdi_dir, f)) as fh:
            env = json.load(fh)["devices"][0]["containerEdits"]["env"][0]
        k, v = env.split("=", 1)
        out[k[len("DRA_CPUSET_"):]] = parse_list(v)
    return out


def assert_disjoint(d, stats):
    seen = {}
    for uid, cpus in specs(d).items():
        for c in cpus:
            assert c not in seen, "CPU %d in claims %s and %s" % (c, seen[c], uid)
            seen[c] = uid
    stats["disjoint_checks"] += 1


def test_chaos_churn(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import CreateContainerError, Runtime

    rng = random.Random(int(os.environ.get("CHAOS_SEED", "20261122")))
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock, request_timeout=5.0).start()
    d = make_driver(args=["--nri-socket", sock, "--no-bpf"]).start()
    stats = dict(prepared=0, unprepared=0, containers=0, removed=0, kills=0, restarts=0,
                 retries=0, create_refused=0, disjoint_checks=0, runtime_restarts=0)
    apiserver.add_fault(action="error", code=500, percent=10)

    def call(fn):
        """The kubelet: retry until the plugin answers without error."""
        while True:
            try:
                r = fn()
                if all(not c.error for c in r.claims.values()):
                    return r
            except grpc.RpcError:
                pass
            stats["retries"] += 1
            kubelet.close()
            if d.proc.poll() is not None:  # the DaemonSet restarts it
                d.start()
                stats["restarts"] += 1
            time.sleep(0.02)

    kill_at = set(rng.sample(range(1, N_CLAIMS * 3), N_KILLS))
    runtime_restart_at = {N_CLAIMS // 3, 2 * N_CLAIMS // 3}
    live = []  # (claim, cpus, exclusive ctr, shared ctr)
    step = 0

    def maybe_chaos():
        nonlocal step
        step += 1
        if step in kill_at and d.proc.poll() is None:
            d.kill9()
            stats["kills"] += 1
            if rng.random() < 0.5:
                d.start()
                stats["restarts"] += 1
        if rng.random() < 0.05:
            apiserver.expire_watches() if rng.random() < 0.5 else apiserver.close_watches(True)

    for i in range(N_CLAIMS):
        if i in runtime_restart_at:
            rt.restart()
            stats["runtime_restarts"] += 1
        pod = rt.add_pod("p%d" % i)
        c = apiserver.put_claim(claim("c%d" % i, [("cpu", "cpudevnuma%03d" % (i % 2),
                                                   str(rng.randint(1, 4)))], reserved_for=[pod]))
        maybe_chaos()
        call(lambda: kubelet.prepare(d.dra_sock, [ref(c)]))
        stats["prepared"] += 1
        assert_disjoint(d, stats)
        cpus = specs(d)[c["metadata"]["uid"]]
        maybe_chaos()
        env = {"DRA_CPUSET_" + c["metadata"]["uid"]: ",".join(map(str, sorted(cpus)))}
        ex = sh = None
        for _ in range(50):  # kubelet retries CreateContainerError
            try:
                ex = ex or rt.create_container(pod, "app", env=env)
                sh = sh or rt.create_container(pod, "sidecar")
                break
            except CreateContainerError:
                stats["create_refused"] += 1
                if d.proc.poll() is not None:
                    d.start()
                    stats["restarts"] += 1
                time.sleep(0.02)
        assert ex and sh
        stats["containers"] += 2
        live.append((c, cpus, ex, sh))
        # keep about 15 pods alive; end the oldest
        while len(live) > 15 or (live and rng.random() < 0.3):
            oc, _, oex, osh = live.pop(rng.randrange(len(live)))
            rt.remove_container(oex)
            rt.remove_container(osh)
            stats["removed"] += 2
            maybe_chaos()
            call(lambda: kubelet.unprepare(d.dra_sock, [ref(oc)]))
            stats["unprepared"] += 1
            assert_disjoint(d, stats)

    # Settle: the driver up, faults off, the runtime synchronized.
    apiserver.clear_faults()
    if d.proc.poll() is not None:
        d.start()
    n = len(rt.applied)
    rt.restart()  # a fresh Synchronize re-pins whatever was created meanwhile
    rt.wait_plugin(timeout=10, after=1)
    wait_for(lambda: len(rt.applied) > n, what="synchronize updates")
    d.wait_ready(timeout=30)

    got = specs(d)
    want = {c["metadata"]["uid"]: cpus for c, cpus, _, _ in live}
    assert got == want, "CDI specs differ from the prepared claims"
    assert sorted(os.listdir(d.cdi_dir)) == sorted(
        "dra.k8s.io-cpu_claim-%s.json" % u for u in want)
    held = set().union(*want.values()) if want else set()
    for c, cpus, ex, sh in live:
        assert parse_list(ex.cpus) == cpus
        assert parse_list(sh.cpus) == ALL - held
    slices = [s for s in apiserver.slices() if s["spec"].get("nodeName") == "node-1"]
    assert len(slices) == 1 and [x["name"] for x in slices[0]["spec"]["devices"]] == [
        "cpudevnuma000", "cpudevnuma001"]
    m = d.metrics()
    assert m["dra_cpu_resource_claims_active"] == len(live)
    assert m["dra_cpu_allocated_cpus"] == len(held)
    rt.close()
    print("\nchaos: " + " ".join("%s=%d" % kv for kv in sorted(stats.items())) +
          " live_claims=%d live_containers=%d" % (len(live), 2 * len(live)))
    assert stats["kills"] == N_KILLS and stats["runtime_restarts"] == N_RUNTIME_RESTARTS

#!/usr/bin/python3
"""make demo: dra-cpu end to end on this machine.

Stands up what a node around the driver would have: an API server (the
project's strict simulator, over TLS), a container runtime speaking NRI (the
runtime simulator, starting real processes in real cgroups when run as root),
and a kubelet speaking gRPC. Then runs the real driver on this machine's own
topology, with its eBPF checks, and walks through what happens when a pod
asks for exclusive CPUs:

  1. the driver publishes ResourceSlices for this node;
  2. the kubelet registers the plugin and prepares a claim: the driver picks
     the CPUs and writes a CDI spec;
  3. the runtime creates the pod's container with that env: the driver pins
     it; a best-effort container is confined to the shared pool;
  4. /metrics shows the allocation and the BPF pinning check;
  5. unprepare: the shared pool widens again;
  6. real-time CPUs (--rt-cpus, as root on two CPUs or more): the last CPU
     becomes a cpurt device with deadline bandwidth; two claims share it, one
     that does not fit is refused; their containers run under SCHED_DEADLINE
     on a CPU that is its own root domain; bpf-verify --realtime shows the
     busy loop overrunning its budget and the polite task within it;
  7. quiet exclusive CPUs (as root, with cyclictest and cyclicdeadline from
     rt-tests): figure 7 of make bench, shortened: wakeup latency pinned vs
     shared vs idle beside a noisy neighbour (CPU hogs on every shared CPU,
     disk and network interrupts), deadline in a real-time claim idle vs
     beside it, CFS throttling with the quota kept vs dropped, and the
     interrupts on the exclusive CPU per source with irq isolation off (the
     NIC's steered onto it) vs on.
Everything is torn down at the end.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, os.environ.get("B", "build"))
sys.path.insert(0, os.path.join(ROOT, "test"))

from sim.kubelet_client import KubeletClient  # noqa: E402
from sim.nrisim import Cgroups, Runtime  # noqa: E402
from sim.apiserver import ApiServer  # noqa: E402

NODE = "demo-node"


def step(msg):
    print("\n=== " + msg, flush=True)


def show(label, value):
    print("  %-28s %s" % (label, value), flush=True)


def wait(pred, timeout=15, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise SystemExit("demo: timed out waiting for " + what)


def cpuset(s):
    out = set()
    for part in filter(None, s.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def http(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


# The two real-time containers: a busy loop, and a task that does 1 ms of
# work then yields (for a deadline task: done until the next period).
BUSY = "while True: pass\n"
POLITE = ("import os, time\n"
          "while True:\n"
          "    t = time.perf_counter()\n"
          "    while time.perf_counter() - t < 0.001: pass\n"
          "    os.sched_yield()\n")
BUDGET = {"policy": "deadline", "runtimeNs": 2000000, "deadlineNs": 10000000,
          "periodNs": 10000000}


def rt_claim(name, dev, q, pod):
    """A real-time claim allocated on dev and reserved for pod."""
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "rt", "exactly": {
                "deviceClassName": "dra.cpu.realtime",
                "capacity": {"requests": {"dra.cpu/rtBandwidth": q}}}}]}},
            "status": {"allocation": {"devices": {
                "results": [{"request": "rt", "driver": "dra.cpu", "pool": NODE, "device": dev,
                             "consumedCapacity": {"dra.cpu/rtBandwidth": q},
                             "shareID": "5f0c1c4e-0000-4000-8000-%012d" % len(name)}],
                "config": [{"source": "FromClaim", "opaque": {"driver": "dra.cpu", "parameters": {
                    "apiVersion": "dra.cpu/v1alpha1", "kind": "CPUConfig",
                    "realtime": BUDGET}}}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
                "reservedFor": [{"resource": "pods", "name": pod.name, "uid": pod.uid}]}}


def realtime(base, api, topo):
    """6: real-time CPUs, with their own driver, runtime and kubelet."""
    cpus = [c["cpu"] for c in topo["cpus"]]
    rt_cpu = cpus[-1]
    rtbase = os.path.join(base, "rt")
    os.makedirs(rtbase)
    nri_sock = os.path.join(rtbase, "nri.sock")
    rt = Runtime(nri_sock, cgroups=True, cgroup_root="dra-cpu-demo-rt-%d" % os.getpid()).start()
    port = 19000 + os.getpid() % 1000
    kroot = os.path.join(rtbase, "kubelet")
    state = os.path.join(rtbase, "state")
    log = open(os.path.join(rtbase, "driver.log"), "w")
    drv = subprocess.Popen(
        [B + "/dra-cpu-driver", "--kubeconfig", api.kubeconfig, "--hostname-override", NODE,
         "--kubelet-root-dir", kroot, "--cdi-dir", os.path.join(rtbase, "cdi"),
         "--state-dir", state, "--nri-socket", nri_sock, "--rt-cpus", str(rt_cpu),
         "--bind-address", "127.0.0.1:%d" % port], stderr=log)
    k = KubeletClient()
    try:
        step("6. Real-time CPUs: dra-cpu-driver --rt-cpus %d" % rt_cpu)
        wait(lambda: http(port, "/metrics")[0] == 200, what="the driver's /metrics")
        rt.wait_plugin(timeout=10)
        dev = "cpurt%03d" % rt_cpu

        def published():
            for s in api.slices():
                for d in s["spec"]["devices"]:
                    if d["name"] == dev:
                        return d
            return None
        d = wait(published, what="the real-time device")
        show(dev, "dra.cpu/realtime=%s capacity dra.cpu/rtBandwidth=%s (the kernel's "
             "deadline share of the CPU), shared: allowMultipleAllocations"
             % (d["attributes"]["dra.cpu/realtime"]["bool"],
                d["capacity"]["dra.cpu/rtBandwidth"]["value"]))
        reg = k.register(os.path.join(kroot, "plugins_registry", "dra.cpu-reg.sock"), "dra.cpu")
        envs, pods = {}, {}
        for name, q in (("control-loop", "300m"), ("busy-loop", "300m"), ("too-big", "400m")):
            pods[name] = rt.add_pod(name)
            c = api.put_claim(rt_claim(name, dev, q, pods[name]))
            uid = c["metadata"]["uid"]
            r = k.prepare(reg.endpoint, [("default", name, uid)]).claims[uid]
            show("claim %s (%s)" % (name, q), "prepared" if not r.error else
                 "refused: " + r.error)
            if not r.error:
                with open(os.path.join(rtbase, "cdi", "dra.k8s.io-cpu_claim-%s.json" % uid)) as f:
                    key, val = json.load(f)["devices"][0]["containerEdits"]["env"][0].split("=", 1)
                envs[name] = (uid, {key: val})
        with open("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance") as f:
            show("root domain", "CPU %d isolated (root cpuset load balancing now %s; "
                 "dra-cpu-rt/cpu%d)" % (rt_cpu, f.read().strip(), rt_cpu))

        ctrs = {}
        for name, code in (("control-loop", POLITE), ("busy-loop", BUSY)):
            ctrs[name] = rt.create_container(pods[name], "app", env=envs[name][1],
                                             argv=[sys.executable, "-c", code])
        for name, ctr in ctrs.items():
            wait(lambda: os.sched_getscheduler(ctr.pid) & 0xff == 6, what="SCHED_DEADLINE")
            show(name, "pid %d SCHED_DEADLINE%s (2 ms every 10 ms), CPUs %s" % (
                ctr.pid, ", reset on fork" if os.sched_getscheduler(ctr.pid) & 0x40000000
                else "", sorted(os.sched_getaffinity(ctr.pid))))
        time.sleep(1)

        verify = os.path.join(B, "bpf-verify")
        step("   bpf-verify --realtime: what the kernel did with the budgets (eBPF)")
        v = subprocess.run([verify, "--realtime", "--state-dir", state, "--duration", "2"],
                           capture_output=True, text=True)
        print("\n".join("    " + l for l in (v.stdout + v.stderr).splitlines()))
        show("exit code", "%d (1: the busy loop ran past its 2 ms budget: the kernel "
             "enforces it at tick granularity)" % v.returncode)
        step("   the busy loop stops; the control loop alone")
        rt.stop_container(ctrs["busy-loop"])
        v = subprocess.run([verify, "--realtime", "--state-dir", state, "--duration", "2"],
                           capture_output=True, text=True)
        print("\n".join("    " + l for l in (v.stdout + v.stderr).splitlines()))
        show("exit code", "%d (0: every deadline task kept its budget and deadline)"
             % v.returncode)

        step("   /metrics (the daemon's own real-time monitor, counted since each task "
             "started: an interpreter starting up may overrun a period or two)")
        _, text = http(port, "/metrics")
        for line in text.splitlines():
            if line.startswith(("dra_cpu_rt_overruns_total", "dra_cpu_rt_bandwidth_used",
                                "dra_cpu_rt_policy_applied_total", "dra_cpu_rt_cpus_isolated",
                                "dra_cpu_rt_tasks")):
                show("", line)

        step("   the pods end: unprepare; the CPU leaves its root domain")
        rt.stop_container(ctrs["control-loop"])
        for name, (uid, _) in envs.items():
            k.unprepare(reg.endpoint, [("default", name, uid)])
        with open("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance") as f:
            show("root cpuset load balancing", f.read().strip())
        drv.send_signal(signal.SIGTERM)
        show("driver exit", drv.wait(10))
    finally:
        k.close()
        if drv.poll() is None:
            drv.kill()
        rt.close()


def quiet(real, topo):
    """Step 7: make bench's figure 7, 2 s per run instead of 10."""
    if (not real or len(topo["cpus"]) < 2 or not shutil.which("cyclictest")
            or not shutil.which("cyclicdeadline")):
        step("7. Quiet exclusive CPUs: skipped (needs root, two CPUs, cyclictest and "
             "cyclicdeadline: apt-get install rt-tests, or make bench once)")
        return
    step("7. Quiet exclusive CPUs: cyclictest pinned vs shared vs idle, cyclicdeadline "
         "in a real-time claim, interrupts with isolation off vs on, 2 s each")
    sys.path.insert(0, os.path.join(ROOT, "test", "bench"))
    import fig_quiet
    r = fig_quiet.run(B, seconds=2)
    import textwrap
    for name, value, target, ok, note in fig_quiet.table(r):
        verdict = "" if ok is None else ("  (target %s: %s)" % (target, "met" if ok else "missed"))
        show(name, value + verdict)
        for line in textwrap.wrap(note, 96):  # where it ran, per source, the remedy
            show("", line)
    show("note", r["note"] + "; make bench runs 10 s each")


def main():
    base = tempfile.mkdtemp(prefix="dra-cpu-demo.",
                            dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    procs, rt, api = [], None, None
    real = os.geteuid() == 0 and Cgroups.available()
    try:
        step("Topology of this machine")
        topo = json.loads(subprocess.run([B + "/dra-cpu-driver", "--print-topology"],
                                         capture_output=True, text=True, check=True).stdout)
        show("CPUs", ", ".join("cpu%d(core %d, numa %d)" % (c["cpu"], c["core"], c["numa"])
                               for c in topo["cpus"]))
        show("summary", {k: v for k, v in topo.items() if k != "cpus"})

        step("Starting an API server (simulator, TLS + token) and an NRI runtime")
        api = ApiServer(os.path.join(base, "api")).start()
        api.put_node(NODE)
        nri_sock = os.path.join(base, "nri.sock")
        rt = Runtime(nri_sock, cgroups=real).start()
        show("API server", api.url)
        show("NRI runtime", nri_sock + ("  (real cgroups and processes)" if real
                                        else "  (no cgroups: not root)"))

        step("Starting dra-cpu-driver (grouped mode, eBPF checks on)")
        port = 18000 + os.getpid() % 1000
        kroot = os.path.join(base, "kubelet")
        log = open(os.path.join(base, "driver.log"), "w")
        drv = subprocess.Popen(
            [B + "/dra-cpu-driver", "--kubeconfig", api.kubeconfig, "--hostname-override", NODE,
             "--kubelet-root-dir", kroot, "--cdi-dir", os.path.join(base, "cdi"),
             "--state-dir", os.path.join(base, "state"), "--nri-socket", nri_sock,
             "--bind-address", "127.0.0.1:%d" % port], stderr=log)
        procs.append(drv)
        wait(lambda: http(port, "/metrics")[0] == 200, what="the driver's /metrics")
        rt.wait_plugin(timeout=10)
        show("NRI", "plugin 00-dra.cpu registered with the runtime")

        step("1. ResourceSlices published for " + NODE)
        wait(lambda: [s for s in api.slices() if s["spec"].get("nodeName") == NODE],
             what="slices")
        for s in api.slices():
            for d in s["spec"]["devices"]:
                attrs = {k.split("/")[-1]: list(v.values())[0] for k, v in d["attributes"].items()}
                show(s["metadata"]["name"], "%s capacity dra.cpu/cpu=%s %s" % (
                    d["name"], d["capacity"]["dra.cpu/cpu"]["value"], attrs))

        step("2. The kubelet registers the plugin and prepares a 1-CPU claim")
        k = KubeletClient()
        reg = k.register(os.path.join(kroot, "plugins_registry", "dra.cpu-reg.sock"), "dra.cpu")
        show("registered", "%s at %s (%s)" % (reg.name, reg.endpoint, reg.api))
        wait(lambda: http(port, "/healthz")[0] == 200, what="/healthz")
        show("/healthz", http(port, "/healthz"))
        db = rt.add_pod("db")
        claim = {"metadata": {"name": "db-cpus", "namespace": "default"},
                 "spec": {"devices": {"requests": [{"name": "cpu", "exactly": {
                     "deviceClassName": "dra.cpu",
                     "capacity": {"requests": {"dra.cpu/cpu": "1"}}}}]}},
                 "status": {"allocation": {"devices": {"results": [{
                     "request": "cpu", "driver": "dra.cpu", "pool": NODE,
                     "device": "cpudevnuma000", "consumedCapacity": {"dra.cpu/cpu": "1"},
                     "shareID": "9a6a4bd4-5b1c-4a8e-9b5e-2f2d3e4a5b6c"}]},
                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
                     # the scheduler reserved it for the pod: only its containers get it
                     "reservedFor": [{"resource": "pods", "name": "db", "uid": db.uid}]}}
        c = api.put_claim(claim)
        uid = c["metadata"]["uid"]
        r = k.prepare(reg.endpoint, [("default", "db-cpus", uid)])
        res = r.claims[uid]
        if res.error:
            raise SystemExit("demo: prepare failed: " + res.error)
        show("prepared", "device %s, CDI %s" % (res.devices[0].device_name,
                                                  list(res.devices[0].cdi_device_ids)))
        spec_path = os.path.join(base, "cdi", "dra.k8s.io-cpu_claim-%s.json" % uid)
        with open(spec_path) as f:
            spec = json.load(f)
        env = spec["devices"][0]["containerEdits"]["env"][0]
        show("CDI spec", os.path.basename(spec_path))
        show("container env", env)

        step("3. The runtime creates the pod's containers")
        key, val = env.split("=", 1)
        shared = rt.create_container(rt.add_pod("web"), "best-effort")
        pinned = rt.create_container(db, "postgres", env={key: val})
        show("postgres (claim holder)", "cpuset %s" % pinned.cpus)
        show("best-effort (shared)", "cpuset %s" % shared.cpus)
        if real:
            for ctr in (pinned, shared):
                with open(os.path.join(rt.cg.path_of(ctr.id), "cpuset.cpus")) as f:
                    show("  kernel cgroup cpuset", "%s: %s" % (ctr.name, f.read().strip()))
            time.sleep(1.5)

        step("4. /metrics")
        _, text = http(port, "/metrics")
        for line in text.splitlines():
            if line.startswith(("dra_cpu_allocated_cpus", "dra_cpu_shared_pool_cpus",
                                "dra_cpu_resource_claims_active", "dra_cpu_bpf_loaded",
                                "dra_cpu_cpu_owner_info", "dra_cpu_enforcement_mode",
                                "dra_cpu_pinning_violations_total",
                                'dra_cpu_prepare_claims_total{result="success"}')):
                show("", line)
        print("  (in audit mode, host processes that land on the claimed CPU are reported as\n"
              "   violations: nothing confines host daemons; --pinning-enforcement=remediate\n"
              "   moves them to the shared pool)")
        verify = os.path.join(B, "bpf-verify")
        if real and os.path.exists(verify):
            step("   bpf-verify: is the exclusive CPU running only its owner?")
            v = subprocess.run([verify, "--state-dir", os.path.join(base, "state"),
                                "--duration", "1"], capture_output=True, text=True)
            print("  node-wide (host processes are not confined by anyone here):")
            print("\n".join("    " + l for l in (v.stdout + v.stderr).splitlines()[-6:]))
            scope = os.path.dirname(rt.cg.path_of(pinned.id))
            v = subprocess.run([verify, "--state-dir", os.path.join(base, "state"),
                                "--duration", "1", "--scope", scope],
                               capture_output=True, text=True)
            print("  containers only (--scope %s):" % scope)
            print("\n".join("    " + l for l in (v.stdout + v.stderr).splitlines()[-3:]))
            show("exit code", "%d (0 = the containers never ran on the claimed CPU)"
                 % v.returncode)

        step("   dra-cpu-driver map: the node as the driver sees it")
        m = subprocess.run([B + "/dra-cpu-driver", "map", "--url",
                            "http://127.0.0.1:%d/nodemap" % port] +
                           ([] if sys.stdout.isatty() else ["--color", "never"]),
                           capture_output=True, text=True)
        print("\n".join("    " + l for l in (m.stdout + m.stderr).splitlines()))

        step("5. The pod ends: unprepare, and the shared pool widens again")
        rt.stop_container(pinned)
        rt.remove_container(pinned)
        k.unprepare(reg.endpoint, [("default", "db-cpus", uid)])
        every = {c["cpu"] for c in topo["cpus"]}
        wait(lambda: cpuset(shared.cpus) == every, what="the pool to widen")
        show("best-effort (shared)", "cpuset %s" % shared.cpus)
        show("CDI spec", "removed" if not os.path.exists(spec_path) else "still there!")
        k.close()

        step("Driver log (last lines)")
        log.flush()
        with open(log.name) as f:
            for line in f.read().splitlines()[-8:]:
                print("  " + line)
        drv.send_signal(signal.SIGTERM)
        rc = drv.wait(10)
        show("driver exit", rc)
        if real and len(topo["cpus"]) >= 2 and os.path.exists("/sys/fs/cgroup/cpuset/cpuset.cpus"):
            realtime(base, api, topo)
        else:
            step("6. Real-time CPUs: skipped (needs root, two CPUs and the v1 cpuset hierarchy)")
        quiet(real, topo)
        print("\ndemo: OK")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        if rt:
            rt.close()
        if api:
            api.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

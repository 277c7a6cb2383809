"""Figure 7: what a user buys exclusive CPUs for, in the workload's numbers.

cyclictest (Debian's rt-tests) measures wakeup latency as a container of the NRI
runtime simulator with real cgroups, pinned by the real driver. Every run is on
this machine's own CPUs, in one bench run, each case as long as the others,
in alternating rounds (cyclictest_runs):

  idle      cyclictest holds a claim (exclusive CPU 1), nothing else of ours runs
  pinned    the same, beside a noisy neighbour in the shared pool (below), with
            the NIC's movable interrupts steered onto CPU 1: isolation off, in
            the worst case a node without it can be in (irqbalance, an admin)
  shared    no claim: the same cyclictest is a shared container beside the same
            neighbour, the NIC's interrupts steered the same way
  isolated  pinned, the claim with CPUConfig irq: isolate, the NIC's interrupts
            as this machine had them (the driver moves them off CPU 1)

The target row, pinned/idle, is the isolated run: an exclusive CPU as the
driver makes it quiet (CPUs of its own, no CFS quota, no movable interrupt).
The pinned run beside it shows what is left without interrupt isolation.

The noisy neighbour is what a busy pod is: 2 CPU hogs per CPU of the machine
(SCHED_OTHER, nice 0, like cyclictest; more runnable threads than CPUs on
every shared CPU), a loop of 4 KiB O_DIRECT disk writes (each one an interrupt
of the block queue) and ICMP echo traffic to the default gateway (each reply an
interrupt of the NIC's receive queue).

Policy other (cyclictest --policy=other): what an ordinary pod gets. Then
deadline, as a real-time claim holder (a driver with --rt-cpus 1, a claim on
cpurt001 with a budget and irq: isolate): cyclictest has no deadline policy
(--policy takes other, normal, batch, idle, fifo, rr), so rt-tests'
cyclicdeadline measures it, twice as long as the other runs (one sample per
20 ms period, against one per ms):

  dl-idle   cyclicdeadline holds the real-time claim, nothing else runs
  dl-pinned the same beside the noisy neighbour

There is no shared deadline case: the driver gives SCHED_DEADLINE only to a
real-time claim's container, on a real-time CPU that is its own root domain.

Then, on the same exclusive CPU:

  throttle  a claim holder with a 0.5-CPU limit busy for 1 s of CPU: throttled
            periods in its container's and its pod's cpu.stat (v1 cpu hierarchy),
            quota kept (--cpu-quota=keep) vs dropped (the default)
  irqs      interrupts per second on the exclusive CPU per source
            (/proc/interrupts deltas), isolation off (pinned) vs on (isolated):
            movable sources should vanish, kernel-managed ones stay and are
            reported with their remedy (isolcpus=managed_irq)

On a 2-CPU machine the shared pool is one CPU (CPU 0), which also runs the
driver, the simulators, this script and whatever else the machine does; the
exclusive CPU is CPU 1. Every figure says so.

    fig_quiet.py echo ADDRESS INTERVAL_S   the neighbour's traffic (a container)
"""

import errno
import os
import re
import shutil
import signal
import socket
import struct
import sys
import threading
import time

from benchlib import BenchError, Env, claim_env_line, quantile

CPU = 1  # the exclusive (and, for deadline, the real-time) CPU
HOGS_PER_CPU = 2
IO_SCRIPT = ("while :; do dd if=/dev/zero of=%s bs=4k count=256 oflag=direct status=none; "
             "done")
ECHO_INTERVAL_S = 0.002
# cyclicdeadline's thread reserves 60 % of its interval (below 3334 us that is
# under 2 ms of runtime, for which it wants HRTICK switched on in debugfs, a
# node-wide change this figure does not make). It counts latency against a
# grid of its own that advances one interval per job and only ever moves
# later: a job delayed past its whole period (the kernel then starts a new
# period from that moment) adds the lost periods to every later sample. 20 ms
# periods keep that out of reach of the delays this VM shows (up to ~13 ms);
# a max beyond the interval says it happened (grid_shifted).
DL_INTERVAL_US = 20000
# the budget the driver gives the container's main task (cyclicdeadline's
# main thread); the claim's bandwidth covers it and the measuring thread
DL_BUDGET = {"policy": "deadline", "runtimeNs": 1000000, "deadlineNs": 20000000,
             "periodNs": 20000000}
DL_BANDWIDTH = "650m"
# Cases in alternating rounds (cyclictest_runs, deadline_runs): at most this
# many, each at least this long (a deadline round of 2 s has 100 periods).
CT_MODES = ("idle", "pinned", "shared", "isolated")
CT_ROUNDS, CT_ROUND_S = 5, 2
DL_ROUNDS, DL_ROUND_S = 4, 2
SCHED_DEADLINE = 6


def hogs():
    return HOGS_PER_CPU * (os.cpu_count() or 1)


def cyclictest_argv(seconds, hist_us=20000):
    return ["cyclictest", "--policy=other", "-t", "1", "-i", "1000", "-m", "-q",
            "-D", "%ds" % seconds, "-h", str(hist_us)]


def cyclicdeadline_argv(seconds):
    # not -q: it then prints its latest period's latency every 10 ms, the only
    # distribution it gives (it keeps no histogram); no -a: with it,
    # cyclicdeadline rebuilds the machine's cpusets itself
    return ["cyclicdeadline", "-t", "1", "-i", str(DL_INTERVAL_US), "-D", str(seconds)]


def hist_p99(counts, mx):
    """p99 of a cyclictest histogram {µs: count}: the first bucket holding
    99 % of the samples, never above the max."""
    total, seen = sum(counts.values()), 0
    for us in sorted(counts):
        seen += counts[us]
        if seen >= 0.99 * total:
            return min(us, mx)
    return mx


def parse_cyclictest_hist(text):
    """({µs: count}, max µs) from cyclictest -q -h; its overflows (above the
    histogram's range) are counted under 10**9 µs."""
    counts, mx = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\d{6})\s+(\d+)", line)
        if m:
            counts[int(m.group(1))] = int(m.group(2))
        m = re.match(r"^# Max Latencies:\s+(\d+)", line)
        if m:
            mx = int(m.group(1))
        m = re.match(r"^# Histogram Overflows:\s+(\d+)", line)
        if m:
            counts[10 ** 9] = int(m.group(1))
    if not sum(counts.values()) or mx is None:
        raise BenchError("cyclictest printed no histogram: %r" % text[-300:])
    return counts, mx


STAT_LINE = re.compile(r"T:\s*0 \(\s*\d+\) I:\d+ C:\s*(\d+) Min:\s*(\d+) Act:\s*(\d+) "
                       r"Avg:\s*(\d+) Max:\s*(\d+)")


def parse_cyclicdeadline(text):
    """cyclicdeadline's status lines (one every 10 ms, cursor escapes between
    them): {periods, min_us, avg_us, max_us} of every period from its last line,
    and p99_us of the periods it printed (each line's latest period, once)."""
    if "Failed" in text or "thread[" not in text:
        raise BenchError("cyclicdeadline failed: %r" % text[-300:])
    acts, last = {}, None
    for m in STAT_LINE.finditer(text):
        c, mn, act, avg, mx = (int(x) for x in m.groups())
        if c:
            acts[c] = act
            last = (c, mn, avg, mx)
    if last is None:
        raise BenchError("cyclicdeadline ran no period: %r" % text[-300:])
    c, mn, avg, mx = last
    return {"periods": c, "min_us": mn, "avg_us": avg, "max_us": mx,
            "p99_us": quantile(list(acts.values()), 0.99), "sampled": len(acts),
            "latencies_us": sorted(acts.values())}


def interrupts_on(cpu, proc="/proc"):
    """{label: (count, description)} of /proc/interrupts for one CPU."""
    out = {}
    with open(os.path.join(proc, "interrupts")) as f:
        cpus = f.readline().split()
        col = cpus.index("CPU%d" % cpu)
        for line in f:
            parts = line.split()
            if not parts or not parts[0].endswith(":"):
                continue
            label = parts[0][:-1]
            vals = parts[1:1 + len(cpus)]
            if len(vals) <= col or not vals[col].isdigit():
                continue
            out[label] = (int(vals[col]), " ".join(parts[1 + len(cpus):]))
    return out


def affinity(label, proc="/proc", name="smp_affinity_list"):
    """/proc/irq/<label>/<name>: the CPUs asked for, or (effective_affinity_list)
    the ones the kernel delivers it to now; None when unreadable."""
    try:
        with open(os.path.join(proc, "irq", label, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def cpus_of(lst):
    s = set()
    for part in filter(None, (lst or "").split(",")):
        lo, _, hi = part.partition("-")
        s.update(range(int(lo), int(hi or lo) + 1))
    return s


def cpu_busy():
    """{cpu: (busy, total, steal)} jiffies of /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"^cpu(\d+)\s+(.*)", line)
            if m:
                v = [int(x) for x in m.group(2).split()[:8]] + [0] * 8
                out[int(m.group(1))] = (sum(v[:8]) - v[3] - v[4], sum(v[:8]), v[7])
    return out


def busy_between(a, b, field=0):
    """Per CPU, the share (%) of its time busy (field 0) or stolen (2)."""
    return {c: round(100.0 * (b[c][field] - a[c][field]) / max(1, b[c][1] - a[c][1]))
            for c in b if c in a}


def others_on(cpu, ours):
    """What other work of the machine does on cpu, outside the cgroups named
    ours: ({tid: "comm policy"} of user tasks under a real-time policy (FIFO,
    RR, DEADLINE) allowed on it, which take it from any ordinary task, claim or
    not; and how many tasks of others are runnable on it now)."""
    rt, runnable = {}, 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            tids = os.listdir("/proc/%s/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%s/task/%s/stat" % (pid, tid)) as f:
                    head, _, rest = f.read().rpartition(")")
                x = rest.split()
                # fields from 3: state, ..., 9 flags (PF_KTHREAD), 39 processor, 41 policy
                kthread, policy = int(x[6]) & 0x00200000, int(x[38])
                here = x[0] == "R" and int(x[36]) == cpu
                if kthread or not (here or policy in (1, 2, 6)):
                    continue
                with open("/proc/%s/task/%s/cpuset" % (pid, tid)) as f:
                    if ours in f.read():
                        continue
                runnable += here
                if policy in (1, 2, 6) and cpu in os.sched_getaffinity(int(tid)):
                    rt[tid] = "%s %s" % (head.partition("(")[2],
                                         {1: "fifo", 2: "rr", 6: "deadline"}[policy])
            except (OSError, ValueError, IndexError):
                continue
    return rt, runnable


def foreign_rt(cpu, ours):
    return others_on(cpu, ours)[0]


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---------------------------------------------------------------- the NIC


def default_route(proc="/proc"):
    """(interface, gateway address) of the IPv4 default route, or None."""
    try:
        with open(os.path.join(proc, "net", "route")) as f:
            next(f)
            for line in f:
                x = line.split()
                if len(x) > 3 and x[1] == "00000000" and int(x[3], 16) & 2:
                    return x[0], socket.inet_ntoa(struct.pack("<I", int(x[2], 16)))
    except (OSError, StopIteration, ValueError):
        pass
    return None


def nic_irqs(iface, sysfs="/sys"):
    """The interrupts of a network interface's device: its msi_irqs, or its
    parent's (a virtio NIC's are on the PCI function above it)."""
    dev = os.path.realpath(os.path.join(sysfs, "class", "net", iface, "device"))
    for d in (dev, os.path.dirname(dev)):
        p = os.path.join(d, "msi_irqs")
        if os.path.isdir(p):
            return sorted((x for x in os.listdir(p) if x.isdigit()), key=int)
    return []


def effective(label, proc="/proc"):
    return affinity(label, proc, "effective_affinity_list")


def settle(irqs, poke=None, proc="/proc", timeout=1.0):
    """Waits until each interrupt's effective CPUs are within its affinity: an
    MSI moves at its next interrupt (x86), which still arrives on the old CPU;
    poke() makes one. Returns those still unsettled."""
    end = time.monotonic() + timeout
    while True:
        left = [i for i in irqs if effective(i, proc) is not None
                and not cpus_of(effective(i, proc)) <= cpus_of(affinity(i, proc))]
        if not left or time.monotonic() > end:
            return left
        if poke:
            poke()
        time.sleep(0.01)


# How long the isolated run waits at most (and no longer than a run lasts) for
# the driver's moves to be carried out before it measures: an interrupt that
# fires rarely (a console, a vsock) may take that long to fire once on its old
# CPU.
SETTLE_S = 10.0


def moved_off(cpu, proc="/proc"):
    """The interrupts whose affinity leaves cpu out while their effective
    CPUs still include it: moved, the move not yet carried out."""
    out = []
    for i in sorted((x for x in os.listdir(os.path.join(proc, "irq")) if x.isdigit()), key=int):
        aff, eff = affinity(i, proc), effective(i, proc)
        if aff is not None and eff is not None and cpu not in cpus_of(aff) \
                and cpu in cpus_of(eff):
            out.append(i)
    return out


class IrqSteer:
    """Moves interrupts onto one CPU for a run and puts back what it found when
    the run ends, also when it fails or the bench is sent SIGTERM: first the
    CPU it was effectively on, then its affinity (written in one step, the
    kernel would leave it on the CPU it was steered to). The kernel refuses to
    move a managed interrupt (EIO): that is recorded, not fought."""

    def __init__(self, irqs, cpu, proc="/proc", poke=None):
        self.irqs, self.cpu, self.proc, self.poke = list(irqs), cpu, proc, poke
        self.saved, self.refused, self.restore_errors = {}, {}, {}
        self.unsettled = []
        self._old_term = None

    def _path(self, irq, name="smp_affinity_list"):
        return os.path.join(self.proc, "irq", irq, name)

    @staticmethod
    def _write(path, value):
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            def term(*_):
                raise SystemExit(143)
            self._old_term = signal.signal(signal.SIGTERM, term)
        try:
            for irq in self.irqs:
                old = affinity(irq, self.proc)
                if old is None:
                    continue
                try:
                    self._write(self._path(irq), str(self.cpu))
                    self.saved[irq] = (old, effective(irq, self.proc))
                except OSError as e:
                    self.refused[irq] = errno.errorcode.get(e.errno, str(e.errno))
            self.unsettled = settle(list(self.saved), self.poke, self.proc)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for irq, (old, eff) in self.saved.items():
            if eff and eff != old and cpus_of(eff) <= cpus_of(old):
                try:
                    self._write(self._path(irq), eff)
                except OSError as e:
                    self.restore_errors[irq] = "%s (was %s)" % (e, old)
        settle(list(self.saved), self.poke, self.proc)
        for irq, (old, eff) in self.saved.items():
            try:
                self._write(self._path(irq), old)
            except OSError as e:
                self.restore_errors[irq] = "%s (was %s)" % (e, old)
        self.saved = {}
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        if self.restore_errors:
            raise BenchError("could not restore interrupt affinities: %s" % self.restore_errors)
        return False


def echo_once(address, n=2):
    """A few ICMP echoes to address, answered or not (they make the NIC's
    interrupts fire, so that a pending affinity change is carried out)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    try:
        s.settimeout(0.05)
        for seq in range(n):
            s.sendto(icmp_echo(seq), (address, 0))
            try:
                s.recv(2048)
            except socket.timeout:
                pass
    finally:
        s.close()


def icmp_echo(seq):
    def csum(b):
        x = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        x = (x >> 16) + (x & 0xffff)
        return ~(x + (x >> 16)) & 0xffff
    body = b"dra-cpu fig7 " * 4
    head = struct.pack("!BBHHH", 8, 0, 0, os.getpid() & 0xffff, seq & 0xffff)
    return struct.pack("!BBHHH", 8, 0, csum(head + body), os.getpid() & 0xffff,
                       seq & 0xffff) + body


def echo(address, interval):
    """ICMP echo to address every interval seconds, forever (the neighbour's
    network traffic: every reply is a receive interrupt of the NIC)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(0.5)
    seq = 0
    while True:
        seq += 1
        s.sendto(icmp_echo(seq), (address, 0))
        try:
            s.recv(2048)
        except socket.timeout:
            pass
        time.sleep(interval)


def has_socket(pid):
    try:
        return any(os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
                   for fd in os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return False


class Noise:
    """The noisy neighbour: shared containers that hog every CPU, write to disk
    and exchange packets with the default gateway."""

    def __init__(self, rt, io_file, gateway):
        self.rt, self.ctrs = rt, []
        pod = rt.add_pod("noisy")
        try:
            for i in range(hogs()):
                self.ctrs.append(rt.create_container(pod, "hog%d" % i,
                                                     argv=["/bin/sh", "-c", "while :; do :; done"]))
            self.ctrs.append(rt.create_container(pod, "io", argv=["/bin/sh", "-c",
                                                                  IO_SCRIPT % io_file]))
            if gateway:
                net = rt.create_container(pod, "net", argv=[
                    sys.executable, os.path.abspath(__file__), "echo", gateway,
                    str(ECHO_INTERVAL_S)])
                self.ctrs.append(net)
                # an interpreter starts slowly on a busy machine: the case
                # begins once the traffic does (its socket is open)
                end = time.monotonic() + 5
                while not has_socket(net.pid) and time.monotonic() < end:
                    time.sleep(0.02)
        except BaseException:
            self.stop()
            raise

    @property
    def cpus(self):
        return sorted({c.cpus or "all" for c in self.ctrs})

    def stop(self):
        for c in self.ctrs:
            self.rt.remove_container(c)
        self.ctrs = []


def prepare(env, d, name, pod, n="1", **params):
    from claims import claim, cpu_config, ref
    # CPU 1, exactly (the reference driver's cpuset override): CPU 0 stays the
    # shared pool, where the driver, the simulators and this script run
    configs = [{"source": "FromClaim", "opaque": {"driver": "dra.cpu", "parameters": {
        "apiVersion": "v1alpha1", "cpuConfig": {"cpuset": str(CPU)}}}}]
    configs += [cpu_config(**params)] if params else []
    c = env.api.put_claim(claim(name, [("cpu", "cpudevnuma000", n)], configs=configs,
                                reserved_for=[pod]))
    return c, _prepared(env, d, c)


def _prepared(env, d, c):
    from claims import ref
    r = env.kubelet_client().prepare(d.dra_sock, [ref(c)])
    err = r.claims[c["metadata"]["uid"]].error
    if err:
        raise BenchError("prepare %s: %s" % (c["metadata"]["name"], err))
    return claim_env_line(d.cdi_dir, c["metadata"]["uid"])


def unprepare(env, d, c):
    from claims import ref
    env.kubelet_client().unprepare(d.dra_sock, [ref(c)])


def run_in(rt, pod, name, env_line, argv, seconds, on_start=None):
    """Runs argv as a container to its end; returns (its output, container)."""
    out = "/dev/shm/dra-cpu-fig7-%d-%s.txt" % (os.getpid(), name)
    sh = ["/bin/sh", "-c", "exec %s > %s 2>&1" % (" ".join(argv), out)]
    env = {}
    if env_line:
        k, v = env_line.split("=", 1)
        env = {k: v}
    ctr = rt.create_container(pod, name, env=env, argv=sh)
    try:
        if on_start:
            on_start(ctr)
        ctr.proc.wait(seconds + 30)
    finally:
        rt.remove_container(ctr)
    try:
        with open(out) as f:
            return f.read(), ctr
    finally:
        os.unlink(out)


class Conditions:
    """What the machine did during one case: load, how busy each CPU was, and
    interrupts on CPU 1 per source."""

    def __init__(self, ours):
        self.ours, self.rt, self.runnable = ours, {}, []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):  # once a second: a scan costs a few ms of CPU 0
        while True:
            rt, n = others_on(CPU, self.ours)
            self.rt.update(rt)
            self.runnable.append(n)
            if self._stop.wait(1.0):
                return

    def __enter__(self):
        self._sampler.start()
        self.load0, self.busy0 = loadavg(), cpu_busy()
        self.irq0, self.t0 = interrupts_on(CPU), time.monotonic()
        return self

    def __exit__(self, *exc):
        self.dt = time.monotonic() - self.t0
        self.irq1, self.busy1, self.load1 = interrupts_on(CPU), cpu_busy(), loadavg()
        self._stop.set()
        self._sampler.join()
        return False

    def record(self, r):
        irq0, irq1 = self.irq0, self.irq1
        r["irqs"] = {k: irq1[k][0] - irq0.get(k, (0, ""))[0]
                     for k in irq1 if irq1[k][0] > irq0.get(k, (0, ""))[0]}
        r["irqs_per_s"] = {k: round(n / self.dt, 1) for k, n in r["irqs"].items()}
        r["irq_names"] = {k: irq1[k][1] for k in r["irqs_per_s"]}
        r["loadavg"] = [self.load0, self.load1]
        r["cpu_busy_pct"] = busy_between(self.busy0, self.busy1)
        r["cpu_steal_pct"] = busy_between(self.busy0, self.busy1, 2)
        r["foreign_rt"] = sorted(set(self.rt.values()))
        r["others_runnable"] = round(sum(self.runnable) / max(1, len(self.runnable)), 1)
        r["measured_s"] = round(self.dt, 3)
        return r


def merge_conditions(rs):
    """The conditions of several rounds of one case as one record: interrupts
    and busy shares over their whole time, the load from the first to the
    last, the tasks of others runnable on CPU 1 as a mean."""
    t = sum(r["measured_s"] for r in rs) or 1.0
    irqs = {}
    for r in rs:
        for k, n in r["irqs"].items():
            irqs[k] = irqs.get(k, 0) + n
    names = {}
    for r in rs:
        names.update(r["irq_names"])

    def share(key):
        cpus = {c for r in rs for c in r[key]}
        return {c: round(sum(r[key].get(c, 0) * r["measured_s"] for r in rs) / t)
                for c in cpus}
    return {"irqs": irqs, "irqs_per_s": {k: round(n / t, 1) for k, n in irqs.items()},
            "irq_names": names, "loadavg": [rs[0]["loadavg"][0], rs[-1]["loadavg"][1]],
            "cpu_busy_pct": share("cpu_busy_pct"), "cpu_steal_pct": share("cpu_steal_pct"),
            "foreign_rt": sorted({x for r in rs for x in r["foreign_rt"]}),
            "others_runnable": round(sum(r["others_runnable"] for r in rs) / len(rs), 1),
            "measured_s": round(t, 3)}


def rounds(seconds, least, most):
    """How many alternating rounds a case of `seconds` takes: rounds of at
    least `least` seconds, at most `most` of them."""
    return max(1, min(most, seconds // least))


def merge_runs(rs):
    """The rounds of one cyclictest case as one result: the histograms added
    up, p99 from the sum, the worst max; what the rounds saw, together."""
    counts = {}
    for r in rs:
        for us, n in r["hist"].items():
            counts[us] = counts.get(us, 0) + n
    mx = max(r["max_us"] for r in rs)
    out = merge_conditions(rs)
    out.update({"p99_us": hist_p99(counts, mx), "max_us": mx, "samples": sum(counts.values()),
                "hist": counts, "rounds": len(rs), "cpus": rs[0]["cpus"],
                "noise_cpus": rs[0]["noise_cpus"], "settle_s": rs[0]["settle_s"],
                "steer_refused": {k: v for r in rs for k, v in r["steer_refused"].items()}})
    for k in ("unsettled", "steered", "managed"):
        if any(k in r for r in rs):
            out[k] = sorted({x for r in rs for x in r.get(k, [])}, key=int)
    for k in ("driver_managed", "bpf_interrupts"):
        if k in rs[-1]:
            out[k] = rs[-1][k]
    return out


def cyclictest_runs(env, rt, d, seconds, io_file, net, res):
    """idle, pinned, shared and isolated, seconds each, in alternating rounds
    (idle, pinned, shared, isolated, idle, ...): what the host does to this
    VM's CPUs drifts over a minute (an idle baseline's p99 went from 113 to
    435 us between two bench runs), and alternating spreads that drift over
    every case instead of charging it to one."""
    n = rounds(seconds, CT_ROUND_S, CT_ROUNDS)
    parts = {m: [] for m in CT_MODES}
    for k in range(n):
        for mode in CT_MODES:
            parts[mode].append(one_run(env, rt, d, mode, seconds // n, io_file, net,
                                       "%s-%d" % (mode, k)))
    for mode, rs in parts.items():
        res[mode] = merge_runs(rs)
    return n * (seconds // n)


def one_run(env, rt, d, mode, seconds, io_file, net, name=None):
    """mode: idle | pinned | shared | isolated; name: this round's pod and
    claim (the mode's when None)."""
    name = name or mode
    pod = rt.add_pod("rt-" + name)
    c, line = None, None
    if mode != "shared":
        params = {"irq": "isolate"} if mode == "isolated" else {}
        c, line = prepare(env, d, "lat-" + name, pod, **params)
    poke = (lambda: echo_once(net["gateway"])) if net else None
    steer = IrqSteer(net["irqs"] if net and mode in ("pinned", "shared") else [], CPU,
                     poke=poke)
    r = {}
    try:
        with steer:
            noise = Noise(rt, io_file, net and net["gateway"]) if mode != "idle" else None
            try:
                # the moves asked for (steering, or the driver's isolation at
                # Prepare) carried out before measuring: one interrupt each
                r["settle_s"] = min(SETTLE_S, seconds) if mode == "isolated" else 1.0
                r["unsettled"] = settle(moved_off(CPU) if mode == "isolated" else
                                        net["irqs"] if net else [], poke,
                                        timeout=r["settle_s"])
                with Conditions("/" + os.path.basename(rt.cg.root) + "/") as cond:
                    text, ctr = run_in(rt, pod, "cyclictest", line, cyclictest_argv(seconds),
                                       seconds)
                r["noise_cpus"] = noise.cpus if noise else []
            finally:
                if noise:
                    noise.stop()
            r["steered"] = sorted(steer.saved, key=int)
            r["steer_refused"] = steer.refused
        counts, mx = parse_cyclictest_hist(text)
        r.update({"p99_us": hist_p99(counts, mx), "max_us": mx, "hist": counts,
                  "samples": sum(counts.values()), "cpus": ctr.cpus or "all"})
        cond.record(r)
        if mode == "isolated":
            r["managed"] = managed_irqs(d, r)
            m = d.metrics()
            r["driver_managed"] = m.get("dra_cpu_irq_managed_on_isolated")
            r["bpf_interrupts"] = {k: v for k, v in m.items()
                                   if k.startswith("dra_cpu_exclusive_interrupt")}
    finally:
        if c:
            unprepare(env, d, c)
    return r


def managed_irqs(d, r):
    """The interrupts the driver reported as kernel-managed (its log line
    irq_managed_on_isolated_cpus), and any device interrupt that fired on CPU 1
    while isolated with CPU 1 still in its affinity."""
    out = set()
    for line in d.log().splitlines():
        if "irq_managed_on_isolated_cpus" in line:
            m = re.search(r"irqs=(\S+)", line)
            if m:
                out.update(re.findall(r"(\d+)\(", m.group(1)))
    out.update(k for k in r["irqs_per_s"] if k.isdigit() and CPU in cpus_of(affinity(k)))
    return sorted(out, key=int)


class Busy(BenchError):
    """The kernel refused a deadline task because of what others did on CPU 1:
    they hold its bandwidth (EBUSY) or undid its root domain (EPERM)."""


def _root_balance():
    try:
        with open("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance") as f:
            return f.read().strip()
    except OSError:
        return "unreadable"


def merge_deadline(rs):
    """The rounds of one deadline case as one result: p99 over every period
    printed in any round, avg over every period, the worst max."""
    lat = sorted(x for r in rs for x in r["latencies_us"])
    periods = sum(r["periods"] for r in rs)
    out = merge_conditions(rs)
    out.update({"periods": periods, "sampled": len(lat), "rounds": len(rs),
                "min_us": min(r["min_us"] for r in rs),
                "avg_us": round(sum(r["avg_us"] * r["periods"] for r in rs) / max(1, periods)),
                "max_us": max(r["max_us"] for r in rs), "p99_us": quantile(lat, 0.99),
                "main_policy": next((r["main_policy"] for r in rs
                                     if r["main_policy"] != "deadline"), "deadline"),
                "grid_shifted": any(r["grid_shifted"] for r in rs), "cpus": rs[0]["cpus"],
                "latencies_us": lat})
    return out


def deadline_runs(env, rt, d, seconds, io_file, net, res, attempts=3):
    """dl-idle and dl-pinned, seconds each, in alternating rounds (idle,
    pinned, idle, ...): what the host does to this VM's CPUs drifts over a
    minute (the hypervisor's steal on CPU 1 went from 3 to 20 % between two
    consecutive 20 s cases), and alternating spreads that drift over both
    cases instead of charging it to one. Another test run holding CPU 1's
    deadline bandwidth (EBUSY) or undoing its root domain (EPERM) is waited
    out a few times, then reported in place of the figure."""
    n = rounds(seconds, DL_ROUND_S, DL_ROUNDS)
    parts = {"dl-idle": [], "dl-pinned": []}
    for k in range(n):
        for mode in ("dl-idle", "dl-pinned"):
            for i in range(attempts):
                try:
                    parts[mode].append(deadline_run(env, rt, d, mode, seconds // n, io_file,
                                                    net, "%s-%d" % (mode, k)))
                    break
                except Busy as e:
                    res[mode] = {"error": str(e), "attempts": i + 1}
                    time.sleep(5)
            else:
                return
    for mode, rs in parts.items():
        res[mode] = merge_deadline(rs)


def deadline_run(env, rt, d, mode, seconds, io_file, net, name):
    """mode: dl-idle | dl-pinned; d runs with --rt-cpus CPU; name: this
    round's pod and claim."""
    from claims import realtime_claim
    pod = rt.add_pod("rt-" + name)
    c = env.api.put_claim(realtime_claim("lat-" + name, "cpurt%03d" % CPU, DL_BANDWIDTH,
                                         DL_BUDGET, reserved_for=[pod], irq="isolate"))
    line = _prepared(env, d, c)
    seen = {}

    def policy_applied(ctr):  # the driver's real-time path, checked in the kernel
        end = time.monotonic() + 5
        while time.monotonic() < end and ctr.proc.poll() is None:
            try:
                if os.sched_getscheduler(ctr.pid) & 0xff == SCHED_DEADLINE:
                    seen["main_policy"] = "deadline"
                    return
            except OSError:
                return
            time.sleep(0.01)
    try:
        noise = Noise(rt, io_file, net and net["gateway"]) if mode == "dl-pinned" else None
        try:
            with Conditions("/" + os.path.basename(rt.cg.root) + "/") as cond:
                text, ctr = run_in(rt, pod, "cyclicdeadline", line, cyclicdeadline_argv(seconds),
                                   seconds, on_start=policy_applied)
        finally:
            if noise:
                noise.stop()
    finally:
        unprepare(env, d, c)
    others = ", ".join(sorted(set(foreign_rt(CPU, "/" + os.path.basename(rt.cg.root)
                                             + "/").values()))) or "none left by now"
    if "Device or resource busy" in text:
        raise Busy("the kernel refused cyclicdeadline's thread (EBUSY): CPU %d's deadline "
                   "bandwidth was held by real-time tasks outside the figure (%s)"
                   % (CPU, others))
    if "Operation not permitted" in text:
        raise Busy("the kernel refused cyclicdeadline's thread (EPERM): CPU %d was not its "
                   "own root domain at that moment (root cpuset sched_load_balance now %s; "
                   "another test run on this machine resets the cpusets the driver set; "
                   "real-time tasks of others: %s)" % (CPU, _root_balance(), others))
    r = parse_cyclicdeadline(text)
    r["main_policy"] = seen.get("main_policy", "not deadline")
    r["grid_shifted"] = r["max_us"] > DL_INTERVAL_US
    r["cpus"] = ctr.cpus or "all"
    return cond.record(r)


def run(build, seconds=10):
    if os.geteuid() != 0:
        raise BenchError("needs root (real cgroups, /proc/irq)")
    for tool in ("cyclictest", "cyclicdeadline"):
        if not shutil.which(tool):
            raise BenchError("%s missing: make bench installs rt-tests (tools/deps.sh bench)"
                             % tool)
    if (os.cpu_count() or 1) < 2:
        raise BenchError("needs 2 CPUs")
    io_file = "/var/tmp/dra-cpu-fig7-%d" % os.getpid()
    route = default_route()
    net = {"iface": route[0], "gateway": route[1], "irqs": nic_irqs(route[0])} if route else None
    # This script, and the driver and simulators it starts, run in the shared
    # pool, as the driver's own pod does on a node: the measuring harness
    # stays off the CPU it measures. (Containers the simulator starts get
    # their cgroup's CPUs whatever this mask is, as runc gives them.)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(range(8192)) - {CPU})
    try:
        return _run(build, seconds, io_file, net)
    finally:
        os.sched_setaffinity(0, saved)


def _run(build, seconds, io_file, net):
    env = Env(build)
    res = {"run_seconds": seconds, "cpus": os.cpu_count(), "hogs": hogs(), "net": net,
           "note": "%d CPUs: exclusive CPU %d; the shared pool is the rest, which also runs "
                   "the driver, the simulators and this script" % (os.cpu_count(), CPU)}
    try:
        rt = env.runtime(cgroups=True, cgroup_root="fig7-%d" % os.getpid())
        d = switch_driver(env, rt, None, [])
        res["run_seconds"] = cyclictest_runs(env, rt, d, seconds, io_file, net, res)
        if rt.cg.cpu_available():
            res["quota_dropped"] = throttle_run(env, d, rt, False)
            d = switch_driver(env, rt, d, ["--cpu-quota=keep"])
            res["quota_kept"] = throttle_run(env, d, rt, True)
        # each deadline run unprepares its claim, also when it fails: the
        # driver then undoes the root domain it made for CPU 1
        d = switch_driver(env, rt, d, ["--rt-cpus", str(CPU)])
        deadline_runs(env, rt, d, 2 * seconds, io_file, net, res)
    finally:
        env.close()
        try:
            os.unlink(io_file)
        except OSError:
            pass
    return res


def switch_driver(env, rt, old, args):
    """Stops old (if any) and starts a driver with args plugged into rt."""
    if old is not None:
        old.stop()
    after = max((c.serial for c in rt.conns), default=0)
    d = env.driver(topology=None, args=["--nri-socket", rt.socket_path] + args).start()
    rt.wait_plugin(timeout=5, after=after)
    return d


def throttle_run(env, d, rt, kept):
    from sim.nrisim import Cgroups
    pod = rt.add_pod("busy", cpu_limit_m=500)
    c, line = prepare(env, d, "busy", pod)
    k, v = line.split("=", 1)
    # nice -20: it gets CPU 1 over the host's tasks there, so the quota is reached
    ctr = rt.create_container(pod, "app", env={k: v}, cpu_limit_m=500,
                              argv=["nice", "-n", "-20", "/bin/sh", "-c", "while :; do :; done"])
    tick = os.sysconf("SC_CLK_TCK")

    def used():
        with open("/proc/%d/stat" % ctr.pid) as f:
            x = f.read().rsplit(")", 1)[1].split()
        return (int(x[11]) + int(x[12])) / tick

    def throttled():
        return (Cgroups.cpu_stat(ctr.cpu_cgroup)["nr_throttled"]
                + Cgroups.cpu_stat(os.path.dirname(ctr.cpu_cgroup))["nr_throttled"])
    # 1 s of CPU; and with the quota kept, at least until its first throttled
    # period (other tasks crowding CPU 1 can keep it below its quota for long)
    t0 = time.monotonic()
    while used() < 1.0 or (kept and not throttled() and time.monotonic() - t0 < 20):
        if time.monotonic() - t0 > 30:
            raise BenchError("the busy claim holder did not get 1 s of CPU in 30 s")
        time.sleep(0.05)
    wall, cpu = time.monotonic() - t0, used()
    a = Cgroups.cpu_stat(ctr.cpu_cgroup)
    b = Cgroups.cpu_stat(os.path.dirname(ctr.cpu_cgroup))
    rt.remove_container(ctr)
    unprepare(env, d, c)
    return {"throttled": a["nr_throttled"] + b["nr_throttled"],
            "container_throttled": a["nr_throttled"], "pod_throttled": b["nr_throttled"],
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


# ---------------------------------------------------------------- the table


def _conditions(r, name):
    x = r[name]
    return ("%s load %.1f, CPU %d %d%% busy (%d%% stolen), %.1f tasks of others runnable "
            "on it%s") % (
        name, x["loadavg"][0], CPU, x["cpu_busy_pct"].get(CPU, 0), x["cpu_steal_pct"].get(CPU, 0),
        x.get("others_runnable", 0),
        ", real-time tasks of others on it: %s" % ", ".join(x["foreign_rt"])
        if x.get("foreign_rt") else "")


def irq_split(r):
    """({irq: per s} movable off, movable on, managed on, managed list) of the
    device interrupts on CPU 1: pinned (isolation off) vs isolated (on)."""
    iso = r["isolated"]
    managed = set(iso.get("managed", []))

    def dev(x):
        return {k: v for k, v in x["irqs_per_s"].items() if k.isdigit()}
    off, on = dev(r["pinned"]), dev(iso)
    return ({k: v for k, v in off.items() if k not in managed},
            {k: v for k, v in on.items() if k not in managed},
            {k: v for k, v in on.items() if k in managed}, sorted(managed, key=int))


def _per_source(rates, names):
    """'36 virtio1-req.0 1641/s, ...': the interrupt, its name, its rate."""
    def name(k):
        return names[k].split()[-1] if names.get(k) else "?"
    return ", ".join("%s %s %.0f/s" % (k, name(k), v)
                     for k, v in sorted(rates.items(), key=lambda kv: int(kv[0])))


def table(r):
    """Rows (name, value, target, ok, note) for bench.py and the demo."""
    idle, pinned, shared, iso = r["idle"], r["pinned"], r["shared"], r["isolated"]
    rows = []
    pr = iso["p99_us"] / max(1, idle["p99_us"])
    nr = pinned["p99_us"] / max(1, idle["p99_us"])
    sr = shared["p99_us"] / max(1, idle["p99_us"])
    conds = "; ".join(_conditions(r, m) for m in ("idle", "isolated", "shared"))
    rows.append(("cyclictest p99 pinned/idle", "%.1fx (%d/%d us)" % (pr, iso["p99_us"],
                                                                   idle["p99_us"]),
                 "<= 2x", pr <= 2, "policy other, %d s each in %d alternating rounds (idle, "
                 "pinned, shared, isolated, idle, ...); pinned: a claim holder on its "
                 "exclusive CPU with irq: isolate and no CFS quota, as the driver makes it "
                 "quiet; cyclictest on CPUs %s/%s/%s; wakeups measured idle/pinned/shared "
                 "%d/%d/%d of %d asked (fewer: the machine was too busy to wake it); %s; %s"
                 % (r["run_seconds"], idle.get("rounds", 1), idle["cpus"], iso["cpus"],
                    shared["cpus"],
                    idle["samples"], iso["samples"], shared["samples"],
                    r["run_seconds"] * 1000, conds, r["note"])))
    rows.append(("cyclictest p99 pinned, irqs not isolated/idle",
                 "%.1fx (%d/%d us)" % (nr, pinned["p99_us"], idle["p99_us"]), "-", None,
                 "the same claim holder without irq: isolate, the NIC's interrupts steered "
                 "onto its CPU (the worst a node without isolation can do to it); %s"
                 % _conditions(r, "pinned")))
    net = r.get("net")
    rows.append(("cyclictest p99 shared/idle", "%.1fx (%d/%d us)" % (sr, shared["p99_us"],
                                                                   idle["p99_us"]),
                 ">= 10x", sr >= 10, "the same cyclictest as a shared container on CPUs %s beside "
                 "%d CPU hogs (SCHED_OTHER nice 0, %d per CPU; on %s), 4 KiB O_DIRECT writes "
                 "and %s"
                 % (shared["cpus"], r["hogs"], HOGS_PER_CPU, "/".join(shared["noise_cpus"]),
                    "ICMP echo to %s over %s" % (net["gateway"], net["iface"]) if net
                    else "no network traffic (no default route)")))
    rows.append(("cyclictest max pinned/shared/idle", "%d/%d/%d us" % (
        iso["max_us"], shared["max_us"], idle["max_us"]), "-", None,
        "pinned without isolation: max %d us" % pinned["max_us"]))
    failed = [x["error"] for x in (r.get("dl-idle"), r.get("dl-pinned")) if x and "error" in x]
    if failed:
        rows.append(("deadline p99 pinned/idle", "not run", "<= 2x", None,
                     "%s, %d attempts" % (failed[0], max(r.get(m, {}).get("attempts", 0)
                                                         for m in ("dl-idle", "dl-pinned")))))
    elif "dl-idle" in r:
        di, dp = r["dl-idle"], r["dl-pinned"]
        dr = dp["p99_us"] / max(1, di["p99_us"])
        rows.append(("deadline p99 pinned/idle", "%.1fx (%d/%d us)" % (dr, dp["p99_us"],
                                                                     di["p99_us"]),
                     "<= 2x", dr <= 2,
                     "cyclicdeadline (cyclictest has no deadline policy) in a real-time claim "
                     "on cpurt%03d (%s, irq: isolate, driver --rt-cpus %d): the driver put its "
                     "main task under "
                     "SCHED_DEADLINE (%s: %s), its thread reserves %d of every %d us itself; p99 "
                     "of the %d/%d periods it printed (it keeps no histogram), in %d alternating "
                     "rounds of each case (idle, pinned, idle, ...); dl-pinned beside "
                     "the same neighbour; no shared case: the driver gives deadline only to "
                     "real-time claims; %s"
                     % (CPU, DL_BANDWIDTH, CPU, "idle/pinned",
                        "/".join((di["main_policy"], dp["main_policy"])),
                        DL_INTERVAL_US * 60 // 100, DL_INTERVAL_US, di["sampled"],
                        dp["sampled"], di.get("rounds", 1), "; ".join(_conditions(r, m)
                                                 for m in ("dl-idle", "dl-pinned")))))
        shifted = [m for m, x in (("idle", di), ("pinned", dp)) if x["grid_shifted"]]
        rows.append(("deadline avg/max pinned vs idle", "%d/%d vs %d/%d us" % (
            dp["avg_us"], dp["max_us"], di["avg_us"], di["max_us"]), "-", None,
            "every period: %d pinned, %d idle; latency = start of each period's job after "
            "the period began%s" % (dp["periods"], di["periods"],
                                    "; %s: a job later than its whole period, cyclicdeadline "
                                    "counts the lost periods in every later sample (avg and "
                                    "p99 overstated)" % "/".join(shifted) if shifted else "")))
    if "quota_dropped" in r:
        qd, qk = r["quota_dropped"], r["quota_kept"]
        rows.append(("throttled periods kept/dropped", "%d/%d" % (qk["throttled"],
                                                                qd["throttled"]),
                     "dropped = 0", qd["throttled"] == 0,
                     "0.5-CPU limit, busy at nice -20 on the exclusive CPU: kept %.2f s CPU in "
                     "%.2f s, dropped %.2f s CPU in %.2f s (v1 cpu.stat, container + pod; "
                     "below 0.5 CPU/s other tasks on CPU 1 kept it under its quota)"
                     % (qk["cpu_s"], qk["wall_s"], qd["cpu_s"], qd["wall_s"])))
    else:
        rows.append(("throttled periods kept/dropped", "-", "dropped = 0", None,
                     "no v1 cpu hierarchy here: see pools_test (v2, fake cgroupfs)"))

    mov_off, mov_on, man_on, managed = irq_split(r)
    names = dict(pinned["irq_names"], **iso["irq_names"])
    steered = pinned.get("steered", [])
    rows.append(("movable interrupts/s on CPU %d, isolation off/on" % CPU,
                 "%.0f/%.0f" % (sum(mov_off.values()), sum(mov_on.values())),
                 "on = 0", sum(mov_on.values()) == 0,
                 "per source from /proc/interrupts; off: %s%s; on: %s%s"
                 % (_per_source(mov_off, names) or "none fired on CPU %d, so on = 0 proves "
                    "little here" % CPU,
                    " (NIC %s's %s steered onto CPU %d for the run, restored after)"
                    % (net["iface"], ",".join(steered), CPU) if net and steered else "",
                    _per_source(mov_on, names) or "none",
                    "; moved, but silent for the %.0f s waited before the run, so the "
                    "kernel had not carried the move out (an MSI moves at its next interrupt, "
                    "which still lands on CPU %d; any such one is counted above): %s"
                    % (iso.get("settle_s", SETTLE_S), CPU, ",".join(iso["unsettled"]))
                    if iso.get("unsettled") else "")))
    rows.append(("kernel-managed interrupts/s on CPU %d, isolation on" % CPU,
                 "%.0f" % sum(man_on.values()), "reported", None,
                 "%s; remedy, as the driver reports it: boot with isolcpus=managed_irq,%d "
                 "(driver gauge dra_cpu_irq_managed_on_isolated = %s)"
                 % (_per_source(man_on, names) or ("none fired (managed here: %s)"
                                                   % (",".join(managed) or "none")), CPU,
                    "%.0f" % iso["driver_managed"] if iso.get("driver_managed") is not None
                    else "-")))
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "echo":
        echo(sys.argv[2], float(sys.argv[3]))
    sys.exit("usage: fig_quiet.py echo ADDRESS INTERVAL_S")

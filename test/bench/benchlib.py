"""Shared pieces of `make bench` (test/bench/bench.py): statistics, what the
kernel says about a process (CPU time, RSS), Prometheus histogram quantiles,
/metrics scraping, and a driver + simulators environment built from the same
parts the integration tests use (test/helpers/driver.py, test/sim).

Nothing here asserts a target: figures are returned as numbers, bench.py
compares and prints them.
"""

import gc
import glob
import http.client
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TEST = os.path.join(ROOT, "test")
for p in (TEST, os.path.join(TEST, "helpers")):
    if p not in sys.path:
        sys.path.insert(0, p)

NODE = "node-1"
NODE_UID = "0c1d2e3f-0000-4000-8000-00000000aaaa"


class BenchError(Exception):
    """A benchmark could not run (as opposed to missing its target)."""


# ---------------------------------------------------------------- statistics


def quantile(values, q):
    """Nearest-rank quantile (q in 0..1) of a non-empty sequence; None if empty."""
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 1)) - 1))  # ceil(q*n) - 1
    return v[k]


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summary(values, scale=1.0):
    """{n, p50, p90, p99, max, mean} of values * scale (rounded for JSON)."""
    v = [x * scale for x in values]
    if not v:
        return {"n": 0}
    r = lambda x: round(x, 4)  # noqa: E731
    return {"n": len(v), "p50": r(quantile(v, 0.5)), "p90": r(quantile(v, 0.9)),
            "p99": r(quantile(v, 0.99)), "max": r(max(v)), "mean": r(sum(v) / len(v))}


class quiet_gc:
    """No Python garbage collection inside a timed loop: a collection of the
    simulators' objects would land on one sample and become the p99."""

    def __enter__(self):
        gc.collect()
        gc.disable()

    def __exit__(self, *exc):
        gc.enable()


# ---------------------------------------------------------------- processes


def cpu_ns(pid):
    """CPU time (ns) the process's live threads have run: the first field of
    /proc/<pid>/task/*/schedstat (sum_exec_runtime). Exact to the ns, unlike
    utime/stime ticks; only threads alive now count (the driver has one)."""
    total = 0
    for f in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def memory(pid):
    """What the process's memory costs, in KiB:

    VmRSS, VmHWM, RssAnon, RssFile, RssShmem   /proc/<pid>/status
    Rss, Pss, Pss_Anon, Pss_File,              /proc/<pid>/smaps_rollup
    Private_Clean, Private_Dirty,
    Shared_Clean, Shared_Dirty
    USS = Private_Clean + Private_Dirty        what freeing the process gives back

    RSS counts every resident page mapped, shared library pages that other
    processes map too included; PSS divides each shared page among its
    mappers; USS counts only the pages no other process maps (heap, stacks,
    written library data, and library pages nobody else has loaded)."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Clean", "Private_Dirty",
                         "Shared_Clean", "Shared_Dirty"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    if "Private_Clean" in out and "Private_Dirty" in out:
        out["USS"] = out["Private_Clean"] + out["Private_Dirty"]
    return out


def memory_by_mapping(pid, top=12, fields=("Private_Dirty:",)):
    """The biggest contributors to private dirty memory (or to the sum of
    other smaps fields): [(mapping, KiB)], from /proc/<pid>/smaps; anonymous
    mappings are named [anon]."""
    per = {}
    name = None
    try:
        with open("/proc/%d/smaps" % pid) as f:
            for line in f:
                head = line.split()
                if not head:
                    continue
                if not head[0].endswith(":") or "-" in head[0]:
                    name = os.path.basename(head[5]) if len(head) > 5 else "[anon]"
                elif head[0] in fields:
                    per[name] = per.get(name, 0) + int(head[1])
    except OSError:
        return []
    return sorted(((k, v) for k, v in per.items() if v), key=lambda kv: -kv[1])[:top]


# ---------------------------------------------------------------- metrics


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, v = line.rsplit(" ", 1)
        out[k] = float(v)
    return out


def histogram(metrics, name, labels=""):
    """[(le, cumulative count)] ascending (le=inf last), sum, count of one
    histogram series. labels: the label text before le, e.g. 'method="x",'."""
    buckets = []
    prefix = name + "_bucket{" + labels + "le=\""
    for k, v in metrics.items():
        if k.startswith(prefix):
            le = k[len(prefix):-2]
            buckets.append((float("inf") if le == "+Inf" else float(le), v))
    buckets.sort()
    tail = "{" + labels.rstrip(",") + "}" if labels else ""
    return buckets, metrics.get(name + "_sum" + tail, 0.0), metrics.get(name + "_count" + tail, 0.0)


def histogram_delta(after, before):
    """after - before for (buckets, sum, count) of the same series."""
    b0 = dict(before[0])
    return ([(le, c - b0.get(le, 0.0)) for le, c in after[0]], after[1] - before[1],
            after[2] - before[2])


def histogram_quantile(q, h):
    """Prometheus' histogram_quantile(): the bucket holding rank q*count, linear
    inside it. Only as fine as the buckets (e.g. 1 ms .. 2.5 ms)."""
    buckets, _, count = h
    if count <= 0:
        return None
    rank = q * count
    lo, prev = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * ((rank - prev) / (c - prev) if c > prev else 1.0)
        lo, prev = le, c
    return lo


class Scraper:
    """GET on one keep-alive HTTP connection (as Prometheus scrapes)."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def get(self, path):
        """(status, body, seconds for request + whole body)."""
        t0 = time.perf_counter()
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        return r.status, body.decode(), time.perf_counter() - t0

    def close(self):
        self.conn.close()


def measure_metrics(port, scrapes=30):
    """Renders /metrics `scrapes` times. The daemon observes its own render time
    in dra_cpu_metrics_render_seconds after answering, so the _sum difference
    between two consecutive scrapes is exactly the earlier scrape's render."""
    s = Scraper(port)
    try:
        sums, http_s, size = [], [], 0
        with quiet_gc():
            for _ in range(scrapes + 1):
                code, body, dt = s.get("/metrics")
                if code != 200:
                    raise BenchError("/metrics answered %d" % code)
                http_s.append(dt)
                size = len(body)
                m = parse_metrics(body)
                sums.append(m.get("dra_cpu_metrics_render_seconds_sum"))
        if None in sums:
            raise BenchError("/metrics has no dra_cpu_metrics_render_seconds")
        render = [b - a for a, b in zip(sums, sums[1:])]
        return {"render_ms": summary(render, 1e3), "http_get_ms": summary(http_s[1:], 1e3),
                "bytes": size, "series": len(m)}
    finally:
        s.close()


# ---------------------------------------------------------------- environment


def claim_env_line(cdi_dir, uid):
    """The DRA_CPUSET_<uid>=<cpus> line of a prepared claim's CDI spec."""
    with open(os.path.join(cdi_dir, "dra.k8s.io-cpu_claim-%s.json" % uid)) as f:
        return json.load(f)["devices"][0]["containerEdits"]["env"][0]


class Env:
    """A temporary directory on tmpfs with an API-server simulator (Node
    object in place) and, on demand, drivers, a kubelet client and an NRI
    runtime; close() tears everything down."""

    def __init__(self, build_dir):
        os.environ["B"] = os.path.relpath(build_dir, ROOT) if os.path.isabs(build_dir) \
            else build_dir
        from sim.apiserver import ApiServer
        self.dir = tempfile.mkdtemp(prefix="dra-cpu-bench.",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.api = ApiServer(os.path.join(self.dir, "api")).start()
        self.api.put_node(NODE, uid=NODE_UID)
        self.drivers, self.runtimes, self.kubelet = [], [], None

    def driver(self, topology="synthetic-1024.json", args=()):
        from driver import Driver
        d = Driver(os.path.join(self.dir, "d%d" % len(self.drivers)), self.api.kubeconfig,
                   node=NODE, topology=topology, args=list(args))
        self.drivers.append(d)
        return d

    def runtime(self, **kw):
        from sim.nrisim import Runtime
        rt = Runtime(os.path.join(self.dir, "nri%d.sock" % len(self.runtimes)), **kw).start()
        self.runtimes.append(rt)
        return rt

    def kubelet_client(self):
        if self.kubelet is None:
            from sim.kubelet_client import KubeletClient
            self.kubelet = KubeletClient()
        return self.kubelet

    def close(self):
        for d in self.drivers:
            try:
                d.stop(timeout=5)
            except Exception:  # noqa: BLE001 - teardown goes on
                if d.proc and d.proc.poll() is None:
                    d.proc.kill()
        for rt in self.runtimes:
            rt.close()
        if self.kubelet:
            self.kubelet.close()
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def log_events(path):
    """[(epoch seconds, "mod event", line)] of a daemon log (logfmt, ts= with ms,
    CLOCK_REALTIME like time.time())."""
    import datetime
    out = []
    with open(path) as f:
        for line in f:
            kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
            if "ts" not in kv or "event" not in kv:
                continue
            try:
                t = datetime.datetime.strptime(kv["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
            except ValueError:
                continue
            out.append((t, "%s %s" % (kv.get("mod", ""), kv["event"]), line.rstrip("\n")))
    return out


def wait_until(pred, timeout, what, step=0.002, proc=None):
    """Polls pred() every `step` s; BenchError on timeout or if proc exits."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise BenchError("driver exited (status %s) while waiting for %s"
                             % (proc.returncode, what))
        if time.monotonic() > end:
            raise BenchError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(step)


def http_status(port, path, timeout=1.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        return r.status
    except OSError:
        return 0
    finally:
        c.close()

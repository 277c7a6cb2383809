"""The real dra-cpu-driver as a test subject: start, stop, kill -9, restart,
scrape /metrics, read its log. Paths live under a per-test directory on tmpfs
(CDI dir, state dir, kubelet root), like /var/run on a node."""

import os
import signal
import socket
import subprocess
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.path.join(ROOT, os.environ.get("B", "build"))

DRIVER = os.path.join(BUILD_DIR, "dra-cpu-driver")
TOPO_DATA = os.path.join(ROOT, "test", "data", "topo")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout=10.0, what="condition", step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))


def parse_metrics(text):
    """{'name{labels}': value} for every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, v = line.rsplit(" ", 1)
        out[k] = float(v)
    return out


class Driver:
    def __init__(self, base, kubeconfig, node="node-1", topology="synthetic-384.json",
                 args=(), env=None, registration=False):
        self.base = base
        os.makedirs(base, exist_ok=True)
        self.kubeconfig = kubeconfig
        self.node = node
        self.topology = topology
        self.args = list(args) + ([] if registration else ["--no-kubelet-registration"])
        self.env = env or {}
        self.kubelet_root = os.path.join(base, "kubelet")
        self.cdi_dir = os.path.join(base, "cdi")
        self.state_dir = os.path.join(base, "state")
        self.port = free_port()
        self.proc = None
        self.logs = []
        self.runs = 0

    @property
    def reg_sock(self):
        return os.path.join(self.kubelet_root, "plugins_registry", "dra.cpu-reg.sock")

    @property
    def dra_sock(self):
        return os.path.join(self.kubelet_root, "plugins", "dra.cpu", "dra.sock")

    def argv(self):
        a = [DRIVER, "--hostname-override", self.node, "--kubelet-root-dir", self.kubelet_root,
             "--cdi-dir", self.cdi_dir, "--state-dir", self.state_dir,
             "--bind-address", "127.0.0.1:%d" % self.port, "-v", "1"]
        if self.kubeconfig:
            a += ["--kubeconfig", self.kubeconfig]
        if self.topology:
            a += ["--topology-file", os.path.join(TOPO_DATA, self.topology)]
        return a + self.args

    def start(self, wait="serving", extra=()):
        log = os.path.join(self.base, "driver-%d.log" % self.runs)
        self.runs += 1
        self.logs.append(log)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_CPU_")}
        env.update(self.env)
        self.proc = subprocess.Popen(self.argv() + list(extra), stdout=subprocess.DEVNULL,
                                     stderr=open(log, "w"), env=env)
        if wait == "serving":
            wait_for(lambda: self.proc.poll() is not None or self.http("/metrics")[0] == 200,
                     what="driver /metrics")
            assert self.proc.poll() is None, self.log()
        elif wait == "ready":
            self.wait_ready()
        return self

    def http(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                        timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def wait_ready(self, timeout=10):
        wait_for(lambda: self.http("/readyz")[0] == 200, timeout, "driver /readyz")

    def metrics(self):
        code, text = self.http("/metrics")
        assert code == 200
        return parse_metrics(text)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("driver did not stop within %ds" % timeout)

    def kill9(self):
        return self.stop(signal.SIGKILL)

    def log(self):
        out = []
        for p in self.logs:
            with open(p) as f:
                out.append(f.read())
        return "\n".join(out)

    def cdi_specs(self):
        if not os.path.isdir(self.cdi_dir):
            return []
        return sorted(f for f in os.listdir(self.cdi_dir) if f.endswith(".json"))

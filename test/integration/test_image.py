"""The container image, built by `make image` and run as the DaemonSet runs it.

Everything the container gets is read from deploy/base/daemonset.yaml, not
copied: capabilities dropped and added, read-only root filesystem, no privilege
escalation, host PID namespace, the memory limit, the arguments and the
environment, every volume mount. Host paths the driver writes (kubelet plugin
directories, /var/run/cdi, /var/run/dra-cpu, /var/run/nri) are mapped to
temporary directories; the read-only ones (/sys, /sys/fs/cgroup) are the host's,
and so is /proc/irq (written: test_irq_isolation_moves_the_hosts_interrupts puts
back what it found).
The ConfigMap and the service-account token are laid out as the kubelet lays
them out (test/sim/volume.py). The container has its own network namespace, as
the pod has (hostNetwork: false), joined to the test by a veth pair: the
API-server simulator listens on the host side, /metrics is scraped on the
container side. The test kubelet (grpcio) and the NRI runtime simulator speak
to the driver through the mounted sockets.

Needs root, podman (or a docker engine) and iproute2; skipped with the reason
otherwise. The image is built once per run with `make image` (cached layers),
or taken from $DRA_CPU_IMAGE.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest
import yaml

from conftest import ROOT
from claims import claim, cpu_config, parse_list, ref
from driver import parse_metrics, wait_for
from sim import volume
from sim.apiserver import ApiServer, make_certs

MANIFEST = os.path.join(ROOT, "deploy", "base", "daemonset.yaml")
CONFIGMAP = os.path.join(ROOT, "deploy", "base", "configmap.yaml")
CHART = os.path.join(ROOT, "deploy", "helm", "dra-cpu", "Chart.yaml")
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
NODE = "node-img"


def sh(*argv, timeout=60, check=True):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, "%s: %s%s" % (" ".join(argv), r.stdout[-2000:], r.stderr[-2000:])
    return r


def engine():
    """(argv prefix for the engine, None) or (None, why it cannot run here)."""
    if os.geteuid() != 0:
        return None, "needs root (host mounts, BPF, network namespaces)"
    if not shutil.which("ip"):
        return None, "needs iproute2 (ip netns)"
    r = subprocess.run(["sh", os.path.join(ROOT, "tools", "image.sh"), "engine"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, r.stderr.strip()
    if r.stdout.split()[0] != "podman":
        return None, "the test speaks podman's CLI (ns: networks, --read-only-tmpfs, image exists)"
    return r.stdout.split(), None


ENGINE, WHY = engine()
pytestmark = pytest.mark.skipif(ENGINE is None, reason="no container engine: %s" % WHY)


def git_version():
    r = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def git_revision():
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


BUILT = {}  # image -> the commit it was built from


@pytest.fixture(scope="module")
def image():
    ref_ = os.environ.get("DRA_CPU_IMAGE")
    if not ref_:
        # Once: the tree may change while the image builds.
        v, rev = git_version(), git_revision()
        sh("make", "-C", ROOT, "--no-print-directory", "image", "VERSION=" + v,
           "IMAGE_REVISION=" + rev, timeout=3600)
        ref_ = "dra-cpu:%s" % v
        BUILT[ref_] = rev
    return ref_


# ------------------------------------------------------------------ the manifest


def load_manifest():
    with open(MANIFEST) as f:
        ds = yaml.safe_load(f)
    pod = ds["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    return pod, ctr


def quantity(q):
    """Kubernetes quantity -> bytes (the suffixes a memory limit uses)."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|K|M|G)?", str(q))
    mult = {None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    return int(m.group(1)) * mult[m.group(2)]


def configmap_files():
    with open(CONFIGMAP) as f:
        return yaml.safe_load(f)["data"]


class Pod:
    """One run of the image as the DaemonSet's pod, on a private network
    namespace. drop/add/seccomp/config let a test change one thing."""

    def __init__(self, image, base, subnet, drop_caps=(), seccomp=None, config=None,
                 extra_args=(), drop_mounts=(), drop_args=()):
        self.image, self.base = image, base
        self.pod, self.ctr = load_manifest()
        # A mount and the arguments that go with it taken out: the manifest
        # as it was without them.
        self.ctr["volumeMounts"] = [m for m in self.ctr["volumeMounts"]
                                    if m["name"] not in drop_mounts]
        self.ctr["args"] = [a for a in self.ctr["args"]
                            if not any(a.startswith(d) for d in drop_args)]
        self.drop_caps = set(drop_caps)
        self.seccomp = seccomp
        self.config = config
        self.extra_args = list(extra_args)
        self.name = "dra-cpu-img-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 10**6)
        self.netns = self.name
        n = subnet
        self.host_ip, self.pod_ip = "10.231.%d.1" % n, "10.231.%d.2" % n
        self.veth = "dcv%d" % (os.getpid() % 100000)
        self.host_dirs = {}
        self.cid = None
        self.started = None

    # ---- network: the pod's own namespace, a veth to the test
    def net_up(self):
        sh("ip", "netns", "add", self.netns)
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", self.veth + "p")
        sh("ip", "link", "set", self.veth + "p", "netns", self.netns)
        sh("ip", "addr", "add", self.host_ip + "/30", "dev", self.veth)
        sh("ip", "link", "set", self.veth, "up")
        sh("ip", "-n", self.netns, "addr", "add", self.pod_ip + "/30", "dev", self.veth + "p")
        sh("ip", "-n", self.netns, "link", "set", self.veth + "p", "up")
        sh("ip", "-n", self.netns, "link", "set", "lo", "up")

    def net_down(self):
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)

    # ---- what the kubelet would give the container, from the manifest
    def volumes(self, sa_dir):
        vols = {v["name"]: v for v in self.pod["volumes"]}
        out = []
        for m in self.ctr["volumeMounts"]:
            v = vols[m["name"]]
            ro = bool(m.get("readOnly"))
            if "hostPath" in v:
                hp = v["hostPath"]["path"]
                if ro or hp.startswith("/proc/"):
                    # read-only host paths are the host's own; so is the
                    # host's /proc/irq, which the driver writes
                    src = hp
                else:  # a host path the driver writes: a temporary one
                    src = os.path.join(self.base, "host" + hp)
                    os.makedirs(src, exist_ok=True)
                    self.host_dirs[hp] = src
            elif "configMap" in v:
                src = os.path.join(self.base, "configmap-" + m["name"])
                files = configmap_files()
                if self.config is not None:
                    files = {"config.yaml": self.config}
                volume.write(src, files)
            else:
                raise AssertionError("volume kind not handled: %s" % v)
            out.append((src, m["mountPath"], ro, m.get("recursiveReadOnly")))
        # automountServiceAccountToken (default true): the projected token.
        if self.pod.get("automountServiceAccountToken", True):
            out.append((sa_dir, SA_MOUNT, True, None))
        return out

    def argv(self, apiserver):
        sc = self.ctr["securityContext"]
        assert not sc.get("privileged")
        a = list(ENGINE) + ["run", "-d", "--name", self.name, "--pull=never",
                            "--network", "ns:/run/netns/" + self.netns,
                            "--hostname", NODE, "--read-only-tmpfs=false"]
        if self.pod.get("hostPID"):
            a += ["--pid", "host"]
        if "runAsUser" in sc:
            a += ["--user", "%d:0" % sc["runAsUser"]]
        if sc.get("readOnlyRootFilesystem"):
            a += ["--read-only"]
        if sc.get("allowPrivilegeEscalation") is False:
            a += ["--security-opt", "no-new-privileges"]
        caps = sc["capabilities"]
        for c in caps.get("drop", []):
            a += ["--cap-drop", c]
        for c in caps.get("add", []):
            if c not in self.drop_caps:
                a += ["--cap-add", c]
        prof = self.seccomp or sc.get("seccompProfile", {}).get("type")
        if prof == "Unconfined":
            a += ["--security-opt", "seccomp=unconfined"]
        elif prof and prof != "RuntimeDefault":
            a += ["--security-opt", "seccomp=" + prof]
        lim = self.ctr.get("resources", {}).get("limits", {})
        if "memory" in lim:
            a += ["--memory", str(quantity(lim["memory"]))]
        # The engine's own defaults for these exceed what an unprivileged
        # build host may set; the kubelet leaves them at the runtime's.
        a += ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
        for src, dst, ro, rro in self.volumes(apiserver.sa_dir):
            opts = ["ro"] if ro else ["rw"]
            if rro == "Enabled" or (rro == "IfPossible" and engine_has_rro(self.image)):
                opts.append("rro")
            a += ["-v", "%s:%s:%s" % (src, dst, ",".join(opts))]
        for e in self.ctr.get("env", []):
            if "value" in e:
                a += ["-e", "%s=%s" % (e["name"], e["value"])]
            elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                a += ["-e", "%s=%s" % (e["name"], NODE)]
            else:
                raise AssertionError("env source not handled: %s" % e)
        for k, v in apiserver.env().items():  # the kubelet's service variables
            a += ["-e", "%s=%s" % (k, v)]
        a += [self.image] + list(self.ctr.get("args", [])) + self.extra_args
        return a

    def start(self, apiserver):
        self.started = time.monotonic()
        r = sh(*self.argv(apiserver), timeout=120)
        self.cid = r.stdout.strip()
        return self

    @property
    def port(self):
        (p,) = [p["containerPort"] for p in self.ctr["ports"] if p["name"] == "metrics"]
        return p

    def http(self, path):
        try:
            with urllib.request.urlopen("http://%s:%d%s" % (self.pod_ip, self.port, path),
                                        timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def metrics(self):
        code, text = self.http("/metrics")
        assert code == 200, (code, self.logs())
        return parse_metrics(text)

    def state(self):
        r = sh(*ENGINE, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.State.Pid}}",
               self.name, check=False)
        return r.stdout.split()

    def running(self):
        return self.state()[:1] == ["running"]

    def pid(self):
        return int(self.state()[2])

    def logs(self):
        r = sh(*ENGINE, "logs", self.name, check=False)
        return r.stdout + r.stderr

    def exec(self, *argv, timeout=60):
        return subprocess.run(list(ENGINE) + ["exec", self.name] + list(argv),
                              capture_output=True, text=True, timeout=timeout)

    def sock(self, host_path, *rest):
        return os.path.join(self.host_dirs[host_path], *rest)

    def stop(self, timeout=None):
        """SIGTERM, as the kubelet sends it; returns (exit code, seconds)."""
        grace = self.pod.get("terminationGracePeriodSeconds", 30)
        t0 = time.monotonic()
        sh(*ENGINE, "kill", "--signal", "TERM", self.name)
        wait_for(lambda: not self.running(), timeout or grace, "container exit after SIGTERM",
                 step=0.1)
        return int(self.state()[1]), time.monotonic() - t0

    def remove(self):
        if self.cid:
            subprocess.run(list(ENGINE) + ["rm", "-f", "-t", "0", self.name], capture_output=True,
                           timeout=60)
        self.net_down()


@pytest.fixture
def run_pod(image, tmp_path, sim_certs):
    """Factory: run_pod(**Pod options) -> (pod, apiserver), both cleaned up."""
    made, nris = [], []
    subnet = [os.getpid() % 200 + 20]

    def make(nri=False, nri_cgroups=False, **kw):
        base = tempfile.mkdtemp(prefix="dra-cpu-img.", dir="/dev/shm")
        n = subnet[0] + len(made)
        host_ip = "10.231.%d.1" % n
        certs = make_certs(os.path.join(base, "pki"), hosts=(host_ip,))
        api = ApiServer(os.path.join(base, "apiserver"), host=host_ip, certs=certs)
        p = Pod(image, base, n, **kw)
        made.append((p, api, base))
        p.net_up()  # the simulator binds the host side of the veth
        api.start()
        api.put_node(NODE, uid="0c1d2e3f-0000-4000-8000-00000000cafe")
        if nri:  # the runtime is up before the driver, as on a node
            from sim.nrisim import Runtime

            d = os.path.join(base, "host/var/run/nri")
            os.makedirs(d)
            p.nri = Runtime(os.path.join(d, "nri.sock"), cgroups=nri_cgroups).start()
            nris.append(p.nri)
        return p.start(api), api

    yield make
    for rt in nris:
        rt.close()
    for p, api, base in made:
        try:
            if p.cid:
                for bad in ("ERROR: AddressSanitizer", "runtime error:"):
                    assert bad not in p.logs()
        finally:
            p.remove()
            api.stop()
            shutil.rmtree(base, ignore_errors=True)


def register(kubelet, pod):
    reg_dir = pod.host_dirs["/var/lib/kubelet/plugins_registry"]
    wait_for(lambda: os.path.exists(os.path.join(reg_dir, "dra.cpu-reg.sock"))
             or not pod.running(), 30, "registration socket", step=0.05)
    assert pod.running(), pod.logs()
    return kubelet.register(os.path.join(reg_dir, "dra.cpu-reg.sock"), "dra.cpu")




# ------------------------------------------------------------------ the tests


def test_version_labels_and_chart_agree(image):
    """--version of both binaries, the OCI labels and the chart's appVersion."""
    labels = json.loads(sh(*ENGINE, "image", "inspect", "--format", "{{json .Labels}}",
                           image).stdout)
    version = labels["org.opencontainers.image.version"]
    assert version not in ("", "unknown"), labels
    for binary in ("/usr/local/bin/dra-cpu-driver", "/usr/local/bin/bpf-verify"):
        out = sh(*ENGINE, "run", "--rm", "--pull=never", "--network", "none", "--read-only",
                 "--cap-drop", "ALL", "--ulimit", "nofile=1024:1024", "--ulimit",
                 "nproc=4096:4096", "--entrypoint", binary, image, "--version").stdout
        assert out.split() == [os.path.basename(binary), version], out
    if image in BUILT:
        assert image == "dra-cpu:" + version
        assert labels["org.opencontainers.image.revision"] == BUILT[image]
    assert labels["org.opencontainers.image.source"] not in ("", "unknown")
    assert re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR) [A-Za-z0-9.+-]+)*",
                        labels["org.opencontainers.image.licenses"]), labels
    with open(CHART) as f:
        app = yaml.safe_load(f)["appVersion"]
    # The chart runs image tag appVersion: that tag is this image; a release
    # chart names the version itself.
    tagged = sh(*ENGINE, "image", "inspect", "--format", "{{.Id}}", "dra-cpu:%s" % app,
                check=False).stdout.strip()
    if not os.environ.get("DRA_CPU_IMAGE"):
        assert tagged == sh(*ENGINE, "image", "inspect", "--format", "{{.Id}}",
                            image).stdout.strip(), "dra-cpu:%s is not %s" % (app, image)
    if re.match(r"v?\d+\.\d+", str(app)):
        assert version.lstrip("v").startswith(str(app).lstrip("v")), (version, app)


def test_image_holds_only_the_binaries_closure_and_the_ca_bundle(image):
    """The runtime stage: the two binaries, what they load, the CA bundle."""
    assert_only_closure(image)


def assert_only_closure(image, platform=()):
    cid = sh(*ENGINE, "create", "--pull=never", *platform, image).stdout.strip()
    try:
        tmp = tempfile.mkdtemp(prefix="dra-cpu-img-fs.")
        sh("sh", "-c", "%s export %s | tar -x -C %s" % (" ".join(ENGINE), cid, tmp))
    finally:
        sh(*ENGINE, "rm", "-f", cid, check=False)
    try:
        files = set()
        for d, _, fs in os.walk(tmp):
            for f in fs:
                p = os.path.join(d, f)
                if not os.path.islink(p):
                    files.add(os.path.relpath(p, tmp))
        bins = {"usr/local/bin/dra-cpu-driver", "usr/local/bin/bpf-verify"}
        assert bins <= files
        # Walk NEEDED as the loader would, in the image's own directories.
        libdirs = [d for d in ("usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu")
                   if os.path.isdir(os.path.join(tmp, d))]
        need, todo = set(), list(bins)
        while todo:
            f = todo.pop()
            out = sh("readelf", "-dW", os.path.join(tmp, f)).stdout
            for so in re.findall(r"\(NEEDED\).*\[(.*)\]", out):
                hit = [os.path.join(d, so) for d in libdirs if os.path.exists(os.path.join(tmp, d, so))]
                assert hit, "%s needs %s: not in the image" % (f, so)
                if hit[0] not in need:
                    need.add(hit[0])
                    todo.append(hit[0])
        extra = files - bins - need - {"etc/ssl/certs/ca-certificates.crt"}
        assert not extra, "not loaded by the binaries: %s" % sorted(extra)
        # libcurl speaks HTTP and HTTPS only: none of Debian's libcurl4 extras.
        for so in need:
            assert not re.search(r"lib(gnutls|ldap|lber|gssapi|krb5|ssh2|rtmp|idn2|psl|brotli|zstd|sasl2)",
                                 so), so
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prepare_one(api, kubelet, pod, cpus="1", pods=()):
    slices = api.slices()
    dev = slices[0]["spec"]["devices"][0]["name"]
    c = api.put_claim(claim("img", [("cpu", dev, cpus)], node=NODE, reserved_for=pods))
    dra = pod.sock("/var/lib/kubelet/plugins/dra.cpu", "dra.sock")
    r = kubelet.prepare(dra, [ref(c)])
    res = r.claims[c["metadata"]["uid"]]
    assert res.error == "", res.error
    cdi = pod.host_dirs["/var/run/cdi"]
    with open(os.path.join(cdi, "dra.k8s.io-cpu_claim-%s.json" % c["metadata"]["uid"])) as f:
        line = json.load(f)["devices"][0]["containerEdits"]["env"][0]
    return c, line


def test_runs_as_the_daemonset_runs_it(run_pod, kubelet, runtime_default, record_property):
    if not runtime_default:
        pytest.skip("the engine does not name its default seccomp profile")
    pod, api = run_pod(nri=True, seccomp=runtime_default)
    reg = register(kubelet, pod)
    assert reg.endpoint == "/var/lib/kubelet/plugins/dra.cpu/dra.sock"
    wait_for(lambda: pod.http("/healthz")[0] == 200 or not pod.running(), 30,
             "/healthz after registration", step=0.05)
    wait_for(lambda: pod.http("/readyz")[0] == 200 or not pod.running(), 30, "/readyz",
             step=0.05)
    ready_s = time.monotonic() - pod.started
    assert pod.running(), pod.logs()
    record_property("start_to_ready_s", round(ready_s, 2))
    print("start to ready (engine run to /readyz 200): %.2f s" % ready_s)
    # slices published for this node, from inside the pod's network namespace
    slices = api.slices()
    assert slices and all(s["spec"]["nodeName"] == NODE for s in slices), slices
    m = pod.metrics()
    assert m["dra_cpu_bpf_loaded"] == 1, pod.logs()
    # the configuration came through the kubelet's links (a key the default lacks)
    assert "pinning_enforcement=audit" in pod.logs()
    # bpf-verify --probe inside the same container, same capabilities
    r = pod.exec("/usr/local/bin/bpf-verify", "--probe")
    assert r.returncode == 0, r.stdout + r.stderr
    # Prepare through the mounted kubelet socket, then an NRI pinning through
    # the mounted NRI socket.
    rt = pod.nri
    rt.wait_plugin(timeout=30)
    db = rt.add_pod("db")
    c, line = prepare_one(api, kubelet, pod, pods=[db])
    k, v = line.split("=", 1)
    ctr = rt.create_container(db, "app", env={k: v})
    assert parse_list(ctr.cpus) == parse_list(v)
    code, secs = pod.stop()
    assert code == 0, pod.logs()
    record_property("sigterm_exit_s", round(secs, 2))


def engine_seccomp_default():
    """The engine's own default seccomp profile (podman: containers-common's)."""
    r = subprocess.run(list(ENGINE[:1]) + ["info", "--format",
                                           "{{.Host.Security.SECCOMPProfilePath}}"],
                       capture_output=True, text=True)
    p = r.stdout.strip()
    return p if r.returncode == 0 and os.path.isfile(p) else None


def containerd_like_profile(path, out):
    """The engine's default profile with bpf() allowed to CAP_BPF and
    perf_event_open() to CAP_PERFMON, as containerd's RuntimeDefault (1.7, late
    1.6) and Docker's (23.0) allow them; everything else unchanged."""
    with open(path) as f:
        prof = json.load(f)
    gated = {"bpf": "CAP_BPF", "perf_event_open": "CAP_PERFMON"}
    for rule in prof["syscalls"]:
        rule["names"] = [n for n in rule["names"] if n not in gated]
    prof["syscalls"] = [r for r in prof["syscalls"] if r["names"]]
    for name, cap in gated.items():
        prof["syscalls"].append({"names": [name], "action": "SCMP_ACT_ALLOW",
                                 "includes": {"caps": [cap]}})
    with open(out, "w") as f:
        json.dump(prof, f)
    return out


@pytest.fixture(scope="module")
def runtime_default(tmp_path_factory):
    """What RuntimeDefault means on a containerd node, made from this engine's
    default profile; None where the engine does not say where its profile is."""
    p = engine_seccomp_default()
    if not p:
        return None
    return containerd_like_profile(p, str(tmp_path_factory.mktemp("seccomp") / "default.json"))


def wait_serving(pod):
    wait_for(lambda: pod.http("/metrics")[0] == 200 or not pod.running(), 60, "/metrics",
             step=0.05)
    assert pod.running(), pod.logs()


def test_seccomp_profile_tying_bpf_to_sys_admin_is_named(run_pod):
    """Under the engine's own default profile (bpf() only with CAP_SYS_ADMIN),
    the driver says it is the profile, not the kernel, and what to do."""
    if not engine_seccomp_default():
        pytest.skip("the engine does not name its default seccomp profile")
    pod, api = run_pod()  # seccompProfile RuntimeDefault = the engine's own
    wait_serving(pod)
    assert pod.metrics()["dra_cpu_bpf_loaded"] == 0
    line = [l for l in pod.logs().splitlines() if "event=bpf_not_loaded" in l]
    assert line, pod.logs()
    assert "likely the runtime's seccomp profile" in line[0], line[0]
    assert "Unconfined, not CAP_SYS_ADMIN (docs/deploy.md)" in line[0], line[0]


def test_cgroup_mount_is_read_only(image, run_pod, runtime_default):
    """/sys/fs/cgroup read-only; recursively where the runtime can do it."""
    pod, api = run_pod(seccomp=runtime_default)
    wait_serving(pod)
    with open("/proc/%d/mountinfo" % pod.pid()) as f:
        mounts = [l.split() for l in f]
    # Mounts stack: the last one on a path is what the container sees.
    seen = {}
    for m in mounts:
        if m[4] == "/sys/fs/cgroup" or m[4].startswith("/sys/fs/cgroup/"):
            seen[m[4]] = m[5]
    below = sorted(seen.items())
    assert below, mounts
    top = [o for p, o in below if p == "/sys/fs/cgroup"]
    assert top and all("ro" in o.split(",") for o in top), below
    rw = [p for p, o in below if "ro" not in o.split(",")]
    (m,) = [m for m in load_manifest()[1]["volumeMounts"] if m["mountPath"] == "/sys/fs/cgroup"]
    assert m.get("readOnly") and m.get("recursiveReadOnly") == "IfPossible", m
    if rw and not engine_has_rro(image):
        pytest.skip("%s cannot mount recursively read-only (podman < 4.6, runc < 1.2): "
                    "%d mounts below /sys/fs/cgroup stay writable (docs/deploy.md)"
                    % (" ".join(ENGINE), len(rw)))
    assert not rw, rw


_rro = {}


def engine_has_rro(image):
    """Whether the engine takes recursive read-only bind mounts ("rro")."""
    if image not in _rro:
        r = subprocess.run(list(ENGINE) + ["create", "--pull=never", "-v",
                                           "/sys/fs/cgroup:/mnt:ro,rro", image],
                           capture_output=True, text=True, timeout=60)
        _rro[image] = r.returncode == 0
        if r.returncode == 0:
            subprocess.run(list(ENGINE) + ["rm", "-f", r.stdout.strip()], capture_output=True)
    return _rro[image]


# What each capability the DaemonSet adds is for, and how its absence shows
# (test_each_added_capability_dropped checks the second column).
CAPS = {
    # Maps and programs cannot be created.
    "BPF": lambda m, log: m["dra_cpu_bpf_loaded"] == 0 and "needs CAP_BPF and CAP_PERFMON" in log,
    # Tracing programs (tp_btf, raw_tp, fentry) are perfmon program types.
    "PERFMON": lambda m, log: (m["dra_cpu_bpf_loaded"] == 0
                               and "needs CAP_BPF and CAP_PERFMON" in log),
    # RLIMIT_MEMLOCK for BPF maps matters on kernels < 5.11 only: here nothing.
    "SYS_RESOURCE": lambda m, log: m["dra_cpu_bpf_loaded"] == 1,
    # sched_setaffinity()/sched_setattr() on other users' tasks: remediate,
    # deny and real-time claims; in audit mode (the default) nothing at start.
    "SYS_NICE": lambda m, log: m["dra_cpu_bpf_loaded"] == 1,
}


@pytest.mark.parametrize("cap", sorted(CAPS))
def test_each_added_capability_dropped(run_pod, kubelet, runtime_default, cap, record_property):
    added = load_manifest()[1]["securityContext"]["capabilities"]["add"]
    if cap not in added:
        pytest.skip("%s is not added by the manifest" % cap)
    pod, api = run_pod(drop_caps={cap}, seccomp=runtime_default)
    register(kubelet, pod)
    wait_for(lambda: pod.http("/readyz")[0] == 200 or not pod.running(), 30, "/readyz",
             step=0.05)
    m, log = pod.metrics(), pod.logs()
    reason = [l for l in log.splitlines() if "bpf_not_loaded" in l]
    record_property("without_" + cap, reason[0] if reason else "bpf loaded, ready")
    print("without %s: %s" % (cap, reason[0] if reason else "bpf loaded, ready"))
    assert CAPS[cap](m, log), log


def test_every_added_capability_is_accounted_for():
    added = load_manifest()[1]["securityContext"]["capabilities"]["add"]
    assert set(added) <= set(CAPS), set(added) - set(CAPS)


def remediate_config():
    cfg = configmap_files()["config.yaml"]
    out = re.sub(r"(?m)^pinningEnforcement: .*$", "pinningEnforcement: remediate", cfg)
    assert out != cfg, cfg
    return out


@pytest.mark.parametrize("sys_nice", [True, False], ids=["with_SYS_NICE", "without_SYS_NICE"])
def test_remediation_needs_sys_nice(run_pod, kubelet, runtime_default, sys_nice):
    """In remediate mode a host task of another user on a claim's CPU is moved
    back to the shared pool: sched_setaffinity() on it needs CAP_SYS_NICE.

    The driver sees this machine as its node (hostPID): it moves every host
    task it finds on the claim's CPU, this test's own processes included. The
    affinity of every process is put back as it was once the driver stopped."""
    if os.cpu_count() < 2:
        pytest.skip("needs a CPU for the claim and one for the shared pool")
    before = affinities()
    try:
        remediation_run(run_pod, kubelet, runtime_default, sys_nice)
    finally:
        restore_affinities(before)


def affinities():
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                out[int(d)] = os.sched_getaffinity(int(d))
            except OSError:
                pass
    return out


def restore_affinities(before):
    for pid, cpus in affinities().items():
        if pid in before and before[pid] != cpus:
            try:
                os.sched_setaffinity(pid, before[pid])
            except OSError:
                pass


def remediation_run(run_pod, kubelet, runtime_default, sys_nice):
    pod, api = run_pod(nri=True, seccomp=runtime_default, config=remediate_config(),
                       drop_caps=() if sys_nice else {"SYS_NICE"}, nri_cgroups=True)
    register(kubelet, pod)
    wait_for(lambda: pod.http("/readyz")[0] == 200 or not pod.running(), 30, "/readyz",
             step=0.05)
    assert pod.metrics()["dra_cpu_bpf_loaded"] == 1, pod.logs()
    rt = pod.nri
    rt.wait_plugin(timeout=30)
    db = rt.add_pod("db")
    c, line = prepare_one(api, kubelet, pod, pods=[db])
    k, v = line.split("=", 1)
    rt.create_container(db, "app", env={k: v})
    cpu = min(parse_list(v))

    def intruder():  # another user's task, on the claim's CPU
        os.sched_setaffinity(0, {cpu})
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    p = subprocess.Popen(["/usr/bin/python3", "-c", "import time\nend = time.time() + 60\n"
                          "while time.time() < end: pass"], preexec_fn=intruder)
    try:
        want = "action=remediated" if sys_nice else "action=remediate_failed"
        wait_for(lambda: any("pid=%d " % p.pid in l and "action=" in l
                             for l in pod.logs().splitlines()), 20, "the intruder's event",
                 step=0.1)
        lines = [l for l in pod.logs().splitlines() if "pid=%d " % p.pid in l]
        assert any(want in l for l in lines), lines
        if sys_nice:
            # The fork may run on the claim's CPU before intruder() pins it
            # there: a move made then is undone by intruder()'s own call, and
            # the driver moves the task again once its per-task interval
            # (10 s) is over. Moved in the end is what counts.
            wait_for(lambda: os.sched_getaffinity(p.pid) != {cpu}, 25, "the intruder moved",
                     step=0.1)
        else:
            assert os.sched_getaffinity(p.pid) == {cpu}
    finally:
        p.kill()
        p.wait()
        pod.stop()  # no more remediation before the affinities are put back


@pytest.fixture(scope="module")
def image_arm64(image):
    """The arm64 image of the same version. Built here when the amd64 one was
    (make image ARCH=arm64: the build stage runs natively and cross-compiles, no
    emulator; the first time its cross packages and libcurl take minutes, then
    only the changed layers); with $DRA_CPU_IMAGE, taken as <that>-arm64."""
    ref_ = image + "-arm64"
    if not shutil.which("qemu-aarch64-static"):
        pytest.skip("qemu-aarch64-static missing to run the arm64 binaries "
                    "(as root: tools/deps.sh cross arm64)")
    if image in BUILT:
        sh("make", "-C", ROOT, "--no-print-directory", "image", "ARCH=arm64",
           "VERSION=" + image.split(":", 1)[1], "IMAGE_REVISION=" + BUILT[image], timeout=3600)
    elif sh(*ENGINE, "image", "exists", ref_, check=False).returncode != 0:
        pytest.skip("%s not built: make image ARCH=arm64 VERSION=%s"
                    % (ref_, image.split(":", 1)[1]))
    return ref_


def test_arm64_image_holds_only_the_binaries_closure_and_the_ca_bundle(image_arm64):
    assert_only_closure(image_arm64, ("--platform", "linux/arm64"))


def test_arm64_image_runs_its_binaries_from_its_own_libraries(image, image_arm64):
    """The arm64 image's binaries run under qemu-user with nothing but the
    image's files."""
    ref_ = image_arm64
    arch = sh(*ENGINE, "image", "inspect", "--format", "{{.Architecture}}", ref_).stdout.strip()
    assert arch == "arm64"
    cid = sh(*ENGINE, "create", "--pull=never", "--platform", "linux/arm64", ref_).stdout.strip()
    tmp = tempfile.mkdtemp(prefix="dra-cpu-img-arm64.")
    try:
        sh("sh", "-c", "%s export %s | tar -x -C %s" % (" ".join(ENGINE), cid, tmp))
        version = image.split(":", 1)[1]
        for b in ("dra-cpu-driver", "bpf-verify"):
            out = sh("qemu-aarch64-static", "-L", tmp, os.path.join(tmp, "usr/local/bin", b),
                     "--version").stdout
            assert out.split() == [b, version], out
    finally:
        sh(*ENGINE, "rm", "-f", cid, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------ interrupts off a claim's CPUs


def host_irqs():
    """{irq: smp_affinity_list} of the host's movable-looking interrupts, and
    default_smp_affinity."""
    out = {}
    for n in os.listdir("/proc/irq"):
        p = "/proc/irq/%s/smp_affinity_list" % n
        if n.isdigit() and os.path.exists(p):
            with open(p) as f:
                out[int(n)] = f.read().strip()
    with open("/proc/irq/default_smp_affinity") as f:
        return out, f.read().strip()


@pytest.fixture
def found_irqs():
    """What /proc/irq holds before the test, written back after it whatever
    happened."""
    if os.cpu_count() < 2 or not os.access("/proc/irq/default_smp_affinity", os.W_OK):
        pytest.skip("needs 2 CPUs and a writable /proc/irq")
    found = host_irqs()
    yield found
    irqs, default = found
    for n, aff in irqs.items():
        p = "/proc/irq/%d/smp_affinity_list" % n
        try:
            with open(p) as f:
                if f.read().strip() == aff:
                    continue
            with open(p, "w") as f:
                f.write(aff)
        except OSError:
            pass  # gone, or managed: nothing of ours
    with open("/proc/irq/default_smp_affinity") as f:
        now = f.read().strip()
    if now != default:
        with open("/proc/irq/default_smp_affinity", "w") as f:
            f.write(default)


def cpus_of(lst):
    return set(parse_list(lst)) if lst else set()


@pytest.mark.parametrize("mounted", [True, False], ids=["host_proc_irq", "own_proc_irq"])
def test_irq_isolation_moves_the_hosts_interrupts(run_pod, kubelet, runtime_default, found_irqs,
                                                  mounted, record_property):
    """A claim with CPUConfig irq: isolate, prepared in the container run as
    the manifest runs it, moves the host's movable interrupts off its CPU and
    out of default_smp_affinity; Unprepare puts back exactly what was there.
    own_proc_irq is the manifest without the proc-irq mount and its
    --procfs-root: the container's own /proc/irq, which the runtime mounts
    read-only, so that nothing moves and the driver says why at start."""
    before, before_default = found_irqs
    drop = {} if mounted else {"drop_mounts": ("proc-irq",), "drop_args": ("--procfs-root",)}
    pod, api = run_pod(seccomp=runtime_default, **drop)
    register(kubelet, pod)
    wait_for(lambda: pod.http("/readyz")[0] == 200 or not pod.running(), 30, "/readyz",
             step=0.05)
    with open("/proc/%d/mountinfo" % pod.pid()) as f:
        seen = {l.split()[4]: l.split()[5] for l in f if "/irq" in l.split()[4]}
    record_property("irq_mounts", seen)
    print("mounts the container sees: %s" % seen)
    assert "ro" in seen["/proc/irq"].split(","), seen  # the runtime's own view
    read_only = [l for l in pod.logs().splitlines() if "event=irq_affinity_read_only" in l]
    if mounted:
        assert "rw" in seen["/host/proc/irq"].split(","), seen
        assert not read_only, read_only
    else:
        assert "/host/proc/irq" not in seen, seen
        assert read_only and "Read-only file system" in read_only[0], pod.logs()
    slices = api.slices()
    dev = slices[0]["spec"]["devices"][0]["name"]
    c = api.put_claim(claim("quiet", [("cpu", dev, "1")], node=NODE,
                            configs=[cpu_config(irq="isolate")]))
    dra = pod.sock("/var/lib/kubelet/plugins/dra.cpu", "dra.sock")
    r = kubelet.prepare(dra, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == "", r
    uid = c["metadata"]["uid"]
    with open(os.path.join(pod.host_dirs["/var/run/cdi"],
                           "dra.k8s.io-cpu_claim-%s.json" % uid)) as f:
        line = json.load(f)["devices"][0]["containerEdits"]["env"][0]
    (cpu,) = parse_list(line.split("=", 1)[1])
    wait_for(lambda: "event=irq_isolated" in pod.logs(), 10, "irq_isolated", step=0.05)
    irqs, default = host_irqs()
    moved = sorted(n for n in irqs if irqs[n] != before.get(n))
    m = pod.metrics()
    line = [l for l in pod.logs().splitlines() if "event=irq_isolated" in l][-1]
    record_property("irq_isolated", line)
    print("CPU %d: %s; moved on the host: %s" % (cpu, line, moved))
    if not mounted:
        assert not moved and default == before_default, (moved, default)
        assert m["dra_cpu_irq_moves_total"] == 0
        assert int(re.search(r"failed=(\d+)", line).group(1)) > 0, line
        return
    assert moved, "no interrupt of the host moved: %s" % line
    assert all(cpu not in cpus_of(irqs[n]) for n in moved), {n: irqs[n] for n in moved}
    assert not int(default, 16) & (1 << cpu), default
    assert m["dra_cpu_irq_isolated_cpus"] == 1 and m["dra_cpu_irq_moves_total"] >= len(moved)
    # What is left on the CPU is what the kernel refuses to move (managed)
    # or what has no other CPU: counted, not hidden.
    left = [n for n in irqs if cpu in cpus_of(irqs[n]) and cpus_of(irqs[n]) != {cpu}]
    assert len(left) <= m["dra_cpu_irq_managed_on_isolated"], (left, m)
    record = os.path.join(pod.host_dirs["/var/run/dra-cpu"], "irq.json")
    assert os.path.exists(record)
    r = kubelet.unprepare(dra, [ref(c)])
    assert r.claims[uid].error == "", r

    def back():  # only what the claim moved: the host's other interrupts are not ours
        irqs, default = host_irqs()
        return ({n: irqs.get(n) for n in moved} == {n: before[n] for n in moved}
                and default == before_default)

    try:
        wait_for(lambda: back() or not pod.running(), 10,
                 "the host's affinities back as they were", step=0.05)
    except AssertionError as e:
        irqs, default = host_irqs()
        diff = {n: (before[n], irqs.get(n)) for n in moved if irqs.get(n) != before[n]}
        said = [l for l in pod.logs().splitlines() if "irq" in l]
        raise AssertionError("%s: (was, is) %s, default %s -> %s; the driver said:\n%s"
                             % (e, diff, before_default, default, "\n".join(said[-20:])))
    assert back(), host_irqs()
    assert not os.path.exists(record)

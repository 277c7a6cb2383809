"""deploy/, Dockerfile: the manifests, examples and image recipe, checked
without a cluster (none can run here).

- every YAML file parses; every resource.k8s.io object (base, both overlays
  rendered, examples, install.yaml) passes the resource.k8s.io/v1 OpenAPI
  documents of Kubernetes 1.36 and 1.37 with unknown fields rejected
  (test/sim/k8svalidate.py --strict);
- install.yaml is a fresh render of the grouped overlay; the individual
  overlay renders and sets --cpu-device-mode=individual;
- every CEL selector parses (a checker for the CEL subset below) and names
  only attributes and capacities the real driver publishes, with the right
  types: they come from `dra-cpu-driver --dry-run` in both modes;
- the DaemonSet's arguments are accepted by the real binary, its mounts
  cover the paths the driver uses, and its privileges are the intended ones;
- example pods mirror their claims' CPUs into cpu requests and limits, and
  CPUConfig parameters are ones the driver accepts (the policy combination is
  checked by the real allocator CLI);
- the Dockerfile's runtime packages exist in Debian 12 and provide every
  shared library the binaries load (apt-cache, dpkg -S, ldd).
"""

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

from conftest import BUILD_DIR, ROOT
from sim import volume

DEPLOY = os.path.join(ROOT, "deploy")
DRIVER = os.path.join(BUILD_DIR, "dra-cpu-driver")
ALLOC = os.path.join(BUILD_DIR, "dra-cpu-alloc")
VALIDATOR = os.path.join(ROOT, "test", "sim", "k8svalidate.py")
TOPO_1024 = os.path.join(ROOT, "test", "data", "topo", "synthetic-1024.json")
TOPO_384 = os.path.join(ROOT, "test", "data", "topo", "synthetic-384.json")
PYTHON = "/usr/bin/python3"
KUBECTL = shutil.which("kubectl")
DRIVER_NAME = "dra.cpu"
NAMESPACE = "dra-cpu"

needs_driver = pytest.mark.skipif(not os.access(DRIVER, os.X_OK),
                                  reason="build/dra-cpu-driver not built (run make)")


@functools.lru_cache(maxsize=None)
def kustomize_problem():
    """Why the overlays cannot be rendered here, or None. deploy/ is written
    for kustomize v5 (kubectl 1.27+): older ones lack the `patches` field and
    print a different YAML layout. Debian 12's kubernetes-client is 1.20."""
    if KUBECTL is None:
        return "kubectl not installed: cannot render kustomize overlays"
    p = subprocess.run([KUBECTL, "version", "--client", "-o", "json"], capture_output=True,
                       text=True, timeout=30)
    try:
        info = json.loads(p.stdout)
    except ValueError:
        return "cannot read `kubectl version --client -o json`: %s" % p.stderr.strip()
    v = info.get("kustomizeVersion") or ""
    m = re.match(r"v(\d+)\.", v)
    if not m or int(m.group(1)) < 5:
        return "kubectl %s embeds kustomize %s; deploy/ needs kustomize v5 (kubectl 1.27+)" % (
            info.get("clientVersion", {}).get("gitVersion", "?"), v or "< v5")
    return None


def needs_kubectl(fn):
    """Skips a test (with the reason) where the overlays cannot be rendered."""
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        why = kustomize_problem()
        if why:
            pytest.skip(why)
        return fn(*a, **kw)
    return wrapper


# ------------------------------------------------------------------ helpers

def yaml_files():
    """deploy/'s YAML files, except the Helm chart's: its templates are not
    YAML until Helm renders them (test_helm.py checks the chart)."""
    out = []
    for d, dirs, files in os.walk(DEPLOY):
        if d == DEPLOY:
            dirs[:] = [x for x in dirs if x != "helm"]
        out += [os.path.join(d, f) for f in files if f.endswith((".yaml", ".yml"))]
    return sorted(out)


def rel(path):
    return os.path.relpath(path, ROOT)


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def is_kustomization(path):
    return os.path.basename(path) == "kustomization.yaml"


def is_manifest(path):
    """Kubernetes objects (not kustomize or kind configs)."""
    return not is_kustomization(path) and os.sep + "kind" + os.sep not in path


@functools.lru_cache(maxsize=None)
def render(overlay):
    p = subprocess.run([KUBECTL, "kustomize", os.path.join(DEPLOY, "overlays", overlay)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, "kubectl kustomize %s: %s" % (overlay, p.stderr)
    return p.stdout


def rendered_docs(overlay):
    return [d for d in yaml.safe_load_all(render(overlay)) if d]


def find(docs, kind, name=None):
    got = [d for d in docs if d.get("kind") == kind and
           (name is None or d["metadata"]["name"] == name)]
    assert got, "no %s %s" % (kind, name or "")
    return got[0]


def all_objects():
    """(label, object) for every Kubernetes object in deploy/: files as they
    are, plus both overlays rendered when kubectl is there."""
    out = []
    for f in yaml_files():
        if is_manifest(f):
            out += [(rel(f), d) for d in load_docs(f)]
    if not kustomize_problem():
        for o in ("grouped", "individual"):
            out += [("overlays/%s (rendered)" % o, d) for d in rendered_docs(o)]
    return out


def run_driver(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DRA_CPU_")}
    e.update(env or {})
    return subprocess.run([DRIVER, *args], capture_output=True, text=True, env=e, timeout=60)


def quantity_milli(q):
    """A CPU quantity ("300m", "2", 2) in milli-CPU."""
    s = str(q)
    return int(s[:-1]) if s.endswith("m") else int(s) * 1000


def quantity_int(q):
    """A whole-number quantity ("10", 10, "10000m") as int; anything else fails."""
    s = str(q)
    if s.endswith("m"):
        n = int(s[:-1])
        assert n % 1000 == 0, "fractional CPU quantity %r" % q
        return n // 1000
    return int(s)


# ------------------------------------------------------------- parse, schema

def test_every_yaml_file_parses():
    files = yaml_files()
    assert len(files) >= 10, files
    for f in files:
        docs = load_docs(f)
        assert docs, "%s: no YAML documents" % rel(f)
        for d in docs:
            assert isinstance(d, dict), "%s: a document is not a mapping" % rel(f)
            if is_manifest(f):
                assert d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get(
                    "name"), "%s: object without apiVersion/kind/name" % rel(f)


def run_validator(objs_by_label, tmp):
    paths = []
    for i, (label, objs) in enumerate(sorted(objs_by_label.items())):
        p = os.path.join(tmp, "%02d-%s.json" % (i, re.sub(r"[^A-Za-z0-9.]+", "_", label)))
        with open(p, "w") as f:
            json.dump(objs, f)
        paths.append(p)
    return subprocess.run([PYTHON, VALIDATOR, "--strict", "--spec", "1.36", "--spec", "1.37",
                           *paths], capture_output=True, text=True, timeout=120)


def test_resource_objects_pass_the_strict_openapi_schema(tmp_path):
    by_label = {}
    for label, d in all_objects():
        if str(d.get("apiVersion", "")).startswith("resource.k8s.io/"):
            by_label.setdefault(label, []).append(d)
    kinds = {d["kind"] for objs in by_label.values() for d in objs}
    assert {"DeviceClass", "ResourceClaim"} <= kinds, kinds
    assert any(lbl.startswith("deploy/install.yaml") for lbl in by_label)
    p = run_validator(by_label, str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    n = sum(len(objs) for objs in by_label.values())
    assert (p.stdout.count(", 1.36)\n"), p.stdout.count(", 1.37)\n")) == (n, n), p.stdout
    # The validator really rejects what the API server would: a typo'd field.
    bad = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": "x"},
           "spec": {"devices": {"requests": [{"name": "r", "exactly": {
               "deviceClassName": DRIVER_NAME, "cout": 4}}]}}}
    p = run_validator({"negative-control": [bad]}, str(tmp_path))
    assert p.returncode == 1 and p.stdout.count("INVALID") == 2, p.stdout + p.stderr
    assert "('cout' was unexpected)" in p.stdout


def test_cluster_scoped_objects_carry_no_namespace():
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "DeviceClass"}
    for label, d in all_objects():
        ns = d["metadata"].get("namespace")
        if d["kind"] in cluster_scoped:
            assert ns is None, "%s: %s %s has namespace %s" % (
                label, d["kind"], d["metadata"]["name"], ns)
        elif label.startswith("deploy/examples"):
            assert ns is None, "%s: examples go into the user's namespace" % label
        else:
            assert ns == NAMESPACE, "%s: %s in namespace %r" % (label, d["kind"], ns)


# ------------------------------------------------------------------ kustomize

@needs_kubectl
def test_install_yaml_is_the_rendered_grouped_overlay():
    with open(os.path.join(DEPLOY, "install.yaml")) as f:
        lines = f.read().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    assert "".join(lines) == render("grouped"), (
        "deploy/install.yaml is stale: run tools/render-deploy.sh")


@needs_kubectl
def test_render_script_check_mode_agrees():
    p = subprocess.run(["sh", os.path.join(ROOT, "tools", "render-deploy.sh"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def driver_container(docs):
    ds = find(docs, "DaemonSet", "dra-cpu")
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return ds, c


@needs_kubectl
@pytest.mark.parametrize("overlay,mode", [("grouped", "grouped"), ("individual", "individual")])
def test_overlay_sets_its_device_mode(overlay, mode):
    _, c = driver_container(rendered_docs(overlay))
    modes = [a for a in c["args"] if a.startswith("--cpu-device-mode")]
    assert modes == ["--cpu-device-mode=" + mode], c["args"]


def container_env(c):
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


@needs_kubectl
@needs_driver
@pytest.mark.parametrize("overlay,first_device", [("grouped", "cpudevnuma000"),
                                                  ("individual", "cpudev000")])
def test_daemonset_arguments_are_accepted_by_the_driver(overlay, first_device):
    """The real flag parser reads the DaemonSet's args and literal env; --dry-run
    then shows that the mode took effect."""
    docs = rendered_docs(overlay)
    _, c = driver_container(docs)
    with tempfile.TemporaryDirectory() as tmp:
        args = config_args(docs, c["args"], tmp)
        p = run_driver(*args, "--dry-run", "--topology-file", TOPO_384,
                       "--hostname-override", "node-x", env=container_env(c))
    assert p.returncode == 0, p.stderr
    items = json.loads(p.stdout)["items"]
    assert items[0]["spec"]["devices"][0]["name"] == first_device


def config_args(docs, args, tmp):
    """args with --config pointed at the ConfigMap's file, laid out under tmp
    as the kubelet mounts the volume (config.yaml -> ..data/config.yaml): the
    driver parses the very file the DaemonSet mounts, the way it is mounted."""
    cm = find(docs, "ConfigMap", "dra-cpu-config")
    volume.write(os.path.join(tmp, "config"), cm["data"])
    path = volume.path(os.path.join(tmp, "config"), "config.yaml")
    out = [("--config=" + path) if a.startswith("--config=") else a for a in args]
    assert out != list(args), "the DaemonSet does not pass --config"
    return out


def test_configmap_is_read_by_the_driver_and_flags_win():
    docs = base_docs()
    _, c = driver_container(docs)
    with tempfile.TemporaryDirectory() as tmp:
        args = config_args(docs, c["args"], tmp)
        cm = find(docs, "ConfigMap", "dra-cpu-config")
        volume.write(os.path.join(tmp, "config"),  # an update in place: a new ..data
                     {"config.yaml": cm["data"]["config.yaml"] + "cpuDeviceMode: individual\n"})
        # The appended key repeats one the ConfigMap sets: refused, with the line.
        p = run_driver(*args, "--dry-run", "--topology-file", TOPO_384)
        assert p.returncode == 2
        assert re.search(r"config file \S+config.yaml line \d+: key cpuDeviceMode repeated",
                         p.stderr), p.stderr


def test_kind_config_enables_dra_nri_and_cdi():
    (cfg,) = load_docs(os.path.join(DEPLOY, "kind", "cluster.yaml"))
    assert cfg["kind"] == "Cluster" and cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert cfg["featureGates"] == {"DynamicResourceAllocation": True,
                                   "DRAConsumableCapacity": True}
    patch = "\n".join(cfg["containerdConfigPatches"])
    assert re.search(r'\[plugins\."io\.containerd\.nri\.v1\.nri"\]\s+disable = false', patch)
    assert "enable_cdi = true" in patch and '"/var/run/cdi"' in patch
    workers = [n for n in cfg["nodes"] if n["role"] == "worker"]
    assert len(workers) == 1, "kind nodes share the host's CPUs: one driver only"
    assert {"hostPath": "/sys/fs/bpf", "containerPath": "/sys/fs/bpf"} in workers[0]["extraMounts"]


# ------------------------------------------------------- DaemonSet and RBAC

def base_docs():
    docs = []
    for f in sorted(os.listdir(os.path.join(DEPLOY, "base"))):
        if f != "kustomization.yaml":
            docs += load_docs(os.path.join(DEPLOY, "base", f))
    return docs


@functools.lru_cache(maxsize=None)
def driver_defaults():
    """{flag: default} from --help ('default: X   env: ...')."""
    p = run_driver("--help")
    assert p.returncode == 0, p.stderr
    out, flag = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"\s+--([a-z0-9-]+)", line)
        if m:
            flag = m.group(1)
        m = re.search(r"default: (\S+)\s+env:", line)
        if m and flag:
            out[flag] = m.group(1).strip('"')
    return out


def test_daemonset_pod_settings():
    ds, c = driver_container(base_docs())
    spec = ds["spec"]
    pod = spec["template"]["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 1}}
    assert pod["hostPID"] is True and not pod.get("hostNetwork")
    assert pod["priorityClassName"] == "system-node-critical"
    assert {"operator": "Exists"} in pod["tolerations"]
    assert pod["terminationGracePeriodSeconds"] == 10
    assert pod["serviceAccountName"] == "dra-cpu"
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"] == {"requests": {"cpu": "50m", "memory": "32Mi"},
                              "limits": {"memory": "128Mi"}}
    # One port everywhere: --bind-address, the probes, the scrape annotation.
    (port,) = c["ports"]
    bind = [a.split("=", 1)[1] for a in c["args"] if a.startswith("--bind-address=")]
    assert bind == [":%d" % port["containerPort"]]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["port"] in (port["name"], port["containerPort"])
    ann = spec["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == str(port["containerPort"])
    assert ann["prometheus.io/path"] == "/metrics"


def test_daemonset_privileges_are_the_intended_ones():
    """A change here is a security decision: update docs/deploy.md with it."""
    _, c = driver_container(base_docs())
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sorted(sc["capabilities"]["add"]) == ["BPF", "PERFMON", "SYS_NICE", "SYS_RESOURCE"]


@needs_driver
def test_daemonset_mounts_cover_the_driver_paths():
    ds, c = driver_container(base_docs())
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    mounts = {}
    for m in c["volumeMounts"]:
        if "configMap" in vols[m["name"]]:
            # The configuration file: read-only, and where --config looks.
            assert m.get("readOnly") is True, m
            assert "--config=%s/config.yaml" % m["mountPath"] in c["args"]
            continue
        hp = vols[m["name"]]["hostPath"]["path"]
        if hp == "/proc/irq":
            # The host's interrupt affinities, writable, where --procfs-root
            # points: the container's own /proc/irq is read-only
            # (docs/irq-isolation.md). Nothing else of the host's /proc.
            assert not m.get("readOnly"), m
            assert "--procfs-root=%s" % os.path.dirname(m["mountPath"]) in c["args"]
            assert m["mountPath"] == "/host/proc/irq", m
            continue
        # Same path inside and out: the kubelet and the runtime read what the
        # driver writes, under the names the driver tells them.
        assert hp == m["mountPath"], m
        mounts[m["mountPath"]] = m
    d = driver_defaults()
    need_rw = [d["cdi-dir"], d["state-dir"], os.path.dirname(d["nri-socket"]),
               d["kubelet-root-dir"] + "/plugins_registry",
               d["kubelet-root-dir"] + "/plugins/" + DRIVER_NAME]
    for p in need_rw:
        assert p in mounts and not mounts[p].get("readOnly"), "%s not mounted read-write" % p
    for p in ("/sys", "/sys/fs/cgroup"):
        assert mounts[p].get("readOnly") is True, "%s must be read-only" % p
    assert not any(v["hostPath"]["path"] == "/proc" for v in vols.values() if "hostPath" in v), \
        "the host's /proc writable would give /proc/sys to the container"
    assert any(v["hostPath"]["path"] == "/proc/irq" for v in vols.values() if "hostPath" in v)
    # The checkpoint must share the CDI specs' lifetime (both tmpfs /run).
    assert d["state-dir"].startswith("/var/run/") and d["cdi-dir"].startswith("/var/run/")


def test_clusterrole_is_least_privilege():
    role = find(base_docs(), "ClusterRole", "dra-cpu")
    got = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"])),
                  tuple(r.get("resourceNames", ())))
                 for r in role["rules"])
    assert got == sorted([
        (("",), ("nodes",), ("get",), ()),
        (("resource.k8s.io",), ("resourceslices",),
         ("create", "delete", "list", "update", "watch"), ()),
        (("resource.k8s.io",), ("resourceclaims",), ("get",), ()),
        # Events: exactly create and patch (docs/events.md)
        (("events.k8s.io",), ("events",), ("create", "patch"), ()),
        # status.devices: only the status subresource, only patch, and the
        # 1.36 per-driver check for this node's claims (docs/claim-status.md)
        (("resource.k8s.io",), ("resourceclaims/status",), ("patch",), ()),
        (("resource.k8s.io",), ("resourceclaims/driver",), ("associated-node:patch",),
         ("dra.cpu",)),
    ])
    binding = find(base_docs(), "ClusterRoleBinding", "dra-cpu")
    assert binding["roleRef"]["name"] == "dra-cpu"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dra-cpu",
                                    "namespace": NAMESPACE}]


def test_deviceclass_selects_the_driver():
    dc = find(base_docs(), "DeviceClass", DRIVER_NAME)
    assert dc["spec"]["selectors"] == [{"cel": {"expression":
                                                'device.driver == "%s" && '
                                                '!("realtime" in device.attributes["%s"]) && '
                                                '!("isolated" in device.attributes["%s"])'
                                                % (DRIVER_NAME, DRIVER_NAME, DRIVER_NAME)}}]
    iso = find(base_docs(), "DeviceClass", DRIVER_NAME + ".isolated")
    expr = iso["spec"]["selectors"][0]["cel"]["expression"]
    assert '"isolated" in device.attributes' in expr and "realtime" in expr
    # the class tells the driver its claims asked for isolated CPUs
    assert iso["spec"]["config"] == [{"opaque": {"driver": DRIVER_NAME, "parameters": {
        "apiVersion": "dra.cpu/v1alpha1", "kind": "CPUConfig", "isolated": "require"}}}]
    rt = find(base_docs(), "DeviceClass", DRIVER_NAME + ".realtime")
    expr = rt["spec"]["selectors"][0]["cel"]["expression"]
    assert 'device.driver == "dra.cpu"' in expr and ".realtime" in expr


# ----------------------------------------------------------------- CEL check
#
# A checker for the part of CEL (github.com/google/cel-spec, langdef.md) that
# DRA selectors use: literals, `device` member/index access, function and
# method calls, unary ! and -, * / % + -, comparisons, `in`, && || and ?:.
# Macros with bound variables (all, exists, map, ...) are not supported and
# are reported as such, so the checker never waves through what it cannot read.

class CelError(Exception):
    pass


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?|\d+[uU]?)
  | (?P<str>[rR]?(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,()\[\]{}])
""", re.X)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "`": "`",
            "?": "?", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unquote(tok):
    raw = tok[0] in "rR"
    body = tok[2:-1] if raw else tok[1:-1]
    if raw:
        return body
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            raise CelError("unsupported escape \\%s in %s" % (nxt, tok))
        out.append(ch)
        i += 1
    return "".join(out)


def cel_tokens(src):
    pos, out = 0, []
    if len(src.encode()) > 10240:
        raise CelError("expression longer than the API's 10 KiB limit")
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise CelError("unexpected character %r at %d" % (src[pos], pos))
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        text = m.group()
        if kind == "id" and text in ("true", "false"):
            out.append(("lit", ("bool", text == "true")))
        elif kind == "id" and text == "null":
            out.append(("lit", ("null", None)))
        elif kind == "id" and text == "in":
            out.append(("op", "in"))
        elif kind == "id" and text in ("as", "break", "const", "continue", "else", "for",
                                       "function", "if", "import", "let", "loop", "package",
                                       "namespace", "return", "var", "void", "while"):
            raise CelError("reserved word %r" % text)
        elif kind == "num":
            if text[-1] in "uU":
                out.append(("lit", ("uint", int(text[:-1], 0))))
            elif re.fullmatch(r"0[xX][0-9a-fA-F]+|\d+", text):
                out.append(("lit", ("int", int(text, 0))))
            else:
                out.append(("lit", ("double", float(text))))
        elif kind == "str":
            out.append(("lit", ("string", _unquote(text))))
        else:
            out.append((kind, text))
    out.append(("end", None))
    return out


class _Parser:
    """Recursive descent over cel-spec's grammar; builds tuples:
    ("lit", type, value) ("ident", name) ("select", x, field) ("index", x, e)
    ("call", name, target-or-None, [args]) ("op", op, [args]) ("list", [items])
    ("map", [(k, v)])."""

    RELOPS = ("<", "<=", ">=", ">", "==", "!=", "in")

    def __init__(self, src):
        self.t = cel_tokens(src)
        self.i = 0

    def peek(self, *vals):
        kind, v = self.t[self.i]
        return kind == "op" and v in vals

    def take(self, val):
        if not self.peek(val):
            raise CelError("expected %r, got %r" % (val, self.t[self.i][1]))
        self.i += 1

    def parse(self):
        e = self.expr()
        if self.t[self.i][0] != "end":
            raise CelError("unexpected %r after the expression" % (self.t[self.i][1],))
        return e

    def expr(self):
        c = self.binary(0)
        if self.peek("?"):
            self.i += 1
            a = self.binary(0)
            self.take(":")
            b = self.expr()
            return ("op", "?:", [c, a, b])
        return c

    LEVELS = (("||",), ("&&",), RELOPS, ("+", "-"), ("*", "/", "%"))

    def binary(self, level):
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek(*self.LEVELS[level]):
            op = self.t[self.i][1]
            self.i += 1
            left = ("op", op, [left, self.binary(level + 1)])
        return left

    def unary(self):
        if self.peek("!", "-"):
            op = self.t[self.i][1]
            self.i += 1
            return ("op", "unary" + op, [self.unary()])
        return self.member()

    def args(self, close):
        out = []
        if self.peek(close):
            self.i += 1
            return out
        while True:
            out.append(self.expr())
            if self.peek(","):
                self.i += 1
                if self.peek(close):  # trailing comma
                    self.i += 1
                    return out
                continue
            self.take(close)
            return out

    def member(self):
        e = self.primary()
        while True:
            if self.peek("."):
                self.i += 1
                kind, name = self.t[self.i]
                if kind != "id":
                    raise CelError("expected a field name after '.', got %r" % (name,))
                self.i += 1
                if self.peek("("):
                    self.i += 1
                    e = ("call", name, e, self.args(")"))
                else:
                    e = ("select", e, name)
            elif self.peek("["):
                self.i += 1
                idx = self.expr()
                self.take("]")
                e = ("index", e, idx)
            else:
                return e

    def primary(self):
        kind, v = self.t[self.i]
        if kind == "lit":
            self.i += 1
            return ("lit",) + v
        if kind == "id":
            self.i += 1
            if self.peek("("):
                self.i += 1
                return ("call", v, None, self.args(")"))
            return ("ident", v)
        if self.peek("("):
            self.i += 1
            e = self.expr()
            self.take(")")
            return e
        if self.peek("["):
            self.i += 1
            return ("list", self.args("]"))
        if self.peek("{"):
            self.i += 1
            items = []
            while not self.peek("}"):
                k = self.expr()
                self.take(":")
                items.append((k, self.expr()))
                if not self.peek(","):
                    break
                self.i += 1
            self.take("}")
            return ("map", items)
        raise CelError("unexpected %r" % (v,))


# Functions and methods a DRA selector may call (CEL standard library plus the
# Kubernetes quantity and semver libraries), with their arity.
_FUNCTIONS = {"has": 1, "size": 1, "int": 1, "uint": 1, "double": 1, "string": 1, "bool": 1,
              "quantity": 1, "isQuantity": 1, "semver": 1, "isSemver": 1}
_METHODS = {"size": 0, "contains": 1, "startsWith": 1, "endsWith": 1, "matches": 1,
            "compareTo": 1, "isGreaterThan": 1, "isLessThan": 1, "sign": 0, "asInteger": 0,
            "isInteger": 0, "asApproximateFloat": 0, "add": 1, "sub": 1, "major": 0,
            "minor": 0, "patch": 0}
_DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")
_MACROS = ("all", "exists", "exists_one", "map", "filter")


class Published:
    """What the driver publishes: {"dom/name": type} for attributes, a set of
    capacity keys, and which modes publish each attribute."""

    def __init__(self, attrs, capacity, modes):
        self.attrs, self.capacity, self.modes = attrs, capacity, modes


def cel_check(src, pub):
    """Parses src and checks every device reference against pub. Returns the
    list of "<domain>/<name>" attribute keys it uses. Raises CelError."""
    tree = _Parser(src).parse()
    used = []

    def domain_map(node):
        """node is device.attributes[<dom>] or device.capacity[<dom>]:
        returns ("attributes"|"capacity", dom), else None."""
        if node[0] != "index":
            return None
        base = node[1]
        if base[0] != "select" or base[1] != ("ident", "device") or \
                base[2] not in ("attributes", "capacity"):
            return None
        if node[2][:2] != ("lit", "string"):
            raise CelError("device.%s[...] needs a string literal domain" % base[2])
        return base[2], node[2][2]

    def ref(which, dom, name):
        key = "%s/%s" % (dom, name)
        if which == "attributes":
            if key not in pub.attrs:
                raise CelError("attribute %s is not published by the driver (it publishes: %s)"
                               % (key, ", ".join(sorted(pub.attrs))))
            used.append(key)
            return ("attr", pub.attrs[key])
        if key not in pub.capacity:
            raise CelError("capacity %s is not published by the driver" % key)
        return ("quantity", None)

    def walk(n):
        """Checks n; returns its static type where known ("int", "string",
        "bool", "quantity", "map", "device"...), else None."""
        kind = n[0]
        if kind == "lit":
            return n[1]
        if kind == "ident":
            if n[1] != "device":
                raise CelError("unknown variable %r (selectors only have `device`)" % n[1])
            return "device"
        if kind == "select":
            dm = domain_map(n[1])
            if dm:
                t = ref(dm[0], dm[1], n[2])
                return t[1] if t[0] == "attr" else "quantity"
            base = walk(n[1])
            if base == "device":
                if n[2] not in _DEVICE_FIELDS:
                    raise CelError("device has no field %r" % n[2])
                return {"driver": "string", "allowMultipleAllocations": "bool"}.get(n[2], "map")
            return None
        if kind == "index":
            dm = domain_map(n)
            if dm:
                return "domain"
            dm = domain_map(n[1])
            if dm and n[2][:2] == ("lit", "string"):
                t = ref(dm[0], dm[1], n[2][2])
                return t[1] if t[0] == "attr" else "quantity"
            walk(n[1])
            walk(n[2])
            return None
        if kind == "call":
            name, target, args = n[1], n[2], n[3]
            if name in _MACROS:
                raise CelError("macro %s() is not supported by this checker" % name)
            if target is None:
                if name not in _FUNCTIONS:
                    raise CelError("unknown function %s()" % name)
                if len(args) != _FUNCTIONS[name]:
                    raise CelError("%s() takes %d argument(s)" % (name, _FUNCTIONS[name]))
                if name == "has":
                    a = args[0]
                    if a[0] != "select":
                        raise CelError("has() needs a field selection")
                    dm = domain_map(a[1])
                    if dm:
                        ref(dm[0], dm[1], a[2])
                        return "bool"
                walk_all(args)
                return {"has": "bool", "size": "int", "quantity": "quantity",
                        "isQuantity": "bool", "isSemver": "bool"}.get(name)
            if name not in _METHODS:
                raise CelError("unknown method .%s()" % name)
            if len(args) != _METHODS[name]:
                raise CelError(".%s() takes %d argument(s)" % (name, _METHODS[name]))
            walk(target)
            walk_all(args)
            return None
        if kind == "list":
            walk_all(n[1])
            return "list"
        if kind == "map":
            for k, v in n[1]:
                walk(k)
                walk(v)
            return "map"
        op, args = n[1], n[2]
        if op == "in" and domain_map(args[1]):
            which, dom = domain_map(args[1])
            if args[0][:2] != ("lit", "string"):
                raise CelError("`in device.%s[...]` needs a string literal key" % which)
            ref(which, dom, args[0][2])
            return "bool"
        types = [walk(a) for a in args]
        if op == "in":
            return "bool"
        if op in ("==", "!=", "<", "<=", ">", ">="):
            a, b = types
            if {a, b} <= {"int", "uint", "double", "string", "bool", "null"} and a != b:
                if not ({a, b} <= {"int", "uint", "double"} and op not in ("==", "!=")):
                    raise CelError("comparing %s with %s" % (a, b))
            if "quantity" in (a, b) and a != b:
                raise CelError("compare quantities with .compareTo(quantity(...))")
            if op in ("==", "!=") and args[0] == ("select", ("ident", "device"), "driver") \
                    and args[1][:2] == ("lit", "string") and args[1][2] != DRIVER_NAME:
                raise CelError("device.driver compared with %r, not %r" % (args[1][2],
                                                                            DRIVER_NAME))
            return "bool"
        if op in ("&&", "||", "unary!"):
            for t in types:
                if t not in (None, "bool"):
                    raise CelError("operand of %s is %s, not bool" % (op, t))
            return "bool"
        if op == "?:":
            if types[0] not in (None, "bool"):
                raise CelError("condition of ?: is %s, not bool" % types[0])
            return types[1] if types[1] == types[2] else None
        return types[0] if len(set(types)) == 1 else None

    def walk_all(xs):
        for x in xs:
            walk(x)

    t = walk(tree)
    if t not in (None, "bool"):
        raise CelError("a selector must be a bool expression, this one is %s" % t)
    return used


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    if not os.access(DRIVER, os.X_OK):
        pytest.skip("build/dra-cpu-driver not built (run make)")
    attrs, caps, modes = {}, set(), {}
    # a node of 1024 CPUs (the external allocator's attributes, docs/external-allocator.md,
    # count as grouped ones), and the capture whose kernel isolated CPUs
    capture = tmp_path_factory.mktemp("isolated")
    subprocess.run(["tar", "-xjf", os.path.join(ROOT, "test", "data", "topologies",
                                                "32intel64-2p8co2t+8ve-isolated.tar.bz2"),
                    "-C", str(capture)], check=True)
    big = ("--topology-file", TOPO_1024, "--rt-cpus", "1000-1001")
    runs = [("grouped", big), ("individual", big), ("grouped", big + ("--allocator", "external")),
            ("grouped", ("--sysfs-root", str(capture / "32intel64-2p8co2t+8ve-isolated"))),
            ("individual", ("--sysfs-root", str(capture / "32intel64-2p8co2t+8ve-isolated")))]
    for mode, source in runs:
        p = run_driver("--dry-run", *source, "--cpu-device-mode", mode,
                       "--hostname-override", "node-x")
        assert p.returncode == 0, p.stderr
        for s in json.loads(p.stdout)["items"]:
            for dev in s["spec"].get("devices", []):
                for k, v in dev.get("attributes", {}).items():
                    (typ,) = v.keys()
                    assert attrs.setdefault(k, typ) == typ, "%s has two types" % k
                    modes.setdefault(k, set()).add(mode)
                caps |= set(dev.get("capacity", {}))
    assert "resource.kubernetes.io/numaNode" in attrs and "dra.cpu/coreType" in attrs
    assert attrs["dra.cpu/isolated"] == attrs["dra.cpu/nohzFull"] == "bool"
    assert caps == {"dra.cpu/cpu", "dra.cpu/rtBandwidth"}
    assert attrs["dra.cpu/realtime"] == "bool"
    return Published(attrs, caps, modes)


def cel_expressions():
    """(label, expression) for every CEL selector anywhere in deploy/."""
    out = []

    def walk(label, node):
        if isinstance(node, dict):
            cel = node.get("cel")
            if isinstance(cel, dict) and "expression" in cel:
                out.append((label, cel["expression"]))
            for v in node.values():
                walk(label, v)
        elif isinstance(node, list):
            for v in node:
                walk(label, v)

    for f in yaml_files():
        if is_manifest(f):
            for d in load_docs(f):
                walk("%s %s/%s" % (rel(f), d["kind"], d["metadata"]["name"]), d)
    return out


def test_every_cel_selector_parses_and_uses_published_attributes(published):
    exprs = cel_expressions()
    assert len(exprs) >= 5, exprs
    used = set()
    for label, src in exprs:
        try:
            used |= set(cel_check(src, published))
        except CelError as e:
            pytest.fail("%s: %s\n  %s" % (label, e, src))
    # The examples exercise both a standard and a driver-specific attribute.
    assert {"resource.kubernetes.io/numaNode", "dra.cpu/coreType"} <= used


@pytest.mark.parametrize("src,why", [
    ('device.attributes["dra.cpu"].coreTyp == "p-core"', "not published"),
    ('device.attributes["resource.kubernetes.io"].numaNode == "0"', "comparing int with string"),
    ('device.attributes["dra.cpu"].coreType == "p-core" &&', "unexpected"),
    ('device.attributes["dra.cpu"].smtEnabled == 1', "comparing bool with int"),
    ('device.driver == "dra.gpu"', "not 'dra.cpu'"),
    ('node.name == "x"', "unknown variable"),
    ('device.attributes[domain].numaNode == 0', "string literal"),
    ('"cpuId" in device.attributes["dra.cpu"]', "not published"),
    ('has(device.attributes["dra.cpu"].numa)', "not published"),
    ('device.capacity["dra.cpu"].cores.compareTo(quantity("4")) >= 0', "capacity dra.cpu/cores"),
    ('device.capacity["dra.cpu"].cpu >= 4', "compareTo"),
    ('device.attributes["dra.cpu"].cpuID', "bool expression"),
    ('device.attributes["dra.cpu"].all(x, x == 1)', "macro"),
    ("device.driver == 'dra.cpu' ? 1 : 2", "bool expression"),
])
def test_cel_checker_rejects(published, src, why):
    with pytest.raises(CelError, match=re.escape(why)):
        cel_check(src, published)


@pytest.mark.parametrize("src", [
    'device.driver == "dra.cpu"',
    "device.driver == 'dra.cpu' && !(device.attributes['dra.cpu'].smtEnabled)",
    'device.capacity["dra.cpu"].cpu.compareTo(quantity("8")) >= 0',
    'has(device.attributes["dra.cpu"].coreType) ? '
    'device.attributes["dra.cpu"].coreType != "e-core" : false',
    'device.attributes["dra.cpu"]["cpuID"] % 2 == 0 && '
    'device.attributes["dra.cpu"].cpuID in [0, 2, 4,]',
    'device.attributes["resource.kubernetes.io"].numaNode >= 0 || '
    'device.attributes["dra.cpu"].socketID < 2',
])
def test_cel_checker_accepts(published, src):
    cel_check(src, published)


# ---------------------------------------------------------------- examples

def example_files():
    d = os.path.join(DEPLOY, "examples")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".yaml"))


def test_examples_are_there():
    """The tests parametrized over the examples would skip, not fail, on none."""
    assert len(example_files()) >= 5


# Classes other drivers install that examples pair CPUs with (a GPU on the
# same PCIe root): not ours to define, and not CPUs.
EXTERNAL_CLASSES = {"gpu.nvidia.com"}


def claim_milli(claim, request=None):
    """Milli-CPU a claim (or one of its requests) holds: its CPUs, or the
    real-time bandwidth it consumes."""
    total = 0
    for r in claim["spec"]["devices"]["requests"]:
        if request and r["name"] != request:
            continue
        ex = r["exactly"]
        caps = ex.get("capacity", {}).get("requests", {})
        if "dra.cpu/rtBandwidth" in caps:
            total += quantity_milli(caps["dra.cpu/rtBandwidth"]) * int(ex.get("count", 1))
        else:
            total += claim_cpus(claim, r["name"]) * 1000
    return total


def claim_cpus(claim, request=None):
    """CPUs a claim (or one of its requests) asks for."""
    total = 0
    for r in claim["spec"]["devices"]["requests"]:
        if request and r["name"] != request:
            continue
        ex = r["exactly"]
        if ex["deviceClassName"] in EXTERNAL_CLASSES:
            continue
        caps = ex.get("capacity", {}).get("requests", {})
        if "dra.cpu/cpu" in caps:
            assert "count" not in ex or ex["count"] == 1, "capacity with count > 1"
            total += quantity_int(caps["dra.cpu/cpu"])
        else:
            total += int(ex.get("count", 1))
    return total


def known_device_classes():
    names = set()
    for f in yaml_files():
        if is_manifest(f):
            names |= {d["metadata"]["name"] for d in load_docs(f) if d["kind"] == "DeviceClass"}
    return names | EXTERNAL_CLASSES


def test_example_pods_mirror_their_claims_into_cpu_requests():
    classes = known_device_classes()
    pods = 0
    for f in example_files():
        docs = load_docs(f)
        claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceClaim"}
        # a template's claims are its inner spec
        claims.update({d["metadata"]["name"]: {"spec": d["spec"]["spec"]}
                       for d in docs if d["kind"] == "ResourceClaimTemplate"})
        for cl in claims.values():
            for r in cl["spec"]["devices"]["requests"]:
                assert r["exactly"]["deviceClassName"] in classes, "%s: unknown class" % rel(f)
        for pod in (d for d in docs if d["kind"] == "Pod"):
            pods += 1
            refs = {rc["name"]: rc.get("resourceClaimName") or rc["resourceClaimTemplateName"]
                    for rc in pod["spec"]["resourceClaims"]}
            for c in pod["spec"]["containers"]:
                res = c["resources"]
                want = 0
                for cc in res.get("claims", []):
                    assert cc["name"] in refs, "%s: claim %s not in the pod" % (rel(f), cc["name"])
                    claim = claims.get(refs[cc["name"]])
                    assert claim, "%s: claim %s not in this file" % (rel(f), refs[cc["name"]])
                    want += claim_milli(claim, cc.get("request"))
                assert want, "%s: container %s uses no claim" % (rel(f), c["name"])
                got = (quantity_milli(res["requests"]["cpu"]),
                       quantity_milli(res["limits"]["cpu"]))
                assert got == (want, want), "%s: container %s cpu %s, claims hold %d" % (
                    rel(f), c["name"], got, want)
    assert pods == len(example_files())


# What user/core/claim.c accepts in CPUConfig parameters.
CPUCONFIG_FIELDS = {"apiVersion": str, "kind": str, "policy": str, "fullCores": bool,
                    "alignL3": bool, "memory": str, "sharedPool": bool, "realtime": dict,
                    "isolated": str}
# ... and in CPUConfig.realtime (user/core/rt.c).
REALTIME_FIELDS = {"policy": str, "runtimeNs": int, "deadlineNs": int, "periodNs": int,
                   "priority": int, "onFailure": str}
CPUCONFIG_POLICIES = {"packed": "packed", "spread-cores": "spread-cores",
                      "distributed": "distributed"}


def is_cpuset_override(c):
    """The reference driver's parameters: apiVersion v1alpha1, no kind."""
    p = c["opaque"]["parameters"]
    return p.get("apiVersion") == "v1alpha1" and "kind" not in p


def opaque_configs(overrides=False):
    """CPUConfig entries of the examples (or, with overrides, the cpuset
    overrides)."""
    out = []
    for f in example_files():
        for d in load_docs(f):
            if d["kind"] == "ResourceClaim":
                for c in d["spec"]["devices"].get("config", []):
                    if is_cpuset_override(c) == overrides:
                        out.append((rel(f), d, c))
    return out


def test_cpuset_overrides_name_as_many_cpus_as_requested():
    """What user/kubelet/dra.c checks at Prepare, short of the node."""
    confs = opaque_configs(overrides=True)
    assert confs, "no example with a cpuset override"
    for label, claim, c in confs:
        assert c["opaque"]["driver"] == DRIVER_NAME, label
        cpus = set()
        for part in c["opaque"]["parameters"]["cpuConfig"]["cpuset"].split(","):
            a, _, b = part.partition("-")
            cpus.update(range(int(a), int(b or a) + 1))
        reqs = c.get("requests") or [r["name"] for r in claim["spec"]["devices"]["requests"]]
        for r in reqs:
            assert claim_cpus(claim, r) == len(cpus), "%s: request %s" % (label, r)


def test_cpuconfig_parameters_are_valid():
    confs = opaque_configs()
    assert confs, "no example with opaque CPUConfig parameters"
    for label, claim, c in confs:
        assert c["opaque"]["driver"] == DRIVER_NAME, label
        p = c["opaque"]["parameters"]
        assert p["apiVersion"] == "dra.cpu/v1alpha1" and p["kind"] == "CPUConfig", label
        for k, v in p.items():
            assert k in CPUCONFIG_FIELDS, "%s: unknown CPUConfig field %s" % (label, k)
            assert isinstance(v, CPUCONFIG_FIELDS[k]), "%s: %s has the wrong type" % (label, k)
        assert p.get("policy", "packed") in CPUCONFIG_POLICIES, label
        for k, v in p.get("realtime", {}).items():
            assert k in REALTIME_FIELDS, "%s: unknown CPUConfig.realtime field %s" % (label, k)
            assert isinstance(v, REALTIME_FIELDS[k]), "%s: realtime.%s has the wrong type" % (
                label, k)
        names = {r["name"] for r in claim["spec"]["devices"]["requests"]}
        assert set(c.get("requests", [])) <= names, "%s: config names unknown requests" % label


@pytest.mark.skipif(not os.access(ALLOC, os.X_OK), reason="build/dra-cpu-alloc not built")
def test_cpuconfig_policy_combinations_are_accepted_by_the_allocator():
    """dra-cpu-alloc applies the kubelet's option rules the driver applies at
    Prepare: the example's policy/fullCores/alignL3 must pass them and yield
    the claim's CPU count on a 384-CPU node."""
    for label, claim, c in opaque_configs():
        p = c["opaque"]["parameters"]
        if "realtime" in p:
            continue  # real-time CPUs are not allocated, they are shared by bandwidth
        policy = p.get("policy", "packed")
        args = ["--topology", TOPO_384, "--available", "0-383", "--policy", policy]
        if p.get("fullCores"):
            args.append("--full-cores")
        # alignL3 defaults on for packed only (user/kubelet/dra.c).
        if p.get("alignL3", policy == "packed"):
            args.append("--align-l3")
        for r in claim["spec"]["devices"]["requests"]:
            if c.get("requests") and r["name"] not in c["requests"]:
                continue
            n = claim_cpus(claim, r["name"])
            out = subprocess.run([ALLOC, *args, "--count", str(n)], capture_output=True,
                                 text=True, timeout=30)
            assert out.returncode == 0, "%s: %s" % (label, out.stderr)
            cpus = 0
            for part in out.stdout.strip().split(","):
                a, _, b = part.partition("-")
                cpus += int(b or a) - int(a) + 1
            assert cpus == n, "%s: got %s" % (label, out.stdout)


# ------------------------------------------------------------------ Dockerfile

DOCKERFILE = os.path.join(ROOT, "Dockerfile")


def dockerfile_stages():
    """[(from-line, [instructions])] with continuation lines joined."""
    stages, cur = [], None
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n", " ", f.read())
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            cur = (line, [])
            stages.append(cur)
        elif cur:
            cur[1].append(line)
    return stages


IMAGE_BUILD_SH = os.path.join(ROOT, "tools", "image-build.sh")


def build_packages():
    """The build stage's package lists (tools/image-build.sh), by variable."""
    with open(IMAGE_BUILD_SH) as f:
        text = f.read()
    out = {}
    for var in ("BUILD_TOOLS", "TARGET_DEVS"):
        m = re.search(r'^%s="([^"]*)"' % var, text, re.M)
        assert m, var
        out[var] = m.group(1).split()
    return out


def test_dockerfile_shape():
    stages = dockerfile_stages()
    assert len(stages) == 2, [s[0] for s in stages]
    build, runtime = stages
    assert re.match(r"FROM (--platform=\S+ )?debian:12\S* AS build$", build[0], re.I), build[0]
    # The runtime stage is the build stage's /rootfs and nothing else.
    assert runtime[0] == "FROM scratch", runtime[0]
    kinds = [i.split()[0].upper() for i in runtime[1]]
    assert set(kinds) <= {"ARG", "COPY", "LABEL", "ENTRYPOINT"}, kinds
    assert [i for i in runtime[1] if i.upper().startswith("COPY")] == [
        "COPY --from=build /rootfs/ /"]
    joined = "\n".join(build[1])
    for step in ("deps", "curl", "make", "rootfs"):
        assert re.search(r"image-build\.sh %s\b" % step, joined), step
    assert "make deps" not in joined, "the build stage has its own package list"
    assert 'ENTRYPOINT ["/usr/local/bin/dra-cpu-driver"]' in runtime[1]
    assert not any(i.upper().startswith("USER ") for i in runtime[1]), \
        "the driver must run as root (host paths, BPF): see the Dockerfile comment"


needs_apt = pytest.mark.skipif(not shutil.which("apt-cache") or not shutil.which("dpkg"),
                               reason="apt-cache/dpkg not available (not a Debian system)")


@needs_apt
def test_build_packages_exist_in_debian_12():
    pkgs = [p for v in build_packages().values() for p in v]
    assert len(pkgs) >= 15, pkgs
    # One apt-cache call for all (each call reads the whole package cache).
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", *pkgs],
                       capture_output=True, text=True, timeout=60)
    found = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
    missing = [p for p in pkgs if p not in found]
    assert not missing, "not Debian 12 packages: %s (%s)" % (missing, r.stderr.strip())


def dpkg_owners(paths):
    """{library path: package} for the paths dpkg knows, trying the usrmerge
    aliases (/lib vs /usr/lib) and the symlink target. One dpkg call."""
    cands = {}
    for path in paths:
        for c in (path, os.path.realpath(path)):
            for a in (c, c[4:] if c.startswith("/usr/") else "/usr" + c):
                cands.setdefault(a, path)
    r = subprocess.run(["dpkg", "-S", *cands], capture_output=True, text=True, timeout=60)
    out = {}
    for line in r.stdout.splitlines():
        pkg, _, p = line.partition(": ")
        if p in cands:
            out.setdefault(cands[p], pkg.split(":")[0].split(",")[0].strip())
    return out


def dependency_closure(pkgs):
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *pkgs],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {l.strip().split(":")[0] for l in r.stdout.splitlines()
            if l and not l.startswith(" ") and not l.startswith("<")}


def needed_libs(binary):
    """(direct NEEDED sonames, {soname: path} of everything ldd resolves)."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    resolved = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            resolved[m.group(1)] = m.group(2)
        assert "not found" not in line, line
    d = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True, timeout=30)
    direct = re.findall(r"NEEDED\s+(\S+)", d.stdout) if d.returncode == 0 else list(resolved)
    return direct, resolved


# The image gets what a plain `make` builds, whatever flavour B= selects for
# the other tests (a SAN=1 build links the sanitizer runtimes on top).
IMAGE_BUILD = os.path.join(ROOT, "build")


@needs_apt
@pytest.mark.skipif(not os.access(os.path.join(IMAGE_BUILD, "dra-cpu-driver"), os.X_OK),
                    reason="build/dra-cpu-driver not built (run make)")
def test_build_stage_provides_every_library_the_binaries_load():
    # The image's runtime stage copies what the binaries load from the build
    # stage, so each library must come from a package the build stage installs
    # (or their dependencies); libcurl is built there from Debian's source.
    lists = build_packages()
    closure = dependency_closure(lists["TARGET_DEVS"] + ["libc6"])
    bins = [b for b in (os.path.join(IMAGE_BUILD, n) for n in ("dra-cpu-driver", "bpf-verify"))
            if os.access(b, os.X_OK)]
    for b in bins:
        direct, resolved = needed_libs(b)
        owners = dpkg_owners(resolved.values())
        for soname, path in sorted(resolved.items()):
            if soname.startswith("libcurl."):
                continue
            owner = owners.get(path)
            assert owner, "%s: %s (%s) belongs to no package" % (rel(b), soname, path)
            if soname in direct:
                assert owner in closure, "%s links %s from %s, which the build stage lacks" % (
                    rel(b), soname, owner)

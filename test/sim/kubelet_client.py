#!/usr/bin/python3
"""The kubelet side of a DRA plugin's gRPC, for tests: a real gRPC stack
(python3-grpcio) calling what kubelet calls, the way kubelet calls it
(the kubelet's pluginregistration and DRA gRPC APIs).

Message classes come from the project's own proto/kubelet_*.proto, compiled
with `protoc --python_out` into a temporary directory on first use (nothing
generated is committed, and grpc_tools is not needed): calls go through
grpcio's generic unary/stream API with the exact method paths.

    from kubelet_client import KubeletClient
    with KubeletClient() as k:
        reg = k.register("/var/lib/kubelet/plugins_registry/dra.cpu-reg.sock")
        resp = k.prepare(reg.endpoint, [("default", "claim-a", "uid-1")], api=reg.api)
        k.check_prepare(claims, resp)      # kubelet's own checks, its wording

CLI (JSON on stdout, exit 1 on a gRPC error):
    kubelet_client.py register  --socket REG_SOCK
    kubelet_client.py getinfo   --socket REG_SOCK
    kubelet_client.py prepare   --socket DRA_SOCK [--api v1|v1beta1] NS/NAME/UID...
    kubelet_client.py unprepare --socket DRA_SOCK [--api v1|v1beta1] NS/NAME/UID...
    kubelet_client.py watch     --socket DRA_SOCK [--count N] [--timeout S]

Use /usr/bin/python3: Debian's grpcio is not visible to other interpreters.
"""
import argparse
import atexit
import collections
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import grpc
from google.protobuf import json_format

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(ROOT, "proto")
PROTO_FILES = {
    "reg": "kubelet_pluginregistration.proto",
    "v1": "kubelet_dra_v1.proto",
    "v1beta1": "kubelet_dra_v1beta1.proto",
    "health": "kubelet_dra_health_v1alpha1.proto",
    "health_v1": "kubelet_dra_health_v1.proto",
}

# Method paths (wire-protocols.md 0, 1.2, 2.1, 2.6).
REG = "/pluginregistration.Registration/"
DRA = {
    "v1": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/",
    "v1beta1": "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/",
}
HEALTH_WATCH = "/v1alpha1.DRAResourceHealth/NodeWatchResources"
HEALTH_WATCH_PATHS = {"v1alpha1": HEALTH_WATCH, "v1": "/v1.DRAResourceHealth/NodeWatchResources"}
# Health services the plugin may advertise, best first: kubelet 1.37 picks v1
# when it is listed, else v1alpha1, else watches no health.
HEALTH_SERVICES = [("v1.DRAResourceHealth", "v1"), ("v1alpha1.DRAResourceHealth", "v1alpha1")]
# Advertised service strings -> our API names, in the order a current kubelet
# (1.34+) knows them; it picks the first entry of the *plugin's* list it knows.
KUBELET_SERVICES = {"v1.DRAPlugin": "v1", "v1beta1.DRAPlugin": "v1beta1"}

# kubelet's deadlines (wire-protocols.md 0).
GETINFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0
PREPARE_TIMEOUT = 45.0

_protos = None


class Protos:
    """Generated modules: reg, v1, v1beta1, health (v1alpha1), health_v1."""

    def __init__(self, proto_dir):
        out = tempfile.mkdtemp(prefix="kubelet-pb-")
        atexit.register(shutil.rmtree, out, True)
        files = [os.path.join(proto_dir, f) for f in PROTO_FILES.values()]
        if not shutil.which("protoc"):
            raise RuntimeError("protoc not found: apt-get install protobuf-compiler")
        subprocess.run(["protoc", "--proto_path=" + proto_dir, "--python_out=" + out] + files,
                       check=True)
        sys.path.insert(0, out)
        try:
            for attr, f in PROTO_FILES.items():
                setattr(self, attr, importlib.import_module(f[:-len(".proto")] + "_pb2"))
        finally:
            sys.path.remove(out)


def protos(proto_dir=PROTO_DIR):
    """The generated modules, compiled once per process."""
    global _protos
    if _protos is None:
        _protos = Protos(proto_dir)
    return _protos


class KubeletError(Exception):
    """What kubelet would report (its wording), not a transport error."""


Registration = collections.namedtuple("Registration", "name endpoint api info health")


def _claim(c):
    """(namespace, name, uid), "ns/name/uid" or a dict -> (ns, name, uid)."""
    if isinstance(c, str):
        parts = c.split("/")
        if len(parts) != 3:
            raise ValueError("claim %r: want NAMESPACE/NAME/UID" % c)
        return tuple(parts)
    if isinstance(c, dict):
        return (c["namespace"], c["name"], c["uid"])
    return tuple(c)


def to_dict(msg):
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


class KubeletClient:
    """One grpc channel per socket, reused like kubelet reuses its connections."""

    def __init__(self, proto_dir=PROTO_DIR, options=None):
        self.pb = protos(proto_dir)
        self.options = [("grpc.enable_retries", 0),
                        ("grpc.primary_user_agent", "dra-cpu-test-kubelet")] + list(options or [])
        self._channels = {}

    def close(self):
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def channel(self, socket):
        path = os.path.abspath(socket)
        ch = self._channels.get(path)
        if ch is None:
            ch = grpc.insecure_channel("unix:" + path, options=self.options)
            self._channels[path] = ch
        return ch

    def _unary(self, socket, path, req, resp_cls, timeout):
        fn = self.channel(socket).unary_unary(
            path, request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=resp_cls.FromString)
        return fn(req, timeout=timeout)

    # ---- registration (pluginwatcher) ----

    def get_info(self, socket, timeout=GETINFO_TIMEOUT):
        pb = self.pb.reg
        return self._unary(socket, REG + "GetInfo", pb.InfoRequest(), pb.PluginInfo, timeout)

    def notify_registration_status(self, socket, registered, error="", timeout=NOTIFY_TIMEOUT):
        pb = self.pb.reg
        return self._unary(socket, REG + "NotifyRegistrationStatus",
                           pb.RegistrationStatus(plugin_registered=registered, error=error),
                           pb.RegistrationStatusResponse, timeout)

    def register(self, socket, driver_name=None):
        """kubelet's sequence (wire-protocols.md 1.4): GetInfo, validate, Notify.

        Returns Registration(name, endpoint, api, info); raises KubeletError after
        telling the plugin Notify(false, why) when validation fails."""
        info = self.get_info(socket)
        why = None
        api = None
        if info.type != "DRAPlugin":
            why = "no handler registered for plugin type: %s at socket %s" % (info.type, socket)
        elif not info.name:
            why = "plugin name is empty"
        elif driver_name and info.name != driver_name:
            why = "plugin name %s, want %s" % (info.name, driver_name)
        elif not info.supported_versions:
            why = "RegisterPlugin error -- plugin validation failed with err: empty list"
        else:
            for v in info.supported_versions:
                if v in KUBELET_SERVICES:
                    api = KUBELET_SERVICES[v]
                    break
            if api is None:
                why = ("RegisterPlugin error -- plugin validation failed with err: none of "
                       "services supported by the plugin %s are supported by the kubelet"
                       % list(info.supported_versions))
        if why:
            self.notify_registration_status(socket, False, why)
            raise KubeletError(why)
        endpoint = info.endpoint or os.path.abspath(socket)
        self.notify_registration_status(socket, True, "")
        health = next((h for v, h in HEALTH_SERVICES if v in info.supported_versions), None)
        return Registration(info.name, endpoint, api, info, health)

    # ---- DRA node service ----

    def _claims(self, mod, claims):
        return [mod.Claim(namespace=ns, name=name, uid=uid)
                for ns, name, uid in map(_claim, claims)]

    def prepare(self, socket, claims, api="v1", timeout=PREPARE_TIMEOUT):
        mod = getattr(self.pb, api)
        req = mod.NodePrepareResourcesRequest(claims=self._claims(mod, claims))
        return self._unary(socket, DRA[api] + "NodePrepareResources", req,
                           mod.NodePrepareResourcesResponse, timeout)

    def unprepare(self, socket, claims, api="v1", timeout=PREPARE_TIMEOUT):
        mod = getattr(self.pb, api)
        req = mod.NodeUnprepareResourcesRequest(claims=self._claims(mod, claims))
        return self._unary(socket, DRA[api] + "NodeUnprepareResources", req,
                           mod.NodeUnprepareResourcesResponse, timeout)

    @staticmethod
    def _check(verb, claims, resp):
        """kubelet's checks of a (un)prepare answer (wire-protocols.md 2.3)."""
        asked = {uid: (ns, name) for ns, name, uid in map(_claim, claims)}
        for uid in resp.claims:
            if uid not in asked:
                raise KubeletError("%s returned result for unknown claim UID %s" % (verb, uid))
        for uid, (ns, name) in asked.items():
            if uid in resp.claims and resp.claims[uid].error:
                raise KubeletError("%s failed for claim %s/%s: %s"
                                   % (verb, ns, name, resp.claims[uid].error))
        missing = len([u for u in asked if u not in resp.claims])
        if missing:
            raise KubeletError("%s left out %d claims" % (verb, missing))

    def check_prepare(self, claims, resp):
        self._check("NodePrepareResources", claims, resp)

    def check_unprepare(self, claims, resp):
        self._check("NodeUnprepareResources", claims, resp)

    # ---- resource health ----

    def watch_resources(self, socket, timeout=None, api="v1alpha1"):
        """The NodeWatchResources stream (api v1alpha1 or v1): iterate for
        responses, .cancel() to stop."""
        pb = self.pb.health_v1 if api == "v1" else self.pb.health
        fn = self.channel(socket).unary_stream(
            HEALTH_WATCH_PATHS[api], request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.NodeWatchResourcesResponse.FromString)
        return fn(pb.NodeWatchResourcesRequest(), timeout=timeout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("register", "getinfo", "prepare", "unprepare", "watch"):
        p = sub.add_parser(name)
        p.add_argument("--socket", required=True)
        if name in ("prepare", "unprepare"):
            p.add_argument("--api", choices=sorted(DRA), default="v1")
            p.add_argument("--timeout", type=float, default=PREPARE_TIMEOUT)
            p.add_argument("claims", nargs="+", metavar="NS/NAME/UID")
        if name == "watch":
            p.add_argument("--count", type=int, default=0, help="stop after N responses")
            p.add_argument("--timeout", type=float, default=None)
    a = ap.parse_args(argv)

    with KubeletClient() as k:
        try:
            if a.cmd == "getinfo":
                print(json.dumps(to_dict(k.get_info(a.socket))))
            elif a.cmd == "register":
                r = k.register(a.socket)
                print(json.dumps({"name": r.name, "endpoint": r.endpoint, "api": r.api,
                                  "supported_versions": list(r.info.supported_versions)}))
            elif a.cmd in ("prepare", "unprepare"):
                fn = k.prepare if a.cmd == "prepare" else k.unprepare
                print(json.dumps(to_dict(fn(a.socket, a.claims, api=a.api, timeout=a.timeout))))
            else:
                stream = k.watch_resources(a.socket, timeout=a.timeout)
                n = 0
                for resp in stream:
                    print(json.dumps(to_dict(resp)), flush=True)
                    n += 1
                    if a.count and n >= a.count:
                        stream.cancel()
                        break
        except grpc.RpcError as e:
            print("error: %s: %s" % (e.code().name, e.details()), file=sys.stderr)
            return 1
        except KubeletError as e:
            print("error: %s" % e, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

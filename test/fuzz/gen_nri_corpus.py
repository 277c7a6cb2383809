#!/usr/bin/python3
"""Writes the seed corpora of test/fuzz/ttrpc_fuzz.c and nri_msg_fuzz.c.

    /usr/bin/python3 test/fuzz/gen_nri_corpus.py     (from the project root)

Seeds are real exchanges (wire-protocols.md appendix A.1) and messages built
with our own .proto files, plus the malformed inputs the unit tests cover.
Input formats are described at the top of each fuzz target."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "sim"))
from nrisim import api, tt, SVC_PLUGIN  # noqa: E402


def frame(conn, payload):
    return struct.pack(">II", conn, len(payload)) + payload


def msg(stream, mtype, body, flags=0, length=None):
    return struct.pack(">IIBB", len(body) if length is None else length, stream, mtype,
                       flags) + body


def req(method, payload=b"", svc=SVC_PLUGIN):
    return tt.Request(service=svc, method=method, payload=payload,
                      timeout_nano=2000000000).SerializeToString()


def resp(payload=b"", code=0, message=""):
    r = tt.Response(payload=payload)
    if code:
        r.status.code, r.status.message = code, message
    return r.SerializeToString()


def pod(i=1):
    p = api.PodSandbox(id=f"sb{i}", name=f"pod{i}", uid=f"uid-{i}", namespace="default")
    p.linux_.cgroup_parent = f"/kubepods/pod{i}"
    p.labels["app"] = "x"
    return p


def ctr(i=1, pin="1", sb=1):
    c = api.Container(id=f"c{i}", pod_sandbox_id=f"sb{sb}", name=f"app{i}",
                      state=api.CONTAINER_RUNNING, env=["HOME=/", f"PIN={pin}"], pid=100 + i)
    c.linux_.cgroups_path = f"/kubepods/pod{sb}/c{i}"
    c.linux_.resources.cpu.cpus = "0-3"
    c.linux_.resources.cpu.mems = "0"
    c.annotations["a"] = "b"
    return c


def ttrpc_corpus():
    golden_configure = bytes.fromhex(
        "000000010000005f" "0000005500000001" "0100"
        "0a1b" + "nri.pkg.api.v1alpha1.Plugin".encode().hex()
        + "1209" + b"Configure".hex()
        + "1a25" + "1210" + b"nri-runtime-peer".hex() + "1a0b" + b"v0.8.0-peer".hex()
        + "208827" + "28d00f" + "20b6a4d4b907")
    big = req("Synchronize", b"\x0a" + b"\x00" * 9000)
    big_msg = msg(7, 1, big)
    seeds = {
        "configure-golden": b"\xff" + golden_configure,
        "configure-bytewise": b"\x00" + golden_configure,
        "register-reply": b"\x10" + frame(2, msg(1, 2, b"")),
        "coalesced": b"\xff" + frame(1, msg(1, 1, req("Echo", b"abc")))
        + frame(2, msg(3, 2, resp(b"ok"))) + frame(1, msg(3, 1, req("Nope"))),
        "split-4096": b"\x80" + frame(1, big_msg[:4096]) + frame(2, msg(1, 2, b""))
        + frame(1, big_msg[4096:]),
        "status-error": b"\x20" + frame(2, msg(5, 2, resp(code=12, message="method X"))),
        "status-ok-explicit": b"\x20" + frame(2, msg(3, 2, resp(b"p", code=0))),
        "shutdown-by-handler": b"\xff" + frame(1, msg(1, 1, req("abcd", b"123456789"))),
        "bad-conn": b"\x07" + frame(9, b"xyz"),
        "oversize-frame": b"\x07" + struct.pack(">II", 1, 0xFFFFFFFF),
        "oversize-msg": b"\x07" + frame(1, msg(1, 1, b"", length=(4 << 20) + 1)),
        "even-stream": b"\x07" + frame(1, msg(2, 1, req("A"))),
        "reused-stream": b"\x30" + frame(1, msg(5, 1, req("A"))) + frame(1, msg(5, 1, req("A"))),
        "data-type": b"\x07" + frame(1, msg(1, 3, b"x")),
        "streaming-flag": b"\x07" + frame(1, msg(1, 1, req("A"), flags=2)),
        "undecodable": b"\x07" + frame(1, msg(1, 1, b"\x0a\x7f")),
        "response-no-call": b"\x07" + frame(2, msg(9, 2, b"")),
        "truncated": b"\x03" + frame(1, msg(1, 1, req("A", b"hello")))[:-3],
        "empty-frames": b"\x01" + frame(1, b"") + frame(2, b"") + frame(2, msg(1, 2, b"")),
    }
    return seeds


def rec(kind, payload):
    return struct.pack("<BH", kind, len(payload)) + payload


M = {m: i for i, m in enumerate([
    "Configure", "Synchronize", "CreateContainer", "UpdateContainer", "StopContainer",
    "RemoveContainer", "PostCreateContainer", "StartContainer", "StateChange", "Shutdown",
    "RunPodSandbox", "NoSuchMethod"])}
PUSH_REPLY, PUSH_ERROR = 0xfe, 0xff


def nri_corpus():
    s = lambda m: m.SerializeToString()  # noqa: E731
    cfg = s(api.ConfigureRequest(runtime_name="containerd", runtime_version="2.1",
                                 registration_timeout=5000, request_timeout=2000))
    sync = s(api.SynchronizeRequest(pods=[pod(1), pod(2)],
                                    containers=[ctr(1, "1"), ctr(2, "0-1", 2), ctr(3, "", 9)]))
    part = lambda i, more: s(api.SynchronizeRequest(  # noqa: E731
        pods=[pod(i)], containers=[ctr(i, str(i % 2), i)], more=more))
    create = s(api.ContainerRequest(pod=pod(), container=ctr(7, "2-3")))
    create_bad = s(api.ContainerRequest(pod=pod(), container=ctr(7, "3-1")))
    ures = api.LinuxResources()
    ures.cpu.cpus = "5"
    update = s(api.UpdateContainerRequest(pod=pod(), container=ctr(), linux_resources=ures))
    plain = s(api.ContainerRequest(pod=pod(), container=ctr()))
    sc = s(api.StateChangeEvent(event=api.START_CONTAINER, pod=pod(), container=ctr()))
    failed = s(api.UpdateContainersResponse(failed=[api.ContainerUpdate(container_id="c1")]))
    return {
        "setup": rec(M["Configure"], cfg) + rec(M["Synchronize"], sync),
        "sync-multi": rec(M["Configure"], cfg) + rec(M["Synchronize"], part(1, True))
        + rec(M["Synchronize"], part(2, True)) + rec(M["Synchronize"], part(3, False)),
        "create": rec(M["CreateContainer"], create),
        "create-bad-pin": rec(M["CreateContainer"], create_bad),
        "create-no-container": rec(M["CreateContainer"], s(api.ContainerRequest(pod=pod()))),
        "create-garbage": rec(M["CreateContainer"], b"\x12\x40\x01"),
        "update": rec(M["UpdateContainer"], update),
        "stop-remove": rec(M["StopContainer"], plain) + rec(M["RemoveContainer"], plain),
        "notify": rec(M["PostCreateContainer"], plain) + rec(M["StartContainer"], plain)
        + rec(M["StateChange"], sc),
        "unimplemented": rec(M["RunPodSandbox"], s(api.PodSandboxRequest(pod=pod())))
        + rec(M["NoSuchMethod"], b""),
        "shutdown": rec(M["Shutdown"], b""),
        "push-failed": rec(PUSH_REPLY, failed),
        "push-error": rec(PUSH_ERROR, b""),
        "push-garbage": rec(PUSH_REPLY, b"\x0a\x05\x0a"),
        "everything": b"".join(rec(k, v) for k, v in [
            (M["Configure"], cfg), (M["Synchronize"], sync), (M["CreateContainer"], create),
            (M["UpdateContainer"], update), (M["StopContainer"], plain),
            (M["RemoveContainer"], plain), (PUSH_REPLY, failed)]),
    }


def write(name, seeds):
    d = os.path.join(ROOT, "test", "fuzz", "corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in seeds.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
    print(f"{d}: {len(seeds)} seeds")


if __name__ == "__main__":
    write("ttrpc", ttrpc_corpus())
    write("nri_msg", nri_corpus())

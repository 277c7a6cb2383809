"""NRI protocol end to end: user/nri/nri.c (in test/nri_echo_plugin) against the
strict runtime simulator test/sim/nrisim.py.

Run from the project root: B=build /usr/bin/python3 -m pytest test/integration
(B selects the build flavour whose nri_echo_plugin is used).
"""
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "sim"))
import nrisim  # noqa: E402
from nrisim import api, tt  # noqa: E402

B = os.environ.get("B", "build")
PLUGIN = os.path.join(ROOT, B, "test", "nri_echo_plugin")


class Plugin:
    """The echo plugin process and its logfmt stderr."""

    def __init__(self, sock, *args, name=None, idx=None):
        fd, self.log_path = tempfile.mkstemp(prefix="nri-echo-", suffix=".log")
        os.close(fd)
        argv = [PLUGIN, "--nri-socket", sock, "--backoff-min-ms", "50",
                "--backoff-max-ms", "400", *args]
        if name:
            argv += ["--name", name]
        if idx:
            argv += ["--idx", idx]
        self.expect_rc = 0
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "w"), cwd=ROOT)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def lines(self, event):
        return [l for l in self.log().splitlines() if f" event={event}" in l]

    def wait_log(self, event, count=1, timeout=5.0, match=None):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = [l for l in self.lines(event) if match is None or re.search(match, l)]
            if len(got) >= count:
                return got
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"no {count}x event={event} (match={match}); exit="
                             f"{self.proc.poll()}; log:\n{self.log()[-3000:]}")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM; the plugin must exit 0 (a SAN build also fails on leaks)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("plugin ignored SIGTERM")
        rc = self.proc.returncode
        assert rc == self.expect_rc, f"plugin exit {rc}; log:\n{self.log()[-3000:]}"
        os.unlink(self.log_path)


@pytest.fixture
def sockdir():
    d = tempfile.mkdtemp(prefix="nri-", dir="/tmp")  # short: sun_path is 108 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sock(sockdir):
    return os.path.join(sockdir, "nri.sock")


@pytest.fixture
def make_runtime(sock):
    made = []

    def make(**kw):
        rt = nrisim.Runtime(kw.pop("socket_path", sock), **kw)
        made.append(rt)
        return rt
    yield make
    for rt in made:
        rt.close()


@pytest.fixture
def make_plugin(sock):
    if not os.access(PLUGIN, os.X_OK):
        pytest.skip(f"{PLUGIN} not built (make {B}/test/nri_echo_plugin)")
    made = []

    def make(*args, **kw):
        p = Plugin(kw.pop("socket", sock), *args, **kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.stop()


@pytest.fixture
def ready(make_runtime, make_plugin):
    """A runtime and a plugin that registered and synchronized."""
    rt = make_runtime().start()
    p = make_plugin()
    conn = rt.wait_plugin(5)
    return rt, p, conn


# ---- registration and setup ------------------------------------------------------------------

def test_registers_as_dra_cpu_00_within_5s(make_runtime, make_plugin):
    rt = make_runtime(registration_timeout=5.0).start()
    t0 = time.monotonic()
    make_plugin()
    conn = rt.wait_plugin(5)
    assert time.monotonic() - t0 < 5
    assert (conn.name, conn.idx) == ("dra.cpu", "00")
    assert conn.events == 0x608  # CreateContainer, StopContainer, RemoveContainer
    assert not conn.closed.is_set()


def test_serves_configure_before_the_register_reply(make_runtime, make_plugin):
    rt = make_runtime(configure_before_register_reply=True).start()
    p = make_plugin()
    conn = rt.wait_plugin(5)
    assert conn.events == 0x608
    log = p.log()
    assert log.index("event=nri_configured") < log.index("event=nri_registered")


def test_subscribes_what_it_handles(make_runtime, make_plugin):
    rt = make_runtime().start()
    make_plugin("--with-start", "--with-update")
    conn = rt.wait_plugin(5)
    # + PostCreate (5), Start (6), Update (8)
    assert conn.events == 0x608 | 0x10 | 0x20 | 0x80


def test_refuses_to_start_with_a_name_the_runtime_would_refuse(make_plugin, sock):
    for kw in ({"name": "dra cpu"}, {"idx": "7"}, {"idx": "000"}):
        p = make_plugin(**kw)
        p.expect_rc = 2
        assert p.proc.wait(5) == 2, kw
        assert "event=nri_new_failed" in p.log()


# ---- Synchronize --------------------------------------------------------------------------------

def test_synchronize_multi_part_repins_existing_containers(make_runtime, make_plugin):
    rt = make_runtime(sync_parts=3).start()
    pod = rt.add_pod("pre")
    pinned = [rt.create_container(pod, f"p{i}", env={"PIN": str(i % 2)}) for i in range(4)]
    plain = rt.create_container(pod, "plain", env={"X": "1"})
    p = make_plugin()
    conn = rt.wait_plugin(5)
    assert sorted(u.container_id for u in conn.sync_updates) == sorted(c.id for c in pinned)
    for c in pinned:
        assert (c.id, c.cpus, "00-dra.cpu") in rt.applied
    assert plain.cpus == ""
    line = p.wait_log("sync")[0]
    assert "pods=1 containers=5 pinned=4" in line
    assert "parts=3" in p.wait_log("nri_synchronized")[0]
    assert len(p.lines("sync")) == 1  # one handler call for all parts


def test_synchronize_over_4mib_is_split_and_reassembled(make_runtime, make_plugin):
    rt = make_runtime(request_timeout=10.0).start()
    pod = rt.add_pod("big")
    blob = "B" * 60000
    ctrs = [rt.create_container(pod, f"c{i}", env={"PIN": "0", "BLOB": blob}, start=False)
            for i in range(90)]  # ~5.4 MB: two parts, each a frame of 4096 + a huge one
    p = make_plugin()
    conn = rt.wait_plugin(15)
    assert len(conn.sync_updates) == len(ctrs)  # a response well over 4096 bytes, too
    assert "parts=2" in p.wait_log("nri_synchronized")[0]


# ---- container events ------------------------------------------------------------------------

def test_create_container_adjustment_is_applied(ready):
    rt, p, conn = ready
    pod = rt.add_pod("web")
    pinned = rt.create_container(pod, "app", env={"PIN": "1"})
    assert pinned.cpus == "1"
    assert (pinned.id, "1", "00-dra.cpu") in rt.applied
    line = p.wait_log("create", match="container=app")[0]
    assert f"uid={pod.uid}" in line and f"id={pinned.id}" in line
    assert f"cgroup=/kubepods/pod{pod.uid}/{pinned.id}" in line
    free = rt.create_container(pod, "sidecar", env={"OTHER": "x"}, cpus="0-1")
    assert free.cpus == "0-1"  # no adjustment: unchanged


def test_create_container_error_fails_the_creation(ready):
    rt, p, conn = ready
    pod = rt.add_pod("web")
    with pytest.raises(nrisim.CreateContainerError, match="quota exceeded here"):
        rt.create_container(pod, "bad", env={"FAIL": "quota exceeded here"})
    assert not any(c.name == "bad" for c in rt.containers.values())
    assert not conn.closed.is_set()  # an error reply, not a broken connection
    ok = rt.create_container(pod, "good", env={"PIN": "0"})
    assert ok.cpus == "0"


def test_create_container_updates_other_containers(ready):
    rt, p, conn = ready
    pod = rt.add_pod("web")
    shared = rt.create_container(pod, "shared", cpus="0-1")
    rt.create_container(pod, "excl", env={"PIN": "1", "UPDATE": f"{shared.id}:0"})
    assert shared.cpus == "0"


def test_stop_and_remove_reach_the_plugin(ready):
    rt, p, conn = ready
    pod = rt.add_pod("web")
    c = rt.create_container(pod, "app", env={"PIN": "1"})
    rt.stop_container(c)
    rt.remove_container(c)
    p.wait_log("stop", match="container=app")
    p.wait_log("remove", match="container=app")


def test_start_and_post_create_when_subscribed(make_runtime, make_plugin):
    rt = make_runtime().start()
    p = make_plugin("--with-start")
    rt.wait_plugin(5)
    rt.create_container(rt.add_pod("web"), "app")
    p.wait_log("post_create", match="container=app")
    p.wait_log("start", match="container=app")


def test_update_container_reaches_the_plugin_when_subscribed(make_runtime, make_plugin):
    rt = make_runtime().start()
    p = make_plugin("--with-update")
    rt.wait_plugin(5)
    c = rt.create_container(rt.add_pod("web"), "app")
    rt.update_container(c, "1")
    p.wait_log("update", match="container=app cpus=1")
    assert c.cpus == "1"


def test_unknown_and_unsubscribed_methods_answer_unimplemented(ready):
    rt, p, conn = ready
    for method in ("FrobnicateContainer", "RunPodSandbox", "StartContainer",
                   "ValidateContainerAdjustment", "UpdatePodSandbox"):
        with pytest.raises(nrisim.PluginError) as e:
            conn.call(method, api.Empty(), api.Empty)
        assert e.value.code == nrisim.UNIMPLEMENTED, method
    assert e.value.message == "method UpdatePodSandbox"
    assert not conn.closed.is_set()
    assert conn in rt.plugins()
    # and the connection still works
    assert rt.create_container(rt.add_pod("x"), "y", env={"PIN": "1"}).cpus == "1"


def test_state_change_fallback_is_served(make_runtime, make_plugin):
    rt = make_runtime().start()
    p = make_plugin("--with-start")
    conn = rt.wait_plugin(5)
    pod = rt.add_pod("web")
    ctr = api.Container(id="c-sc", pod_sandbox_id=pod.id, name="sc")
    conn.call("StateChange", api.StateChangeEvent(event=nrisim.EV_START, pod=pod,
                                                   container=ctr), api.Empty)
    p.wait_log("start", match="container=sc")


# ---- UpdateContainers --------------------------------------------------------------------------

def test_update_containers_push(make_runtime, make_plugin, sockdir):
    rt = make_runtime().start()
    push = os.path.join(sockdir, "push")
    p = make_plugin("--push-file", push)
    rt.wait_plugin(5)
    pod = rt.add_pod("web")
    a = rt.create_container(pod, "a", cpus="0-1")
    b = rt.create_container(pod, "b", cpus="0-1")
    with open(push, "w") as f:
        f.write(f"{a.id} 1\n{b.id} 0\nno-such-container 1\n")
    p.proc.send_signal(signal.SIGUSR1)
    assert "n=3 r=0" in p.wait_log("push")[0]
    line = p.wait_log("push_done")[0]
    assert "r=0 failed=1 first_failed=no-such-container" in line
    assert (a.cpus, b.cpus) == ("1", "0")
    assert (a.id, "1", "00-dra.cpu") in rt.applied


def test_update_containers_push_while_disconnected_is_refused(make_runtime, make_plugin,
                                                              sockdir):
    push = os.path.join(sockdir, "push")
    with open(push, "w") as f:
        f.write("abc 1\n")
    p = make_plugin("--push-file", push)
    p.wait_log("nri_connect_failed")
    p.proc.send_signal(signal.SIGUSR1)
    assert f"r=-{107}" in p.wait_log("push")[0]  # -ENOTCONN: Synchronize will catch up


# ---- reconnection ------------------------------------------------------------------------------

def test_runtime_restart_plugin_reconnects_and_resyncs(ready):
    rt, p, conn = ready
    pod = rt.add_pod("web")
    c = rt.create_container(pod, "app", env={"PIN": "1"})
    rt.stop()
    p.wait_log("disconnected")
    c.msg.linux_.resources.cpu.cpus = "0-1"  # pretend the pinning was lost meanwhile
    rt.start()
    conn2 = rt.wait_plugin(5, after=conn.serial)
    assert conn2.ready.is_set()
    assert c.cpus == "1"  # Synchronize re-pinned it
    p.wait_log("connected", count=2)
    assert p.alive()


def test_socket_appearing_later_is_picked_up(make_runtime, make_plugin):
    p = make_plugin("--verbose")
    # Several attempts while the socket is absent (the repeats log at debug).
    tries = p.wait_log("nri_connect_failed", count=4)
    rt = make_runtime().start()
    rt.wait_plugin(5)
    # retried quietly: one warning for a run of identical failures
    assert [l for l in tries if "level=warn" in l] == tries[:1]
    assert len([l for l in p.lines("nri_connect_failed") if "level=warn" in l]) == 1


def test_repeated_restarts(ready):
    rt, p, conn = ready
    last = conn.serial
    for _ in range(5):
        rt.restart()
        last = rt.wait_plugin(5, after=last).serial
    assert p.alive()


# ---- bad runtime data: the plugin drops the connection, survives, reconnects --------------------

def frame(conn, payload):
    return struct.pack(">II", conn, len(payload)) + payload


def ttrpc_msg(stream, mtype, body, flags=0, length=None):
    return struct.pack(">IIBB", len(body) if length is None else length, stream, mtype,
                       flags) + body


def request(method, payload=b"", svc=nrisim.SVC_PLUGIN):
    return tt.Request(service=svc, method=method, payload=payload).SerializeToString()


# An even or reused request stream id is not garbage: it is answered
# INVALID_ARGUMENT and the connection stays (test_probes.py).
GARBAGE = {
    "unknown_conn_id": frame(7, b"abcd"),
    "conn_id_zero": frame(0, b""),
    "huge_mux_frame": struct.pack(">II", 1, 0xFFFFFFF0),
    "huge_ttrpc_length": frame(1, ttrpc_msg(101, 1, b"", length=(4 << 20) + 1)),
    "data_message": frame(1, ttrpc_msg(101, 3, b"x")),
    "streaming_request": frame(1, ttrpc_msg(101, 1, request("Configure"), flags=2)),
    "undecodable_request": frame(1, ttrpc_msg(101, 1, b"\x0a\x7f")),
    "undecodable_create": frame(1, ttrpc_msg(101, 1, request("CreateContainer",
                                                             b"\x12\x40\x01"))),
    "response_for_no_call": frame(2, ttrpc_msg(99, 2, b"")),
    "request_on_client_conn": frame(2, ttrpc_msg(101, 1, request("X"))),
    "random_bytes": bytes(range(7, 250, 3)) * 3,
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_garbage_drops_the_connection_and_plugin_reconnects(ready, name):
    rt, p, conn = ready
    conn.send_raw(GARBAGE[name])
    conn.closed.wait(5)
    assert conn.closed_reason in ("plugin closed the connection",) or \
        conn.closed_reason.startswith("read failed"), conn.closed_reason
    conn2 = rt.wait_plugin(5, after=conn.serial)
    assert conn2.ready.is_set()
    assert p.alive()
    line = p.lines("nri_protocol_error")[-1]
    assert "action=reconnecting" in line
    # and the new connection works
    assert rt.create_container(rt.add_pod("x"), "y", env={"PIN": "1"}).cpus == "1"


def test_truncated_frame_then_runtime_exit(ready):
    rt, p, conn = ready
    # A frame in two writes: the plugin waits for the rest, then answers it.
    whole = frame(1, ttrpc_msg(101, 1, request("Configure")))
    slot = [threading.Event(), None]
    with conn._lock:
        conn._pending[101] = slot
    conn.send_raw(whole[:15])
    conn.send_raw(whole[15:])
    assert slot[0].wait(5), "no answer to a frame sent in two pieces"
    assert p.alive() and not conn.closed.is_set()
    # Then the runtime goes away in the middle of the next frame.
    conn.send_raw(frame(1, ttrpc_msg(103, 1, request("Configure")))[:15])
    rt.restart()
    rt.wait_plugin(5, after=conn.serial)
    assert p.alive()


def test_frames_cut_in_seven_byte_pieces(make_runtime, make_plugin):
    rt = make_runtime(write_mode="small", sync_parts=2).start()
    pod = rt.add_pod("pre")
    rt.create_container(pod, "a", env={"PIN": "0"})
    make_plugin()
    rt.wait_plugin(5)
    assert rt.create_container(pod, "b", env={"PIN": "1"}).cpus == "1"


def test_two_plugins_setting_cpus_conflict(make_runtime, make_plugin):
    rt = make_runtime().start()
    make_plugin()
    make_plugin(name="other", idx="10")
    rt.wait_for(lambda: len(rt.plugins()) == 2)
    assert [c.idx for c in rt.plugins()] == ["00", "10"]
    with pytest.raises(nrisim.CreateContainerError, match="both tried to set cpus"):
        rt.create_container(rt.add_pod("p"), "c", env={"PIN": "1"})


# ---- real cgroups --------------------------------------------------------------------------------

@pytest.mark.skipif(not nrisim.Cgroups.available(), reason="skipped: needs root and cpuset cgroups")
def test_real_cgroup_pinning(make_runtime, make_plugin, sockdir):
    rt = make_runtime(cgroups=True).start()
    ncpu = os.cpu_count()
    last = str(ncpu - 1)
    p = make_plugin()
    rt.wait_plugin(5)
    pod = rt.add_pod("pinned")
    c = rt.create_container(pod, "app", env={"PIN": last})
    assert nrisim.cpus_allowed(c.pid) == last
    other = rt.create_container(pod, "shared")
    assert nrisim.cpus_allowed(other.pid) == (f"0-{last}" if ncpu > 1 else "0")
    # the policy moves the shared one via an update of the next creation
    rt.create_container(pod, "mover", env={"PIN": last, "UPDATE": f"{other.id}:0"})
    assert nrisim.cpus_allowed(other.pid) == "0"
    assert p.alive()


# ---- the simulator is strict -------------------------------------------------------------------

def raw_client(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def register_bytes(name="raw", idx="50", stream=1):
    body = api.RegisterPluginRequest(plugin_name=name, plugin_idx=idx).SerializeToString()
    return frame(2, ttrpc_msg(stream, 1, request("RegisterPlugin", body, nrisim.SVC_RUNTIME)))


@pytest.mark.parametrize("case,data,reason", [
    ("frame_over_4096", frame(2, b"\0" * 5000), "ENOMEM"),
    ("unknown_conn", frame(3, b"x"), "unknown mux conn id 3"),
    ("even_stream", register_bytes(stream=2), "StreamID cannot be re-used"),
    ("not_register_first",
     frame(2, ttrpc_msg(1, 1, request("UpdateContainers", b"", nrisim.SVC_RUNTIME))),
     "UpdateContainers before RegisterPlugin"),
    ("bad_index", register_bytes(idx="7"), "invalid plugin index"),
    ("bad_name", register_bytes(name="a b"), "invalid plugin name"),
    ("response_on_conn2", frame(2, ttrpc_msg(1, 2, b"")), "expected request"),
])
def test_simulator_closes_misbehaving_plugins(make_runtime, case, data, reason):
    rt = make_runtime().start()
    s = raw_client(rt.socket_path)
    conn = rt.wait_conn(5)
    s.sendall(data)
    assert conn.closed.wait(5)
    assert reason in conn.closed_reason
    s.close()


def test_simulator_enforces_registration_timeout(make_runtime):
    rt = make_runtime(registration_timeout=0.3).start()
    s = raw_client(rt.socket_path)
    conn = rt.wait_conn(5)
    assert conn.closed.wait(3)
    assert conn.closed_reason == "plugin registration timed out"
    s.close()


def test_simulator_closes_a_plugin_that_does_not_answer(make_runtime):
    rt = make_runtime(request_timeout=0.3).start()
    s = raw_client(rt.socket_path)
    s.sendall(register_bytes())
    conn = rt.wait_conn(5)
    assert conn.closed.wait(3)
    assert conn.closed_reason == "Configure timed out after 0.3s"
    s.close()

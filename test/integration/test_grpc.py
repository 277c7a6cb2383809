"""user/kubelet/grpc.c against a real gRPC stack (python3-grpcio) and against raw
sockets that misbehave, through test/grpc_echo (built by `make`; B selects
the build dir, default build). Also exercises test/sim/kubelet_client.py
against the echo server's stand-in DRA plugin.

Run: /usr/bin/python3 -m pytest test/integration  (from the project root)
"""
import concurrent.futures
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "helpers"))
sys.path.insert(0, os.path.join(ROOT, "test", "sim"))

import h2raw  # noqa: E402
import kubelet_client  # noqa: E402

B = os.path.join(ROOT, os.environ.get("B", "build"))
ECHO = os.path.join(B, "test", "grpc_echo")
SANITIZED = "san" in os.path.basename(os.path.normpath(B))
# e.g. GRPC_ECHO_WRAPPER="valgrind -q --leak-check=full --error-exitcode=9"
WRAPPER = os.environ.get("GRPC_ECHO_WRAPPER", "").split()


class Echo:
    def __init__(self, proc, sock, reg, tmp):
        self.proc, self.sock, self.reg, self.tmp = proc, sock, reg, tmp
        self.channel = grpc.insecure_channel("unix:" + sock)

    def unary(self, method, payload=b"", timeout=5.0, **kw):
        return self.channel.unary_unary("/echo.Echo/" + method)(payload, timeout=timeout, **kw)

    def stats(self):
        ch = grpc.insecure_channel("unix:" + self.sock)
        try:
            return json.loads(ch.unary_unary("/echo.Echo/Stats")(b"", timeout=5))
        finally:
            ch.close()

    def alive(self):
        return self.proc.poll() is None


def start_echo(tmp, *args, sock=None, reg=False, umask=None):
    """Starts grpc_echo; returns (proc, ready) without waiting for success."""
    if not os.path.exists(ECHO):
        pytest.fail("%s missing: run make (or make SAN=1 / CC=clang for B=...)" % ECHO)
    sock = sock or os.path.join(tmp, "echo.sock")
    cmd = WRAPPER + [ECHO, "--socket", sock] + list(args)
    if reg:
        cmd += ["--reg-socket", os.path.join(tmp, "reg.sock")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
    r, _, _ = select.select([proc.stdout], [], [], 30 if WRAPPER else 10)
    ready = bool(r) and proc.stdout.readline() == b"ready\n"
    return proc, ready


def stop(proc, timeout=10):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("grpc_echo did not exit on SIGTERM")
    err = proc.stderr.read().decode(errors="replace")
    assert "Sanitizer" not in err and "runtime error" not in err, err
    return proc.returncode, err


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="grpc-", dir="/tmp")  # short: sun_path is 108 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def echo_factory(tmp):
    started = []

    def make(*args, reg=False):
        proc, ready = start_echo(tmp, *args, reg=reg)
        started.append(proc)
        assert ready, proc.stderr.read().decode(errors="replace")
        return Echo(proc, os.path.join(tmp, "echo.sock"),
                    os.path.join(tmp, "reg.sock") if reg else None, tmp)

    yield make
    for p in started:
        rc, err = stop(p)
        assert rc == 0, err


@pytest.fixture
def echo(echo_factory):
    return echo_factory()


# ---- gRPC behaviour seen by grpcio ----------------------------------------------------------

def test_unary_echo(echo):
    assert echo.unary("Unary", b"hello") == b"hello"
    assert echo.unary("Unary", b"") == b""


def test_concurrent_calls_over_several_channels(echo):
    channels = [grpc.insecure_channel("unix:" + echo.sock) for _ in range(5)]
    try:
        futs = []
        for i in range(100):
            ch = channels[i % len(channels)]
            method = "/echo.Echo/Slow" if i % 2 else "/echo.Echo/Unary"
            payload = (b"50:%d" % i) if i % 2 else (b"u%d" % i) * 100
            futs.append((payload, ch.unary_unary(method).future(payload, timeout=10)))
        for payload, f in futs:
            assert f.result() == payload
    finally:
        for ch in channels:
            ch.close()
    st = echo.stats()
    assert st["calls_started"] >= 100
    assert st["calls_active"] == 1  # the Stats call itself


def test_unknown_method_is_unimplemented(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("Nope")
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert e.value.details() == "unknown method Nope for service echo.Echo"
    with pytest.raises(grpc.RpcError) as e:
        echo.channel.unary_unary("/no.Such/Thing")(b"", timeout=5)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert e.value.details() == "unknown service no.Such"


def test_5mib_message_is_resource_exhausted(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("Unary", b"x" * (5 << 20), timeout=20)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in e.value.details()
    assert echo.stats()["messages_too_large"] == 1
    assert echo.unary("Unary", b"still here") == b"still here"  # same channel


def test_message_near_the_limit_roundtrips(echo):
    msg = os.urandom(4 << 20)  # exactly max_message
    assert echo.unary("Unary", msg, timeout=20) == msg


def test_status_code_and_message_roundtrip(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("Fail", "9 déjà 100% vu\nline two".encode())
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert e.value.details() == "déjà 100% vu\nline two"


def test_compressed_call_is_unimplemented(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("Unary", b"y" * 1000, compression=grpc.Compression.Gzip)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_async_reply_arrives_later(echo):
    t = time.monotonic()
    assert echo.unary("Slow", b"200:abc") == b"200:abc"
    assert time.monotonic() - t >= 0.19


def test_deadline_cancels_async_call(echo):
    with pytest.raises(grpc.RpcError) as e:
        echo.unary("Slow", b"3000", timeout=0.2)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    for _ in range(50):  # the client's RST_STREAM reaches the server soon after
        if echo.stats()["cancels_seen"] >= 1:
            break
        time.sleep(0.05)
    st = echo.stats()
    assert st["cancels_seen"] == 1 and st["calls_cancelled"] == 1


def test_server_stream_then_status(echo):
    got = list(echo.channel.unary_stream("/echo.Echo/Stream")(b"5 10", timeout=5))
    assert got == [b"msg %d" % i for i in range(5)]


def test_client_cancel_of_stream_is_detected(echo):
    it = echo.channel.unary_stream("/echo.Echo/Stream")(b"0 10", timeout=10)
    for i, m in enumerate(it):
        assert m == b"msg %d" % i
        if i == 3:
            it.cancel()
            break
    for _ in range(50):
        if echo.stats()["cancels_seen"] == 1:
            break
        time.sleep(0.05)
    assert echo.stats()["cancels_seen"] == 1
    assert echo.stats()["calls_active"] == 1


# ---- bad peers on raw sockets --------------------------------------------------------------

def test_garbage_bytes_close_the_connection(echo):
    s = h2raw.connect(echo.sock)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(100))
    assert h2raw.wait_closed(s)
    s.close()
    assert echo.unary("Unary", b"ok") == b"ok"
    assert echo.stats()["conns_protocol_error"] >= 1


def test_bad_frame_after_preface_gets_goaway(echo):
    s = h2raw.connect(echo.sock)
    s.sendall(h2raw.client_start() + h2raw.frame(h2raw.DATA, 0, 0, b"x"))  # DATA on stream 0
    frames, eof = h2raw.read_frames(s, 3)
    s.close()
    assert frames[0][0] == h2raw.SETTINGS  # the server speaks first
    goaway = [f for f in frames if f[0] == h2raw.GOAWAY]
    assert goaway and int.from_bytes(goaway[0][3][4:8], "big") == 1  # PROTOCOL_ERROR
    assert eof
    assert echo.unary("Unary", b"ok") == b"ok"


def test_half_written_frame_then_disconnect(echo):
    for cut in (3, 10, 30):
        s = h2raw.connect(echo.sock)
        req = h2raw.grpc_request(1, "/echo.Echo/Unary", b"abc")
        s.sendall(h2raw.client_start() + req[:cut])
        time.sleep(0.05)
        s.close()
    assert echo.unary("Unary", b"ok") == b"ok"
    for _ in range(50):
        if echo.stats()["conns_active"] == 1:
            break
        time.sleep(0.05)
    assert echo.stats()["conns_active"] == 1  # only the stats connection


def test_raw_unary_call_works(echo):
    """Our frame builder is right (the fuzz seeds use it)."""
    s = h2raw.connect(echo.sock)
    s.sendall(h2raw.client_start() + h2raw.grpc_request(1, "/echo.Echo/Unary", b"raw"))
    frames, _ = h2raw.read_frames(
        s, 3, until=lambda f: f[0] == h2raw.HEADERS and f[1] & h2raw.END_STREAM)
    s.close()
    data = b"".join(f[3] for f in frames if f[0] == h2raw.DATA and f[2] == 1)
    assert data == h2raw.grpc_message(b"raw")


def test_handshake_timeout_closes_silent_connection(echo_factory):
    e = echo_factory("--handshake-ms", "300")
    s = h2raw.connect(e.sock)
    t = time.monotonic()
    assert h2raw.wait_closed(s, 5)
    assert 0.25 <= time.monotonic() - t < 3
    s.close()
    assert e.stats()["conns_timed_out"] == 1


def goaway_code(frames):
    g = [f for f in frames if f[0] == h2raw.GOAWAY]
    return int.from_bytes(g[0][3][4:8], "big") if g else None


def idle_peer(path, settings=True):
    """A peer that connects (and says its SETTINGS) and asks for nothing."""
    s = h2raw.connect(path)
    if settings:
        s.sendall(h2raw.client_start())
        h2raw.read_frames(s, 2, until=lambda f: f[0] == h2raw.SETTINGS)
    return s


def test_no_request_within_the_first_request_timeout_gets_goaway(echo_factory):
    """Handshaken, then nothing but PINGs, on a crowded server (a quarter of
    the cap of 4): closed when the first-request timeout (counted from the
    accept) runs out, not an idle timeout later; what it sends meanwhile buys
    no time."""
    e = echo_factory("--max-conns", "4", "--first-request-ms", "400", "--idle-ms", "60000")
    s = idle_peer(e.sock)
    t = time.monotonic()
    frames, eof = [], False
    while not eof and time.monotonic() - t < 5:
        try:
            s.sendall(h2raw.frame(h2raw.PING, 0, 0, b"8 bytes!"))
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed between two PINGs: the read below sees the EOF
        got, eof = h2raw.read_frames(s, 0.1)
        frames += got
    s.close()
    assert eof
    assert 0.3 <= time.monotonic() - t < 3
    assert goaway_code(frames) == 0  # NO_ERROR
    assert e.stats()["conns_timed_out"] == 1


def test_uncrowded_a_client_ahead_of_its_first_call_is_only_idle(echo_factory):
    """The kubelet connects ahead of its first call. Alone (below a quarter of
    the cap of 64) such a connection is not closed at the first-request
    timeout but after the idle timeout; once 16 or more connections are open,
    it and every other silent one past the first-request timeout go at once."""
    e = echo_factory("--first-request-ms", "300", "--idle-ms", "2500")
    early = idle_peer(e.sock)
    t = time.monotonic()
    assert not h2raw.wait_closed(early, 1.0)  # well past 300 ms
    crowd = [idle_peer(e.sock) for _ in range(15)]  # 16 open: crowded
    assert h2raw.wait_closed(early, 1.0)
    assert time.monotonic() - t < 2.0  # not the idle timeout (2.5 s)
    early.close()
    # 15 left, not crowded: past their 300 ms they stay, merely idle
    assert not any(h2raw.wait_closed(s, 0.05) for s in crowd)
    one_more = idle_peer(e.sock)  # 16 again: all those past 300 ms go at once
    t = time.monotonic()
    for s in crowd:
        assert h2raw.wait_closed(s, 1.0)
        s.close()
    assert time.monotonic() - t < 1.0
    one_more.close()
    # alone again: a quiet client gets the idle timeout
    late = idle_peer(e.sock)
    t = time.monotonic()
    assert h2raw.wait_closed(late, 5)
    assert 2.0 <= time.monotonic() - t < 4.5
    late.close()


def test_after_a_request_the_idle_timeout_applies(echo_factory):
    e = echo_factory("--first-request-ms", "300", "--idle-ms", "1500")
    s = h2raw.connect(e.sock)
    s.sendall(h2raw.client_start() + h2raw.grpc_request(1, "/echo.Echo/Unary", b"hi"))
    t = time.monotonic()
    frames, eof = h2raw.read_frames(s, 5)
    s.close()
    assert eof and goaway_code(frames) == 0
    assert 1.3 <= time.monotonic() - t < 4  # the idle timeout, not the first-request one
    assert any(f[0] == h2raw.DATA and f[2] == 1 for f in frames)  # answered first


def test_active_stream_keeps_idle_connection(echo_factory):
    e = echo_factory("--idle-ms", "200")
    it = e.channel.unary_stream("/echo.Echo/Stream")(b"8 100", timeout=10)
    assert len(list(it)) == 8  # 0.8 s, four idle periods, one quiet client


def test_idle_connections_yield_to_a_new_one_oldest_first(echo_factory):
    """At the cap, a new connection closes the one longest idle instead of
    being refused: a crowd of idle peers cannot keep the kubelet out."""
    e = echo_factory("--max-conns", "4", "--first-request-ms", "60000")
    held = []
    for _ in range(4):
        held.append(idle_peer(e.sock))
        time.sleep(0.01)  # distinct input times: the first is the idlest
    assert e.unary("Unary", b"ok") == b"ok"  # the client's connection made room
    assert h2raw.wait_closed(held[0], 3)
    for s in held[1:]:
        assert not h2raw.wait_closed(s, 0.05)
    # a peer that talks is not the idlest any more: the next to go is held[2]
    held[1].sendall(h2raw.frame(h2raw.PING, 0, 0, b"8 bytes!"))
    h2raw.read_frames(held[1], 1, until=lambda f: f[0] == h2raw.PING)
    extra = idle_peer(e.sock)
    assert h2raw.wait_closed(held[2], 3)
    assert not h2raw.wait_closed(held[1], 0.05) and not h2raw.wait_closed(extra, 0.05)
    for s in held + [extra]:
        s.close()
    st = e.stats()
    assert st["conns_evicted"] >= 2 and st["conns_rejected"] == 0


def test_max_connections_refuses_extra_only_when_all_are_busy(echo_factory):
    e = echo_factory("--max-conns", "3")
    held = []
    for i in range(3):  # each waits for a reply a handler holds: not idle
        s = h2raw.connect(e.sock)
        s.sendall(h2raw.client_start() + h2raw.grpc_request(1, "/echo.Echo/Slow", b"3000"))
        h2raw.read_frames(s, 1, until=lambda f: f[0] == h2raw.SETTINGS)
        held.append(s)
    time.sleep(0.2)
    extra = h2raw.connect(e.sock)
    assert h2raw.wait_closed(extra, 3)
    extra.close()
    for s in held:
        assert not h2raw.wait_closed(s, 0.05)
        s.close()
    time.sleep(0.1)
    assert e.unary("Unary", b"ok") == b"ok"
    st = e.stats()
    assert st["conns_rejected"] >= 1 and st["conns_evicted"] == 0


def test_hundreds_of_idle_peers_do_not_lock_out_a_client(echo_factory):
    """300 idle peers against the default cap of 64, while a client keeps
    calling: every call is answered; the peers beyond the cap are closed,
    oldest first, and the rest when the first-request timeout runs out
    (down to the quarter of the cap below which silence is mere idleness)."""
    e = echo_factory("--first-request-ms", "2000")
    peers = []
    for i in range(300):
        peers.append(idle_peer(e.sock, settings=i % 2 == 0))  # half never handshake
        if i % 50 == 49:
            ch = grpc.insecure_channel("unix:" + e.sock)  # a new connection each time
            try:
                assert ch.unary_unary("/echo.Echo/Unary")(b"%d" % i, timeout=5) == b"%d" % i
            finally:
                ch.close()
    closed = sum(h2raw.wait_closed(s, 0.01) for s in peers)
    assert closed >= 300 - 64
    # the rest go once their first-request timeout (2 s) runs out
    deadline = time.monotonic() + 6
    while True:
        left = [s for s in peers if not h2raw.wait_closed(s, 0.01)]
        if len(left) < 64 // 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(left) < 64 // 4, len(left)
    for s in peers:
        s.close()
    st = e.stats()
    assert st["conns_evicted"] >= 300 - 64 and st["conns_rejected"] == 0


def test_peer_that_stops_reading_is_bounded_and_dropped(echo_factory):
    e = echo_factory("--write-ms", "500")
    s = h2raw.connect(e.sock)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    win = (1 << 31) - 1  # the largest windows: only the socket holds us back
    out = h2raw.client_start(initial_window_size=win)
    out += h2raw.frame(h2raw.WINDOW_UPDATE, 0, 0, (win - 65535).to_bytes(4, "big"))
    for i in range(20):  # 20 x 3 MiB replies asked for, none read
        out += h2raw.grpc_request(2 * i + 1, "/echo.Echo/Big", b"%d" % (3 << 20))
    s.sendall(out)
    time.sleep(0.2)
    assert e.unary("Unary", b"meanwhile") == b"meanwhile"
    if not SANITIZED and not WRAPPER:  # ASan's quarantine makes RSS meaningless
        rss = int([ln for ln in open("/proc/%d/status" % e.proc.pid)
                   if ln.startswith("VmRSS")][0].split()[1])
        assert rss < 64 * 1024, "RSS %d KiB" % rss
    for _ in range(40):
        if e.stats()["conns_timed_out"] >= 1:
            break
        time.sleep(0.1)
    st = e.stats()
    assert st["conns_timed_out"] >= 1
    assert st["replies_dropped"] >= 10  # 16 MiB queue cap: the rest were refused
    s.close()


# ---- sockets --------------------------------------------------------------------------------

def test_stale_socket_file_is_replaced(tmp):
    path = os.path.join(tmp, "echo.sock")
    old = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old.bind(path)
    old.close()  # the file stays behind, nobody listens
    proc, ready = start_echo(tmp)
    try:
        assert ready
        ch = grpc.insecure_channel("unix:" + path)
        assert ch.unary_unary("/echo.Echo/Unary")(b"new", timeout=5) == b"new"
        ch.close()
    finally:
        assert stop(proc)[0] == 0
    assert not os.path.exists(path)  # removed on exit


def test_other_file_at_socket_path_is_left_alone(tmp):
    path = os.path.join(tmp, "echo.sock")
    with open(path, "w") as f:
        f.write("precious")
    proc, ready = start_echo(tmp)
    rc, err = stop(proc)
    assert not ready and rc == 1
    assert "listen_failed" in err and "File exists" in err
    assert open(path).read() == "precious"


@pytest.mark.parametrize("mode", [0o600, 0o660, 0o666])
def test_socket_has_the_requested_mode(tmp, mode):
    proc, ready = start_echo(tmp, "--mode", "%o" % mode, umask=0o077)
    try:
        assert ready
        assert os.stat(os.path.join(tmp, "echo.sock")).st_mode & 0o777 == mode
    finally:
        assert stop(proc)[0] == 0


def test_socket_path_longer_than_sun_path_is_refused(tmp):
    d = os.path.join(tmp, "d" * 90)
    os.mkdir(d)
    path = os.path.join(d, "echo-socket.sock")
    assert len(path) > 107
    proc, ready = start_echo(tmp, sock=path)
    rc, err = stop(proc)
    assert not ready and rc == 1
    assert "File name too long" in err and "len=%d" % len(path) in err
    assert not os.path.exists(path)


# ---- the kubelet client against the stand-in plugin -------------------------------------------

@pytest.fixture
def plugin(echo_factory):
    return echo_factory("--health-ms", "50", reg=True)


def test_kubelet_registration_sequence(plugin):
    with kubelet_client.KubeletClient() as k:
        r = k.register(plugin.reg)
        assert (r.name, r.endpoint, r.api) == ("dra.cpu", plugin.sock, "v1")
        for _ in range(5):  # the connection monitor's GetInfo polling, one connection
            assert k.get_info(plugin.reg).type == "DRAPlugin"
    assert plugin.stats()["notify_ok"] == 1


def test_registration_socket_serves_only_registration(plugin):
    with kubelet_client.KubeletClient() as k:
        with pytest.raises(grpc.RpcError) as e:
            k.prepare(plugin.reg, [("ns", "c", "u")])
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.parametrize("api", ["v1", "v1beta1"])
def test_kubelet_prepare_and_unprepare(plugin, api):
    claims = [("default", "c1", "uid-1"), "default/c2/uid-2"]
    with kubelet_client.KubeletClient() as k:
        resp = k.prepare(plugin.sock, claims, api=api)
        k.check_prepare(claims, resp)
        dev = resp.claims["uid-1"].devices[0]
        assert (dev.pool_name, dev.device_name) == ("node", "cpudev000")
        assert list(dev.cdi_device_ids) == ["dra.k8s.io/cpu=claim-uid-1"]
        assert list(dev.request_names) == ["cpus"]
        bad = claims + [("default", "fail-x", "uid-3")]
        resp = k.prepare(plugin.sock, bad, api=api)
        with pytest.raises(kubelet_client.KubeletError, match="failed for claim default/fail-x"):
            k.check_prepare(bad, resp)
        resp = k.unprepare(plugin.sock, claims, api=api)
        k.check_unprepare(claims, resp)
        assert sorted(resp.claims) == ["uid-1", "uid-2"]


def test_kubelet_watch_resources(plugin):
    with kubelet_client.KubeletClient() as k:
        stream = k.watch_resources(plugin.sock, timeout=10)
        got = []
        for resp in stream:
            got.append(resp)
            if len(got) == 3:
                stream.cancel()
                break
        names = [d.device.device_name for d in got[0].devices]
        assert names == ["cpudev000", "cpudev001"]
        assert got[0].devices[0].health == k.pb.health.HEALTHY
    for _ in range(50):
        if plugin.stats()["cancels_seen"] == 1:
            break
        time.sleep(0.05)
    assert plugin.stats()["cancels_seen"] == 1


def test_kubelet_client_cli(plugin):
    cli = [sys.executable, os.path.join(ROOT, "test", "sim", "kubelet_client.py")]
    out = subprocess.run(cli + ["register", "--socket", plugin.reg], check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out)["api"] == "v1"
    out = subprocess.run(cli + ["prepare", "--api", "v1beta1", "--socket", plugin.sock,
                                "ns/c/u1"], check=True, capture_output=True, text=True).stdout
    assert "u1" in json.loads(out)["claims"]
    out = subprocess.run(cli + ["watch", "--count", "2", "--socket", plugin.sock], check=True,
                         capture_output=True, text=True, timeout=20).stdout
    assert len(out.splitlines()) == 2
    r = subprocess.run(cli + ["prepare", "--socket", plugin.reg, "a/b/c"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "UNIMPLEMENTED" in r.stderr

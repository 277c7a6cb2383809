"""Probes and peers that cannot be starved: /healthz keeps answering while
anyone who can reach the port floods it with idle connections, running out of
file descriptors sheds load instead of spinning, and an NRI runtime that
misuses ttrpc stream ids gets an error reply on a connection that stays up."""

import os
import resource
import socket
import time

import pytest

from driver import wait_for

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat fields 14, 15)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def log_lines(d):
    return d.log().count("\n")


def set_fd_limit(pid, n):
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (n, n))


def idle_connections(port, n):
    """n connections that never send a byte, opened without waiting: a peer
    that stops accepting leaves them in its backlog or in SYN_SENT, as a
    flood would."""
    out = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        out.append(s)
    return out


def timed_get(d, path):
    t = time.monotonic()
    code, body = d.http(path)
    return code, body, time.monotonic() - t


def closed_by_server(socks):
    """How many of socks the server has closed (EOF or reset, seen without blocking)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                n += 1
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


@pytest.fixture
def httpd_driver(make_driver):
    d = make_driver(topology=None, args=["--no-nri", "--no-bpf"]).start()
    wait_for(lambda: d.http("/healthz")[0] == 200, what="driver /healthz")
    return d


def test_idle_flood_keeps_probes_answering(httpd_driver):
    """Hundreds of idle connections, more than the driver has descriptors for:
    the oldest idle ones make room, the probe answers within the kubelet's
    default probe timeout (1 s) and the driver never holds more than its cap."""
    d = httpd_driver
    pid = d.proc.pid
    base = open_fds(pid)
    # Room for more than the connection cap, less than the flood.
    set_fd_limit(pid, base + 200)
    socks = idle_connections(d.port, 400)
    try:
        for _ in range(5):
            code, body, dt = timed_get(d, "/healthz")
            assert code == 200 and body == "ok\n", (code, body)
            assert dt < 1.0, "probe took %.2fs during the flood" % dt
        cap = d.metrics()["dra_cpu_http_connections_limit"]
        assert 0 < cap < 200
        # every flood connection accepted (the last ones may still be in
        # the backlog when the probes are answered): all but cap evicted
        m = wait_for(lambda: (lambda m: m if m['dra_cpu_http_connections_evicted_total'
                                                '{reason="limit"}'] >= 400 - cap else None)(
            d.metrics()), what="the flood accepted and evicted")
        assert m["dra_cpu_http_connections"] <= cap
        assert open_fds(pid) <= base + cap + 2
        # what was evicted was really closed, towards the peer too
        assert closed_by_server(socks) >= 400 - cap
    finally:
        for s in socks:
            s.close()


def test_fd_exhaustion_sheds_without_spinning(httpd_driver):
    """Out of descriptors (EMFILE) under a flood that goes on for a second:
    no accept loop burning a CPU, a handful of log lines, counters, probes
    answered during the flood and after it."""
    d = httpd_driver
    pid = d.proc.pid
    base = open_fds(pid)
    # Fewer descriptors than the connection cap: accept() fails before the cap bites.
    set_fd_limit(pid, base + 16)
    lines0, cpu0, t0 = log_lines(d), cpu_seconds(pid), time.monotonic()
    socks = idle_connections(d.port, 300)
    probes = 0
    try:
        # The flood goes on for a second while the kubelet probes: every
        # 50 ms a round of idle connections and a probe, which must be
        # answered within its timeout. The pacing gives a spinning accept
        # loop a second to show in the CPU time; the work itself is small.
        while time.monotonic() - t0 < 1.0:
            socks += idle_connections(d.port, 20)
            code, body, dt = timed_get(d, "/healthz")
            assert code == 200, (code, body)
            assert dt < 1.0, "probe took %.2fs while out of descriptors" % dt
            probes += 1
            time.sleep(0.05)
        cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - t0
        # A spinning accept loop burns the whole second; serving the flood
        # costs milliseconds (one clock tick is 10 ms).
        assert cpu < 0.25 * wall, "driver burnt %.2fs CPU in %.2fs" % (cpu, wall)
        assert log_lines(d) - lines0 <= 5, d.log()[-2000:]
        m = d.metrics()
        assert m['dra_cpu_http_accept_errors_total{reason="fd_exhausted"}'] >= probes
        assert m['dra_cpu_http_connections_evicted_total{reason="fd_exhausted"}'] >= probes
        assert open_fds(pid) <= base + 16
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: d.metrics()["dra_cpu_http_connections"] <= 1,
             what="the flood's connections closed")
    assert d.http("/healthz")[0] == 200
    assert d.log().count("event=http_accept_failed") == 1, d.log()[-2000:]


# ---------------------------------------------------------------- NRI

ODD_MSG = "StreamID must be odd for client initiated streams"
REUSE_MSG = "StreamID cannot be re-used and must increment"


@pytest.fixture
def nri_runtime(make_driver, driver_dir):
    from sim.nrisim import Runtime

    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    d = make_driver(args=["--nri-socket", sock, "--no-bpf", "--reserved-cpus", "0"]).start()
    rt.wait_plugin(timeout=5)
    yield rt, d
    rt.close()


def test_nri_bad_stream_ids_are_answered_on_a_connection_that_stays(nri_runtime):
    """As containerd/ttrpc's server: a request on an even stream id, or on one
    already used (still in flight or not), gets INVALID_ARGUMENT on that id;
    the plugin keeps its connection and goes on serving the runtime."""
    from sim.nrisim import INVALID_ARGUMENT, OK, api

    rt, d = nri_runtime
    conn = rt.wait_plugin()
    ev = api.StateChangeEvent(event=1)  # RunPodSandbox: acknowledged, not observed
    nxt = conn._next_stream

    assert conn.call_raw([nxt + 1], "StateChange", ev) == [(nxt + 1, INVALID_ARGUMENT, ODD_MSG)]
    # the first is served, the second reuses its id while it is answered
    assert conn.call_raw([nxt, nxt], "StateChange", ev) == [
        (nxt, OK, ""), (nxt, INVALID_ARGUMENT, REUSE_MSG)]
    # an id below the last one
    assert conn.call_raw([1], "StateChange", ev) == [(1, INVALID_ARGUMENT, REUSE_MSG)]
    assert conn.call_raw([0], "StateChange", ev) == [(0, INVALID_ARGUMENT, ODD_MSG)]

    # Same connection, still serving: a container is created through it.
    assert not conn.closed.is_set()
    ctr = rt.create_container(rt.add_pod("web"), "app")
    assert ctr.cpus
    assert [c.serial for c in rt.plugins()] == [conn.serial]
    log = d.log()
    assert log.count("level=warn mod=nri event=nri_request_rejected") == 1, log[-2000:]
    assert "nri_protocol_error" not in log and "nri_disconnected" not in log

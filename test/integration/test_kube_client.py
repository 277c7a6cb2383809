"""The kube client (user/kube/kube.c) over real TLS, driven through test/helpers/kube_cli.

Against the project's strict API-server simulator (test/sim/apiserver.py, the
`apiserver` fixture in conftest.py):

  * GET over TLS with CA verification (file and inline data, DNS name,
    in-cluster config over IPv4 and IPv6); a wrong CA fails clearly
  * insecure kubeconfigs refused unless --allow-insecure
  * 401 -> token file re-read -> one retry with the rotated token
  * 429 Retry-After honoured; a server that goes down and comes back
  * slice create / update / delete with resourceVersion and preconditions,
    list with a field selector, Warning headers
  * watch: history replay, bookmarks, server-side end, 410 Expired (compacted
    history and expiry while open), dropped stream, line cap
  * a slow server hits the timeout while the loop keeps ticking (max_gap_ms)
  * the token never shows up in trace output

A few things the simulator does not do get a small stdlib HTTPS server here:
watch lines cut at arbitrary bytes, client-certificate auth, and a listener
that never answers the TLS ClientHello (connect timeout).

HTTP/2: the simulator in plain HTTP behind Debian's nghttpx (test/sim/h2front.py)
as a TLS 1.3 only, ALPN h2 front: requests, writes and watches over h2, every
request and a watch multiplexed on one TCP connection, HTTP/1.1 when the front
offers only that, a watch held back by a slow consumer, a client certificate
rotated on disk while the client runs (the next connection presents it).
Proxies (test/sim/connect_proxy.py, a CONNECT proxy with its own name map):
kubeconfig proxy-url, HTTPS_PROXY and NO_PROXY, never for loopback, a refused
tunnel, proxy credentials kept out of the logs.
"""
import base64
import copy
import json
import os
import queue
import shutil
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sim import h2front
from sim.apiserver import ApiServer, V, make_certs
from sim.connect_proxy import ConnectProxy
from sim.h2front import H2Front

ROOT = Path(__file__).resolve().parents[2]
SLICES = "/apis/resource.k8s.io/v1/resourceslices"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


# ---- the kube_cli binary -------------------------------------------------------------------

@pytest.fixture(scope="session")
def kube_cli(tmp_path_factory):
    """test/helpers/kube_cli.c linked here against $B/libdracpu.a (what make builds first)."""
    b = os.environ.get("B", "build")
    lib = ROOT / b / "libdracpu.a"
    if not lib.exists():
        pytest.skip("%s not built (run make)" % lib)
    out = tmp_path_factory.mktemp("kube_cli") / "kube_cli"
    pkg = subprocess.run(["pkg-config", "--cflags", "--libs", "json-c", "yaml-0.1",
                          "libevent", "libcurl"], check=True, capture_output=True,
                         text=True).stdout.split()
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] if "san" in b else []
    subprocess.run([os.environ.get("CC", "cc"), "-std=gnu11", "-D_GNU_SOURCE", "-O1", "-g",
                    "-Wall", "-Werror", "-Wno-unused-parameter", "-Iuser", *san,
                    "test/helpers/kube_cli.c", str(lib), *pkg, "-o", str(out)], check=True, cwd=ROOT)
    return str(out)


def run_cli(cli, *args, env=None, timeout=30, after_ready=None):
    """Runs kube_cli; returns (exit code, JSON lines by key, stderr).

    after_ready() runs once the client exists and before its request starts
    (pass --delay-ms to leave it time)."""
    e = clean_env(env)
    # KUBE_CLI_WRAPPER="valgrind -q --error-exitcode=9 --leak-check=full" for memory checks
    # (timing assertions may then fail; the valgrind verdict is in stderr).
    wrap = os.environ.get("KUBE_CLI_WRAPPER", "").split()
    p = subprocess.Popen([*wrap, cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    if after_ready:
        first = p.stdout.readline()
        assert json.loads(first) == {"ready": True}, first
        after_ready()
    out, err = p.communicate(timeout=timeout)
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    got = {"events": [l["event"] for l in lines if "event" in l]}
    for l in lines:
        for k in ("result", "end", "loop", "stats"):
            if k in l:
                got[k] = l[k]
    return p.returncode, got, err


PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
             "ALL_PROXY", "all_proxy")


def clean_env(env=None):
    """The test's environment without in-cluster or proxy settings, plus env."""
    e = dict(os.environ)
    for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE") + PROXY_ENV:
        e.pop(k, None)
    e.update(env or {})
    return e


class Cli:
    """kube_cli --stdin: a client that stays up while the test acts on it.
    Output lines are read by a thread; wait() takes them as they come."""

    def __init__(self, cli, *args, env=None):
        self.p = subprocess.Popen([cli, "--stdin", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=clean_env(env))
        self.q = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()
        assert self.wait(lambda l: "ready" in l) == {"ready": True}

    def _read(self):
        for line in self.p.stdout:
            if line.strip():
                self.q.put(json.loads(line))
        self.q.put(None)

    def wait(self, pred, timeout=15):
        """The next output line for which pred is true (earlier ones are kept in seen)."""
        end = time.time() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                raise AssertionError("kube_cli: nothing matching after %ss; seen %s; stderr %s"
                                     % (timeout, self.seen[-5:], self.stderr()))
            if line is None:
                raise AssertionError("kube_cli exited; seen %s" % self.seen[-5:])
            self.seen.append(line)
            if pred(line):
                return line

    def get(self, path, n=1):
        """n GETs of path at once; their results, in completion order."""
        self.send("get %s %d" % (path, n))
        return [self.wait(lambda l: "result" in l)["result"] for _ in range(n)]

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def quit(self, timeout=15):
        """Stops the watch, waits for the exit; returns (exit code, stats)."""
        self.send("quit")
        self.p.stdin.close()
        stats = self.wait(lambda l: "stats" in l, timeout)["stats"]
        return self.p.wait(timeout), stats

    def stderr(self):
        return self.p.stderr.read() if self.p.poll() is not None else "(running)"

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def assert_loop_free(got, ticks_at_least=0):
    # 10 ms ticker: a gap far above that would mean something held the loop
    assert got["loop"]["max_gap_ms"] < 100, got["loop"]
    assert got["loop"]["ticks"] >= ticks_at_least, got["loop"]


def kubeconfig(d, server_url, cluster_extra, user_extra):
    p = Path(d) / "kubeconfig"
    p.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
        f"clusters:\n- name: c\n  cluster:\n    server: {server_url}\n{cluster_extra}"
        f"users:\n- name: u\n  user:\n{user_extra}")
    return str(p)


def make_slice(name=None, node="node-1", devices=1):
    obj = V.sample_slice()
    obj["metadata"] = {"name": name} if name else {"generateName": f"{node}-dra.cpu-"}
    obj["spec"]["nodeName"] = node
    obj["spec"]["pool"]["name"] = node
    dev = obj["spec"]["devices"][0]
    obj["spec"]["devices"] = [dict(copy.deepcopy(dev), name="cpudevnuma%03d" % i)
                              for i in range(devices)]
    return obj


# ---- TLS and trust -------------------------------------------------------------------------

def test_get_over_tls_verifies_the_ca(kube_cli, apiserver):
    apiserver.put_node("n1")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "get",
                           "/api/v1/nodes/n1")
    assert rc == 0, err
    r = got["result"]
    assert (r["error"], r["http"], r["attempts"]) == (0, 200, 1)
    assert r["body"]["metadata"]["name"] == "n1"
    assert [e["user_agent"] for e in apiserver.log()] == ["dra-cpu"]
    assert_loop_free(got)


def test_get_by_hostname_with_inline_ca_data(kube_cli, apiserver, tmp_path):
    apiserver.put_node("n1")
    ca = base64.b64encode(Path(apiserver.ca).read_bytes()).decode()
    path = kubeconfig(tmp_path, f"https://localhost:{apiserver.port}",
                      f"    certificate-authority-data: {ca}\n",
                      f"    token: {apiserver.token}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["http"] == 200


def test_wrong_ca_fails_with_clear_error(kube_cli, apiserver, tmp_path):
    other = make_certs(str(tmp_path / "other-pki"), name="not-the-cluster-ca")
    path = kubeconfig(tmp_path, apiserver.url, f"    certificate-authority: {other.ca}\n",
                      f"    token: {apiserver.token}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--attempts", "3", "get",
                           "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 1
    assert r["errno"] == "EKEYREJECTED"
    assert r["http"] == 0 and r["attempts"] == 1  # a trust failure is not retried
    assert "certificate" in r["error_text"].lower(), r["error_text"]
    assert apiserver.log() == []  # no request (and no token) reached the server


def test_insecure_kubeconfig_needs_the_flag(kube_cli, apiserver, tmp_path):
    apiserver.put_node("n1")
    path = kubeconfig(tmp_path, apiserver.url, "    insecure-skip-tls-verify: true\n",
                      f"    token: {apiserver.token}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 2
    assert "insecure-skip-tls-verify is true: refused without --allow-insecure-kubeconfig" in err
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--allow-insecure", "get",
                           "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["http"] == 200


def test_trace_output_never_holds_the_token(kube_cli, apiserver):
    apiserver.put_node("n1")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "--trace", "get",
                           "/api/v1/nodes/n1")
    assert rc == 0
    assert "GET /api/v1/nodes/n1" in err
    assert "<redacted>" in err
    assert apiserver.token not in err


# ---- auth, throttling, outages -------------------------------------------------------------

def test_401_rereads_rotated_token_and_retries(kube_cli, apiserver):
    apiserver.put_node("n1")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig_tokenfile,
                           "--delay-ms", "300", "get", "/api/v1/nodes/n1",
                           after_ready=apiserver.rotate_token)  # old token invalid at once
    assert rc == 0, err
    assert got["result"]["attempts"] == 2
    assert [e["code"] for e in apiserver.log()] == [401, 200]
    assert got["stats"]["token_reloads"] == 1
    assert apiserver.token not in err  # logs name the file, never the token


def test_401_that_a_new_token_does_not_fix_is_reported(kube_cli, apiserver):
    apiserver.set_tokens(["somebody-else"])
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig_tokenfile, "get",
                           "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 1
    assert (r["errno"], r["http"], r["reason"], r["attempts"]) == (
        "EACCES", 401, "Unauthorized", 2)


def test_429_retry_after_is_honoured(kube_cli, apiserver):
    apiserver.put_node("n1")
    apiserver.add_fault(action="throttle", count=1, retry_after=1, verb="get")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "--attempts", "3",
                           "get", "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 0, err
    assert r["attempts"] == 2
    assert r["elapsed_ms"] >= 1000  # Retry-After: 1; the backoff alone is 250-500 ms
    log = apiserver.log()
    assert [e["code"] for e in log] == [429, 200]
    assert log[1]["time"] - log[0]["time"] >= 0.95
    assert_loop_free(got, ticks_at_least=50)


def test_429_without_retries_returns_retry_after(kube_cli, apiserver):
    apiserver.add_fault(action="throttle", retry_after=2, verb="get")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "get",
                           "/api/v1/nodes/n1")
    r = got["result"]
    assert (r["errno"], r["http"], r["retry_after"], r["reason"]) == (
        "EAGAIN", 429, 2, "TooManyRequests")


def test_server_down_then_back_is_retried(kube_cli, apiserver):
    apiserver.put_node("n1")
    apiserver.down(seconds=1.5)
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "--attempts", "8",
                           "get", "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 0, err
    assert r["attempts"] > 1 and r["elapsed_ms"] >= 1400
    assert [e["code"] for e in apiserver.log()] == [200]
    assert_loop_free(got)


def test_slow_server_hits_timeout_loop_keeps_ticking(kube_cli, apiserver):
    apiserver.put_node("n1")
    apiserver.add_fault(action="delay", seconds=3, verb="get")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "--timeout-ms",
                           "1000", "get", "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 1
    assert r["errno"] == "ETIMEDOUT" and r["http"] == 0
    assert 1000 <= r["elapsed_ms"] < 2000
    assert_loop_free(got, ticks_at_least=80)


# ---- writes against the strict server ------------------------------------------------------

def test_slice_create_update_delete_with_preconditions(kube_cli, apiserver):
    kc = apiserver.kubeconfig

    def cli(*a):
        rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, *a)
        return got["result"]

    body = make_slice()
    body["spec"]["devices"][0]["numaNode"] = 0  # unknown field: dropped with a Warning
    r = cli("create", SLICES, json.dumps(body))
    assert (r["error"], r["http"]) == (0, 201), r
    assert "unknown field" in r["warning"]
    obj = r["body"]
    name, uid, rv = (obj["metadata"][k] for k in ("name", "uid", "resourceVersion"))
    assert name.startswith("node-1-dra.cpu-")

    r = cli("create", SLICES, json.dumps(make_slice(name=name)))
    assert (r["errno"], r["http"], r["reason"]) == ("EEXIST", 409, "AlreadyExists")

    stale = copy.deepcopy(obj)
    stale["metadata"]["resourceVersion"] = "1"
    r = cli("update", f"{SLICES}/{name}", json.dumps(stale))
    assert (r["errno"], r["http"], r["reason"]) == ("EBUSY", 409, "Conflict")

    obj["spec"]["pool"]["generation"] = 2
    r = cli("update", f"{SLICES}/{name}", json.dumps(obj))
    assert (r["error"], r["http"]) == (0, 200), r
    assert r["body"]["metadata"]["resourceVersion"] != rv

    r = cli("--precondition-uid", "not-" + uid, "delete", f"{SLICES}/{name}")
    assert (r["errno"], r["http"]) == ("EBUSY", 409)
    r = cli("--precondition-uid", uid, "delete", f"{SLICES}/{name}")
    assert (r["error"], r["http"]) == (0, 200), r
    r = cli("get", f"{SLICES}/{name}")
    assert (r["errno"], r["http"], r["reason"]) == ("ENOENT", 404, "NotFound")
    r = cli("update", f"{SLICES}/{name}", json.dumps(obj))
    assert r["errno"] == "ENOENT"  # no create-on-update


def test_invalid_slice_is_422_with_the_servers_message(kube_cli, apiserver):
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "create", SLICES,
                           json.dumps(make_slice(devices=129)))
    r = got["result"]
    assert (r["errno"], r["http"], r["reason"]) == ("EINVAL", 422, "Invalid")
    assert "must have at most 128 items" in r["error_text"]


def test_list_with_field_selector(kube_cli, apiserver):
    for node in ("node-1", "node-2", "node-1"):
        apiserver.put_slice(make_slice(node=node))
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "get",
                           SLICES + "?fieldSelector=spec.nodeName%3Dnode-1")
    body = got["result"]["body"]
    assert rc == 0, err
    assert [s["spec"]["nodeName"] for s in body["items"]] == ["node-1", "node-1"]
    assert body["metadata"]["resourceVersion"] == str(apiserver.resource_version)


# ---- watches -------------------------------------------------------------------------------

def test_watch_replays_history_then_bookmarks_and_ends(kube_cli, apiserver):
    start = apiserver.resource_version
    a = apiserver.put_slice(make_slice(name="a"))
    apiserver.put_slice(make_slice(name="b"))
    apiserver.set_bookmark_interval(0.3)
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "watch",
                           f"{SLICES}?watch=1&allowWatchBookmarks=true&timeoutSeconds=1"
                           f"&resourceVersion={start}")
    assert rc == 0, err
    types = [e["type"] for e in got["events"]]
    assert types[:2] == ["ADDED", "ADDED"] and got["events"][0]["rv"] == \
        a["metadata"]["resourceVersion"]
    assert "BOOKMARK" in types[2:]
    assert (got["end"]["error"], got["end"]["http"]) == (0, 200)  # timeoutSeconds: normal end
    assert_loop_free(got)


def test_watch_from_compacted_history_is_expired(kube_cli, apiserver):
    start = apiserver.resource_version
    apiserver.put_slice(make_slice())
    apiserver.compact()
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "watch",
                           f"{SLICES}?watch=1&resourceVersion={start}")
    e = got["end"]
    assert rc == 1 and got["events"] == []
    assert (e["errno"], e["code"], e["reason"], e["expired"]) == ("ESTALE", 410, "Expired", True)


def test_watch_expired_while_open(kube_cli, apiserver):
    def expire_once_open():
        apiserver.wait_for(lambda: apiserver.open_watches() == 1, what="watch open")
        apiserver.put_slice(make_slice())
        time.sleep(0.2)
        apiserver.expire_watches()

    t = threading.Thread(target=expire_once_open)
    t.start()
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "watch",
                           f"{SLICES}?watch=1&resourceVersion={apiserver.resource_version}")
    t.join()
    assert [e["type"] for e in got["events"]] == ["ADDED"]
    assert (got["end"]["errno"], got["end"]["expired"]) == ("ESTALE", True)


def test_watch_cut_by_the_server_is_a_transport_error(kube_cli, apiserver):
    def cut_once_open():
        apiserver.wait_for(lambda: apiserver.open_watches() == 1, what="watch open")
        apiserver.close_watches(abrupt=True)

    t = threading.Thread(target=cut_once_open)
    t.start()
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "watch",
                           f"{SLICES}?watch=1")
    t.join()
    assert rc == 1
    assert got["end"]["http"] == 200 and got["end"]["errno"] in ("ECONNRESET", "EPROTO")


def test_watch_line_cap(kube_cli, apiserver):
    apiserver.put_slice(make_slice(devices=128))  # one ADDED line of ~60 KiB
    rc, got, err = run_cli(kube_cli, "--kubeconfig", apiserver.kubeconfig, "--max-line",
                           "4096", "watch", f"{SLICES}?watch=1")
    assert got["events"] == []
    assert got["end"]["errno"] == "E2BIG"
    assert got["end"]["error_text"] == "watch line over 4096 bytes"
    assert got["stats"]["too_big"] == 1


# ---- in-cluster ----------------------------------------------------------------------------

def sa_dir(d, s):
    sa = Path(d) / "sa"
    sa.mkdir()
    shutil.copy(s.ca, sa / "ca.crt")
    (sa / "token").write_text(s.token + "\n")
    return str(sa)


def test_in_cluster_config(kube_cli, apiserver, tmp_path):
    apiserver.put_node("n1")
    rc, got, err = run_cli(kube_cli, "--sa-dir", sa_dir(tmp_path, apiserver), "get",
                           "/api/v1/nodes/n1", env=apiserver.env())
    assert rc == 0, err
    assert [e["code"] for e in apiserver.log()] == [200]


def test_in_cluster_config_ipv6(kube_cli, tmp_path, sim_certs):
    try:
        s = ApiServer(str(tmp_path / "v6"), host="::1", certs=sim_certs).start()
    except OSError:
        pytest.skip("no IPv6 loopback")
    try:
        s.put_node("n1")
        rc, got, err = run_cli(kube_cli, "--sa-dir", sa_dir(tmp_path, s), "get",
                               "/api/v1/nodes/n1", env=s.env())
        assert rc == 0, err
        assert got["result"]["http"] == 200
    finally:
        s.stop()


def test_not_in_cluster_is_a_clear_error(kube_cli, tmp_path):
    rc, got, err = run_cli(kube_cli, "--sa-dir", str(tmp_path), "get", "/api/v1/nodes/n1")
    assert rc == 2
    assert "not running in a cluster" in err


# ---- what the simulator does not do --------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if not self.server.require_cert and self.headers.get("Authorization") != "Bearer t":
            self.send_error(401)
            return
        if "watch=1" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json;stream=watch")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for c in self.server.chunks:
                data = c.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True
            return
        body = json.dumps({"kind": "Node", "metadata": {"name": "n1"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, ctx):
        self.ctx, self.chunks, self.require_cert = ctx, [], False
        super().__init__(("127.0.0.1", 0), _Handler)

    def finish_request(self, request, client_address):
        try:  # handshake in the connection's thread: a bad client holds up no one
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


@pytest.fixture
def tiny(sim_certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sim_certs.cert, sim_certs.key)
    srv = _TLSServer(ctx)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def ev(t, rv):
    return json.dumps({"type": t, "object": {"kind": "ResourceSlice",
                                             "metadata": {"resourceVersion": rv}}}) + "\n"


def test_watch_lines_cut_anywhere(kube_cli, tiny, sim_certs, tmp_path):
    stream = ev("ADDED", "10") + ev("MODIFIED", "11") + ev("BOOKMARK", "12") + ev("DELETED", "13")
    cuts = [7, 40, 41, 100, 150, 151, 220]  # mid-token, mid-line, on the '\n', ...
    tiny.chunks = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{tiny.server_address[1]}",
                      f"    certificate-authority: {sim_certs.ca}\n", "    token: t\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "watch", SLICES + "?watch=1")
    assert rc == 0, err
    assert got["events"] == [{"type": "ADDED", "rv": "10"}, {"type": "MODIFIED", "rv": "11"},
                             {"type": "BOOKMARK", "rv": "12"}, {"type": "DELETED", "rv": "13"}]
    assert (got["end"]["error"], got["end"]["http"]) == (0, 200)


def test_client_certificate_auth(kube_cli, tiny, sim_certs, tmp_path):
    d = tmp_path / "client"
    d.mkdir()
    ca_key = str(Path(sim_certs.ca).with_suffix(".key"))
    assert os.path.exists(ca_key), ca_key
    (d / "ext").write_text("extendedKeyUsage=clientAuth\n")
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", "driver.key", "-out", "driver.csr", "-subj", "/CN=driver"],
                 ["x509", "-req", "-in", "driver.csr", "-CA", sim_certs.ca, "-CAkey", ca_key,
                  "-CAcreateserial", "-CAserial", "ca.srl", "-out", "driver.crt", "-days", "1",
                  "-extfile", "ext"]):
        subprocess.run(["openssl", *args], check=True, cwd=d, capture_output=True)
    tiny.ctx.load_verify_locations(sim_certs.ca)
    tiny.ctx.verify_mode = ssl.CERT_REQUIRED
    tiny.require_cert = True
    b64 = lambda p: base64.b64encode(Path(p).read_bytes()).decode()  # noqa: E731
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{tiny.server_address[1]}",
                      f"    certificate-authority-data: {b64(sim_certs.ca)}\n",
                      f"    client-certificate-data: {b64(d / 'driver.crt')}\n"
                      f"    client-key-data: {b64(d / 'driver.key')}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["http"] == 200


def test_stalled_tls_handshake_hits_connect_timeout(kube_cli, sim_certs, tmp_path):
    # Listens, never accepts: the kernel completes TCP, nobody answers the ClientHello.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    try:
        path = kubeconfig(tmp_path, f"https://127.0.0.1:{lsock.getsockname()[1]}",
                          f"    certificate-authority: {sim_certs.ca}\n", "    token: t\n")
        rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--connect-timeout-ms", "700",
                               "--timeout-ms", "5000", "get", "/api/v1/nodes/n1")
        r = got["result"]
        assert r["errno"] == "ETIMEDOUT"
        assert 700 <= r["elapsed_ms"] < 1500
        assert_loop_free(got, ticks_at_least=50)
    finally:
        lsock.close()


def _server_cert(sim_certs, d, san):
    """A server certificate from the simulator's CA for subjectAltName san."""
    ca_key = str(Path(sim_certs.ca).with_suffix(".key"))
    (d / "ext").write_text("extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % san)
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1"],
                 ["x509", "-req", "-in", "srv.csr", "-CA", sim_certs.ca, "-CAkey", ca_key,
                  "-CAcreateserial", "-CAserial", "ca.srl", "-out", "srv.crt", "-days", "1",
                  "-extfile", "ext"]):
        subprocess.run(["openssl", *args], check=True, cwd=d, capture_output=True)
    return str(d / "srv.crt"), str(d / "srv.key")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_certificate_for_another_host_is_rejected(kube_cli, sim_certs, tmp_path, host):
    # A trusted CA, but the certificate names 127.0.0.2 and other.example only
    # (and a CN of 127.0.0.1, which must not count): the name check fails for
    # an address (IP subjectAltName) and for a DNS name alike.
    crt, key = _server_cert(sim_certs, tmp_path, "IP:127.0.0.2,DNS:other.example")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv = _TLSServer(ctx)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        path = kubeconfig(tmp_path, f"https://{host}:{srv.server_address[1]}",
                          f"    certificate-authority: {sim_certs.ca}\n", "    token: t\n")
        rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
        r = got["result"]
        assert r["errno"] == "EKEYREJECTED", r
        assert r["error_text"].startswith("server certificate rejected"), r["error_text"]
        assert "subject name" in r["error_text"] and host in r["error_text"], r["error_text"]
        assert r["http"] == 0
    finally:
        srv.shutdown()
        srv.server_close()


def test_tls13_only_server_is_reachable(kube_cli, tiny, sim_certs, tmp_path):
    tiny.ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{tiny.server_address[1]}",
                      f"    certificate-authority: {sim_certs.ca}\n", "    token: t\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["http"] == 200


# ---- HTTP/2 (the simulator behind nghttpx) -------------------------------------------------

needs_nghttpx = pytest.mark.skipif(not h2front.available(),
                                   reason="needs nghttpx (Debian package nghttp2-proxy)")
API_HOST = "apiserver.test"  # resolvable only by the proxy's name map


@pytest.fixture(scope="session")
def front_certs(tmp_path_factory):
    """CA + server certificate for the fronts: loopback names and API_HOST."""
    return make_certs(str(tmp_path_factory.mktemp("front-pki")),
                      hosts=("127.0.0.1", "::1", "localhost", API_HOST), name="dra-cpu-front")


@pytest.fixture
def plain_sim(tmp_path):
    s = ApiServer(str(tmp_path / "sim"), tls=False).start()
    yield s
    s.stop()


def make_front(tmp_path, sim, certs, **kw):
    f = H2Front(str(tmp_path / ("front-%d" % time.monotonic_ns())), sim.port, certs, **kw)
    return f.start()


@pytest.fixture
def h2(tmp_path, plain_sim, front_certs):
    """The simulator behind a TLS 1.3 only, ALPN h2 nghttpx: .url .log() .sim .kubeconfig."""
    f = make_front(tmp_path, plain_sim, front_certs, tls13_only=True)
    f.sim = plain_sim
    f.kubeconfig = kubeconfig(tmp_path, f.url, f"    certificate-authority: {front_certs.ca}\n",
                              f"    token: {plain_sim.token}\n")
    yield f
    f.stop()


@needs_nghttpx
def test_h2_over_tls13_requests_writes_and_watch(kube_cli, h2):
    h2.sim.put_node("n1")
    start = h2.sim.resource_version

    def cli(*a):
        rc, got, err = run_cli(kube_cli, "--kubeconfig", h2.kubeconfig, *a)
        return rc, got, err

    rc, got, err = cli("get", "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["body"]["metadata"]["name"] == "n1"
    assert got["stats"]["http2"] == 1 and got["stats"]["connections"] == 1
    rc, got, err = cli("create", SLICES, json.dumps(make_slice()))
    assert (got["result"]["error"], got["result"]["http"]) == (0, 201), got["result"]
    name = got["result"]["body"]["metadata"]["name"]
    rc, got, err = cli("get", SLICES + "?fieldSelector=spec.nodeName%3Dnode-1")
    assert [s["metadata"]["name"] for s in got["result"]["body"]["items"]] == [name]
    rc, got, err = cli("watch", f"{SLICES}?watch=1&timeoutSeconds=1&resourceVersion={start}")
    assert [e["type"] for e in got["events"]] == ["ADDED"]
    assert (got["end"]["error"], got["end"]["http"]) == (0, 200)
    assert got["stats"]["http2"] == 1
    log = h2.log()
    assert len(log) == 4
    assert {(e["alpn"], e["tls_protocol"]) for e in log} == {("h2", "TLSv1.3")}


@needs_nghttpx
def test_h2_requests_and_a_watch_share_one_connection(kube_cli, h2):
    h2.sim.put_node("n1")
    h2.sim.put_slice(make_slice(name="a"))
    cli = Cli(kube_cli, "--kubeconfig", h2.kubeconfig, "watch", SLICES + "?watch=1")
    try:
        cli.wait(lambda l: "event" in l)  # the watch streams
        results = cli.get("/api/v1/nodes/n1", 20)  # 20 at once, the watch still open
        assert [r["http"] for r in results] == [200] * 20
        rc, stats = cli.quit()
    finally:
        cli.kill()
    assert rc == 0
    log = h2.log()
    assert len(log) == 21 and sum(e["path"].startswith(SLICES) for e in log) == 1
    assert {e["alpn"] for e in log} == {"h2"}
    assert len({e["remote_port"] for e in log}) == 1, log  # one TCP connection
    assert stats["connections"] == 1 and stats["http2"] == 20


@needs_nghttpx
def test_http1_when_the_server_offers_only_http1(kube_cli, tmp_path, plain_sim, front_certs):
    plain_sim.put_node("n1")
    f = make_front(tmp_path, plain_sim, front_certs, alpn=("http/1.1",))
    try:
        path = kubeconfig(tmp_path, f.url, f"    certificate-authority: {front_certs.ca}\n",
                          f"    token: {plain_sim.token}\n")
        cli = Cli(kube_cli, "--kubeconfig", path, "watch", SLICES + "?watch=1")
        try:
            # the watch holds its connection (HTTP/1.1: one per transfer)
            plain_sim.wait_for(lambda: any("watch=1" in e["path"] for e in f.log()),
                               what="watch open at the front")
            results = cli.get("/api/v1/nodes/n1", 10)
            assert [r["http"] for r in results] == [200] * 10
            rc, stats = cli.quit()
        finally:
            cli.kill()
        log = f.log()
    finally:
        f.stop()
    assert rc == 0 and stats["http2"] == 0
    assert {e["alpn"] for e in log} == {"http/1.1"}
    # the watch's connection plus at most 3 for the requests: bounded, reused
    ports = {e["remote_port"] for e in log}
    assert 2 <= len(ports) <= 4 and stats["connections"] == len(ports), (ports, stats)


@needs_nghttpx
def test_h2_watch_held_back_by_a_slow_reader_loses_nothing(kube_cli, h2):
    start = h2.sim.resource_version
    for i in range(150):
        h2.sim.put_slice(make_slice(name="s%03d" % i, devices=4))
    rc, got, err = run_cli(kube_cli, "--kubeconfig", h2.kubeconfig, "--max-line", "8192",
                           "watch", f"{SLICES}?watch=1&timeoutSeconds=2&resourceVersion={start}")
    assert rc == 0, err
    rvs = [int(e["rv"]) for e in got["events"]]
    assert len(rvs) == 150 and rvs == sorted(rvs)
    assert got["stats"]["watch_pauses"] > 0  # it was held back, and caught up
    assert (got["end"]["error"], got["end"]["http"]) == (0, 200)


# ---- client certificates rotated on disk ---------------------------------------------------

def client_cert(certs, d, cn):
    """A client certificate + key (one PEM file, as the kubelet writes) from certs' CA."""
    d.mkdir(exist_ok=True)
    (d / "ext").write_text("extendedKeyUsage=clientAuth\n")
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", cn + ".key", "-out", cn + ".csr", "-subj", "/CN=" + cn],
                 ["x509", "-req", "-in", cn + ".csr", "-CA", certs.ca, "-CAkey", certs.ca_key,
                  "-CAcreateserial", "-CAserial", "ca.srl", "-out", cn + ".crt", "-days", "1",
                  "-extfile", "ext"]):
        subprocess.run(["openssl", *args], check=True, cwd=d, capture_output=True)
    pem = d / (cn + ".pem")
    pem.write_text((d / (cn + ".crt")).read_text() + (d / (cn + ".key")).read_text())
    return pem


def swap_symlink(link, target):
    """Points link at target atomically (rename over it), as the kubelet rotates."""
    tmp = link.with_name(link.name + ".tmp")
    os.symlink(target, tmp)
    os.replace(tmp, link)


@needs_nghttpx
def test_client_certificate_rotated_on_disk_is_presented(kube_cli, tmp_path, plain_sim,
                                                         front_certs):
    plain_sim.put_node("n1")
    d = tmp_path / "kubelet-pki"
    one, two = client_cert(front_certs, d, "driver-1"), client_cert(front_certs, d, "driver-2")
    current = d / "client-current.pem"
    swap_symlink(current, one)
    f = make_front(tmp_path, plain_sim, front_certs, tls13_only=True, client_ca=front_certs.ca)
    try:
        path = kubeconfig(tmp_path, f.url, f"    certificate-authority: {front_certs.ca}\n",
                          f"    client-certificate: {current}\n    client-key: {current}\n"
                          f"    token: {plain_sim.token}\n")
        cli = Cli(kube_cli, "--kubeconfig", path, "watch", SLICES + "?watch=1")
        try:
            (before,) = cli.get("/api/v1/nodes/n1")
            swap_symlink(current, two)
            (after,) = cli.get("/api/v1/nodes/n1")
            assert not any("end" in l for l in cli.seen)  # the watch ran throughout
            rc, stats = cli.quit()
        finally:
            cli.kill()
        log = f.log()
    finally:
        f.stop()
    assert (before["http"], after["http"], rc) == (200, 200, 0)
    watch, first, second = log
    assert "CN=driver-1" in watch["tls_client_subject_name"]
    assert "CN=driver-1" in first["tls_client_subject_name"]
    assert "CN=driver-2" in second["tls_client_subject_name"], log
    assert first["remote_port"] == watch["remote_port"] != second["remote_port"]
    assert stats["cert_reloads"] == 1 and stats["connections"] == 2


@needs_nghttpx
def test_client_certificate_refused_without_one(kube_cli, tmp_path, plain_sim, front_certs):
    f = make_front(tmp_path, plain_sim, front_certs, client_ca=front_certs.ca)
    try:
        path = kubeconfig(tmp_path, f.url, f"    certificate-authority: {front_certs.ca}\n",
                          f"    token: {plain_sim.token}\n")
        rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    finally:
        f.stop()
    assert rc == 1 and got["result"]["http"] == 0
    assert got["result"]["errno"] in ("ECONNABORTED", "ECONNRESET"), got["result"]


# ---- proxies -------------------------------------------------------------------------------

@pytest.fixture
def proxy():
    p = ConnectProxy(hosts={API_HOST: "127.0.0.1"}).start()
    yield p
    p.stop()


def by_name(tmp_path, front, certs, sim, cluster_extra=""):
    """A kubeconfig naming the front as API_HOST, which only the proxy can resolve."""
    return kubeconfig(tmp_path, f"https://{API_HOST}:{front.port}",
                      f"    certificate-authority: {certs.ca}\n{cluster_extra}",
                      f"    token: {sim.token}\n")


@needs_nghttpx
def test_proxy_url_carries_everything_through_one_tunnel(kube_cli, tmp_path, h2, proxy,
                                                         front_certs):
    h2.sim.put_node("n1")
    path = by_name(tmp_path, h2, front_certs, h2.sim, f"    proxy-url: {proxy.url}\n")
    # proxy-url is used whatever NO_PROXY says (client-go)
    cli = Cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1",
              env={"NO_PROXY": API_HOST})
    try:
        first = cli.wait(lambda l: "result" in l)["result"]
        more = cli.get("/api/v1/nodes/n1", 5)
        rc, stats = cli.quit()
    finally:
        cli.kill()
    assert rc == 0 and [r["http"] for r in [first] + more] == [200] * 6
    assert [t["target"] for t in proxy.tunnels()] == [f"{API_HOST}:{h2.port}"]
    assert stats["connections"] == 1 and stats["http2"] == 6  # HTTP/2 inside the tunnel


@needs_nghttpx
def test_https_proxy_from_the_environment_and_no_proxy(kube_cli, tmp_path, h2, proxy,
                                                       front_certs):
    h2.sim.put_node("n1")
    path = by_name(tmp_path, h2, front_certs, h2.sim)
    get = ("--kubeconfig", path, "get", "/api/v1/nodes/n1")
    hostport = proxy.url[len("http://"):]
    # HTTPS_PROXY, also without a scheme (http:// is meant), and the lower-case name
    for env in ({"HTTPS_PROXY": proxy.url}, {"HTTPS_PROXY": hostport},
                {"https_proxy": proxy.url, "NO_PROXY": "other.test,10.0.0.0/8"}):
        rc, got, err = run_cli(kube_cli, *get, env=env)
        assert rc == 0 and got["result"]["http"] == 200, (env, got["result"], err)
    assert len(proxy.tunnels()) == 3
    # NO_PROXY names it (or its domain): straight to a name nobody else resolves
    for no in (API_HOST, ".test", "other.test, " + API_HOST):
        rc, got, err = run_cli(kube_cli, *get, env={"HTTPS_PROXY": proxy.url, "NO_PROXY": no})
        assert got["result"]["errno"] == "EHOSTUNREACH", (no, got["result"])
    assert len(proxy.tunnels()) == 3
    # HTTP_PROXY is for http:// servers only
    rc, got, err = run_cli(kube_cli, *get, env={"HTTP_PROXY": proxy.url})
    assert got["result"]["errno"] == "EHOSTUNREACH"
    assert len(proxy.tunnels()) == 3


@needs_nghttpx
def test_environment_proxy_never_for_loopback(kube_cli, tmp_path, h2, proxy, front_certs):
    h2.sim.put_node("n1")
    for host in ("127.0.0.1", "localhost"):
        path = kubeconfig(tmp_path, f"https://{host}:{h2.port}",
                          f"    certificate-authority: {front_certs.ca}\n",
                          f"    token: {h2.sim.token}\n")
        rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1",
                               env={"HTTPS_PROXY": proxy.url})
        assert rc == 0, err
    assert proxy.tunnels() == []
    # ... but a kubeconfig's proxy-url is used even there
    path = kubeconfig(tmp_path, h2.url, f"    certificate-authority: {front_certs.ca}\n"
                      f"    proxy-url: {proxy.url}\n", f"    token: {h2.sim.token}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    assert [t["target"] for t in proxy.tunnels()] == [f"127.0.0.1:{h2.port}"]


@needs_nghttpx
def test_proxy_refusing_the_tunnel_and_proxy_credentials(kube_cli, tmp_path, h2, proxy,
                                                         front_certs):
    h2.sim.put_node("n1")
    url = proxy.url.replace("http://", "http://driver:s3cret-pw@")
    path = by_name(tmp_path, h2, front_certs, h2.sim, f"    proxy-url: {url}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--trace", "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    (t,) = proxy.tunnels()
    assert t["proxy_authorization"] == "Basic " + base64.b64encode(b"driver:s3cret-pw").decode()
    assert "s3cret-pw" not in err and "<redacted>" in err  # trace on, credentials out
    proxy.deny = True
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--attempts", "2", "get",
                           "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 1 and r["errno"] == "ECONNREFUSED" and r["http"] == 0, r
    assert "403" in r["error_text"], r["error_text"]
    assert "s3cret-pw" not in err + r["error_text"]


# ---- the daemon ----------------------------------------------------------------------------

@needs_nghttpx
def test_daemon_publishes_over_h2_through_a_proxy_on_one_connection(tmp_path, h2, proxy,
                                                                    front_certs, driver_dir):
    from driver import Driver, wait_for

    h2.sim.put_node("node-1", uid="0c1d2e3f-0000-4000-8000-00000000aaaa")
    path = by_name(tmp_path, h2, front_certs, h2.sim)
    d = Driver(os.path.join(driver_dir, "d"), path, topology="synthetic-384.json",
               args=["--cpu-device-mode", "individual", "--no-nri", "--no-bpf"],
               env=clean_env({"HTTPS_PROXY": proxy.url}))
    try:
        d.start()
        d.wait_ready()
        wait_for(lambda: len([s for s in h2.sim.slices()
                              if s["spec"].get("nodeName") == "node-1"]) == 3,
                 what="3 slices published")
        log = h2.log()
        m = d.metrics()
    finally:
        assert d.stop() == 0, d.log()[-3000:]
    verbs = sorted((e["method"], e["path"].split("?")[0].rsplit("/", 1)[-1]) for e in log)
    assert ("GET", "node-1") in verbs and verbs.count(("POST", "resourceslices")) == 3
    assert any("watch=" in e["path"] for e in log)  # the watch is among them
    assert {e["alpn"] for e in log} == {"h2"} and {e["tls_protocol"] for e in log} == {"TLSv1.3"}
    assert len({e["remote_port"] for e in log}) == 1, log  # all of it on one connection
    assert [t["target"] for t in proxy.tunnels()] == [f"{API_HOST}:{h2.port}"]
    assert m["dra_cpu_kube_requests_total"] >= len(log)


@needs_nghttpx
def test_daemon_presents_a_client_certificate_rotated_while_it_runs(tmp_path, plain_sim,
                                                                    front_certs, driver_dir):
    from driver import Driver, wait_for

    plain_sim.put_node("node-1", uid="0c1d2e3f-0000-4000-8000-00000000aaaa")
    pki = tmp_path / "kubelet-pki"
    one, two = client_cert(front_certs, pki, "driver-1"), client_cert(front_certs, pki, "driver-2")
    current = pki / "client-current.pem"
    swap_symlink(current, one)
    f = make_front(tmp_path, plain_sim, front_certs, tls13_only=True, client_ca=front_certs.ca)
    path = kubeconfig(tmp_path, f.url, f"    certificate-authority: {front_certs.ca}\n",
                      f"    client-certificate: {current}\n    client-key: {current}\n"
                      f"    token: {plain_sim.token}\n")
    d = Driver(os.path.join(driver_dir, "d"), path, topology="synthetic-384.json",
               args=["--no-nri", "--no-bpf"], env=clean_env())
    mine = lambda: [s for s in plain_sim.slices() if s["spec"].get("nodeName") == "node-1"]  # noqa
    try:
        d.start()
        d.wait_ready()
        wait_for(lambda: len(mine()) == 1, what="slice published")
        n = len(f.log())
        swap_symlink(current, two)
        plain_sim.wipe_node("node-1")  # the watch sees it go; the daemon creates it again
        wait_for(lambda: len(mine()) == 1 and len(f.log()) > n, what="slice re-created")
        log = f.log()
    finally:
        assert d.stop() == 0, d.log()[-3000:]
        f.stop()
    before, after = log[:n], log[n:]
    assert all("CN=driver-1" in e["tls_client_subject_name"] for e in before), before
    assert [e["method"] for e in after] == ["POST"], after
    assert "CN=driver-2" in after[0]["tls_client_subject_name"], after
    assert after[0]["remote_port"] not in {e["remote_port"] for e in before}
    assert "client_cert_reloaded" in d.log()

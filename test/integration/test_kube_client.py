"""The kube client (user/kube.c) over real TLS, driven through test/kube_cli.

A small stdlib HTTPS server stands in for the API server until the project's
simulator (test/sim/apiserver.py) covers these behaviours; certificates come
from the openssl CLI. What is shown here:

  * GET over TLS with CA verification (file and inline data, IP and DNS name,
    in-cluster config incl. IPv6, client certificates); wrong CA fails clearly
  * insecure kubeconfigs refused unless --allow-insecure
  * 401 -> token file re-read -> one retry with the rotated token
  * 429 Retry-After honoured
  * watch events split across chunks; 410 Expired ends the watch
  * a slow server / a stalled TLS handshake hit the timeouts
  * the loop is never blocked: a 10 ms ticker keeps firing (max_gap_ms)
  * the token never shows up in trace output
"""
import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN_A = "token-aaaa.bbbb"
TOKEN_B = "token-rotated.cccc"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


# ---- the kube_cli binary -------------------------------------------------------------------

@pytest.fixture(scope="session")
def kube_cli(tmp_path_factory):
    """$B/kube_cli when the Makefile built it, else compiled here from the sources."""
    b = os.environ.get("B", "build")
    built = ROOT / b / "kube_cli"
    srcs = ["test/kube_cli.c", "user/kube.c", "user/kubeconfig.c", "user/backoff.c",
            "user/log.c"]
    if built.exists() and all(built.stat().st_mtime >= (ROOT / s).stat().st_mtime
                              for s in srcs):
        return str(built)
    out = tmp_path_factory.mktemp("kube_cli") / "kube_cli"
    pkg = subprocess.run(["pkg-config", "--cflags", "--libs", "libcurl", "json-c",
                          "yaml-0.1", "libevent"], check=True, capture_output=True,
                         text=True).stdout.split()
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] if "san" in b else []
    subprocess.run([os.environ.get("CC", "cc"), "-std=gnu11", "-D_GNU_SOURCE", "-O1", "-g",
                    "-Wall", "-Werror", "-Wno-unused-parameter", "-Iuser", *san, *srcs,
                    *pkg, "-o", str(out)], check=True, cwd=ROOT)
    return str(out)


def run_cli(cli, *args, env=None, timeout=30, stdin_hook=None):
    """Runs kube_cli; returns (exit code, parsed JSON lines by key, stderr)."""
    e = dict(os.environ)
    e.pop("KUBERNETES_SERVICE_HOST", None)
    e.pop("KUBERNETES_SERVICE_PORT", None)
    e.update(env or {})
    # KUBE_CLI_WRAPPER="valgrind -q --error-exitcode=9 --leak-check=full" for memory checks
    # (timing assertions may then fail; the valgrind verdict is in stderr).
    wrap = os.environ.get("KUBE_CLI_WRAPPER", "").split()
    p = subprocess.Popen([*wrap, cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    if stdin_hook:
        first = p.stdout.readline()
        assert json.loads(first) == {"ready": True}
        stdin_hook()
    out, err = p.communicate(timeout=timeout)
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    got = {"events": [l["event"] for l in lines if "event" in l]}
    for l in lines:
        for k in ("result", "end", "loop", "stats"):
            if k in l:
                got[k] = l[k]
    return p.returncode, got, err


# ---- certificates --------------------------------------------------------------------------

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], check=True, cwd=cwd, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
            "-subj", f"/CN={name}", cwd=d)


def make_leaf(d, ca, name, ext):
    (d / f"{name}.ext").write_text(ext)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
            "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca")
    make_ca(d, "wrong-ca")
    make_leaf(d, "ca", "apiserver",
              "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    make_leaf(d, "ca", "driver", "extendedKeyUsage=clientAuth\n")
    return d


# ---- the server ----------------------------------------------------------------------------

def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


NODE = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1", "resourceVersion": "7"}}


class State:
    def __init__(self):
        self.token = TOKEN_A          # the one token the server accepts (None: any)
        self.client_cert = False      # mTLS instead of a token
        self.throttle = 0             # 429s still to send on /throttle
        self.slow_s = 0.0
        self.chunks = []              # watch stream, sent one piece at a time
        self.seen_auth = []
        self.lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, obj, headers=()):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        st = self.server.state
        auth = self.headers.get("Authorization")
        with st.lock:
            st.seen_auth.append(auth)
        if st.client_cert:
            if not self.connection.getpeercert():
                return self.reply(401, status(401, "Unauthorized", "no client cert"))
        elif st.token and auth != f"Bearer {st.token}":
            return self.reply(401, status(401, "Unauthorized", "Unauthorized"))
        path = self.path.split("?")[0]
        if path == "/api/v1/nodes/n1":
            return self.reply(200, NODE)
        if path == "/slow":
            time.sleep(st.slow_s)
            return self.reply(200, NODE)
        if path == "/throttle":
            with st.lock:
                st.throttle -= 1
                throttled = st.throttle >= 0
            if throttled:
                s = status(429, "TooManyRequests", "slow down")
                return self.reply(429, s, [("Retry-After", "1")])
            return self.reply(200, NODE)
        if path == "/apis/resource.k8s.io/v1/resourceslices" and "watch=1" in self.path:
            self.send_response(200)
            self.send_header("Content-Type", "application/json;stream=watch")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for c in st.chunks:
                data = c.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True
            return None
        return self.reply(404, status(404, "NotFound", f"{path} not found"))


class TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, ctx, family=socket.AF_INET):
        self.address_family = family
        self.ctx = ctx
        self.state = State()
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the connection's own thread, so a client that
        # stalls or fails it does not hold up anyone else.
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


def start_server(pki, family=socket.AF_INET, host="127.0.0.1", client_ca=False):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
    if client_ca:
        ctx.load_verify_locations(pki / "ca.crt")
        ctx.verify_mode = ssl.CERT_REQUIRED
    srv = TLSServer((host, 0), ctx, family)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def server(pki):
    srv = start_server(pki)
    yield srv
    srv.shutdown()
    srv.server_close()


def kubeconfig(d, server_url, cluster_extra, user_extra):
    p = d / "kubeconfig"
    p.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
        f"clusters:\n- name: c\n  cluster:\n    server: {server_url}\n{cluster_extra}"
        f"users:\n- name: u\n  user:\n{user_extra}")
    return str(p)


@pytest.fixture
def kc(tmp_path, pki, server):
    """A kubeconfig for `server`: CA by relative path, token from a file."""
    shutil.copy(pki / "ca.crt", tmp_path / "ca.crt")
    (tmp_path / "token").write_text(TOKEN_A + "\n")
    url = f"https://127.0.0.1:{server.server_address[1]}"
    return kubeconfig(tmp_path, url, "    certificate-authority: ca.crt\n",
                      "    tokenFile: token\n")


def assert_loop_free(got, ticks_at_least=0):
    # 10 ms ticker: a gap far above that would mean something held the loop
    assert got["loop"]["max_gap_ms"] < 100, got["loop"]
    assert got["loop"]["ticks"] >= ticks_at_least, got["loop"]


# ---- tests ---------------------------------------------------------------------------------

def test_get_over_tls_with_ca_file(kube_cli, kc, server):
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    r = got["result"]
    assert (r["error"], r["http"], r["attempts"]) == (0, 200, 1)
    assert r["body"]["metadata"]["name"] == "n1"
    assert server.state.seen_auth == [f"Bearer {TOKEN_A}"]
    assert_loop_free(got)


def test_get_with_inline_ca_data_by_hostname(kube_cli, tmp_path, pki, server):
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    path = kubeconfig(tmp_path, f"https://localhost:{server.server_address[1]}",
                      f"    certificate-authority-data: {ca}\n", f"    token: {TOKEN_A}\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["http"] == 200


def test_wrong_ca_fails_with_clear_error(kube_cli, tmp_path, pki, server):
    shutil.copy(pki / "wrong-ca.crt", tmp_path / "ca.crt")
    (tmp_path / "token").write_text(TOKEN_A)
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{server.server_address[1]}",
                      "    certificate-authority: ca.crt\n", "    tokenFile: token\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--attempts", "3", "get",
                           "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 1
    assert r["errno"] == "EKEYREJECTED"
    assert r["http"] == 0 and r["attempts"] == 1  # a trust failure is not retried
    assert "certificate" in r["error_text"].lower(), r["error_text"]
    assert server.state.seen_auth == []  # the token never reached an untrusted server


def test_insecure_kubeconfig_needs_the_flag(kube_cli, tmp_path, server):
    (tmp_path / "token").write_text(TOKEN_A)
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{server.server_address[1]}",
                      "    insecure-skip-tls-verify: true\n", "    tokenFile: token\n")
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
    assert rc == 2
    assert "insecure-skip-tls-verify is true: refused without --allow-insecure-kubeconfig" in err
    rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--allow-insecure", "get",
                           "/api/v1/nodes/n1")
    assert rc == 0, err
    assert got["result"]["http"] == 200


def test_client_certificate_auth(kube_cli, tmp_path, pki):
    srv = start_server(pki, client_ca=True)
    try:
        srv.state.client_cert = True
        b64 = lambda n: base64.b64encode((pki / n).read_bytes()).decode()
        path = kubeconfig(tmp_path, f"https://127.0.0.1:{srv.server_address[1]}",
                          f"    certificate-authority-data: {b64('ca.crt')}\n",
                          f"    client-certificate-data: {b64('driver.crt')}\n"
                          f"    client-key-data: {b64('driver.key')}\n")
        rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "get", "/api/v1/nodes/n1")
        assert rc == 0, err
        assert srv.state.seen_auth == [None]  # no bearer token: the cert did it
    finally:
        srv.shutdown()
        srv.server_close()


def test_401_rereads_rotated_token_and_retries(kube_cli, kc, server, tmp_path):
    def rotate():  # the kubelet rewrites the projected token; the server moves on
        (tmp_path / "token").write_text(TOKEN_B + "\n")
        server.state.token = TOKEN_B

    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "--delay-ms", "200", "get",
                           "/api/v1/nodes/n1", stdin_hook=rotate)
    assert rc == 0, err
    assert got["result"]["attempts"] == 2
    assert server.state.seen_auth == [f"Bearer {TOKEN_A}", f"Bearer {TOKEN_B}"]
    assert got["stats"]["token_reloads"] == 1
    assert "token-" not in err  # logs name the file, never the token


def test_401_with_no_new_token_is_reported(kube_cli, kc, server):
    server.state.token = "something-else"
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "get", "/api/v1/nodes/n1")
    r = got["result"]
    assert rc == 1
    assert (r["errno"], r["http"], r["reason"], r["attempts"]) == (
        "EACCES", 401, "Unauthorized", 2)


def test_429_retry_after_is_honoured(kube_cli, kc, server):
    server.state.throttle = 1
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "--attempts", "3", "get", "/throttle")
    r = got["result"]
    assert rc == 0, err
    assert r["attempts"] == 2
    assert r["elapsed_ms"] >= 1000  # Retry-After: 1, the backoff alone is 250-500 ms
    assert_loop_free(got, ticks_at_least=50)


def test_429_without_retries_returns_retry_after(kube_cli, kc, server):
    server.state.throttle = 5
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "get", "/throttle")
    r = got["result"]
    assert (r["errno"], r["http"], r["retry_after"], r["reason"]) == (
        "EAGAIN", 429, 1, "TooManyRequests")


WATCH = "/apis/resource.k8s.io/v1/resourceslices?watch=1&allowWatchBookmarks=true"


def ev(t, rv):
    return json.dumps({"type": t, "object": {"kind": "ResourceSlice",
                                             "metadata": {"resourceVersion": rv}}}) + "\n"


def test_watch_events_across_chunks(kube_cli, kc, server):
    stream = ev("ADDED", "10") + ev("MODIFIED", "11") + ev("BOOKMARK", "12") + ev("DELETED", "13")
    cuts = [7, 40, 41, 100, 150, 151, 220]  # mid-token, mid-line, on '\n', ...
    server.state.chunks = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "watch", WATCH)
    assert rc == 0, err
    assert got["events"] == [{"type": "ADDED", "rv": "10"}, {"type": "MODIFIED", "rv": "11"},
                             {"type": "BOOKMARK", "rv": "12"}, {"type": "DELETED", "rv": "13"}]
    assert (got["end"]["error"], got["end"]["http"]) == (0, 200)
    assert_loop_free(got)


def test_watch_expired_ends_with_estale(kube_cli, kc, server):
    gone = {"type": "ERROR", "object": status(410, "Expired",
                                              "too old resource version: 1 (13)")}
    server.state.chunks = [ev("ADDED", "12"), json.dumps(gone) + "\n"]
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "watch", WATCH + "&resourceVersion=1")
    e = got["end"]
    assert rc == 1
    assert got["events"] == [{"type": "ADDED", "rv": "12"}]
    assert (e["errno"], e["code"], e["reason"], e["expired"]) == ("ESTALE", 410, "Expired", True)


def test_watch_line_cap(kube_cli, kc, server):
    server.state.chunks = [ev("ADDED", "1"), '{"type":"ADDED","object":{"x":"' + "a" * 5000]
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "--max-line", "1024", "watch", WATCH)
    assert got["events"] == [{"type": "ADDED", "rv": "1"}]
    assert got["end"]["errno"] == "E2BIG"
    assert got["stats"]["too_big"] == 1


def test_slow_server_hits_timeout_loop_keeps_ticking(kube_cli, kc, server):
    server.state.slow_s = 3
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "--timeout-ms", "1000", "get", "/slow")
    r = got["result"]
    assert rc == 1
    assert r["errno"] == "ETIMEDOUT" and r["http"] == 0
    assert 1000 <= r["elapsed_ms"] < 2000
    assert_loop_free(got, ticks_at_least=80)


def test_stalled_tls_handshake_hits_connect_timeout(kube_cli, tmp_path, pki):
    # Listens, never accepts: the kernel completes TCP, nobody answers the ClientHello.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    try:
        shutil.copy(pki / "ca.crt", tmp_path / "ca.crt")
        path = kubeconfig(tmp_path, f"https://127.0.0.1:{lsock.getsockname()[1]}",
                          "    certificate-authority: ca.crt\n", f"    token: {TOKEN_A}\n")
        rc, got, err = run_cli(kube_cli, "--kubeconfig", path, "--connect-timeout-ms", "700",
                               "--timeout-ms", "5000", "get", "/api/v1/nodes/n1")
        r = got["result"]
        assert r["errno"] == "ETIMEDOUT"
        assert 700 <= r["elapsed_ms"] < 1500
        assert_loop_free(got, ticks_at_least=50)
    finally:
        lsock.close()


def test_trace_output_never_holds_the_token(kube_cli, kc, server):
    rc, got, err = run_cli(kube_cli, "--kubeconfig", kc, "--trace", "get", "/api/v1/nodes/n1")
    assert rc == 0
    assert "GET /api/v1/nodes/n1" in err
    assert "<redacted>" in err
    assert TOKEN_A not in err and "aaaa" not in err


def in_cluster_env(srv, host):
    return {"KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": str(srv.server_address[1]), "POD_NAMESPACE": "dra"}


def test_in_cluster_config(kube_cli, tmp_path, pki, server):
    shutil.copy(pki / "ca.crt", tmp_path / "ca.crt")
    (tmp_path / "token").write_text(TOKEN_A + "\n")
    rc, got, err = run_cli(kube_cli, "--sa-dir", str(tmp_path), "get", "/api/v1/nodes/n1",
                           env=in_cluster_env(server, "127.0.0.1"))
    assert rc == 0, err
    assert server.state.seen_auth == [f"Bearer {TOKEN_A}"]


def test_in_cluster_config_ipv6(kube_cli, tmp_path, pki):
    try:
        srv = start_server(pki, family=socket.AF_INET6, host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback")
    try:
        shutil.copy(pki / "ca.crt", tmp_path / "ca.crt")
        (tmp_path / "token").write_text(TOKEN_A)
        rc, got, err = run_cli(kube_cli, "--sa-dir", str(tmp_path), "get", "/api/v1/nodes/n1",
                               env=in_cluster_env(srv, "::1"))
        assert rc == 0, err
        assert got["result"]["http"] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_not_in_cluster_is_a_clear_error(kube_cli, tmp_path):
    rc, got, err = run_cli(kube_cli, "--sa-dir", str(tmp_path), "get", "/api/v1/nodes/n1")
    assert rc == 2
    assert "not running in a cluster" in err

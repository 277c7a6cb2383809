"""A small HTTP CONNECT proxy for the tests: what HTTPS_PROXY and a
kubeconfig's proxy-url point at.

It answers `CONNECT host:port HTTP/1.1` with 200 and then relays bytes both
ways; TLS runs end to end through the tunnel, so the proxy sees no
plaintext. Every tunnel is recorded (target as asked, and when), so a test
can assert that traffic went through the proxy, and how many connections
it took. Names can be mapped to addresses the way a corporate proxy's own
DNS would (`hosts={"apiserver.test": "127.0.0.1"}`): a client that must
go through the proxy then has no way to reach the name without it.

    p = ConnectProxy(hosts={...}).start()   p.url  http://127.0.0.1:<port>
    p.tunnels()                             [{"target": "apiserver.test:6443", ...}]
    p.deny = True                           answer 403 to every CONNECT
    p.stop()

Anything but CONNECT gets 405; a target that cannot be reached 502.
"""

import select
import socket
import socketserver
import threading
import time


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        proxy = self.server.proxy
        c = self.request
        c.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = c.recv(4096)
                if not chunk or len(head) > 16384:
                    return
                head += chunk
        except OSError:
            return
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        parts = lines[0].split()
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:])}
        if len(parts) != 3 or parts[0] != "CONNECT":
            c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        target = parts[1]
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        entry = {"target": target, "time": time.time(),
                 "proxy_authorization": headers.get("proxy-authorization")}
        with proxy.lock:
            proxy.log.append(entry)
        if proxy.deny:
            c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            up = socket.create_connection((proxy.hosts.get(host, host), int(port)), timeout=5)
        except (OSError, ValueError):
            c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        c.settimeout(None)
        up.settimeout(None)
        try:
            self._relay(c, up)
        finally:
            up.close()

    @staticmethod
    def _relay(a, b):
        peers = {a: b, b: a}
        while True:
            ready, _, _ = select.select(list(peers), [], [], 60)
            if not ready:
                return
            for s in ready:
                try:
                    data = s.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                peers[s].sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class ConnectProxy:
    def __init__(self, host="127.0.0.1", hosts=None):
        self.host = host
        self.hosts = dict(hosts or {})
        self.deny = False
        self.lock = threading.Lock()
        self.log = []
        self._srv = None
        self.port = None
        self.url = None

    def start(self):
        self._srv = _Server((self.host, 0), _Handler)
        self._srv.proxy = self
        self.port = self._srv.server_address[1]
        self.url = "http://%s:%d" % (self.host, self.port)
        threading.Thread(target=self._srv.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def tunnels(self):
        with self.lock:
            return list(self.log)

    def stop(self):
        if self._srv:
            self._srv.shutdown()
            self._srv.server_close()
            self._srv = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

"""A real HTTP/2 + TLS front for the API-server simulator: Debian's nghttpx.

kube-apiserver speaks HTTP/2 over TLS (and HTTP/1.1 to clients that ask for
it in ALPN). The simulator (apiserver.py) is a Python HTTP/1.1 server; put
this in front of it (ApiServer(..., tls=False)) and the client under test
talks to a proper HTTP/2 stack, nghttpx, which forwards each stream to the
simulator as an HTTP/1.1 request and streams watch bodies back as DATA
frames.

    front = H2Front(tmpdir, backend_port=sim.port, certs=certs,
                    tls13_only=True).start()
    front.url                      https://127.0.0.1:<port>
    front.log()                    one dict per request the front answered
    front.stop()

The access log is written when the response head arrives (a watch shows up
while still open) with, per request: the client's port (one per TCP
connection), the protocol (h2 or http/1.1), the TLS version and the client
certificate's subject and serial when one was presented.

Options: alpn=("h2", "http/1.1") what the front offers; tls13_only (min and
max TLS 1.3); client_ca (require a client certificate signed by it).
"""

import os
import shutil
import signal
import socket
import subprocess
import time

NGHTTPX = shutil.which("nghttpx") or "/usr/sbin/nghttpx"
FIELDS = ("remote_port", "alpn", "tls_protocol", "method", "path", "status",
          "tls_client_subject_name", "tls_client_serial")


def available():
    return os.access(NGHTTPX, os.X_OK)


class H2Front:
    def __init__(self, directory, backend_port, certs, host="127.0.0.1", backend_host="127.0.0.1",
                 alpn=("h2", "http/1.1"), tls13_only=False, client_ca=None):
        self.dir = os.path.abspath(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.host, self.backend = host, (backend_host, backend_port)
        self.certs, self.alpn, self.tls13_only, self.client_ca = certs, alpn, tls13_only, client_ca
        self.access_log = os.path.join(self.dir, "access.log")
        self.error_log = os.path.join(self.dir, "error.log")
        self.proc = None
        self.port = None
        self.url = None

    def start(self):
        with socket.socket() as s:  # a free port; nghttpx cannot report the one it got
            s.bind((self.host, 0))
            self.port = s.getsockname()[1]
        args = [NGHTTPX, "--conf=/dev/null", "--workers=1", "--no-ocsp", "--no-via",
                "--frontend=%s,%d" % (self.host, self.port),
                "--backend=%s,%d;;proto=http/1.1" % self.backend,
                "--npn-list=" + ",".join(self.alpn),
                # watches stay open for minutes with nothing to send between bookmarks
                "--backend-read-timeout=10m", "--frontend-http2-read-timeout=10m",
                "--accesslog-file=" + self.access_log, "--accesslog-write-early",
                "--accesslog-format=" + "|".join("$" + f for f in FIELDS),
                "--errorlog-file=" + self.error_log]
        if self.tls13_only:
            args += ["--tls-min-proto-version=TLSv1.3", "--tls-max-proto-version=TLSv1.3"]
        if self.client_ca:
            args += ["--verify-client", "--verify-client-cacert=" + self.client_ca]
        args += [self.certs.key, self.certs.cert]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("nghttpx did not start: %s" % self.errors())
                time.sleep(0.05)
        self.url = "https://%s:%d" % (self.host, self.port)
        return self

    def log(self):
        """[{remote_port, alpn, tls_protocol, method, path, status, ...}] so far."""
        try:
            with open(self.access_log) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        return [dict(zip(FIELDS, line.split("|"))) for line in lines if line]

    def errors(self):
        try:
            with open(self.error_log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: finish, then exit
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

#!/usr/bin/python3
"""NRI runtime simulator: the containerd side of NRI, strict like the real one.

It listens on a unix socket as containerd's NRI adaptation does, speaks the
NRI multiplexer and ttrpc (containerd/nri pkg/net/multiplex, containerd/ttrpc),
accepts RegisterPlugin, sends Configure then Synchronize (optionally split in
parts with `more`), sends container events on command, serves UpdateContainers
and applies the cpusets plugins ask for. With cgroups=True it starts real
processes in real cgroups (v2 at /sys/fs/cgroup, or the v1 cpuset hierarchy)
and writes cpuset.cpus, so pinning is real.

Strict: anything the real runtime would refuse closes the plugin's connection
with a logged reason (see Conn.closed_reason): unknown conn ids, mux frames
over 4096 bytes (the Go reader fails with ENOMEM on them), ttrpc messages over
4 MiB, wrong message types, even or non-increasing stream ids, responses to no
request, undecodable messages, a first request other than RegisterPlugin, a
bad plugin name or index, no registration within the registration timeout,
invalid event masks, split-Synchronize answers other than `more`, an error
from Configure or Synchronize, any request that goes unanswered past the
request timeout.

The scheduler adjustment (LinuxScheduler, NRI v0.11): a Runtime that calls
itself a runtime with NRI v0.11 (runtime_name/runtime_version, e.g.
"containerd" "2.2.1") takes it from CreateContainer responses (one plugin at
most may set it), shows it in the container's LinuxContainer.scheduler, and
with real processes applies it the way crun does: sched_setattr(2) on the
container's process from the parent, once it joined its cgroup; if the kernel
refuses, the start fails. An older one ignores the field, as real ones do.
Evictions in UpdateContainers stop the container (its process is killed,
plugins see StopContainer) and are listed in Runtime.evicted.

Messages come from the project's own proto/nri_api.proto and nri_ttrpc.proto,
compiled with protoc --python_out into a temporary directory at import.

As a library (pytest fixtures):

    rt = Runtime("/tmp/nri.sock", sync_parts=3).start()
    conn = rt.wait_plugin(timeout=5)
    pod = rt.add_pod("web")
    ctr = rt.create_container(pod, "app", env={"PIN": "1"})
    assert ctr.cpus == "1"
    rt.stop()

Standalone: test/sim/nrisim.py --socket PATH [--cgroups] [--sync-parts N]
then commands on stdin (help lists them).
"""

import argparse
import atexit
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SVC_PLUGIN = "nri.pkg.api.v1alpha1.Plugin"
SVC_RUNTIME = "nri.pkg.api.v1alpha1.Runtime"
CONN_PLUGIN = 1   # the plugin serves, we call
CONN_RUNTIME = 2  # we serve, the plugin calls
MSG_MAX = 4 << 20
GO_FRAME_READ_MAX = 4096
T_REQUEST, T_RESPONSE, T_DATA = 1, 2, 3

OK, UNKNOWN, INVALID_ARGUMENT, UNIMPLEMENTED = 0, 2, 3, 12

EV_RUN_POD, EV_STOP_POD, EV_REMOVE_POD = 1, 2, 3
EV_CREATE, EV_POST_CREATE, EV_START, EV_POST_START = 4, 5, 6, 7
EV_UPDATE, EV_POST_UPDATE, EV_STOP, EV_REMOVE = 8, 9, 10, 11
VALID_EVENTS = 0x3FFF
# Events a runtime re-sends as StateChange when the method is UNIMPLEMENTED.
STATE_CHANGE_FALLBACK = {EV_RUN_POD, EV_STOP_POD, EV_REMOVE_POD, EV_POST_CREATE,
                         EV_START, EV_POST_START, EV_POST_UPDATE, EV_REMOVE, 13}

NAME_RE = re.compile(r"^[a-zA-Z0-9_.+-]+$")
IDX_RE = re.compile(r"^[0-9]{2}$")

# ---- protobuf modules from our .proto files ---------------------------------------------------

_pb_dir = None
api = None
tt = None


def _load_protos():
    global _pb_dir, api, tt
    if api is not None:
        return
    _pb_dir = tempfile.mkdtemp(prefix="nrisim-pb-")
    atexit.register(shutil.rmtree, _pb_dir, True)
    protos = os.path.join(ROOT, "proto")
    subprocess.run(["protoc", "--python_out=" + _pb_dir, "-I", protos,
                    os.path.join(protos, "nri_api.proto"),
                    os.path.join(protos, "nri_ttrpc.proto")], check=True)
    sys.path.insert(0, _pb_dir)
    import nri_api_pb2
    import nri_ttrpc_pb2
    api, tt = nri_api_pb2, nri_ttrpc_pb2


_load_protos()


class ProtocolError(Exception):
    """The plugin broke the protocol; its connection is closed."""


class PluginError(Exception):
    """A plugin answered with an error status."""

    def __init__(self, plugin, method, code, message):
        super().__init__(f"plugin {plugin} {method}: code {code}: {message}")
        self.plugin, self.method, self.code, self.message = plugin, method, code, message


class CreateContainerError(Exception):
    """Container creation failed (a plugin refused it or its adjustment)."""


# ---- sched_setattr(2) for the scheduler adjustment -----------------------------------------------

SCHED_POLICY = {0: None, 1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5, 7: 6}  # NRI enum -> Linux
SCHED_FLAG_BITS = {0: 0x01, 1: 0x02, 2: 0x04, 3: 0x08, 4: 0x10, 5: 0x20, 6: 0x40}
SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}.get(os.uname().machine)


def sched_setattr(pid, sched):
    """Apply an NRI LinuxScheduler to pid; OSError with the kernel's errno."""
    import ctypes
    policy = SCHED_POLICY.get(sched.policy)
    if policy is None:
        return
    flags = 0
    for f in sched.flags:
        flags |= SCHED_FLAG_BITS.get(f, 0)
    # struct sched_attr, SCHED_ATTR_SIZE_VER1
    attr = struct.pack("=IIQiIQQQII", 56, policy, flags, sched.nice, sched.priority,
                       sched.runtime, sched.deadline, sched.period, 0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(attr, len(attr))
    if libc.syscall(SYS_SCHED_SETATTR, ctypes.c_int(pid), buf, ctypes.c_uint(0)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# ---- cgroups ------------------------------------------------------------------------------------

class Cgroups:
    """Real cgroups for simulated containers: v2 if its cpuset controller is
    available at /sys/fs/cgroup, else the v1 cpuset hierarchy."""

    def __init__(self, root_name):
        v2 = "/sys/fs/cgroup"
        v1 = "/sys/fs/cgroup/cpuset"
        ctl = os.path.join(v2, "cgroup.controllers")
        if os.path.exists(ctl) and "cpuset" in open(ctl).read().split():
            self.version, self.mount = 2, v2
        elif os.path.exists(os.path.join(v1, "cpuset.cpus")):
            self.version, self.mount = 1, v1
        else:
            raise OSError("no cpuset cgroup hierarchy (v2 or v1) found")
        self.root = os.path.join(self.mount, root_name)
        os.makedirs(self.root, exist_ok=True)
        if self.version == 2:
            self._write(os.path.join(self.mount, "cgroup.subtree_control"), "+cpuset")
            self._write(os.path.join(self.root, "cgroup.subtree_control"), "+cpuset")
        else:
            for f in ("cpuset.cpus", "cpuset.mems"):
                self._write(os.path.join(self.root, f),
                            open(os.path.join(self.mount, f)).read().strip())

    @staticmethod
    def _write(path, value):
        with open(path, "w") as f:
            f.write(value)

    # -- CPU limits (CFS quota) in the v1 cpu hierarchy: pod cgroups hold
    # their containers there, as the kubelet lays them out; v2 nodes are
    # covered by the driver's fake-cgroupfs unit tests instead. --

    CPU_V1 = "/sys/fs/cgroup/cpu"

    @property
    def cpu_root(self):
        return os.path.join(self.CPU_V1, os.path.basename(self.root))

    def cpu_available(self):
        return self.version == 1 and os.path.exists(os.path.join(self.CPU_V1,
                                                                 "cpu.cfs_quota_us"))

    def cpu_create(self, rel, quota_us, period_us=100000):
        """A cgroup at cpu_root/rel with a CFS quota (-1: none)."""
        if not self.cpu_available():
            raise OSError("CPU limits need the v1 cpu hierarchy at " + self.CPU_V1)
        p = os.path.join(self.cpu_root, rel)
        os.makedirs(p, exist_ok=True)
        self._write(os.path.join(p, "cpu.cfs_period_us"), str(period_us))
        self._write(os.path.join(p, "cpu.cfs_quota_us"), str(quota_us))
        return p

    @staticmethod
    def cpu_stat(path):
        """cpu.stat of a cpu cgroup directory as a dict."""
        with open(os.path.join(path, "cpu.stat")) as f:
            return {k: int(v) for k, v in (line.split() for line in f if line.strip())}

    @staticmethod
    def available():
        try:
            return os.geteuid() == 0 and (
                "cpuset" in open("/sys/fs/cgroup/cgroup.controllers").read().split()
                if os.path.exists("/sys/fs/cgroup/cgroup.controllers")
                else os.path.exists("/sys/fs/cgroup/cpuset/cpuset.cpus"))
        except OSError:
            return False

    def path_of(self, name):
        return os.path.join(self.root, name)

    def create(self, name, cpus):
        p = self.path_of(name)
        os.makedirs(p, exist_ok=True)
        if self.version == 1:
            self._write(os.path.join(p, "cpuset.mems"),
                        open(os.path.join(self.root, "cpuset.mems")).read().strip())
        if not cpus:  # the parent's
            f = "cpuset.cpus.effective" if self.version == 2 else "cpuset.cpus"
            cpus = open(os.path.join(self.root, f)).read().strip()
        self.set_cpus(name, cpus)
        return p

    def set_cpus(self, name, cpus):
        self._write(os.path.join(self.path_of(name), "cpuset.cpus"), cpus)

    def start(self, name, argv, cpu_cgroup=None):
        procs = [os.path.join(self.path_of(name), "cgroup.procs")]
        if cpu_cgroup:
            procs.append(os.path.join(cpu_cgroup, "cgroup.procs"))

        def enter():  # in the child, before exec: join the cgroups
            # As runc (1.2.7, 1.3.1 on) and crun do: forget the mask this
            # process inherited, which since Linux 6.2 would narrow what the
            # cpuset gives the container; the kernel trims an all-set mask to
            # the CPUs that exist.
            os.sched_setaffinity(0, range(8192))
            for p in procs:
                with open(p, "w") as f:
                    f.write(str(os.getpid()))
        return subprocess.Popen(argv, preexec_fn=enter, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def remove(self, name):
        for _ in range(50):
            try:
                os.rmdir(self.path_of(name))
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)  # processes still leaving

    def cleanup(self):
        try:
            for d in os.listdir(self.root):
                if os.path.isdir(os.path.join(self.root, d)):
                    self.remove(d)
            os.rmdir(self.root)
        except OSError:
            pass
        if os.path.isdir(self.cpu_root):  # pods, then the root, deepest first
            for top, dirs, _ in os.walk(self.cpu_root, topdown=False):
                for d in dirs:
                    try:
                        os.rmdir(os.path.join(top, d))
                    except OSError:
                        pass
            try:
                os.rmdir(self.cpu_root)
            except OSError:
                pass


def cpus_allowed(pid):
    """Cpus_allowed_list of a process, as the kernel enforces it."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return None


# ---- one plugin connection ----------------------------------------------------------------------

class Conn:
    """One plugin's connection: the mux, both ttrpc directions, its setup."""

    def __init__(self, rt, sock, serial):
        self.rt = rt
        self.sock = sock
        self.serial = serial
        self.name = None
        self.idx = None
        self.events = None          # mask from Configure
        self.registered = threading.Event()
        self.ready = threading.Event()     # configured and synchronized
        self.closed = threading.Event()
        self.closed_reason = None
        self.sync_updates = []      # what the last Synchronize returned
        self.configure_response = None
        self._wlock = threading.Lock()
        self._lock = threading.Lock()
        self._next_stream = 1
        self._pending = {}          # stream id -> [event, response or exception]
        self._last_req_stream = 0   # conn 2: requests from the plugin
        self._raw = None            # call_raw(): [stream ids, responses, event]
        self._streams = {CONN_PLUGIN: bytearray(), CONN_RUNTIME: bytearray()}
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name=f"nrisim-conn{serial}")
        self._reg_timer = threading.Timer(rt.registration_timeout, self._registration_timeout)
        self._reg_timer.daemon = True

    def __repr__(self):
        return f"<plugin {self.idx}-{self.name} #{self.serial}>"

    @property
    def label(self):
        return f"{self.idx}-{self.name}" if self.name else f"conn#{self.serial}"

    def start(self):
        self._reg_timer.start()
        self._reader.start()

    def subscribed(self, event):
        return self.events is not None and (self.events == 0 or self.events & (1 << (event - 1)))

    # -- closing --

    def close(self, reason):
        with self._lock:
            if self.closed.is_set():
                return
            self.closed_reason = reason
            self.closed.set()
            pending, self._pending = self._pending, {}
        self._reg_timer.cancel()
        self.rt._log(f"closing {self.label}: {reason}")
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for slot in pending.values():
            slot[1] = ConnectionError(f"connection closed: {reason}")
            slot[0].set()
        raw = self._raw
        if raw is not None:
            raw[2].set()
        self.rt._conn_closed(self)

    def _registration_timeout(self):
        if not self.registered.is_set():
            self.close("plugin registration timed out")

    # -- writing --

    def send_raw(self, data):
        """Bytes straight onto the socket (tests inject garbage with it)."""
        with self._wlock:
            self.sock.sendall(data)

    def _send(self, conn, stream, mtype, body, flags=0):
        msg = struct.pack(">IIBB", len(body), stream, mtype, flags) + body
        if len(body) > MSG_MAX:
            raise ValueError("ttrpc message too large")
        mode = self.rt.write_mode
        if mode == "go":  # one frame if it fits 4096, else 4096 + the rest
            chunks = [msg] if len(msg) <= 4096 else [msg[:4096], msg[4096:]]
        elif mode == "small":  # many small frames, the header split too
            chunks = [msg[i:i + 7] for i in range(0, len(msg), 7)]
        else:  # "4k": frames of at most 4096, like our C writer
            chunks = [msg[i:i + 4096] for i in range(0, len(msg), 4096)] or [b""]
        try:
            with self._wlock:
                for c in chunks:
                    # Go writes the mux header and the payload with two write()s.
                    self.sock.sendall(struct.pack(">II", conn, len(c)))
                    self.sock.sendall(c)
        except OSError as e:
            self.close(f"write failed: {e}")
            raise ConnectionError(str(e)) from e

    # -- calls to the plugin (conn 1) --

    def call(self, method, req, resp_cls, timeout=None):
        """Call Plugin.<method>; returns the decoded response. PluginError on an
        error status; ConnectionError if the connection is (or gets) closed;
        a missed deadline closes the connection, as the runtime does."""
        timeout = self.rt.request_timeout if timeout is None else timeout
        with self._lock:
            if self.closed.is_set():
                raise ConnectionError(f"connection closed: {self.closed_reason}")
            stream = self._next_stream
            self._next_stream += 2
            slot = [threading.Event(), None]
            self._pending[stream] = slot
        r = tt.Request(service=SVC_PLUGIN, method=method, payload=req.SerializeToString(),
                       timeout_nano=int(timeout * 1e9))
        self._send(CONN_PLUGIN, stream, T_REQUEST, r.SerializeToString())
        if not slot[0].wait(timeout):
            self.close(f"{method} timed out after {timeout}s")
            raise ConnectionError(f"{method} timed out")
        if isinstance(slot[1], Exception):
            raise slot[1]
        resp = slot[1]
        if resp.HasField("status") and resp.status.code != OK:
            raise PluginError(self.label, method, resp.status.code, resp.status.message)
        out = resp_cls()
        try:
            out.ParseFromString(resp.payload)
        except Exception as e:
            self.close(f"undecodable {method} response: {e}")
            raise ConnectionError("undecodable response") from e
        return out

    def call_raw(self, streams, method, req, timeout=None):
        """Plugin.<method> requests on the stream ids given, in one write,
        whatever those ids are (a correct runtime only uses odd increasing
        ones: call() does). Returns the responses in arrival order as
        (stream id, code, message); ConnectionError if the connection closes
        first. Later call()s use ids above all of these."""
        timeout = self.rt.request_timeout if timeout is None else timeout
        body = tt.Request(service=SVC_PLUGIN, method=method, payload=req.SerializeToString(),
                          timeout_nano=int(timeout * 1e9)).SerializeToString()
        done = threading.Event()
        with self._lock:
            if self.closed.is_set():
                raise ConnectionError(f"connection closed: {self.closed_reason}")
            self._raw = [list(streams), [], done]
            self._next_stream = max(self._next_stream, max(streams) + 2) | 1
        data = b""
        for sid in streams:
            msg = struct.pack(">IIBB", len(body), sid, T_REQUEST, 0) + body
            data += struct.pack(">II", CONN_PLUGIN, len(msg)) + msg
        try:
            self.send_raw(data)
            if not done.wait(timeout) and not self.closed.is_set():
                raise TimeoutError(f"{len(streams)} responses to {method} in {timeout}s")
        finally:
            with self._lock:
                raw, self._raw = self._raw, None
        if len(raw[1]) < len(streams):
            raise ConnectionError(f"connection closed: {self.closed_reason}")
        return raw[1]

    # -- reading --

    def _read_loop(self):
        hdr = b""
        try:
            while not self.closed.is_set():
                data = self.sock.recv(65536)
                if not data:
                    self.close("plugin closed the connection")
                    return
                hdr += data
                while len(hdr) >= 8:
                    conn, flen = struct.unpack(">II", hdr[:8])
                    if conn not in (CONN_PLUGIN, CONN_RUNTIME):
                        raise ProtocolError(f"unknown mux conn id {conn}")
                    if flen > GO_FRAME_READ_MAX:
                        raise ProtocolError(
                            f"mux frame of {flen} bytes: the Go reader fails with ENOMEM "
                            f"above {GO_FRAME_READ_MAX}")
                    if len(hdr) < 8 + flen:
                        break
                    self._streams[conn] += hdr[8:8 + flen]
                    hdr = hdr[8 + flen:]
                    self._drain(conn)
        except ProtocolError as e:
            self.close(f"protocol error: {e}")
        except OSError as e:
            self.close(f"read failed: {e}")

    def _drain(self, conn):
        buf = self._streams[conn]
        while len(buf) >= 10:
            length, stream, mtype, flags = struct.unpack(">IIBB", buf[:10])
            if length > MSG_MAX:
                raise ProtocolError(f"ttrpc message of {length} bytes")
            if len(buf) < 10 + length:
                return
            body = bytes(buf[10:10 + length])
            del buf[:10 + length]
            if conn == CONN_PLUGIN:
                self._on_response(stream, mtype, flags, body)
            else:
                self._on_request(stream, mtype, flags, body)

    def _on_response(self, stream, mtype, flags, body):
        if mtype != T_RESPONSE:
            raise ProtocolError(f"message type {mtype} on conn {CONN_PLUGIN} (expected response)")
        with self._lock:
            raw = self._raw
            if raw is not None and stream in raw[0]:
                raw[0].remove(stream)
                resp = tt.Response()
                resp.ParseFromString(body)
                st = resp.status if resp.HasField("status") else None
                raw[1].append((stream, st.code if st else OK, st.message if st else ""))
                if not raw[0]:
                    raw[2].set()
                return
            slot = self._pending.pop(stream, None)
        if slot is None:
            raise ProtocolError(f"response for unknown stream {stream}")
        resp = tt.Response()
        try:
            resp.ParseFromString(body)
        except Exception as e:
            raise ProtocolError(f"undecodable ttrpc response: {e}") from e
        slot[1] = resp
        slot[0].set()

    def _on_request(self, stream, mtype, flags, body):
        if mtype != T_REQUEST:
            raise ProtocolError(f"message type {mtype} on conn {CONN_RUNTIME} (expected request)")
        if flags != 0:
            raise ProtocolError(f"request flags {flags:#x} (NRI is unary)")
        if stream % 2 == 0 or stream <= self._last_req_stream:
            raise ProtocolError(f"stream id {stream} after {self._last_req_stream}: "
                                "StreamID cannot be re-used and must increment")
        self._last_req_stream = stream
        req = tt.Request()
        try:
            req.ParseFromString(body)
        except Exception as e:
            raise ProtocolError(f"undecodable ttrpc request: {e}") from e
        if req.service != SVC_RUNTIME:
            return self._reply_error(stream, UNIMPLEMENTED, f"service {req.service}")
        if not self.registered.is_set() and req.method != "RegisterPlugin":
            raise ProtocolError(f"{req.method} before RegisterPlugin")
        if req.method == "RegisterPlugin":
            return self._register(stream, req.payload)
        if req.method == "UpdateContainers":
            return self._update_containers(stream, req.payload)
        return self._reply_error(stream, UNIMPLEMENTED, f"method {req.method}")

    def _reply(self, stream, msg):
        self._send(CONN_RUNTIME, stream, T_RESPONSE,
                   tt.Response(payload=msg.SerializeToString()).SerializeToString())

    def _reply_error(self, stream, code, message):
        self._send(CONN_RUNTIME, stream, T_RESPONSE,
                   tt.Response(status=tt.Status(code=code, message=message)).SerializeToString())

    # -- the Runtime service --

    def _register(self, stream, payload):
        if self.registered.is_set():
            raise ProtocolError("RegisterPlugin twice")
        req = api.RegisterPluginRequest()
        try:
            req.ParseFromString(payload)
        except Exception as e:
            raise ProtocolError(f"undecodable RegisterPluginRequest: {e}") from e
        err = None
        if not NAME_RE.match(req.plugin_name):
            err = f"invalid plugin name \"{req.plugin_name}\""
        elif not IDX_RE.match(req.plugin_idx):
            err = f"invalid plugin index \"{req.plugin_idx}\""
        if err:
            self._reply_error(stream, UNKNOWN, err)
            self.close(f"registration refused: {err}")
            return
        self.name, self.idx = req.plugin_name, req.plugin_idx
        self.registered.set()
        self._reg_timer.cancel()
        self.rt._log(f"registered {self.label}")
        threading.Thread(target=self._setup, args=(stream,), daemon=True,
                         name=f"nrisim-setup{self.serial}").start()

    def _setup(self, reg_stream):
        """Configure and Synchronize, like the adaptation's plugin start()."""
        try:
            if not self.rt.configure_before_register_reply:
                self._reply(reg_stream, api.Empty())
            cfg = api.ConfigureRequest(
                runtime_name=self.rt.runtime_name, runtime_version=self.rt.runtime_version,
                registration_timeout=int(self.rt.registration_timeout * 1000),
                request_timeout=int(self.rt.request_timeout * 1000))
            resp = self.call("Configure", cfg, api.ConfigureResponse)
            if self.rt.configure_before_register_reply:
                self._reply(reg_stream, api.Empty())
            if resp.events & ~VALID_EVENTS:
                self.close(f"invalid plugin events {resp.events:#x}")
                return
            self.events = resp.events
            self.configure_response = resp
            self.rt._log(f"configured {self.label} events={resp.events:#x}")
            self._synchronize()
        except PluginError as e:
            self.close(f"setup failed: {e}")
            return
        except ConnectionError:
            return
        self.ready.set()
        self.rt._plugin_ready(self)

    def _synchronize(self):
        pods, ctrs = self.rt._snapshot()
        parts = self.rt._split_sync(pods, ctrs)
        deadline = time.monotonic() + self.rt.request_timeout
        for i, (p, c) in enumerate(parts):
            more = i < len(parts) - 1
            req = api.SynchronizeRequest(pods=p, containers=c, more=more)
            left = max(0.01, deadline - time.monotonic())
            resp = self.call("Synchronize", req, api.SynchronizeResponse, timeout=left)
            if more and (not resp.more or len(resp.update)):
                self.close("plugin does not handle split sync requests")
                raise ConnectionError("split sync")
        self.sync_updates = list(resp.update)
        self.rt._log(f"synchronized {self.label} parts={len(parts)} updates={len(resp.update)}")
        self.rt._apply_updates(resp.update, self.label)

    def _update_containers(self, stream, payload):
        req = api.UpdateContainersRequest()
        try:
            req.ParseFromString(payload)
        except Exception as e:
            raise ProtocolError(f"undecodable UpdateContainersRequest: {e}") from e
        failed = self.rt._apply_updates(req.update, self.label, unsolicited=True)
        self._reply(stream, api.UpdateContainersResponse(failed=failed))
        for ev in req.evict:
            self.rt._evict(ev.container_id, ev.reason, self.label)


# ---- the runtime ---------------------------------------------------------------------------------

class Container:
    """A simulated container; msg is the NRI Container the runtime shows."""

    def __init__(self, pod, msg):
        self.pod = pod
        self.msg = msg
        self.proc = None
        self.cgroup = None
        self.cpu_cgroup = None       # its v1 cpu cgroup when it has a CPU limit
        self.scheduler = None       # the LinuxScheduler a plugin asked for, if any
        self.scheduler_error = None  # why applying it failed

    @property
    def id(self):
        return self.msg.id

    @property
    def name(self):
        return self.msg.name

    @property
    def cpus(self):
        return self.msg.linux_.resources.cpu.cpus

    @property
    def mems(self):
        return self.msg.linux_.resources.cpu.mems

    @property
    def pid(self):
        return self.proc.pid if self.proc else 0

    def __repr__(self):
        return f"<container {self.name} {self.id[:12]} cpus={self.cpus!r}>"


class Runtime:
    """The simulated runtime. Thread-safe; plugin calls never hold its lock."""

    def __init__(self, socket_path, *, request_timeout=2.0, registration_timeout=5.0,
                 configure_before_register_reply=False, sync_parts=None, write_mode="go",
                 cgroups=False, cgroup_root=None, command=("sleep", "3600"), verbose=False,
                 runtime_name="nrisim", runtime_version="0.1"):
        self.socket_path = socket_path
        self.request_timeout = request_timeout
        self.registration_timeout = registration_timeout
        self.configure_before_register_reply = configure_before_register_reply
        self.sync_parts = sync_parts
        self.write_mode = write_mode
        self.command = list(command)
        self.verbose = verbose
        self.runtime_name, self.runtime_version = runtime_name, runtime_version
        self.evicted = []          # (container id, reason, who)
        self.cg = Cgroups(cgroup_root or f"nrisim-{os.getpid()}") if cgroups else None
        self.log = []
        self.applied = []          # (container id, cpus, who) in order
        self.conns = []            # every connection ever accepted
        self.pods = {}             # id -> PodSandbox
        self.containers = {}       # id -> Container
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._lsock = None
        self._acceptor = None
        self._serial = 0

    # -- lifecycle --

    def start(self):
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        os.makedirs(os.path.dirname(self.socket_path) or ".", exist_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.socket_path)
        s.listen(16)
        self._lsock = s
        self._acceptor = threading.Thread(target=self._accept_loop, args=(s,), daemon=True,
                                          name="nrisim-accept")
        self._acceptor.start()
        self._log(f"listening on {self.socket_path}")
        return self

    def stop(self, keep_socket=False):
        """The runtime goes away: listener and every plugin connection closed.
        Pods and containers stay (they outlive a containerd restart)."""
        s, self._lsock = self._lsock, None
        if s:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for c in list(self.conns):
            c.close("runtime shutting down")
        if not keep_socket and os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        if self._acceptor:
            self._acceptor.join(2)

    def restart(self):
        self.stop()
        return self.start()

    def close(self):
        """stop() and also end every container process and cgroup."""
        self.stop()
        for c in list(self.containers.values()):
            self._kill(c)
            if self.cg and c.cgroup:
                self.cg.remove(c.id)
        if self.cg:
            self.cg.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def _accept_loop(self, lsock):
        while True:
            try:
                s, _ = lsock.accept()
            except OSError:
                return
            with self._lock:
                self._serial += 1
                c = Conn(self, s, self._serial)
                self.conns.append(c)
                self._cond.notify_all()
            self._log(f"accepted conn#{c.serial}")
            c.start()

    def _log(self, line):
        with self._lock:
            self.log.append(f"{time.monotonic():.3f} {line}")
        if self.verbose:
            print(f"nrisim: {line}", file=sys.stderr, flush=True)

    def _conn_closed(self, conn):
        with self._lock:
            self._cond.notify_all()

    def _plugin_ready(self, conn):
        with self._lock:
            self._cond.notify_all()

    # -- waiting --

    def wait_for(self, pred, timeout=5.0):
        """Wait until pred() is true (checked on every state change and every
        50 ms); returns its value or raises TimeoutError."""
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                v = pred()
                if v:
                    return v
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"condition not met in {timeout}s; log tail: "
                                       + " | ".join(self.log[-8:]))
                self._cond.wait(min(left, 0.05))

    def plugins(self):
        """Connections that are configured, synchronized and open, in index order."""
        with self._lock:
            ready = [c for c in self.conns if c.ready.is_set() and not c.closed.is_set()]
        return sorted(ready, key=lambda c: (c.idx, c.name))

    def wait_plugin(self, timeout=5.0, after=0):
        """The first ready plugin connection with serial > after."""
        return self.wait_for(lambda: next((c for c in self.plugins() if c.serial > after),
                                          None), timeout)

    def wait_conn(self, timeout=5.0, after=0):
        """The first accepted connection with serial > after (ready or not)."""
        return self.wait_for(lambda: next((c for c in self.conns if c.serial > after), None),
                             timeout)

    # -- state --

    def add_pod(self, name, namespace="default", uid=None, cpu_limit_m=None):
        """cpu_limit_m: the pod's CPU limit in millicores; with real cgroups
        its pod cgroup gets the CFS quota the kubelet would give it (the sum
        of its containers' limits), in the v1 cpu hierarchy."""
        uid = uid or secrets.token_hex(16)
        pod = api.PodSandbox(id=secrets.token_hex(32), name=name, uid=uid, namespace=namespace,
                             runtime_handler="runc")
        pod.linux_.cgroup_parent = f"/kubepods/pod{uid}"
        if self.cg and cpu_limit_m:
            pod.linux_.cgroup_parent = f"/{os.path.basename(self.cg.root)}/pod{uid}"
            self.cg.cpu_create(f"pod{uid}", cpu_limit_m * 100)
        pod.labels["app"] = name
        with self._lock:
            self.pods[pod.id] = pod
        return pod

    def remove_pod(self, pod):
        """The pod sandbox goes away (its containers removed first): the
        runtime's RemovePodSandbox to the plugins subscribed to it."""
        self._event("RemovePodSandbox", EV_REMOVE_POD, api.PodSandboxRequest(pod=pod), api.Empty)
        with self._lock:
            self.pods.pop(pod.id, None)

    def _snapshot(self):
        with self._lock:
            pods = [api.PodSandbox.FromString(p.SerializeToString()) for p in self.pods.values()]
            ctrs = [api.Container.FromString(c.msg.SerializeToString())
                    for c in self.containers.values()]
        return pods, ctrs

    def _split_sync(self, pods, ctrs):
        """Parts of a Synchronize: sync_parts if set (containers spread over
        them, pods in the first), else split only what exceeds 4 MiB."""
        n = self.sync_parts
        if not n:
            whole = api.SynchronizeRequest(pods=pods, containers=ctrs).ByteSize()
            n = 1 + whole // (MSG_MAX - 4096)
        if n <= 1:
            return [(pods, ctrs)]
        parts = [([], []) for _ in range(n)]
        parts[0][0].extend(pods)
        for i, c in enumerate(ctrs):
            parts[i % n][1].append(c)
        return parts

    def _apply_cpus(self, ctr, cpus, who):
        if not cpus:
            return
        if self.cg and ctr.cgroup:
            self.cg.set_cpus(ctr.id, cpus)  # OSError: the update failed
        with self._lock:
            ctr.msg.linux_.resources.cpu.cpus = cpus
            self.applied.append((ctr.id, cpus, who))
            self._cond.notify_all()
        self._log(f"{who}: {ctr.name} {ctr.id[:12]} cpus={cpus}")

    def _apply_updates(self, updates, who, unsolicited=False):
        """Apply ContainerUpdates; returns the ones that failed."""
        failed = []
        for u in updates:
            with self._lock:
                ctr = self.containers.get(u.container_id)
            try:
                if ctr is None:
                    raise KeyError(u.container_id)
                self._apply_cpus(ctr, u.linux_.resources.cpu.cpus, who)
            except (KeyError, OSError) as e:
                self._log(f"{who}: update of {u.container_id[:12]} failed: {e!r}")
                if not u.ignore_failure:
                    failed.append(u)
        return failed

    # -- events --

    def _event(self, method, event, req, resp_cls, fallback=None):
        """Send an event to every subscribed plugin in index order; returns
        [(conn, response)]. UNIMPLEMENTED falls back to StateChange where the
        runtime does. A dead plugin is skipped (the runtime goes on without)."""
        out = []
        for c in self.plugins():
            if not c.subscribed(event):
                continue
            try:
                out.append((c, c.call(method, req, resp_cls)))
            except PluginError as e:
                if e.code == UNIMPLEMENTED and event in STATE_CHANGE_FALLBACK:
                    sc = api.StateChangeEvent(event=event, pod=fallback[0],
                                              container=fallback[1])
                    try:
                        c.call("StateChange", sc, api.Empty)
                    except ConnectionError:
                        pass
                    continue
                raise
            except ConnectionError:
                continue
        return out

    def create_container(self, pod, name, env=None, cpus="", start=True, argv=None,
                         cpu_limit_m=None):
        """CreateContainer through the plugins, then create (and start) it.
        env: dict or list of KEY=VALUE. cpu_limit_m: its CPU limit (a CFS
        quota of limit/1000 periods of 100 ms, in its pod's cpu cgroup: the
        pod needs one, see add_pod()), which a plugin's adjustment may
        change (LinuxCPU.quota, -1: none). Raises CreateContainerError."""
        if isinstance(env, dict):
            env = [f"{k}={v}" for k, v in env.items()]
        cid = secrets.token_hex(32)
        msg = api.Container(id=cid, pod_sandbox_id=pod.id, name=name,
                            state=api.CONTAINER_CREATED, env=env or [],
                            args=list(argv or self.command))
        msg.linux_.cgroups_path = (f"/{os.path.basename(self.cg.root)}/{cid}" if self.cg
                                   else f"/kubepods/pod{pod.uid}/{cid}")
        msg.linux_.resources.cpu.cpus = cpus
        if cpu_limit_m:
            msg.linux_.resources.cpu.quota.value = cpu_limit_m * 100
            msg.linux_.resources.cpu.period.value = 100000
        msg.labels["io.kubernetes.container.name"] = name
        req = api.ContainerRequest(pod=pod, container=msg)
        try:
            results = self._event("CreateContainer", EV_CREATE, req, api.CreateContainerResponse)
        except PluginError as e:
            self._log(f"CreateContainer {name} failed: {e}")
            raise CreateContainerError(str(e)) from e
        adjust, owner, updates, mems, quota = "", None, [], "", None
        sched, sched_owner = None, None
        for conn, resp in results:
            want = resp.adjust.linux_.resources.cpu.cpus
            if want:
                if owner:
                    raise CreateContainerError(
                        f"plugins {owner} and {conn.label} both tried to set cpus")
                adjust, owner = want, conn.label
            # cpuset.mems is recorded on the container, not written to a
            # real cgroup: the nodes a test names need not exist here
            mems = resp.adjust.linux_.resources.cpu.mems or mems
            if resp.adjust.linux_.resources.cpu.HasField("quota"):
                quota = resp.adjust.linux_.resources.cpu.quota.value
            if resp.adjust.linux_.HasField("scheduler"):
                if sched_owner:
                    raise CreateContainerError(
                        f"plugins {sched_owner} and {conn.label} both tried to set the "
                        "scheduler")
                sched, sched_owner = resp.adjust.linux_.scheduler, conn.label
            updates.extend((conn.label, u) for u in resp.update)
        ctr = Container(pod, msg)
        if sched is not None and self.applies_scheduler:
            ctr.scheduler = sched
            msg.linux_.scheduler.CopyFrom(sched)
            self._log(f"{sched_owner}: {name} scheduler policy={sched.policy} "
                      f"runtime={sched.runtime} deadline={sched.deadline} period={sched.period}")
        with self._lock:
            self.containers[cid] = ctr
        if adjust:
            msg.linux_.resources.cpu.cpus = adjust
        if mems:
            msg.linux_.resources.cpu.mems = mems
        if quota is not None:
            msg.linux_.resources.cpu.quota.value = quota
        if self.cg:
            ctr.cgroup = self.cg.create(cid, msg.linux_.resources.cpu.cpus)
            if cpu_limit_m:
                # as runc: cpu.cfs_quota_us from the spec, -1 (none) included
                ctr.cpu_cgroup = self.cg.cpu_create(
                    os.path.join(os.path.basename(pod.linux_.cgroup_parent), cid),
                    msg.linux_.resources.cpu.quota.value)
        if adjust:
            with self._lock:
                self.applied.append((cid, adjust, owner))
        for who, u in updates:
            self._apply_updates([u], who)
        self._event("PostCreateContainer", EV_POST_CREATE, req, api.Empty, (pod, msg))
        if start:
            self.start_container(ctr)
        return ctr

    def start_container(self, ctr):
        if self.cg:
            ctr.proc = self.cg.start(ctr.id, list(ctr.msg.args), ctr.cpu_cgroup)
            ctr.msg.pid = ctr.proc.pid
            if ctr.scheduler is not None:
                try:  # like crun: from the parent, the child in its cgroup
                    sched_setattr(ctr.proc.pid, ctr.scheduler)
                except OSError as e:
                    ctr.scheduler_error = e
                    self._log(f"{ctr.name}: scheduler refused: {e}")
                    self._kill(ctr)
                    ctr.msg.state = api.CONTAINER_STOPPED
                    raise CreateContainerError(f"applying the scheduler: {e}") from e
        ctr.msg.state = api.CONTAINER_RUNNING
        req = api.ContainerRequest(pod=ctr.pod, container=ctr.msg)
        self._event("StartContainer", EV_START, req, api.Empty, (ctr.pod, ctr.msg))
        self._event("PostStartContainer", EV_POST_START, req, api.Empty, (ctr.pod, ctr.msg))

    def start_container_with(self, ctr, proc):
        """Start ctr with a process the caller made (it joins the cgroup
        itself, when it likes): the runtime's Start events name its pid."""
        ctr.proc = proc
        ctr.msg.pid = proc.pid
        ctr.msg.state = api.CONTAINER_RUNNING
        req = api.ContainerRequest(pod=ctr.pod, container=ctr.msg)
        self._event("StartContainer", EV_START, req, api.Empty, (ctr.pod, ctr.msg))
        self._event("PostStartContainer", EV_POST_START, req, api.Empty, (ctr.pod, ctr.msg))

    def update_container(self, ctr, cpus):
        """A CRI UpdateContainerResources that sets cpus."""
        res = api.LinuxResources()
        res.cpu.cpus = cpus
        req = api.UpdateContainerRequest(pod=ctr.pod, container=ctr.msg, linux_resources=res)
        for conn, resp in self._event("UpdateContainer", EV_UPDATE, req,
                                      api.UpdateContainerResponse):
            self._apply_updates(resp.update, conn.label)
        self._apply_cpus(ctr, cpus, "cri")

    def stop_container(self, ctr):
        ctr.msg.state = api.CONTAINER_STOPPED
        self._kill(ctr)
        req = api.ContainerRequest(pod=ctr.pod, container=ctr.msg)
        for conn, resp in self._event("StopContainer", EV_STOP, req, api.StopContainerResponse):
            self._apply_updates(resp.update, conn.label)

    def remove_container(self, ctr):
        if ctr.msg.state != api.CONTAINER_STOPPED:
            self.stop_container(ctr)
        req = api.ContainerRequest(pod=ctr.pod, container=ctr.msg)
        self._event("RemoveContainer", EV_REMOVE, req, api.Empty, (ctr.pod, ctr.msg))
        if self.cg and ctr.cgroup:
            self.cg.remove(ctr.id)
        if ctr.cpu_cgroup:
            try:
                os.rmdir(ctr.cpu_cgroup)
            except OSError:
                pass
        with self._lock:
            self.containers.pop(ctr.id, None)

    @property
    def applies_scheduler(self):
        """NRI v0.11 runtimes (containerd 2.2.1, CRI-O 1.35.0) apply LinuxScheduler."""
        def ver(v):
            return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
        return ((self.runtime_name == "containerd" and ver(self.runtime_version) >= (2, 2, 1))
                or (self.runtime_name in ("cri-o", "crio")
                    and ver(self.runtime_version) >= (1, 35, 0)))

    def _evict(self, cid, reason, who):
        """An eviction: the container stops (outside the plugin's call)."""
        with self._lock:
            ctr = self.containers.get(cid)
            self.evicted.append((cid, reason, who))
            self._cond.notify_all()
        self._log(f"{who}: evict {cid[:12]}: {reason}")
        if ctr is not None:
            threading.Thread(target=self.stop_container, args=(ctr,), daemon=True,
                             name="nrisim-evict").start()

    def _kill(self, ctr):
        if ctr.proc and ctr.proc.poll() is None:
            ctr.proc.kill()
            ctr.proc.wait(5)


# ---- standalone ---------------------------------------------------------------------------------

HELP = """commands:
  pod NAME [NAMESPACE]            add a pod sandbox
  create POD NAME [K=V ...]       create and start a container (POD: name)
  update NAME CPUS                CRI update of a container's cpus
  stop NAME | remove NAME         container lifecycle
  list                            pods, containers, cpusets (and Cpus_allowed_list)
  plugins                         connected plugins
  restart                         drop every plugin, listen again
  log                             the runtime's log
  quit"""


def main():
    ap = argparse.ArgumentParser(description="NRI runtime simulator")
    ap.add_argument("--socket", default="/var/run/nri/nri.sock")
    ap.add_argument("--cgroups", action="store_true", help="real processes in real cgroups")
    ap.add_argument("--sync-parts", type=int, default=None)
    ap.add_argument("--configure-first", action="store_true",
                    help="send Configure before the RegisterPlugin reply")
    ap.add_argument("--request-timeout", type=float, default=2.0)
    ap.add_argument("--write-mode", choices=("go", "4k", "small"), default="go")
    a = ap.parse_args()
    rt = Runtime(a.socket, cgroups=a.cgroups, sync_parts=a.sync_parts,
                 configure_before_register_reply=a.configure_first,
                 request_timeout=a.request_timeout, write_mode=a.write_mode,
                 verbose=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    pods, ctrs = {}, {}
    print(HELP, flush=True)
    try:
        for line in sys.stdin:
            w = line.split()
            if not w:
                continue
            try:
                if w[0] == "pod":
                    pods[w[1]] = rt.add_pod(w[1], *(w[2:3]))
                elif w[0] == "create":
                    env = [x for x in w[3:] if "=" in x]
                    ctrs[w[2]] = rt.create_container(pods[w[1]], w[2], env=env)
                    print(ctrs[w[2]])
                elif w[0] == "update":
                    rt.update_container(ctrs[w[1]], w[2])
                elif w[0] == "stop":
                    rt.stop_container(ctrs[w[1]])
                elif w[0] == "remove":
                    rt.remove_container(ctrs.pop(w[1]))
                elif w[0] == "list":
                    for c in rt.containers.values():
                        allowed = cpus_allowed(c.pid) if c.pid else "-"
                        print(f"{c.pod.name}/{c.name} {c.id[:12]} cpus={c.cpus!r} "
                              f"allowed={allowed}")
                elif w[0] == "plugins":
                    for c in rt.plugins():
                        print(c, f"events={c.events:#x}")
                elif w[0] == "restart":
                    rt.restart()
                elif w[0] == "log":
                    print("\n".join(rt.log))
                elif w[0] == "quit":
                    break
                else:
                    print(HELP)
            except (KeyError, IndexError) as e:
                print(f"bad command: {e!r}")
            except (CreateContainerError, PluginError, ConnectionError) as e:
                print(f"failed: {e}")
            sys.stdout.flush()
    finally:
        rt.close()


if __name__ == "__main__":
    main()

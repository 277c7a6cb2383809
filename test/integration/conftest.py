"""Fixtures shared by dra-cpu's integration tests.

Run from the project root: /usr/bin/python3 -m pytest test/integration
(test/run.sh does this with B=<build dir> and a junit report).

Sections: paths, kube-apiserver simulator. Fixtures for the driver binary,
the kubelet gRPC client and the NRI runtime belong in their own sections
below; keep each fixture function-scoped unless it is expensive and stateless.
"""

import os
import sys

import pytest

# ---------------------------------------------------------------- paths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_DIR = os.path.join(ROOT, "test")
BUILD_DIR = os.path.join(ROOT, os.environ.get("B", "build"))
# test/ for the simulators (sim.*), test/helpers for the shared helpers (driver, claims).
for _p in (TEST_DIR, os.path.join(TEST_DIR, "helpers")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from sim.apiserver import ApiServer, SimClient, make_certs, start_process  # noqa: E402

# Every online CPU for this process and what it starts, as test/run.sh does
# for itself (test/helpers/all-cpus.sh says why), also when pytest is run
# alone from a pinned shell.
os.sched_setaffinity(0, range(8192))

# ------------------------------------------------ kube-apiserver simulator


@pytest.fixture(scope="session")
def sim_certs(tmp_path_factory):
    """One test CA + server cert (127.0.0.1, ::1, localhost) for the whole run."""
    return make_certs(str(tmp_path_factory.mktemp("sim-pki")))


@pytest.fixture
def apiserver(tmp_path, sim_certs):
    """A fresh in-process simulator: .url .ca .token .kubeconfig, faults, stats.

    Bookmarks every second and 30 min watch lifetimes like the real server's
    defaults allow; tests that need them sooner call set_bookmark_interval()
    or pass timeoutSeconds.
    """
    s = ApiServer(str(tmp_path / "apiserver"), certs=sim_certs).start()
    yield s
    s.stop()


@pytest.fixture
def kube(apiserver):
    """An authenticated JSON client for the apiserver fixture."""
    c = SimClient.for_server(apiserver)
    yield c
    c.close()


@pytest.fixture
def apiserver_process(tmp_path):
    """The simulator as a separate process (standalone mode), with a control port."""
    p = start_process(str(tmp_path / "apiserver-proc"))
    yield p
    p.stop()


# ------------------------------------------------------- the driver binary


@pytest.fixture
def node(apiserver):
    """A Node object on the simulator for the driver's ownerReferences."""
    apiserver.put_node("node-1", uid="0c1d2e3f-0000-4000-8000-00000000aaaa")
    return "node-1"


@pytest.fixture
def driver_dir():
    """A per-test directory on tmpfs (where /var/run lives on a node)."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="dra-cpu-e2e.",
                         dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def make_driver(apiserver, node, driver_dir):
    """Factory: make_driver(args=..., topology=...) -> an unstarted Driver;
    every driver made is stopped at the end of the test."""
    from driver import Driver

    made = []

    def make(**kw):
        kw.setdefault("kubeconfig", apiserver.kubeconfig)
        d = Driver(os.path.join(driver_dir, "d%d" % len(made)), **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop(timeout=5)
    for d in made:  # a sanitizer build reports into the driver's log
        for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            assert bad not in d.log(), d.log()[-4000:]


@pytest.fixture
def kubelet():
    """A kubelet speaking real gRPC (python3-grpcio) over unix sockets."""
    from sim.kubelet_client import KubeletClient

    k = KubeletClient()
    yield k
    k.close()

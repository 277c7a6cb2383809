"""The NRI plugin end to end: the real driver, the strict NRI runtime
simulator (real processes in real cgroups when root), claims prepared through
the grpcio kubelet from the API simulator."""

import os
import socket
import time

import pytest

from claims import claim, parse_list, ref
from driver import wait_for

sys_path_added = False


@pytest.fixture
def nri_env(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import Runtime

    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    d = make_driver(args=["--nri-socket", sock, "--no-bpf", "--reserved-cpus", "0"]).start()
    rt.wait_plugin(timeout=5)
    yield apiserver, d, kubelet, rt
    rt.close()


def prep(env, name, dev="cpudevnuma000", n="4", pods=()):
    """Prepares a claim reserved for pods (NRI simulator pods); returns it and
    the DRA_CPUSET_ line of its CDI spec."""
    apiserver, d, kubelet, rt = env
    c = apiserver.put_claim(claim(name, [("cpu", dev, n)], reserved_for=pods))
    r = kubelet.prepare(d.dra_sock, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == ""
    with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json" % c["metadata"]["uid"])) as f:
        import json
        env_line = json.load(f)["devices"][0]["containerEdits"]["env"][0]
    return c, env_line


def envd(line):
    k, v = line.split("=", 1)
    return {k: v}


def cpus(ctr):
    return parse_list(ctr.cpus)


ALL = set(range(1, 384))  # synthetic-384 minus reserved CPU 0


def test_pinned_and_shared_containers(nri_env):
    apiserver, d, kubelet, rt = nri_env
    pod = rt.add_pod("web")
    shared = rt.create_container(pod, "sidecar")
    assert cpus(shared) == ALL
    db = rt.add_pod("db")
    c, line = prep(nri_env, "db", pods=[db])
    app = rt.create_container(db, "app", env=envd(line))
    mine = parse_list(line.split("=", 1)[1])
    assert cpus(app) == mine
    # the shared container shrank when the claim's container started
    assert cpus(shared) == ALL - mine
    m = d.metrics()
    assert m["dra_cpu_nri_containers_exclusive"] == 1 and m["dra_cpu_nri_containers_shared"] == 1
    assert m["dra_cpu_shared_pool_cpus"] == 383 - 4
    owners = [k for k in m if k.startswith("dra_cpu_cpu_owner_info")]
    assert len(owners) == 4 and all('container="app"' in k for k in owners)


def test_multi_claim_container_gets_the_union(nri_env):
    apiserver, d, kubelet, rt = nri_env
    p = rt.add_pod("p")
    _, l1 = prep(nri_env, "a", n="2", pods=[p])
    _, l2 = prep(nri_env, "b", dev="cpudevnuma001", n="2", pods=[p])
    ctr = rt.create_container(p, "app", env={**envd(l1), **envd(l2)})
    assert cpus(ctr) == parse_list(l1.split("=")[1]) | parse_list(l2.split("=")[1])


@pytest.mark.parametrize("env,msg", [
    ({"DRA_CPUSET_6f0c1c4e-0000-4000-8000-00000000dead": "1-2"}, "not prepared"),
    ({"DRA_CPUSET_abc": "a-b"}, "malformed CPU list"),
    ({"DRA_CPUSET_../x": "1"}, "bad claim uid"),
])
def test_malformed_and_unknown_env_fail_closed(nri_env, env, msg):
    from sim.nrisim import CreateContainerError
    apiserver, d, kubelet, rt = nri_env
    with pytest.raises(CreateContainerError) as e:
        rt.create_container(rt.add_pod("x"), "app", env=env)
    assert msg in str(e.value)


def test_forged_and_stale_env_fail(nri_env):
    from sim.nrisim import CreateContainerError
    apiserver, d, kubelet, rt = nri_env
    c, line = prep(nri_env, "db")
    k, v = line.split("=", 1)
    with pytest.raises(CreateContainerError) as e:
        rt.create_container(rt.add_pod("evil"), "app", env={k: "1-300"})
    assert "forged or stale" in str(e.value)


def test_claim_reused_by_another_pod_and_restart(nri_env):
    from sim.nrisim import CreateContainerError
    apiserver, d, kubelet, rt = nri_env
    pod, other = rt.add_pod("db"), rt.add_pod("other")
    # shared by two pods: still one container holds it
    c, line = prep(nri_env, "db", pods=[pod, other])
    first = rt.create_container(pod, "app", env=envd(line))
    with pytest.raises(CreateContainerError) as e:
        rt.create_container(other, "app", env=envd(line))
    assert "serves one container" in str(e.value)
    # a pod it is not reserved for learns nothing of who holds it
    with pytest.raises(CreateContainerError) as e:
        rt.create_container(rt.add_pod("thief"), "app", env=envd(line))
    assert "is not a consumer" in str(e.value) and pod.uid not in str(e.value)
    with pytest.raises(CreateContainerError):
        rt.create_container(pod, "other", env=envd(line))
    # the same container restarting keeps its CPUs
    rt.stop_container(first)
    rt.remove_container(first)
    again = rt.create_container(pod, "app", env=envd(line))
    assert cpus(again) == parse_list(line.split("=")[1])


def test_unprepare_widens_the_pool(nri_env):
    apiserver, d, kubelet, rt = nri_env
    shared = rt.create_container(rt.add_pod("web"), "sidecar")
    db = rt.add_pod("db")
    c, line = prep(nri_env, "db", pods=[db])
    app = rt.create_container(db, "app", env=envd(line))
    assert len(cpus(shared)) == 383 - 4
    rt.stop_container(app)
    rt.remove_container(app)
    kubelet.unprepare(d.dra_sock, [ref(c)])
    wait_for(lambda: cpus(shared) == ALL, what="shared container widened by a push")


def test_empty_pool_refusal(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import CreateContainerError, Runtime
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    try:
        d = make_driver(topology=None, args=["--nri-socket", sock, "--no-bpf"]).start()
        rt.wait_plugin(timeout=5)
        n = len(open("/sys/devices/system/cpu/online").read().strip().split(",")) and os.cpu_count()
        shared = rt.create_container(rt.add_pod("web"), "sidecar")
        c = apiserver.put_claim(claim("all", [("cpu", "cpudevnuma000", str(n))]))
        r = kubelet.prepare(d.dra_sock, [ref(c)])
        assert "would leave no CPU" in r.claims[c["metadata"]["uid"]].error
        assert len(cpus(shared)) == n
        # without shared containers the whole node can be claimed, and then
        # no shared container can start
        rt.stop_container(shared)
        rt.remove_container(shared)
        assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
        with pytest.raises(CreateContainerError) as e:
            rt.create_container(rt.add_pod("late"), "x")
        assert "shared CPU pool is empty" in str(e.value)
    finally:
        rt.close()


def test_synchronize_after_kill9_with_50_live_containers(nri_env):
    apiserver, d, kubelet, rt = nri_env
    pods = [rt.add_pod("p%d" % i) for i in range(10)]
    claims = [prep(nri_env, "c%d" % i, n="2", pods=[pods[i]]) for i in range(10)]
    ctrs = []
    for i, (c, line) in enumerate(claims):
        ctrs.append((rt.create_container(pods[i], "app", env=envd(line)), line))
    shared = [rt.create_container(rt.add_pod("s%d" % i), "s") for i in range(40)]
    d.kill9()
    # meanwhile a container is created without the plugin: unrestricted
    late = rt.create_container(rt.add_pod("late"), "x")
    assert late.cpus == ""
    n = len(rt.applied)
    d.start()
    rt.wait_plugin(timeout=5, after=1)
    wait_for(lambda: parse_list(late.cpus or "0-1000") == ALL - set().union(
        *(parse_list(l.split("=")[1]) for _, l in claims)), what="late container corrected")
    for ctr, line in ctrs:
        assert cpus(ctr) == parse_list(line.split("=")[1])
    assert all(cpus(s) == cpus(late) for s in shared)
    assert len(rt.applied) > n
    assert "nri_synchronized" in d.log()


def test_runtime_restart_and_late_socket(apiserver, make_driver, driver_dir):
    from sim.nrisim import Runtime
    sock = os.path.join(driver_dir, "nri.sock")
    d = make_driver(args=["--nri-socket", sock, "--no-bpf"]).start()
    wait_for(lambda: "event=nri_connect_failed" in d.log(), what="a failed NRI connect")
    rt = Runtime(sock).start()  # the socket appears after the driver
    try:
        rt.wait_plugin(timeout=10)
        ctr = rt.create_container(rt.add_pod("a"), "x")
        assert cpus(ctr) == set(range(0, 384))
        rt.restart()
        rt.wait_plugin(timeout=10, after=1)
        ctr2 = rt.create_container(rt.add_pod("b"), "y")
        assert cpus(ctr2) == set(range(0, 384))
        assert d.proc.poll() is None
    finally:
        rt.close()


def test_garbage_on_the_nri_socket_reconnects(apiserver, make_driver, driver_dir):
    """A 'runtime' that sends garbage: the driver drops it and reconnects."""
    sock = os.path.join(driver_dir, "nri.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sock)
    srv.listen(4)
    srv.settimeout(10)
    d = make_driver(args=["--nri-socket", sock, "--no-bpf"]).start()
    for junk in (os.urandom(3000), b"\xff" * 64, b"\x00\x00\x00\x09" + b"\x00" * 5000):
        conn, _ = srv.accept()
        try:
            conn.sendall(junk)
        except OSError:
            pass
        conn.close()
    conn, _ = srv.accept()  # still reconnecting
    conn.close()
    srv.close()
    assert d.proc.poll() is None
    assert d.http("/metrics")[0] == 200


def test_real_cgroups_owners_file_and_bpf_owner(apiserver, make_driver, kubelet, driver_dir):
    """Real processes in real cgroups: the container's cgroup becomes the BPF
    owner of its CPU and is listed in owners.json for bpf-verify."""
    import json
    from sim.nrisim import Cgroups, Runtime
    if os.geteuid() != 0 or not Cgroups.available():
        pytest.skip("needs root and a writable cgroup hierarchy")
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock, cgroups=True).start()
    try:
        d = make_driver(topology=None, args=["--nri-socket", sock, "--reserved-cpus", "0"]).start()
        rt.wait_plugin(timeout=5)
        db = rt.add_pod("db")
        c = apiserver.put_claim(claim("db", [("cpu", "cpudevnuma000", "1")], reserved_for=[db]))
        assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
        with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json"
                               % c["metadata"]["uid"])) as f:
            line = json.load(f)["devices"][0]["containerEdits"]["env"][0]
        ctr = rt.create_container(db, "app", env=envd(line))
        assert ctr.cpus == "1"
        owners = os.path.join(d.state_dir, "owners.json")
        wait_for(lambda: os.path.exists(owners) and json.load(open(owners))["owners"],
                 what="owners.json lists the container")
        (o,) = json.load(open(owners))["owners"]
        assert o["cpus"] == "1" and o["container"] == "app" and o["claim"] == "default/db"
        assert os.path.isdir(o["cgroup"]) and o["cgroupId"] == os.stat(o["cgroup"]).st_ino
        m = d.metrics()
        if m.get("dra_cpu_bpf_loaded") == 1:
            assert m['dra_cpu_cpu_owner_info{cpu="1",namespace="default",pod="db",'
                     'container="app",claim="default/db"}'] == 1
        rt.stop_container(ctr)
        wait_for(lambda: json.load(open(owners))["owners"] == [], what="owner gone at stop")
    finally:
        rt.close()


# ---- NUMA-local memory and the shared pool beside exclusive CPUs


def prep_cfg(env, name, dev, n, pods=(), **params):
    """prep() with CPUConfig parameters."""
    from claims import cpu_config
    apiserver, d, kubelet, rt = env
    c = apiserver.put_claim(claim(name, [("cpu", dev, n)], configs=[cpu_config(**params)],
                                  reserved_for=pods))
    r = kubelet.prepare(d.dra_sock, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == ""
    import json
    with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json" % c["metadata"]["uid"])) as f:
        env_line = json.load(f)["devices"][0]["containerEdits"]["env"][0]
    return c, env_line


NODE1 = set(range(96, 192)) | set(range(288, 384))  # synthetic-384's NUMA node 1


def test_memory_local_sets_mems_to_the_claims_nodes(nri_env):
    apiserver, d, kubelet, rt = nri_env
    shared = rt.create_container(rt.add_pod("web"), "sidecar")
    db = rt.add_pod("db")
    c, line = prep_cfg(nri_env, "db", "cpudevnuma001", "4", pods=[db], memory="local")
    app = rt.create_container(db, "app", env=envd(line))
    assert cpus(app) <= NODE1 and app.mems == "1"
    assert shared.mems == ""  # shared containers keep every node
    assert "event=container_memory_local" in d.log() and "mems=1" in d.log()
    # "all", and no word at all (the node default is all): mems untouched
    for name, params in (("all", {"memory": "all"}), ("plain", {})):
        pod = rt.add_pod(name)
        _, line = prep_cfg(nri_env, name, "cpudevnuma000", "2", pods=[pod], **params)
        x = rt.create_container(pod, "app", env=envd(line))
        assert x.mems == "", name


def test_memory_locality_node_default(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import Runtime
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    try:
        d = make_driver(args=["--nri-socket", sock, "--no-bpf", "--memory-locality",
                              "local"]).start()
        rt.wait_plugin(timeout=5)
        env = (apiserver, d, kubelet, rt)
        db, o = rt.add_pod("db"), rt.add_pod("o")
        _, line = prep_cfg(env, "db", "cpudevnuma000", "2", pods=[db])
        assert rt.create_container(db, "app", env=envd(line)).mems == "0"
        _, line = prep_cfg(env, "opt-out", "cpudevnuma001", "2", pods=[o], memory="all")
        assert rt.create_container(o, "app", env=envd(line)).mems == ""
    finally:
        rt.close()


def test_shared_pool_beside_exclusive_cpus_follows_the_pool(nri_env):
    apiserver, d, kubelet, rt = nri_env
    shared = rt.create_container(rt.add_pod("web"), "sidecar")
    dp_pod = rt.add_pod("dp")
    a, line_a = prep_cfg(nri_env, "dataplane", "cpudevnuma000", "4", pods=[dp_pod],
                         sharedPool=True)
    own = parse_list(line_a.split("=", 1)[1])
    dp = rt.create_container(dp_pod, "app", env=envd(line_a))
    # its own CPUs plus the pool (every allocatable CPU, here)
    assert cpus(dp) == ALL
    assert cpus(shared) == ALL - own
    # another claim's container starts: the pool shrinks for both
    db = rt.add_pod("db")
    b, line_b = prep(nri_env, "db", dev="cpudevnuma001", pods=[db])
    theirs = parse_list(line_b.split("=", 1)[1])
    app = rt.create_container(db, "app", env=envd(line_b))
    assert cpus(app) == theirs
    assert cpus(dp) == ALL - theirs
    assert cpus(shared) == ALL - own - theirs
    # that claim goes: both widen again
    rt.stop_container(app)
    rt.remove_container(app)
    kubelet.unprepare(d.dra_sock, [ref(b)])
    wait_for(lambda: cpus(dp) == ALL and cpus(shared) == ALL - own,
             what="pool widened for the shared and the sharedPool container")
    # what it asked survives a restart of the driver (the checkpoint keeps
    # it): the next claim's container still shrinks it with the pool
    serial = rt.wait_plugin(timeout=5).serial
    d.kill9()
    d.start()
    kubelet.close()
    rt.wait_plugin(timeout=5, after=serial)
    db2 = rt.add_pod("db2")
    c2, line2 = prep(nri_env, "db2", dev="cpudevnuma001", pods=[db2])
    theirs2 = parse_list(line2.split("=", 1)[1])
    rt.create_container(db2, "app", env=envd(line2))
    assert cpus(dp) == ALL - theirs2

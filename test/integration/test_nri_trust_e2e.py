"""Exclusive CPUs belong to the pods a claim is reserved for, end to end: the
real driver, the NRI runtime simulator, the grpcio kubelet and the API-server
simulator. A pod that writes another pod's DRA_CPUSET_ variable into its spec
is refused while the owner gets its CPUs; a shared claim gains a consumer
after Prepare and that pod binds after one more read; the check holds across
kill -9 and across Synchronize with an impostor already running."""

import json
import os
import time

import pytest

from claims import claim, parse_list, ref
from driver import wait_for

ALL = set(range(1, 384))  # synthetic-384 minus reserved CPU 0


@pytest.fixture
def env(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import Runtime

    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    d = make_driver(args=["--nri-socket", sock, "--no-bpf", "--reserved-cpus", "0"]).start()
    rt.wait_plugin(timeout=5)
    yield apiserver, d, kubelet, rt
    rt.close()


def prep(env, name, pods, n="4"):
    apiserver, d, kubelet, rt = env
    c = apiserver.put_claim(claim(name, [("cpu", "cpudevnuma000", n)], reserved_for=pods))
    assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
    with open(os.path.join(d.cdi_dir, "dra.k8s.io-cpu_claim-%s.json" % c["metadata"]["uid"])) as f:
        k, v = json.load(f)["devices"][0]["containerEdits"]["env"][0].split("=", 1)
    return c, {k: v}


def claim_gets(apiserver):
    return apiserver.count("get", "resourceclaims")


def refused(rt, pod, env_):
    from sim.nrisim import CreateContainerError
    with pytest.raises(CreateContainerError) as e:
        rt.create_container(pod, "app", env=env_)
    return str(e.value)


def test_a_pod_with_another_pods_variable_is_refused_and_the_owner_served(env):
    apiserver, d, kubelet, rt = env
    owner, thief = rt.add_pod("db"), rt.add_pod("thief")
    c, var = prep(env, "db", [owner])
    gets = claim_gets(apiserver)
    # the impostor starts first, with the owner's variable word for word
    msg = refused(rt, thief, var)
    assert "pod default/thief (uid %s) is not a consumer of claim default/db" % thief.uid in msg
    assert claim_gets(apiserver) == gets + 1  # one fresh read, then no
    app = rt.create_container(owner, "app", env=var)
    assert parse_list(app.cpus) == parse_list(list(var.values())[0])
    assert claim_gets(apiserver) == gets + 1  # the owner needs no read
    m = d.metrics()
    assert m['dra_cpu_nri_binding_refused_total{reason="not_consumer"}'] == 1
    assert m['dra_cpu_nri_rejected_containers_total{reason="binding"}'] == 1
    assert m["dra_cpu_nri_containers_exclusive"] == 1
    line = next(x for x in d.log().splitlines() if "event=container_binding_refused" in x)
    assert "reason=not_consumer pod=default/thief pod_uid=%s container=app claim=default/db" \
        % thief.uid in line


def test_names_in_the_refusal_line_are_quoted(env):
    apiserver, d, kubelet, rt = env
    owner = rt.add_pod("db")
    c, var = prep(env, "db", [owner])
    # the runtime is the one to tell pod names; a hostile one cannot forge lines
    evil = rt.add_pod("x level=error event=forged\nts=0")
    refused(rt, evil, var)
    lines = [x for x in d.log().splitlines() if "container_binding_refused" in x]
    assert len(lines) == 1
    assert 'pod="default/x level=error event=forged\\nts=0"' in lines[0]
    assert not any(x.startswith("ts=0") for x in d.log().splitlines())


def test_a_shared_claim_gains_a_consumer_after_prepare(env):
    apiserver, d, kubelet, rt = env
    first, later = rt.add_pod("first"), rt.add_pod("later")
    c, var = prep(env, "shared", [first])
    # the scheduler reserves the claim for another pod; its container starts
    # before the first pod's does
    apiserver.reserve_claim("default", "shared", [later])
    gets = claim_gets(apiserver)
    app = rt.create_container(later, "app", env=var)
    assert parse_list(app.cpus) == parse_list(list(var.values())[0])
    assert claim_gets(apiserver) == gets + 1
    with open(os.path.join(d.state_dir, "checkpoint.json")) as f:
        ck = json.load(f)
    (entry,) = ck["claims"]
    assert {p["uid"] for p in entry["consumers"]} == {first.uid, later.uid}
    assert d.metrics()['dra_cpu_nri_claim_reads_total{result="ok"}'] == 1


def test_a_read_that_takes_too_long_refuses_before_the_runtime_gives_up(env):
    apiserver, d, kubelet, rt = env
    owner, thief = rt.add_pod("db"), rt.add_pod("thief")
    c, var = prep(env, "db", [owner])
    apiserver.add_fault(action="delay", seconds=4, verb="get", resource="resourceclaims", count=1)
    t0 = time.monotonic()
    msg = refused(rt, thief, var)
    took = time.monotonic() - t0
    assert "could not be read again in time" in msg
    assert 1.2 < took < 2.0, took  # within the runtime's 2 s, the plugin kept
    assert rt.plugins() and rt.plugins()[0].serial == 1
    assert d.metrics()['dra_cpu_nri_binding_refused_total{reason="read_timeout"}'] == 1
    # the owner is not held up by it
    assert rt.create_container(owner, "app", env=var).cpus


def test_kill9_and_restart_keep_the_check(env):
    apiserver, d, kubelet, rt = env
    owner, thief = rt.add_pod("db"), rt.add_pod("thief")
    c, var = prep(env, "db", [owner])
    conn = rt.plugins()[0]
    d.kill9()
    d.start()
    rt.wait_plugin(timeout=5, after=conn.serial)
    assert "is not a consumer of claim default/db" in refused(rt, thief, var)
    app = rt.create_container(owner, "app", env=var)
    assert parse_list(app.cpus) == parse_list(list(var.values())[0])


def test_synchronize_confines_an_impostor_already_running(env):
    apiserver, d, kubelet, rt = env
    owner, thief = rt.add_pod("db"), rt.add_pod("thief")
    c, var = prep(env, "db", [owner])
    shared = rt.create_container(rt.add_pod("web"), "web")
    conn = rt.plugins()[0]
    d.kill9()
    # while the plugin is away the impostor starts, unrestricted
    imp = rt.create_container(thief, "app", env=var)
    assert imp.cpus == ""
    d.start()
    rt.wait_plugin(timeout=5, after=conn.serial)
    mine = parse_list(list(var.values())[0])
    # Synchronize put it in the shared pool, with everyone else
    assert parse_list(imp.cpus) == ALL - mine == parse_list(shared.cpus)
    wait_for(lambda: d.metrics().get(
        'dra_cpu_nri_binding_refused_total{reason="synchronize"}') == 1,
        what="the impostor reported after one more read")
    assert "event=container_binding_refused reason=synchronize" in d.log()
    assert parse_list(imp.cpus) == ALL - mine
    # the owner starts and gets its CPUs
    app = rt.create_container(owner, "app", env=var)
    assert parse_list(app.cpus) == mine

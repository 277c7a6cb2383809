"""Interrupts off exclusive CPUs (docs/irq-isolation.md), on this machine's real
/proc/irq: a claim with CPUConfig irq: isolate moves every movable interrupt off
its CPU, keeps it so across a kill -9 of the driver, and puts everything back
exactly at Unprepare; two real-time claims sharing a CPU keep it isolated
until the last of them goes. Whatever happens, the test writes back what it
found. Edge cases (managed, empty, unwritable) are irq_test's, on a fake
procfs; which claims ask, irqiso_test's."""

import os

import pytest

from claims import claim, cpu_config, realtime_claim, ref
from driver import wait_for
from rtnode import CPUSET, restore_node


def read_irqs():
    out = {}
    for n in os.listdir("/proc/irq"):
        p = f"/proc/irq/{n}/smp_affinity_list"
        if n.isdigit() and os.path.exists(p):
            out[int(n)] = open(p).read().strip()
    return out, open("/proc/irq/default_smp_affinity").read().strip()


def parse(lst):
    cpus = set()
    for part in filter(None, lst.split(",")):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


@pytest.fixture
def real_irqs():
    if os.geteuid() != 0 or os.cpu_count() < 2 or not os.access(
            "/proc/irq/default_smp_affinity", os.W_OK):
        pytest.skip("needs root, 2 CPUs and a writable /proc/irq")
    found = read_irqs()
    yield found
    irqs, default = found
    for n, aff in irqs.items():
        p = f"/proc/irq/{n}/smp_affinity_list"
        try:
            if open(p).read().strip() != aff:
                with open(p, "w") as f:
                    f.write(aff)
        except OSError:
            pass
    if open("/proc/irq/default_smp_affinity").read().strip() != default:
        with open("/proc/irq/default_smp_affinity", "w") as f:
            f.write(default)


def prepare(apiserver, kubelet, d, name, **params):
    configs = [cpu_config(**params)] if params else []
    c = apiserver.put_claim(claim(name, [("cpu", "cpudevnuma000", "1")], configs=configs))
    r = kubelet.prepare(d.dra_sock, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == ""
    return c


def off_cpu1(before, movable):
    irqs, default = read_irqs()
    return (all(1 not in parse(irqs[n]) for n in movable if n in irqs)
            and not int(default, 16) & 2)


def test_isolate_claim_survives_kill9_and_restores_exactly(real_irqs, apiserver, make_driver,
                                                           kubelet):
    before_irqs, before_default = real_irqs
    d = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--reserved-cpus", "0"]).start()
    c = prepare(apiserver, kubelet, d, "quiet", irq="isolate")
    m = d.metrics()
    assert m["dra_cpu_irq_isolated_cpus"] == 1
    managed = m["dra_cpu_irq_managed_on_isolated"]
    irqs, default = read_irqs()
    moved = [n for n in irqs if irqs[n] != before_irqs.get(n)]
    assert moved, "no interrupt moved"
    assert all(1 not in parse(irqs[n]) for n in moved)
    assert not int(default, 16) & 2
    still = [n for n in irqs if 1 in parse(irqs[n]) and parse(irqs[n]) != {1}]
    assert len(still) == managed, (still, managed)  # each reported, none fought
    if managed:
        assert "event=irq_managed_on_isolated_cpus" in d.log()
        assert "isolcpus=managed_irq" in d.log()
    assert os.path.exists(os.path.join(d.state_dir, "irq.json"))

    d.kill9()
    assert read_irqs() == (irqs, default)  # nothing undone by a kill
    d.start()
    kubelet.close()  # a new process behind the socket: new connections, as the kubelet does
    assert d.metrics()["dra_cpu_irq_isolated_cpus"] == 1  # the record, still prepared
    assert read_irqs() == (irqs, default)
    r = kubelet.unprepare(d.dra_sock, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == ""
    wait_for(lambda: d.metrics()["dra_cpu_irq_isolated_cpus"] == 0, what="isolation released")
    assert read_irqs() == (before_irqs, before_default)
    assert not os.path.exists(os.path.join(d.state_dir, "irq.json"))


def test_unprepared_while_down_is_restored_at_start(real_irqs, apiserver, make_driver, kubelet):
    before = real_irqs
    d = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--reserved-cpus", "0",
                                         "--irq-isolation=isolate"]).start()
    prepare(apiserver, kubelet, d, "quiet")
    assert read_irqs() != before
    d.kill9()
    for f in os.listdir(d.cdi_dir):  # the claim's commit record goes while it is down
        os.unlink(os.path.join(d.cdi_dir, f))
    d.start()
    wait_for(lambda: "event=irq_isolation_released" in d.log(), what="record reconciled")
    assert read_irqs() == before
    assert d.metrics()["dra_cpu_irq_isolated_cpus"] == 0


def test_claims_that_do_not_ask_leave_interrupts_alone(real_irqs, apiserver, make_driver,
                                                       kubelet):
    before = real_irqs
    d = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--reserved-cpus", "0"]).start()
    prepare(apiserver, kubelet, d, "plain")
    assert read_irqs() == before
    assert d.metrics()["dra_cpu_irq_isolated_cpus"] == 0
    d.stop()
    d2 = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--reserved-cpus", "0",
                                          "--irq-isolation=isolate"]).start()
    prepare(apiserver, kubelet, d2, "keeps", irq="keep")
    assert read_irqs() == before


def prepare_rt(apiserver, kubelet, d, name, cpu, **params):
    """A deadline claim of 300m on cpurt<cpu>, its CPUConfig also carrying params."""
    c = apiserver.put_claim(realtime_claim(
        name, "cpurt%03d" % cpu, "300m",
        {"policy": "deadline", "runtimeNs": 3000000, "periodNs": 10000000}, **params))
    r = kubelet.prepare(d.dra_sock, [ref(c)])
    assert r.claims[c["metadata"]["uid"]].error == ""
    return c


@pytest.mark.skipif(not os.path.exists(CPUSET + "/cpuset.cpus"),
                    reason="skipped: needs the cgroup v1 cpuset hierarchy (real-time CPUs)")
def test_real_time_claims_sharing_a_cpu_keep_it_isolated_until_the_last_goes(
        real_irqs, apiserver, make_driver, kubelet):
    before = real_irqs
    cpu = os.cpu_count() - 1
    d = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--rt-cpus", str(cpu)])
    try:
        d.start()
        a = prepare_rt(apiserver, kubelet, d, "rt-quiet", cpu, irq="isolate")
        irqs, default = read_irqs()
        moved = [n for n in irqs if irqs[n] != before[0].get(n)]
        assert moved, "no interrupt moved"
        assert all(cpu not in parse(irqs[n]) for n in moved)
        assert not int(default.replace(",", ""), 16) & (1 << cpu)
        b = prepare_rt(apiserver, kubelet, d, "rt-also", cpu, irq="isolate")
        assert d.metrics()["dra_cpu_irq_isolated_cpus"] == 1
        d.kill9()
        d.start()
        kubelet.close()
        assert d.metrics()["dra_cpu_irq_isolated_cpus"] == 1  # the record, both prepared
        assert read_irqs() == (irqs, default)
        r = kubelet.unprepare(d.dra_sock, [ref(a)])
        assert r.claims[a["metadata"]["uid"]].error == ""
        assert read_irqs() == (irqs, default)  # b still holds the CPU
        assert d.metrics()["dra_cpu_irq_isolated_cpus"] == 1
        r = kubelet.unprepare(d.dra_sock, [ref(b)])
        assert r.claims[b["metadata"]["uid"]].error == ""
        wait_for(lambda: d.metrics()["dra_cpu_irq_isolated_cpus"] == 0,
                 what="isolation released")
        assert read_irqs() == before
        assert not os.path.exists(os.path.join(d.state_dir, "irq.json"))
    finally:
        print(d.log()[-6000:])
        d.stop(timeout=5)
        restore_node()

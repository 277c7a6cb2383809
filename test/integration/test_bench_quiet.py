"""make bench figure 7 (test/bench/fig_quiet.py): the pieces that decide what
the figure says, on fake trees and captured tool output. The figure itself
runs on the real kernel in make bench and make demo; these check that it
parses cyclicdeadline, finds and steers the NIC's interrupts and puts them back
exactly (also when the run fails), and tells movable from managed sources.
"""

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "test", "bench"))
import fig_quiet  # noqa: E402
from benchlib import BenchError  # noqa: E402

DATA = os.path.join(ROOT, "test", "data", "bench")


def proc_irqs(tmp_path, irqs):
    """A fake procfs: {irq: (smp_affinity_list, effective_affinity_list)}."""
    for irq, (aff, eff) in irqs.items():
        d = tmp_path / "irq" / irq
        d.mkdir(parents=True)
        (d / "smp_affinity_list").write_text(aff + "\n")
        (d / "effective_affinity_list").write_text(eff + "\n")
    return str(tmp_path)


def read(root, irq, name="smp_affinity_list"):
    with open(os.path.join(root, "irq", irq, name)) as f:
        return f.read().strip()


class Kernel:
    """poke(): the next interrupt of every IRQ carries out its pending move,
    as x86 does for an MSI: the effective CPU becomes the first of its mask."""

    def __init__(self, root, irqs):
        self.root, self.irqs, self.pokes = root, irqs, 0

    def poke(self):
        self.pokes += 1
        for irq in self.irqs:
            aff = fig_quiet.cpus_of(read(self.root, irq))
            eff = fig_quiet.cpus_of(read(self.root, irq, "effective_affinity_list"))
            if not eff <= aff:
                with open(os.path.join(self.root, "irq", irq, "effective_affinity_list"),
                          "w") as f:
                    f.write(str(min(aff)))


def test_cyclicdeadline_output_parsed_from_its_status_lines():
    with open(os.path.join(DATA, "cyclicdeadline-i20000.txt")) as f:
        text = f.read()
    r = fig_quiet.parse_cyclicdeadline(text)
    # its last status line: every period
    assert (r["periods"], r["min_us"], r["avg_us"], r["max_us"]) == (50, 11, 50, 993)
    # each period it printed once, the worst of them its max
    assert r["sampled"] == 50 and r["p99_us"] == 993


def test_cyclicdeadline_failures_are_errors_not_figures():
    with pytest.raises(BenchError, match="failed"):
        fig_quiet.parse_cyclicdeadline("Using all CPUS\n[1] Failed sched_setattr\n")
    with pytest.raises(BenchError, match="no period"):
        fig_quiet.parse_cyclicdeadline("thread[7] runtime=12000us deadline=20000us\n"
                                       "T: 0 (    7) I:20000 C:      0 Min:      0 Act:    0 "
                                       "Avg:    0 Max:       0\n")


def test_the_neighbour_puts_more_runnable_threads_than_cpus_on_every_cpu():
    assert fig_quiet.hogs() >= 2 * os.cpu_count()


def test_nic_irqs_of_the_default_route(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n"
        "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\n")
    assert fig_quiet.default_route(str(tmp_path)) == ("eth0", "192.0.2.1")
    # a virtio NIC: its interrupts are the PCI function's, one level up
    pci = tmp_path / "devices" / "pci0000:00" / "0000:00:03.0"
    (pci / "virtio2").mkdir(parents=True)
    (pci / "msi_irqs").mkdir()
    for i in ("39", "37", "38"):
        (pci / "msi_irqs" / i).write_text("msix\n")
    (tmp_path / "class" / "net" / "eth0").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:03.0/virtio2",
               tmp_path / "class" / "net" / "eth0" / "device")
    assert fig_quiet.nic_irqs("eth0", str(tmp_path)) == ["37", "38", "39"]


def test_no_default_route_no_traffic(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\n" "eth0\t000200C0\t00000000\t0001\n")
    assert fig_quiet.default_route(str(tmp_path)) is None


def test_steered_onto_the_cpu_and_put_back_exactly(tmp_path):
    root = proc_irqs(tmp_path, {"38": ("0-1", "0"), "39": ("0-1", "1")})
    k = Kernel(root, ["38", "39"])
    with fig_quiet.IrqSteer(["38", "39"], 1, proc=root, poke=k.poke) as s:
        assert read(root, "38") == "1" and read(root, "39") == "1"
        # measured once the kernel moved them
        assert read(root, "38", "effective_affinity_list") == "1" and not s.unsettled
    assert read(root, "38") == "0-1" and read(root, "39") == "0-1"
    # where each was effectively: 38 back on CPU 0 (written alone, the kernel
    # would have kept it on CPU 1), 39 stays on 1
    assert read(root, "38", "effective_affinity_list") == "0"
    assert read(root, "39", "effective_affinity_list") == "1"


def test_put_back_when_the_run_fails(tmp_path):
    root = proc_irqs(tmp_path, {"38": ("0", "0")})
    k = Kernel(root, ["38"])
    with pytest.raises(RuntimeError):
        with fig_quiet.IrqSteer(["38"], 1, proc=root, poke=k.poke):
            assert read(root, "38") == "1"
            raise RuntimeError("cyclictest died")
    assert read(root, "38") == "0"


def test_an_irq_the_kernel_refuses_to_move_is_recorded_not_fought(tmp_path):
    root = proc_irqs(tmp_path, {"36": ("0-1", "1"), "38": ("0-1", "0")})
    # a file that reads and answers every write with EIO, as a managed IRQ's
    path = os.path.join(root, "irq", "36", "smp_affinity_list")
    os.unlink(path)
    os.symlink("/proc/version", path)
    k = Kernel(root, ["38"])
    with fig_quiet.IrqSteer(["36", "38"], 1, proc=root, poke=k.poke) as s:
        assert s.refused == {"36": "EIO"} and "36" not in s.saved
        assert read(root, "38") == "1"
    assert read(root, "38") == "0-1"


def test_settle_says_which_moves_never_happened(tmp_path):
    root = proc_irqs(tmp_path, {"37": ("1", "0")})  # an IRQ that never fires
    calls = []
    assert fig_quiet.settle(["37"], lambda: calls.append(1), proc=root, timeout=0.05) == ["37"]
    assert calls


def dl_round(lat, steal, irqs, seconds=5.0, policy="deadline"):
    return {"latencies_us": sorted(lat), "periods": len(lat), "min_us": min(lat),
            "avg_us": sum(lat) // len(lat), "max_us": max(lat), "main_policy": policy,
            "grid_shifted": False, "cpus": "1", "irqs": irqs,
            "irq_names": {k: "x" for k in irqs}, "loadavg": [1.0, 2.0],
            "cpu_busy_pct": {1: steal + 1}, "cpu_steal_pct": {1: steal}, "foreign_rt": [],
            "others_runnable": 1.0, "measured_s": seconds}


def test_deadline_rounds_are_merged_over_every_period():
    # two rounds: 100 quiet periods, then 100 with a bad tail and more steal
    a = dl_round([10] * 100, 2, {"36": 100})
    b = dl_round([10] * 95 + [900] * 5, 20, {"36": 300}, seconds=15.0)
    m = fig_quiet.merge_deadline([a, b])
    assert (m["periods"], m["sampled"], m["rounds"]) == (200, 200, 2)
    assert m["p99_us"] == 900 and m["max_us"] == 900 and m["min_us"] == 10
    assert m["avg_us"] == (10 * 195 + 900 * 5) // 200
    assert m["cpu_steal_pct"] == {1: 16}            # (2*5 + 20*15) / 20 s
    assert m["irqs_per_s"] == {"36": 20.0}          # 400 in 20 s
    assert m["loadavg"] == [1.0, 2.0] and m["main_policy"] == "deadline"
    # a round whose task never got deadline marks the whole case
    c = dl_round([10] * 100, 0, {}, policy="not deadline")
    assert fig_quiet.merge_deadline([a, c])["main_policy"] == "not deadline"


def test_rounds_are_at_least_so_long_and_at_most_so_many():
    assert [fig_quiet.rounds(s, 2, 4) for s in (1, 2, 4, 6, 20)] == [1, 1, 2, 3, 4]


def ct_round(hist, mx, steal, **kw):
    r = dl_round([1], steal, {"38": 10})
    r.update({"hist": hist, "max_us": mx, "noise_cpus": ["0"], "settle_s": 2.0,
              "steer_refused": {}, "unsettled": [], "steered": ["38"]})
    r.update(kw)
    return r


def test_cyclictest_rounds_add_their_histograms():
    a = ct_round({5: 990, 40: 10}, 40, 1, unsettled=["40"])
    b = ct_round({5: 980, 300: 20}, 900, 3, unsettled=["26"], managed=["36"],
                 driver_managed=1.0)
    m = fig_quiet.merge_runs([a, b])
    # 2000 samples, 1980 of them at 40 us or below: the p99 is that bucket ...
    assert (m["samples"], m["p99_us"], m["max_us"], m["rounds"]) == (2000, 40, 900, 2)
    assert m["hist"] == {5: 1970, 40: 10, 300: 20}
    assert m["unsettled"] == ["26", "40"] and m["steered"] == ["38"]
    assert m["irqs"] == {"38": 20} and m["driver_managed"] == 1.0
    assert m["managed"] == ["36"]
    # ... and the p99 is the same whether the samples came in one round or two
    assert fig_quiet.hist_p99(m["hist"], 900) == m["p99_us"]


def test_moved_off_finds_the_moves_not_yet_carried_out(tmp_path):
    root = proc_irqs(tmp_path, {"24": ("0", "0"),      # off CPU 1, done
                                "36": ("0-1", "1"),    # on CPU 1 by its own mask
                                "41": ("0", "1"),      # moved, still delivered to 1
                                "42": ("0", "0-1")})   # moved, 1 still among them
    assert fig_quiet.moved_off(1, proc=root) == ["41", "42"]
    k = Kernel(root, ["41", "42"])
    assert fig_quiet.settle(fig_quiet.moved_off(1, proc=root), k.poke, proc=root) == []
    assert fig_quiet.moved_off(1, proc=root) == []


def test_the_table_names_the_moves_still_pending_when_isolated():
    r = results()
    r["isolated"]["unsettled"] = ["41"]
    note = rows(r)["movable interrupts/s on CPU 1, isolation off/on"][3]
    assert "not carried the move out" in note and note.endswith(": 41")


def results(movable_on=0.0, managed_on=1700.0):
    def case(p99, irqs=None, names=None, **kw):
        r = {"p99_us": p99, "max_us": 3 * p99, "samples": 900, "cpus": "1",
             "irqs_per_s": irqs or {}, "irq_names": names or {}, "loadavg": [0.5, 0.5],
             "cpu_busy_pct": {1: 10}, "cpu_steal_pct": {1: 0}, "noise_cpus": ["0"]}
        r.update(kw)
        return r
    names = {"36": "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0",
             "38": "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0", "LOC": "Local timer"}
    iso_irqs = {"36": managed_on, "LOC": 1000.0}
    if movable_on:
        iso_irqs["38"] = movable_on
    return {
        "run_seconds": 10, "hogs": 4, "note": "2 CPUs",
        "net": {"iface": "eth0", "gateway": "192.0.2.1", "irqs": ["37", "38", "39"]},
        "idle": case(100), "shared": case(2500, cpus="0-1", noise_cpus=["0-1"]),
        "pinned": case(450, {"36": 1800.0, "38": 480.0, "LOC": 1000.0}, names,
                       steered=["37", "38", "39"]),
        "isolated": case(140, iso_irqs, names, managed=["36"], driver_managed=1.0),
        "dl-idle": {"p99_us": 40, "avg_us": 10, "max_us": 60, "periods": 500, "sampled": 500,
                    "main_policy": "deadline", "grid_shifted": False, "loadavg": [0.5, 0.5],
                    "cpu_busy_pct": {1: 5}, "cpu_steal_pct": {1: 0}},
        "dl-pinned": {"p99_us": 70, "avg_us": 12, "max_us": 30000, "periods": 500,
                      "sampled": 500, "main_policy": "deadline", "grid_shifted": True,
                      "loadavg": [0.5, 0.5], "cpu_busy_pct": {1: 5}, "cpu_steal_pct": {1: 0}},
    }


def rows(r):
    return {name: (value, target, ok, note) for name, value, target, ok, note
            in fig_quiet.table(r)}


def test_the_table_judges_latency_and_names_the_tools():
    t = rows(results())
    # the target is the quiet claim holder (irq: isolate), 140/100; the one
    # with the NIC's interrupts on its CPU is shown beside it, not judged
    assert t["cyclictest p99 pinned/idle"][:3] == ("1.4x (140/100 us)", "<= 2x", True)
    assert "irq: isolate" in t["cyclictest p99 pinned/idle"][3]
    assert t["cyclictest p99 pinned, irqs not isolated/idle"][:3] == ("4.5x (450/100 us)", "-",
                                                                      None)
    assert t["cyclictest p99 shared/idle"][:3] == ("25.0x (2500/100 us)", ">= 10x", True)
    dl = t["deadline p99 pinned/idle"]
    assert dl[2] is True and "cyclicdeadline" in dl[3] and "no shared case" in dl[3]
    assert "overstated" in t["deadline avg/max pinned vs idle"][3]


def test_the_table_shows_movable_off_and_managed_on_with_the_remedy():
    t = rows(results())
    value, target, ok, note = t["movable interrupts/s on CPU 1, isolation off/on"]
    assert (value, ok) == ("480/0", True)
    assert "38 virtio2-input.0 480/s" in note and "steered onto CPU 1" in note
    assert "36" not in note.split(";")[0]  # managed: not counted as movable
    value, target, ok, note = t["kernel-managed interrupts/s on CPU 1, isolation on"]
    assert value == "1700" and "36 virtio1-req.0 1700/s" in note
    assert "isolcpus=managed_irq,1" in note


def test_a_movable_source_left_on_the_cpu_misses_the_target():
    value, target, ok, note = rows(results(movable_on=12.0))[
        "movable interrupts/s on CPU 1, isolation off/on"]
    assert (value, ok) == ("480/12", False) and "on: 38 virtio2-input.0 12/s" in note


@pytest.mark.skipif(os.geteuid() != 0, reason="skipped: needs root (SCHED_FIFO)")
def test_real_time_tasks_of_others_on_the_cpu_are_named_ours_are_not():
    import subprocess
    from driver import wait_for
    cpu = (os.cpu_count() or 1) - 1
    p = subprocess.Popen(["taskset", "-c", str(cpu), "chrt", "-f", "1", "sleep", "30"])
    try:
        wait_for(lambda: open("/proc/%d/comm" % p.pid).read().strip() == "sleep",
                 what="sleep under SCHED_FIFO")
        assert "sleep fifo" in fig_quiet.foreign_rt(cpu, "/no-such-cgroup/").values()
        with open("/proc/%d/cpuset" % p.pid) as f:
            own = f.read().strip()
        assert str(p.pid) not in fig_quiet.foreign_rt(cpu, own)
    finally:
        p.kill()
        p.wait()


def test_deadline_bandwidth_held_by_others_is_reported_not_a_figure():
    r = results()
    r["dl-pinned"] = {"error": "the kernel refused cyclicdeadline's thread (EBUSY): CPU 1's "
                               "deadline bandwidth was held by real-time tasks outside the "
                               "figure (python3 deadline)", "attempts": 3}
    t = rows(r)
    value, target, ok, note = t["deadline p99 pinned/idle"]
    assert (value, ok) == ("not run", None) and "EBUSY" in note and "3 attempts" in note
    assert "deadline avg/max pinned vs idle" not in t


def test_the_neighbours_traffic_is_awaited_by_its_open_socket():
    import socket
    import subprocess
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert not fig_quiet.has_socket(p.pid)
    finally:
        p.kill()
        p.wait()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM):
        assert fig_quiet.has_socket(os.getpid())

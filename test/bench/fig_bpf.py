"""What the sched_switch programs cost per context switch, from
test/bench/bpf_bench.c (a pipe ping-pong pinned to one CPU), two ways.

Wall clock (runs with no program and with the program alternate; medians of
the per-pair figures):

  pinning    "+ns/switch" of the row "pinning, owner runs" (the full owner
             check on an exclusive CPU), over no program at all
  histogram  "+ns/switch" of "pinning + runq latency" (CPU in the shared
             pool, run-queue latency on) minus the cost of one sched_switch
             program: the median of the rows "baseline (count only)",
             "pinning, CPU not exclusive" and "pinning, owner runs", which
             the kernel's own accounting puts within a few ns of each other;
             subtracting one noisy row alone swung the result by 200 ns on a
             busy machine. What is left is the histogram's own cost.

The kernel's own accounting (bpf_stats: run_time_ns / run_cnt per program),
in one load with the empty program attached alongside, phase by phase; the
targets are bpf_bench's "target" lines (both net of the instrumentation,
i.e. over the empty program):

  pinning check over empty          ns per run on the owner path, < 15
  contention histogram over empty   run-queue programs' run time per
                                    context switch on a shared CPU, < 60

It is far steadier than the ping-pong but does not see the cost of entering
a program at all. The raw_tp twins (kernels without tp_btf) are measured the
same way, as information.
"""

import os
import re
import subprocess

from benchlib import BenchError

ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<none>\d+)\s+(?P<prog>\d+)\s+(?P<ratio>[\d.]+)\s+"
                 r"(?P<delta>-?[\d.]+)$")
SECTION = re.compile(r"^bpf_stats (?P<kind>tp_btf|raw_tp): kernel-accounted")
PHASES = ("CPU not exclusive", "owner runs", "all violations", "shared pool")
STAT = re.compile(r"^(?P<phase>%s)\s+(?P<prog>\S.*?)\s+(?P<runs>\d+)\s+(?P<ns>[\d.]+)"
                  r"(?:\s+(?P<over>[+-][\d.]+))?$" % "|".join(re.escape(p) for p in PHASES))
PER_SWITCH = re.compile(r"^bpf_stats (?P<kind>tp_btf|raw_tp): run-queue programs per context "
                        r"switch, shared pool: (?P<over>[+-][\d.]+) ns over empty, "
                        r"(?P<total>[\d.]+) ns in all")
TARGET = re.compile(r"^target (?P<name>.+?): (?P<value>-?[\d.]+) (?P<unit>\S+) < "
                    r"(?P<limit>[\d.]+): ratio (?P<ratio>-?[\d.]+) (?P<status>PASS|FAIL)$")
NEED = ("baseline (count only)", "pinning, CPU not exclusive", "pinning, owner runs",
        "pinning, all violations", "pinning + runq latency")
TARGETS = ("pinning check over empty", "contention histogram over empty")


def parse(text):
    rows, stats, per_switch, targets, kind = {}, {}, {}, {}, None
    for line in text.splitlines():
        m = ROW.match(line)
        if m and kind is None:
            rows[m.group("name")] = {"ns_rt_none": int(m.group("none")),
                                     "ns_rt_prog": int(m.group("prog")),
                                     "ratio": float(m.group("ratio")),
                                     "ns_per_switch": float(m.group("delta"))}
            continue
        m = SECTION.match(line)
        if m:
            kind = m.group("kind")
            stats[kind] = {}
            continue
        m = STAT.match(line)
        if m and kind:
            over = m.group("over")
            stats[kind].setdefault(m.group("phase"), {})[m.group("prog")] = {
                "runs": int(m.group("runs")), "ns_per_run": float(m.group("ns")),
                "over_empty": float(over) if over else None}
            continue
        m = PER_SWITCH.match(line)
        if m:
            per_switch[m.group("kind")] = {"over_empty": float(m.group("over")),
                                           "total": float(m.group("total"))}
            continue
        m = TARGET.match(line)
        if m:
            targets[m.group("name")] = {"value": float(m.group("value")),
                                        "unit": m.group("unit"),
                                        "limit": float(m.group("limit")),
                                        "ratio": float(m.group("ratio")),
                                        "pass": m.group("status") == "PASS"}
    return rows, stats, per_switch, targets


def _over(stats, kind, phase, prefix):
    """over_empty of the program whose name starts with prefix (tp_btf and
    raw_tp twins differ by a suffix)."""
    for name, v in stats.get(kind, {}).get(phase, {}).items():
        if name.startswith(prefix) and (name == prefix or name == prefix + "_raw"):
            return v["over_empty"]
    return None


def run(build_dir, round_trips=50000, pairs=15, stats_round_trips=200000):
    exe = os.path.join(build_dir, "bpf_bench")
    if not os.access(exe, os.X_OK):
        raise BenchError("%s missing (make %s)" % (exe, exe))
    if os.geteuid() != 0:
        return {"skipped": "needs root (CAP_BPF, cgroup writes)"}
    p = subprocess.run([exe, "-n", str(round_trips), "-p", str(pairs),
                        "-s", str(stats_round_trips)], capture_output=True, text=True,
                       timeout=600)
    if p.stdout.strip().startswith("skipped"):
        return {"skipped": p.stdout.strip()}
    rows, stats, per_switch, targets = parse(p.stdout)
    missing = [n for n in NEED if n not in rows] + [n for n in TARGETS if n not in targets]
    if p.returncode != 0 or missing or "tp_btf" not in per_switch:
        raise BenchError("bpf_bench exit %d, rows missing %s: %s"
                         % (p.returncode, missing, (p.stderr or p.stdout)[-400:]))
    pin = rows["pinning, owner runs"]
    unowned = rows["pinning, CPU not exclusive"]
    runq = rows["pinning + runq latency"]
    one = sorted(rows[n]["ns_per_switch"] for n in NEED[:3])[1]
    empty = stats["tp_btf"]["owner runs"]["empty (baseline.bpf.c)"]["ns_per_run"]
    return {
        "rows": rows,
        "bpf_stats": stats,
        "bpf_stats_runq_per_switch": per_switch,
        "targets": targets,
        "header": p.stdout.splitlines()[0] if p.stdout else "",
        "round_trips": round_trips, "pairs": pairs, "stats_round_trips": stats_round_trips,
        "pinning_ns": pin["ns_per_switch"],
        "pinning_ratio": pin["ratio"],
        "empty_program_ns": rows["baseline (count only)"]["ns_per_switch"],
        "unowned_ns": unowned["ns_per_switch"],
        "violation_ns": rows["pinning, all violations"]["ns_per_switch"],
        "one_program_ns": one,
        "histogram_ns": round(runq["ns_per_switch"] - one, 1),
        "pinning_plus_histogram_ns": runq["ns_per_switch"],
        "baseline_rt_ns": pin["ns_rt_none"],
        "empty_program_stats_ns": empty,
        "pinning_stats_over_empty_ns": targets["pinning check over empty"]["value"],
        "violation_stats_over_empty_ns": _over(stats, "tp_btf", "all violations",
                                               "handle_sched_switch"),
        "histogram_stats_per_switch_ns": targets["contention histogram over empty"]["value"],
        "histogram_stats_per_switch_total_ns": per_switch["tp_btf"]["total"],
        "raw_pinning_stats_over_empty_ns": _over(stats, "raw_tp", "owner runs",
                                                 "handle_sched_switch"),
        "raw_histogram_stats_per_switch_ns": per_switch.get("raw_tp", {}).get("over_empty"),
    }

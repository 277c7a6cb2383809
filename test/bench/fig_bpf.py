"""Issue 6: what the sched_switch programs add per context switch, from
test/bench/bpf_bench.c (a pipe ping-pong pinned to one CPU; runs with no
program and with the program alternate; medians of the per-pair figures).

  pinning    "+ns/switch" of the row "pinning, owner runs" (the full owner
             check on an exclusive CPU), over no program at all
  histogram  "+ns/switch" of "pinning + runq latency" (CPU in the shared
             pool, run-queue latency on) minus that of "pinning, CPU not
             exclusive" (same program minus the histogram): the histogram's
             own cost (its sched_wakeup program included)
The kernel's own accounting (bpf_stats, ns per program run) is kept in the
notes; it includes about 30 ns of instrumentation per run.
"""

import os
import re
import subprocess

from benchlib import BenchError

ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<none>\d+)\s+(?P<prog>\d+)\s+(?P<ratio>[\d.]+)\s+"
                 r"(?P<delta>-?[\d.]+)\s\s(?P<stats>.*)$")


def run(build_dir, round_trips=50000, pairs=15):
    exe = os.path.join(build_dir, "bpf_bench")
    if not os.access(exe, os.X_OK):
        raise BenchError("%s missing (make %s)" % (exe, exe))
    if os.geteuid() != 0:
        return {"skipped": "needs root (CAP_BPF, cgroup writes)"}
    p = subprocess.run([exe, "-n", str(round_trips), "-p", str(pairs)], capture_output=True,
                       text=True, timeout=600)
    if p.stdout.strip().startswith("skipped"):
        return {"skipped": p.stdout.strip()}
    rows = {}
    for line in p.stdout.splitlines():
        m = ROW.match(line)
        if m:
            s = re.match(r"([\d.]+)", m.group("stats"))
            rows[m.group("name")] = {"ns_rt_none": int(m.group("none")),
                                     "ns_rt_prog": int(m.group("prog")),
                                     "ratio": float(m.group("ratio")),
                                     "ns_per_switch": float(m.group("delta")),
                                     "bpf_stats_ns_per_run": float(s.group(1)) if s else None,
                                     "bpf_stats": m.group("stats")}
    need = ("baseline (count only)", "pinning, CPU not exclusive", "pinning, owner runs",
            "pinning, all violations", "pinning + runq latency")
    missing = [n for n in need if n not in rows]
    if p.returncode != 0 or missing:
        raise BenchError("bpf_bench exit %d, rows missing %s: %s"
                         % (p.returncode, missing, (p.stderr or p.stdout)[-400:]))
    pin = rows["pinning, owner runs"]
    unowned = rows["pinning, CPU not exclusive"]
    runq = rows["pinning + runq latency"]
    return {
        "rows": rows,
        "header": p.stdout.splitlines()[0] if p.stdout else "",
        "round_trips": round_trips, "pairs": pairs,
        "pinning_ns": pin["ns_per_switch"],
        "pinning_ratio": pin["ratio"],
        "empty_program_ns": rows["baseline (count only)"]["ns_per_switch"],
        "unowned_ns": unowned["ns_per_switch"],
        "violation_ns": rows["pinning, all violations"]["ns_per_switch"],
        "histogram_ns": round(runq["ns_per_switch"] - unowned["ns_per_switch"], 1),
        "pinning_plus_histogram_ns": runq["ns_per_switch"],
        "baseline_rt_ns": pin["ns_rt_none"],
    }

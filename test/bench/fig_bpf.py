"""Issue 6: what the sched_switch programs add per context switch, from
test/bench/bpf_bench.c (a pipe ping-pong pinned to one CPU; runs with no
program and with the program alternate; medians of the per-pair figures).

  pinning    "+ns/switch" of the row "pinning, owner runs" (the full owner
             check on an exclusive CPU), over no program at all
  histogram  "+ns/switch" of "pinning + runq latency" (CPU in the shared
             pool, run-queue latency on) minus the cost of one sched_switch
             program: the median of the rows "baseline (count only)",
             "pinning, CPU not exclusive" and "pinning, owner runs", which
             the kernel's own accounting puts within a few ns of each other;
             subtracting one noisy row alone swung the result by 200 ns on a
             busy machine. What is left is the histogram's own cost, its
             sched_wakeup program included.
The kernel's own accounting (bpf_stats: ns per program run, and bpf_bench's
"+ns over baseline", i.e. over the empty program, which cancels the
instrumentation) is kept in the results; it is far steadier than the
ping-pong but does not see the cost of entering a program at all.
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
            over = re.search(r"\), ([+-][\d.]+)$", m.group("stats"))
            rows[m.group("name")] = {"ns_rt_none": int(m.group("none")),
                                     "ns_rt_prog": int(m.group("prog")),
                                     "ratio": float(m.group("ratio")),
                                     "ns_per_switch": float(m.group("delta")),
                                     "bpf_stats_ns_per_run": float(s.group(1)) if s else None,
                                     "bpf_stats_over_empty": float(over.group(1)) if over
                                     else None,
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
    one = sorted(rows[n]["ns_per_switch"] for n in need[:3])[1]
    return {
        "rows": rows,
        "header": p.stdout.splitlines()[0] if p.stdout else "",
        "round_trips": round_trips, "pairs": pairs,
        "pinning_ns": pin["ns_per_switch"],
        "pinning_ratio": pin["ratio"],
        "empty_program_ns": rows["baseline (count only)"]["ns_per_switch"],
        "unowned_ns": unowned["ns_per_switch"],
        "violation_ns": rows["pinning, all violations"]["ns_per_switch"],
        "one_program_ns": one,
        "histogram_ns": round(runq["ns_per_switch"] - one, 1),
        "pinning_stats_over_empty_ns": pin["bpf_stats_over_empty"],
        "histogram_stats_over_empty_ns": None if runq["bpf_stats_over_empty"] is None else
        round(runq["bpf_stats_over_empty"] - (unowned["bpf_stats_over_empty"] or 0), 1),
        "pinning_plus_histogram_ns": runq["ns_per_switch"],
        "baseline_rt_ns": pin["ns_rt_none"],
    }

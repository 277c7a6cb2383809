"""Issue 21 section 3: whole cores under a random churn of mixed claims.

Runs build/cores_bench (its header says how it simulates: 128-CPU SMT-2 node,
one device per NUMA node taken first-fit by capacity as the scheduler does, a
quarter of the claims with fullCores, seeded) and returns its three variants:
main (kubelet's SMT checks only), kubelet (kubelet's placement, fullCores on
wholly free cores only) and driver (the same plus broken cores first for the
other claims, as the driver decides now).
"""

import json
import os
import subprocess

from benchlib import BenchError


def run(build_dir, claims=20000, seeds=5):
    exe = os.path.join(build_dir, "cores_bench")
    if not os.access(exe, os.X_OK):
        raise BenchError("%s missing (make %s)" % (exe, exe))
    p = subprocess.run([exe, str(claims), str(seeds)], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0 or p.stderr:
        raise BenchError("cores_bench failed (exit %d): %s"
                         % (p.returncode, (p.stderr or p.stdout)[-300:]))
    out = {}
    for line in p.stdout.splitlines():
        v = json.loads(line)
        v["refused_share"] = v["full_refused"] / max(1, v["full"])
        v["shared_share"] = v["full_shared"] / max(1, v["full"])
        out[v["variant"]] = v
    if set(out) != {"main", "kubelet", "driver"}:
        raise BenchError("cores_bench printed %s" % sorted(out))
    return out

"""Real-time tests touch node-wide state: the driver's cpuset tree for its
real-time CPUs and the root cpuset's load balancing. restore_node() puts both
back whatever a failed test left (no isolation, balancing on)."""

import os

CPUSET = "/sys/fs/cgroup/cpuset"


def restore_node():
    top = os.path.join(CPUSET, "dra-cpu-rt")
    if os.path.isdir(top):
        for sub in os.listdir(top):
            if os.path.isdir(os.path.join(top, sub)):
                try:
                    os.rmdir(os.path.join(top, sub))
                except OSError:
                    pass
        try:
            os.rmdir(top)
        except OSError:
            pass
    with open(os.path.join(CPUSET, "cpuset.sched_load_balance"), "w") as f:
        f.write("1")

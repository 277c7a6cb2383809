#!/usr/bin/python3
"""Synthetic topology JSON for tests, in the exact --print-topology format.

CPUs are numbered the way Linux numbers an x86 server: the first thread of every
core (socket by socket, NUMA node by NUMA node), then the second thread of every
core, and so on, so SMT siblings are N and N + cores. Per CPU:

  socket  = socket index            numa   = global NUMA node index
  core    = global core index       coreId = core index within its socket
  l3      = global L3 index (-1 with --l3-per-numa 0)

Offline CPUs are left out of "cpus" and listed in "offline"; a core whose threads
are all offline disappears. The summary fields are computed like topo_build().

  gen_topology.py --sockets 4 --numa-per-socket 2 --cores-per-numa 64 --threads 2 \\
      > synthetic-1024.json
  gen_topology.py --sockets 2 --cores-per-numa 96 --threads 2 > synthetic-384.json
"""
import argparse
import sys


def parse_cpulist(text):
    cpus = set()
    if not text:
        return cpus
    for item in text.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad CPU list item {item!r}")
        lo, hi = int(lo), int(hi) if sep else int(lo)
        if hi < lo:
            raise ValueError(f"reversed range {item!r}")
        cpus.update(range(lo, hi + 1))
    return cpus


def format_cpulist(cpus):
    out, run = [], None
    for cpu in sorted(cpus):
        if run and cpu == run[1] + 1:
            run[1] = cpu
            continue
        if run:
            out.append(run)
        run = [cpu, cpu]
    if run:
        out.append(run)
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def generate(sockets, numa_per_socket, cores_per_numa, threads, l3_per_numa, offline):
    if min(sockets, numa_per_socket, cores_per_numa, threads) < 1:
        raise ValueError("counts must be >= 1")
    if l3_per_numa < 0 or (l3_per_numa and cores_per_numa % l3_per_numa):
        raise ValueError("--l3-per-numa must divide --cores-per-numa (or be 0)")
    cores_per_socket = numa_per_socket * cores_per_numa
    n_cores = sockets * cores_per_socket
    n_cpus = n_cores * threads
    if n_cpus > 8192:
        raise ValueError(f"{n_cpus} CPUs, more than 8192")
    if offline and max(offline) >= n_cpus:
        raise ValueError(f"offline CPU {max(offline)} does not exist (0-{n_cpus - 1})")

    rows = []
    for cpu in range(n_cpus):
        if cpu in offline:
            continue
        core = cpu % n_cores
        socket = core // cores_per_socket
        numa = core // cores_per_numa
        if l3_per_numa:
            l3 = numa * l3_per_numa + (core % cores_per_numa) // (cores_per_numa // l3_per_numa)
        else:
            l3 = -1
        rows.append(dict(cpu=cpu, socket=socket, numa=numa, core=core,
                         coreId=core % cores_per_socket, l3=l3))
    if not rows:
        raise ValueError("every CPU is offline")

    def distinct(key):
        return len({r[key] for r in rows if r[key] >= 0})

    per_core = {}
    for r in rows:
        per_core[r["core"]] = per_core.get(r["core"], 0) + 1
    cpus = ", ".join(
        '{"cpu": %(cpu)d, "socket": %(socket)d, "numa": %(numa)d, "core": %(core)d, '
        '"coreId": %(coreId)d, "l3": %(l3)d, "coreType": "standard"}' % r for r in rows)
    return ('{"cpus": [%s], "offline": "%s", "sockets": %d, "numaNodes": %d, "cores": %d, '
            '"l3Caches": %d, "smtEnabled": %s}\n' % (
                cpus, format_cpulist(offline), distinct("socket"), distinct("numa"),
                distinct("core"), distinct("l3"),
                "true" if max(per_core.values()) > 1 else "false"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sockets", type=int, default=1)
    p.add_argument("--numa-per-socket", type=int, default=1)
    p.add_argument("--cores-per-numa", type=int, required=True)
    p.add_argument("--threads", type=int, default=1, help="SMT threads per core")
    p.add_argument("--l3-per-numa", type=int, default=1, help="0 = no L3")
    p.add_argument("--offline", default="", metavar="LIST", help='CPU list, e.g. "2,5-6"')
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    a = p.parse_args()
    try:
        text = generate(a.sockets, a.numa_per_socket, a.cores_per_numa, a.threads,
                        a.l3_per_numa, parse_cpulist(a.offline))
    except ValueError as e:
        p.error(str(e))
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

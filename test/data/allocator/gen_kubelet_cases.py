#!/usr/bin/python3
"""Writes kubelet_cases.json: kubelet's CPU-manager test topologies and cases.

Source: kubernetes pkg/kubelet/cm/cpumanager/{cpu_assignment_test.go,
policy_static_test.go, policy_test.go} (fd5b2efa lineage and the 2026 revision
with the extra uncore cases); docs/allocation.md describes the algorithm.
Topologies with a regular layout are written as formulas here and expanded to
explicit rows; the KNL quad-socket machine is transcribed core by core.
topoSmallSingleSocketSingleNumaPerSocketNoSMTUncore is not in any revision we
could read: it is rebuilt from its test comments (32 CPUs, no SMT, 8 per
uncore cache) and marked "reconstructed".

Rows are [cpu, core, socket, numa, uncore]; headers are kubelet's
NumCPUs/NumCores/NumSockets/NumNUMANodes/NumUncoreCache (0 = not set).

Run: /usr/bin/python3 test/data/allocator/gen_kubelet_cases.py
"""
import json
import os


def rows(n, core, socket=lambda c: 0, numa=None, l3=lambda c: 0):
    numa = numa or socket
    return [[c, core(c), socket(c), numa(c), l3(c)] for c in range(n)]


def hdr(cpus, cores, sockets, numa=0, uncore=0):
    return {"cpus": cpus, "cores": cores, "sockets": sockets, "numa": numa, "uncore": uncore}


# KNL quad socket, SMT-4: socket -> [(core, [cpus])]
QUAD = {
    0: [(0, [0, 169, 109, 229]), (1, [50, 170, 110, 230]), (64, [1, 25, 13, 38]),
        (65, [2, 26, 14, 39]), (72, [9, 33, 21, 46]), (73, [10, 34, 22, 47]),
        (8, [57, 177, 117, 237]), (9, [58, 178, 118, 238]), (24, [71, 191, 131, 251]),
        (25, [72, 192, 132, 252]), (32, [79, 199, 139, 259]), (33, [80, 200, 140, 260]),
        (40, [87, 207, 147, 267]), (41, [88, 208, 148, 268]), (48, [95, 215, 155, 275]),
        (49, [96, 216, 156, 276]), (56, [103, 223, 163, 283]), (57, [104, 224, 164, 284])],
    1: [(66, [3, 27, 15, 40]), (67, [4, 28, 16, 41]), (74, [11, 35, 23, 48]),
        (75, [12, 36, 24, 49]), (2, [51, 171, 111, 231]), (3, [52, 172, 112, 232]),
        (10, [59, 179, 119, 239]), (11, [60, 180, 120, 240]), (18, [65, 185, 125, 245]),
        (19, [66, 186, 126, 246]), (26, [73, 193, 133, 253]), (27, [74, 194, 134, 254]),
        (34, [81, 201, 141, 261]), (35, [82, 202, 142, 262]), (42, [89, 209, 149, 269]),
        (43, [90, 210, 150, 270]), (50, [97, 217, 157, 277]), (51, [98, 218, 158, 278])],
    2: [(68, [5, 29, 17, 42]), (69, [6, 30, 18, 43]), (4, [53, 173, 113, 233]),
        (5, [54, 174, 114, 234]), (12, [61, 181, 121, 241]), (13, [62, 182, 122, 242]),
        (20, [67, 187, 127, 247]), (21, [68, 188, 128, 248]), (28, [75, 195, 135, 255]),
        (29, [76, 196, 136, 256]), (36, [83, 203, 143, 263]), (37, [84, 204, 144, 264]),
        (44, [91, 211, 151, 271]), (45, [92, 212, 152, 272]), (52, [99, 219, 159, 279]),
        (53, [100, 220, 160, 280]), (60, [105, 225, 165, 285]), (61, [106, 226, 166, 286])],
    3: [(70, [7, 31, 19, 44]), (71, [8, 32, 20, 45]), (63, [37, 168, 108, 228]),
        (62, [107, 227, 167, 287]), (6, [55, 175, 115, 235]), (7, [56, 176, 116, 236]),
        (14, [63, 183, 123, 243]), (15, [64, 184, 124, 244]), (22, [69, 189, 129, 249]),
        (23, [70, 190, 130, 250]), (30, [77, 197, 137, 257]), (31, [78, 198, 138, 258]),
        (38, [85, 205, 145, 265]), (39, [86, 206, 146, 266]), (46, [93, 213, 153, 273]),
        (47, [94, 214, 154, 274]), (54, [101, 221, 161, 281]), (55, [102, 222, 162, 282])],
}
QUAD_SOCKET_LISTS = {  # the comment above topoQuadSocketFourWayHT, to check the table
    0: "0-2,9-10,13-14,21-22,25-26,33-34,38-39,46-47,50,57-58,71-72,79-80,87-88,95-96,103-104,"
       "109-110,117-118,131-132,139-140,147-148,155-156,163-164,169-170,177-178,191-192,199-200,"
       "207-208,215-216,223-224,229-230,237-238,251-252,259-260,267-268,275-276,283-284",
    1: "3-4,11-12,15-16,23-24,27-28,35-36,40-41,48-49,51-52,59-60,65-66,73-74,81-82,89-90,97-98,"
       "111-112,119-120,125-126,133-134,141-142,149-150,157-158,171-172,179-180,185-186,193-194,"
       "201-202,209-210,217-218,231-232,239-240,245-246,253-254,261-262,269-270,277-278",
    2: "5-6,17-18,29-30,42-43,53-54,61-62,67-68,75-76,83-84,91-92,99-100,105-106,113-114,121-122,"
       "127-128,135-136,143-144,151-152,159-160,165-166,173-174,181-182,187-188,195-196,203-204,"
       "211-212,219-220,225-226,233-234,241-242,247-248,255-256,263-264,271-272,279-280,285-286",
    3: "7-8,19-20,31-32,37,44-45,55-56,63-64,69-70,77-78,85-86,93-94,101-102,107-108,115-116,"
       "123-124,129-130,137-138,145-146,153-154,161-162,167-168,175-176,183-184,189-190,197-198,"
       "205-206,213-214,221-222,227-228,235-236,243-244,249-250,257-258,265-266,273-274,281-282,287",
}


def parse(s):
    out = set()
    for item in filter(None, s.split(",")):
        lo, _, hi = item.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def fmt(cpus):
    cpus = sorted(set(cpus))
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def quad_rows():
    r = []
    for sock, cores in QUAD.items():
        got = set()
        for core, cpus in cores:
            got.update(cpus)
            r += [[c, core, sock, sock, 0] for c in cpus]
        assert got == parse(QUAD_SOCKET_LISTS[sock]), sock
    assert sorted(x[0] for x in r) == list(range(288))
    return sorted(r)


T = {
    "topoSingleSocketHT": (hdr(8, 4, 1), rows(8, lambda c: c % 4)),
    "topoDualSocketHT": (hdr(12, 6, 2, 0, 1), rows(12, lambda c: c % 6, lambda c: c % 6 % 2)),
    "topoDualSocketNoHT": (hdr(8, 8, 2), rows(8, lambda c: c, lambda c: c // 4)),
    "topoTripleSocketHT": (hdr(18, 9, 3), rows(18, lambda c: c // 2, lambda c: [1, 0, 2][c // 6])),
    "topoQuadSocketFourWayHT": (hdr(288, 72, 4), quad_rows()),
    "topoDualSocketMultiNumaPerSocketHT": (
        hdr(80, 40, 2, 4), rows(80, lambda c: c % 40, lambda c: c % 40 // 20, lambda c: c % 40 // 10)),
    "fakeTopoMultiSocketDualSocketPerNumaHT": (
        hdr(80, 40, 4, 2), rows(80, lambda c: c % 40, lambda c: c % 40 // 10, lambda c: c % 40 // 20)),
    "topoDualSocketMultiNumaPerSocketHTLarge": (
        hdr(256, 128, 2, 8),
        rows(256, lambda c: c % 128, lambda c: c % 128 // 64, lambda c: c % 128 // 16)),
    "topoUncoreSingleSocketNoSMT": (
        hdr(16, 16, 1, 0, 4), rows(16, lambda c: c, l3=lambda c: c // 4)),
    "topoUncoreDualSocketNoSMT": (
        hdr(16, 16, 2, 0, 4), rows(16, lambda c: c, lambda c: c // 8, lambda c: 0, lambda c: c // 4)),
    "topoUncoreSingleSocketMultiNuma": (
        hdr(16, 16, 1, 0, 4), rows(16, lambda c: c, lambda c: 0, lambda c: c // 8, lambda c: c // 4)),
    "topoUncoreSingleSocketSMT": (
        hdr(16, 8, 1, 0, 2), rows(16, lambda c: c % 8, l3=lambda c: c % 8 // 4)),
    "topoDualSocketSingleNumaPerSocketSMTUncore": (
        hdr(384, 192, 2, 2, 24),
        rows(384, lambda c: c % 192, lambda c: c % 192 // 96, None, lambda c: c % 192 // 8)),
    "topoSingleSocketSingleNumaPerSocketSMTSmallUncore": (
        hdr(128, 64, 1, 1, 16), rows(128, lambda c: c % 64, l3=lambda c: c % 64 // 4)),
    # header declares 128 CPUs, the table lists 64 (§1.1)
    "topoSingleSocketSingleNumaPerSocketNoSMTSmallUncore": (
        hdr(128, 64, 1, 1, 16), rows(64, lambda c: c, l3=lambda c: c // 4)),
    "topoSmallDualSocketSingleNumaPerSocketNoSMTUncore": (
        hdr(64, 64, 2, 2, 8), rows(64, lambda c: c, lambda c: c // 32, None, lambda c: c // 8)),
    "topoLargeSingleSocketSingleNumaPerSocketSMTUncore": (
        hdr(256, 128, 1, 1, 16), rows(256, lambda c: c % 128, l3=lambda c: c % 128 // 8)),
    # core ids restart on the second socket (§1.3)
    "topoDualSocketMultiNumaPerSocketUncore": (
        hdr(192, 192, 2, 4, 24),
        rows(192, lambda c: c % 96, lambda c: c // 96, lambda c: c // 48, lambda c: c // 8)),
    "topoDualSocketSubNumaPerSocketHTMonolithicUncore": (
        hdr(240, 120, 2, 4, 2),
        rows(240, lambda c: c % 120, lambda c: c % 120 // 60, lambda c: c % 120 // 30,
             lambda c: c % 120 // 60)),
    "topoSingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore": (
        hdr(24, 16, 1, 1, 1), rows(24, lambda c: c if c < 16 else c - 8)),
    "topoLargeSingleSocketSingleNumaPerSocketUncore": (
        hdr(128, 128, 1, 1, 16), rows(128, lambda c: c, l3=lambda c: c // 8)),
    "topoSingleSocketSingleNumaPerSocketUncore": (hdr(64, 64, 1, 1, 1), rows(64, lambda c: c)),
    "topoSmallSingleSocketSingleNumaPerSocketNoSMTUncore": (
        hdr(32, 32, 1, 1, 4), rows(32, lambda c: c, l3=lambda c: c // 8)),
}
RECONSTRUCTED = {"topoSmallSingleSocketSingleNumaPerSocketNoSMTUncore"}


def all_cpus(topo):
    return {r[0] for r in T[topo][1]}


def in_l3(topo, *ids):
    return {r[0] for r in T[topo][1] if r[4] in ids}


def in_socket(topo, s):
    return {r[0] for r in T[topo][1] if r[2] == s}


SSHT, DSHT, DSNOHT, TSHT = "topoSingleSocketHT", "topoDualSocketHT", "topoDualSocketNoHT", "topoTripleSocketHT"
QUADT, MNPS, FAKE, LARGE = ("topoQuadSocketFourWayHT", "topoDualSocketMultiNumaPerSocketHT",
                            "fakeTopoMultiSocketDualSocketPerNumaHT",
                            "topoDualSocketMultiNumaPerSocketHTLarge")

# ---- accumulator orders (TestCPUAccumulatorFree*) ----------------------------------------------
free_units = []


def fu(test, level, topo, avail, expect, sort=False):
    free_units.append({"test": test, "level": level, "topo": topo, "available": avail,
                       "expect": expect, "sort": sort})


for d, t, a, e in [
        ("single socket HT, 1 socket free", SSHT, "0-7", [0]),
        ("single socket HT, 0 sockets free", SSHT, "1-7", []),
        ("dual socket HT, 2 sockets free", DSHT, "0-11", [0, 1]),
        ("dual socket HT, 1 socket free", DSHT, "0-9,11", [1]),
        ("dual socket HT, 0 sockets free", DSHT, "0,2-9,11", []),
        ("dual socket, multi numa per socket, HT, 2 sockets free", MNPS, "0-79", [0, 1]),
        ("dual socket, multi numa per socket, HT, 1 sockets free", MNPS, "1-79", [1]),
        ("dual socket, multi numa per socket, HT, 0 sockets free", MNPS, "1-78", []),
        ("dual numa, multi socket per per socket, HT, 4 sockets free", FAKE, "0-79", [0, 1, 2, 3]),
        ("dual numa, multi socket per per socket, HT, 3 sockets free", FAKE, "0-19,21-79", [0, 1, 3]),
        ("dual numa, multi socket per per socket, HT, 2 sockets free", FAKE, "0-59,61-78", [0, 1]),
        ("dual numa, multi socket per per socket, HT, 1 sockets free", FAKE,
         "1-19,21-38,41-60,61-78", [1]),
        ("dual numa, multi socket per per socket, HT, 0 sockets free", FAKE,
         "0-40,42-49,51-68,71-79", [])]:
    fu("TestCPUAccumulatorFreeSockets/" + d, "socket", t, a, e, sort=True)

for d, t, a, e in [
        ("single socket HT, 1 NUMA node free", SSHT, "0-7", [0]),
        ("single socket HT, 0 NUMA Node free", SSHT, "1-7", []),
        ("dual socket HT, 2 NUMA Node free", DSHT, "0-11", [0, 1]),
        ("dual socket HT, 1 NUMA Node free", DSHT, "0-9,11", [1]),
        ("dual socket HT, 0 NUMA node free", DSHT, "0,2-9,11", []),
        ("dual socket, multi numa per socket, HT, 4 NUMA Node free", MNPS, "0-79", [0, 1, 2, 3]),
        ("dual socket, multi numa per socket, HT, 3 NUMA node free", MNPS, "1-79", [1, 2, 3]),
        ("dual socket, multi numa per socket, HT, 2 NUMA node free", MNPS, "1-9,11-79", [2, 3]),
        ("dual socket, multi numa per socket, HT, 1 NUMA node free", MNPS, "1-9,11-59,61-79", [3]),
        ("dual socket, multi numa per socket, HT, 0 NUMA node free", MNPS, "1-9,11-59,61-78", []),
        ("dual numa, multi socket per per socket, HT, 2 NUMA node free", FAKE, "0-79", [0, 1]),
        ("dual numa, multi socket per per socket, HT, 1 NUMA node free", FAKE, "0-9,11-79", [1]),
        ("dual numa, multi socket per per socket, HT, 0 sockets free", FAKE, "0-9,11-59,61-79", [])]:
    fu("TestCPUAccumulatorFreeNUMANodes/" + d, "numa", t, a, e)

for d, a, s, n in [
        ("dual socket, multi numa per socket, HT, 2 Socket/4 NUMA Node free", "0-79", [0, 1], [0, 1, 2, 3]),
        ("dual socket, multi numa per socket, HT, 1 Socket/3 NUMA node free", "1-79", [1], [1, 2, 3]),
        ("dual socket, multi numa per socket, HT, 1 Socket/ 2 NUMA node free", "1-9,11-79", [1], [2, 3]),
        ("dual socket, multi numa per socket, HT, 0 Socket/ 2 NUMA node free", "1-59,61-79", [], [1, 3])]:
    fu("TestCPUAccumulatorFreeSocketsAndNUMANodes/" + d + " (NUMA)", "numa", MNPS, a, n)
    fu("TestCPUAccumulatorFreeSocketsAndNUMANodes/" + d + " (sockets)", "socket", MNPS, a, s)

for d, t, a, e in [
        ("single socket HT, 4 cores free", SSHT, "0-7", [0, 1, 2, 3]),
        ("single socket HT, 3 cores free", SSHT, "0-2,4-6", [0, 1, 2]),
        ("single socket HT, 3 cores free (1 partially consumed)", SSHT, "0-6", [0, 1, 2]),
        ("single socket HT, 0 cores free", SSHT, "", []),
        ("single socket HT, 0 cores free (4 partially consumed)", SSHT, "0-3", []),
        ("dual socket HT, 6 cores free", DSHT, "0-11", [0, 2, 4, 1, 3, 5]),
        ("dual socket HT, 5 cores free (1 consumed from socket 0)", DSHT, "1-5,7-11", [2, 4, 1, 3, 5]),
        ("dual socket HT, 4 cores free (1 consumed from each socket)", DSHT, "2-5,8-11", [2, 4, 3, 5])]:
    fu("TestCPUAccumulatorFreeCores/" + d, "core", t, a, e)

cpu_order = []
for d, t, a, e in [
        ("single socket HT, 8 cpus free", SSHT, "0-7", [0, 4, 1, 5, 2, 6, 3, 7]),
        ("single socket HT, 5 cpus free", SSHT, "3-7", [4, 5, 6, 3, 7]),
        ("dual socket HT, 12 cpus free", DSHT, "0-11", [0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("dual socket HT, 11 cpus free", DSHT, "1-11", [6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("dual socket HT, 10 cpus free", DSHT, "1-5,7-11", [2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("triple socket HT, 12 cpus free", TSHT, "0-3,6-13", [12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11])]:
    cpu_order.append({"test": "TestCPUAccumulatorFreeCPUs/" + d, "topo": t, "available": a,
                      "expect": e})

# ---- takeByTopology* -------------------------------------------------------------------------
take = []


def tk(test, topo, avail, count, expect=None, error=None, policy="packed", align_l3=False, group=1):
    c = {"test": test, "topo": topo, "available": avail, "count": count, "policy": policy,
         "align_l3": align_l3, "group_size": group}
    if error is not None:
        c["error"] = error
    else:
        c["expect"] = fmt(parse(expect))
    take.append(c)


COMMON = [
    ("take more cpus than are available from single socket with HT", SSHT, "0,2,4,6", 5, None,
     "not enough cpus available to satisfy request: requested=5, available=4"),
    ("take zero cpus from single socket with HT", SSHT, "0-7", 0, "", None),
    ("take one cpu from single socket with HT", SSHT, "0-7", 1, "0", None),
    ("take one cpu from single socket with HT, some cpus are taken", SSHT, "1,3,5,6,7", 1, "6", None),
    ("take two cpus from single socket with HT", SSHT, "0-7", 2, "0,4", None),
    ("take all cpus from single socket with HT", SSHT, "0-7", 8, "0-7", None),
    ("take two cpus from single socket with HT, only one core totally free", SSHT, "0,1,2,3,6", 2,
     "2,6", None),
    ("take a socket of cpus from dual socket with HT", DSHT, "0-11", 6, "0,2,4,6,8,10", None),
    ("take a socket of cpus from dual socket with multi-numa-per-socket with HT", MNPS, "0-79", 40,
     "0-19,40-59", None),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", MNPS, "0-79", 20,
     "0-9,40-49", None),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken",
     MNPS, "10-39,50-79", 20, "10-19,50-59", None),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", MNPS,
     "0-79", 60, "0-29,40-69", None),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
     MNPS, "1-39,41-79", 60, "10-39,50-79", None),
]
for d, t, a, n, e, err in COMMON:
    tk("TestTakeByTopologyNUMAPacked/" + d, t, a, n, e, err)
for d, t, a, n, e, l3 in [
        ("take one cpu from dual socket with HT - core from Socket 0", DSHT, "1-5,7-11", 1, "2", False),
        ("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second NUMA node",
         DSHT, "0-11", 8, "0,6,2,8,4,10,1,7", False),
        ("allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the fourth NUMA node",
         MNPS, "0-79", 64, "0-29,40-69,30,31,70,71", False),
        ("take cpus from two full UncoreCaches and partial from a single UncoreCache",
         "topoUncoreSingleSocketNoSMT", "1-15", 10, "1,2,4,5,6,7,8,9,10,11", True),
        ("take one cpu from dual socket with HT - core from Socket 0 (uncore)", DSHT, "1-5,7-11", 1, "1",
         True),
        ("take first available UncoreCache from first socket", "topoUncoreDualSocketNoSMT", "0-15", 4,
         "0-3", True),
        ("take all available UncoreCache from first socket", "topoUncoreDualSocketNoSMT", "2-15", 6,
         "2-7", True),
        ("take first available UncoreCache from second socket", "topoUncoreDualSocketNoSMT", "8-15", 4,
         "8-11", True),
        ("take first available UncoreCache from available NUMA", "topoUncoreSingleSocketMultiNuma",
         "3,4-8,12", 2, "4,5", True),
        ("take cpus from best available UncoreCache group of multi uncore cache single socket - SMT enabled",
         "topoUncoreSingleSocketSMT", "2-3,10-11,4-7,12-15", 6, "4,5,6,12,13,14", True),
        ("take cpus from multiple UncoreCache of single socket - SMT enabled",
         "topoUncoreSingleSocketSMT", "1-7,9-15", 10, "4-7,12-15,1,9", True)]:
    tk("TestTakeByTopologyNUMAPacked/" + d, t, a, n, e, align_l3=l3)

for d, t, a, n, e in [
        ("take a socket of cpus from single socket with HT, 3 cpus", SSHT, "0-7", 3, "0,1,2"),
        ("take a socket of cpus from dual socket with HT, 2 cpus", DSHT, "0-11", 2, "0,2"),
        ("take a socket of cpus from dual socket with HT, 3 cpus", DSHT, "0-11", 3, "0,2,4"),
        ("take a socket of cpus from dual socket with HT, 6 cpus", DSHT, "0-11", 6, "0,2,4,6,8,10"),
        ("take cpus from dual socket with HT, 8 cpus", DSHT, "0-11", 8, "0,2,4,6,8,10,1,3"),
        ("take a socket of cpus from dual socket without HT, 2 cpus", DSNOHT, "0-7", 2, "0,1"),
        ("take a socket of cpus from dual socket with multi numa per socket and HT, 12 cpus", MNPS,
         "0-79", 8, "0-7"),
        ("take a socket of cpus from quad socket four way with HT, 12 cpus", QUADT, "0-287", 12,
         "0-2,9-10,13-14,21-22,25-26,33")]:
    tk("TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption/" + d, t, a, n, e,
       policy="spread-cores")

DIST = [(d, t, a, n, e, err, 1) for d, t, a, n, e, err in COMMON] + [
    ("allocate 4 full cores with 2 distributed across each NUMA node", DSHT, "0-11", 8,
     "0,6,2,8,1,7,3,9", None, 1),
    ("allocate 32 full cores with 8 distributed across each NUMA node", MNPS, "0-79", 64,
     "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77", None, 1),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", MNPS, "0-79", 48,
     "0-7,10-17,20-27,40-47,50-57,60-67", None, 1),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but 2 from the first NUMA node)",
     MNPS, "1-29,32-39,41-69,72-79", 48, "1-8,10-17,20-27,41-48,50-57,60-67", None, 1),
    ("allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)",
     MNPS, "2-29,31-39,42-69,71-79", 48, "10-17,20-27,31-38,50-57,60-67,71-78", None, 1),
    ("allocate 8 full cores with 2 distributed across each NUMA node", MNPS,
     "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16,
     "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71", None, 1),
    ("allocate 8 full cores with 2 distributed across each NUMA node (listed twice upstream)", MNPS,
     "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16,
     "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71", None, 1),
    ("take one cpu from dual socket with HT - core from Socket 0", DSHT, "1-5,7-11", 1, "1", None, 1),
    ("take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2", DSHT, "1-5,7-11", 1,
     "2", None, 2),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes", MNPS, "0-79", 26,
     "0-6,10-16,40-45,50-55", None, 1),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)", MNPS, "0-79", 26,
     "0-6,10-15,40-46,50-55", None, 2),
    ("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 0, 1",
     MNPS, "0-79", 62, "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76", None, 1),
    ("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)",
     MNPS, "0-79", 62, "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76", None, 2),
    ("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)",
     MNPS, "0-8,10-18,20-39,40-48,50-58,60-79", 62, "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77",
     None, 1),
    ("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)",
     MNPS, "0-8,10-18,20-39,40-48,50-58,60-79", 62, "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77",
     None, 2),
    ("ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request", MNPS,
     "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", 34,
     "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74", None, 1),
    ("ensure previous failure encountered on live machine has been fixed (1/1)", LARGE,
     "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255",
     28, "43-47,75-79,96,101-105,171-174,203-206,229-232", None, 1),
]
for d, t, a, n, e, err, g in DIST:
    tk("TestTakeByTopologyNUMADistributed/" + d, t, a, n, e, err, policy="distributed", group=g)

# ---- policy_static_test.go: what the static policy feeds the allocator ------------------------
policy = []


def pc(test, topo, default, requests, *, num_reserved=0, reserved=None, full_cores=False,
       align_l3=False, hint=None, align_by_socket=False, expect=None, expect_l3=None, error=None):
    if isinstance(default, set):
        default = fmt(default)
    c = {"test": test, "topo": topo, "default": default, "requests": requests,
         "num_reserved": num_reserved, "full_cores": full_cores, "align_l3": align_l3}
    if reserved is not None:
        c["reserved"] = reserved
    if hint is not None:
        c["hint_numa"] = hint
        c["align_by_socket"] = align_by_socket
    if error is not None:
        c["error"] = error
    if expect is not None:
        c["expect"] = fmt(parse(expect) if isinstance(expect, str) else expect)
    if expect_l3 is not None:
        c["expect_l3"] = expect_l3
    policy.append(c)


quad_all = all_cpus(QUADT)
quad_s0, quad_s1 = in_socket(QUADT, 0), in_socket(QUADT, 1)
INSENSITIVE = [
    ("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", SSHT, 1, "0,1,4,5", 2, "1,5"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", DSHT, 1, "0,1,3-11", 6, "1,3,5,7,9,11"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores", DSHT, 1, "0,2,3,4,6-11", 6,
     "2,3,4,8,9,10"),
    ("GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket", DSNOHT, 1, "0,1,3-7", 4, "4-7"),
    ("GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores", DSNOHT, 1, "0,1,3,6,7", 4, "1,3,6,7"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore", DSHT, 1, "0,1,3-11", 8,
     "1,3,4,5,7,9,10,11"),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0", QUADT, 0,
     quad_all - {3, 11, 4, 5, 6, 7}, 72, quad_s0),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets", QUADT, 0,
     "1,25,13,38,2,9,11,35,23,48,12,51,53,173,113,233,54,61", 12,
     "1,25,13,38,11,35,23,48,53,173,113,233"),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore", QUADT, 0,
     quad_s1 | {10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235}, 76, quad_s1 | {10, 34, 22, 47}),
]
for opt in (False, True):
    for d, t, nr, dflt, n, e in INSENSITIVE:
        pc("TestStaticPolicyAdd/options=%s %s" % ("full-pcpus-only" if opt else "none", d), t, dflt, [n],
           num_reserved=nr, full_cores=opt, expect=e)
for d, t, nr, dflt, n, e, err in [
        ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", SSHT, 1, "0-7", 1, "4", None),
        ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs", QUADT, 0, "10,11,53,67,52", 5,
         "10,11,53,67,52", None),
        ("GuPodSingleCore, SingleSocketHT, ExpectError", SSHT, 1, "0-7", 8, None,
         "not enough cpus available to satisfy request: requested=8, available=7"),
        ("GuPodMultipleCores, DualSocketHT, NoAllocExpectError", DSHT, 1, "0,4-11", 10, None,
         "not enough cpus available to satisfy request: requested=10, available=8"),
        ("GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", SSHT, 1, "0,7", 2, None,
         "not enough cpus available to satisfy request: requested=2, available=1"),
        ("GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc", QUADT, 0, "10,11,53,37,55,67,52", 76,
         None, "not enough cpus available to satisfy request: requested=76, available=7")]:
    pc("TestStaticPolicyAdd/" + d, t, dflt, [n], num_reserved=nr, expect=e, error=err)
for d, t, nr, res, dflt, n, e, err in [
        ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", SSHT, 1, None, "0-7", 1, None,
         "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"),
        ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs", QUADT, 8, None, fmt(quad_all),
         15, None, "SMT Alignment Error: requested 15 cpus not multiple cpus per core = 4"),
        ("GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU", DSHT, 2, "1,6", "0,2-5,7-11", 10,
         None,
         "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 8, requested CPUs = 10, CPUs per core = 2"),
        ("GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs", DSHT, 2, None, "1-5,7-11",
         10, "1-5,7-11", None),
        ("GuPodManyCores, topoDualSocketHT, ExpectAllocAllCPUs", DSHT, 2, "0,6", "1-5,7-11", 10, "1-5,7-11",
         None)]:
    pc("TestStaticPolicyAdd/smtalign " + d, t, dflt, [n], num_reserved=nr, reserved=res, full_cores=True,
       expect=e, error=err)
pc("TestStaticPolicyAdd/Align by socket: true, cpu's within same socket of numa in hint are part of allocation",
   MNPS, "2,11,21,22", [2], num_reserved=1, hint=[0, 2], align_by_socket=True, expect="2,11")
pc("TestStaticPolicyAdd/Align by socket: false, cpu's are taken strictly from NUMA nodes in hint",
   MNPS, "2,11,21,22", [2], num_reserved=1, hint=[0, 2], align_by_socket=False, expect="2,21")
for d, n, h, e in [("Request 2 CPUs, No BitMask", 2, None, "0,6"),
                   ("Request 2 CPUs, BitMask on Socket 0", 2, [0], "0,6"),
                   ("Request 2 CPUs, BitMask on Socket 1", 2, [1], "1,7"),
                   ("Request 8 CPUs, BitMask on Socket 0", 8, [0], "0,6,2,8,4,10,1,7"),
                   ("Request 8 CPUs, BitMask on Socket 1", 8, [1], "1,7,3,9,5,11,0,6")]:
    pc("TestTopologyAwareAllocateCPUs/" + d, DSHT, "0-11", [n], hint=h, expect=e)
for d, nr, res, dflt, n, e, err in [
        ("GuPodSingleCore, SingleSocketHT, ExpectError", 1, "0", "0-7", 8, None,
         "not enough cpus available to satisfy request: requested=8, available=7"),
        ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", 2, "0,1", "0-7", 1, "4", None),
        ("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", 2, "0,1", "0,1,4,5", 2, "4,5", None)]:
    pc("TestStaticPolicyAddWithResvList/" + d, SSHT, dflt, [n], num_reserved=nr, reserved=res, expect=e,
       error=err)

A = "topoDualSocketSingleNumaPerSocketSMTUncore"
B = "topoSingleSocketSingleNumaPerSocketSMTSmallUncore"
C = "topoSingleSocketSingleNumaPerSocketNoSMTSmallUncore"
E = "topoSmallDualSocketSingleNumaPerSocketNoSMTUncore"
F = "topoLargeSingleSocketSingleNumaPerSocketSMTUncore"
G = "topoDualSocketMultiNumaPerSocketUncore"
H = "topoDualSocketSubNumaPerSocketHTMonolithicUncore"
I = "topoSingleSocketSingleNumaPerSocketPCoreHTMonolithicUncore"
J = "topoLargeSingleSocketSingleNumaPerSocketUncore"
K = "topoSingleSocketSingleNumaPerSocketUncore"
L = "topoSmallSingleSocketSingleNumaPerSocketNoSMTUncore"
A_RES = "0,1,96,97,192,193,288,289"
a_clean = all_cpus(A) - in_l3(A, 0, 12)
UNCORE = [
    ("GuPodSingleContainerSaturating, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", A, 8,
     A_RES, a_clean, [16], True, None, [1]),
    ("GuPodMainAndSidecarContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", A, 8,
     A_RES, a_clean, [12, 2], True, None, [1]),
    ("GuPodSidecarAndMainContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", A, 8,
     A_RES, a_clean, [2, 12], True, None, [1]),
    ("GuPodMainAndManySidecarContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", A, 8,
     A_RES, a_clean, [10, 2, 2, 2], True, None, [1]),
    ("GuPodMainAndSidecarContainer, DualSocketHTUncore, ExpectAllocTwoUncore", A, 8, A_RES, all_cpus(A),
     [12, 2], True, None, [0, 1]),
    ("GuPodSingleContainer, SingleSocketSMTSmallUncore, ExpectAllocOneUncore", B, 4, "0,1,64,65",
     all_cpus(B), [8], True, None, [1]),
    ("GuPodSingleContainer, SingleSocketSMTSmallUncore, ExpectAllocTwoUncore", B, 4, "0,1,64,65",
     all_cpus(B) - in_l3(B, 1), [12], True, None, [0, 2]),
    ("GuPodSingleContainer, SingleSocketNoSMTSmallUncore, FragmentedUncore, ExpectAllocThreeUncore", C, 4,
     "0-3", all_cpus(C) - in_l3(C, 2, 3, 5), [12], True, None, [1, 4, 6]),
    ("GuPodMultiContainer, DualSocketSMTUncore, FragmentedUncore, ExpectAllocOneUncore", E, 4,
     "0,1,32,33", all_cpus(E) - in_l3(E, 1), [4, 2], True, None, [0]),
    ("GuPodMultiContainer, DualSocketSMTUncore, FragmentedUncore, ExpectAllocTwoUncore", E, 4,
     "0,1,32,33", all_cpus(E) - in_l3(E, 1), [4, 4], True, None, [0, 2]),
    ("GuPodMultiContainer, LargeSingleSocketSMTUncore, PartialUncoreFit, ExpectAllocTwoUncore", F, 4,
     "0,1,128,129", all_cpus(F) - {8, 9, 136, 137}, [12, 12], True, None, [0, 1]),
    ("GuPodMultiContainer, LargeSingleSocketSMTUncore, PartialUncoreNoFit, ExpectAllocTwoUncore", F, 4,
     "0,1,128,129", all_cpus(F) - {8, 9, 136, 137}, [14, 14], True, None, [2, 3]),
    ("GuPodLargeSingleContainer, DualSocketNoSMTUncore, FullNUMAsAvail, ExpectAllocFullNUMA", G, 4, "0-3",
     all_cpus(G), [48], True, None, [6, 7, 8, 9, 10, 11]),
    ("GuPodSingleContainer, MonoUncoreCacheHT, ExpectAllocCPUSet", H, 4, "0,1,120,121", all_cpus(H), [6],
     True, "2,3,4,122,123,124", None),
    ("GuPodSingleContainer, MonoUncoreCacheHT, ExpectAllocCPUSet (fragmented)", I, 2, "0,1",
     all_cpus(I) - {4, 5, 6, 7}, [6], True, "2,3,8,9,16,17", None),
    ("GuPodSingleContainer, LargeSingleSocketUncore, ExpectAllocOneUncore", J, 4, "0-3", all_cpus(J), [8],
     True, None, [1]),
    ("GuPodSingleContainer, MonoUncoreCacheHT, ExpectFragmentedAllocCPUSet", K, 2, "0,1",
     all_cpus(K) - {6, 7, 8, 9, 12, 13, 14, 15, 18, 19}, [12], True, "2,3,4,5,10,11,16,17,20,21,22,23",
     None),
    ("GuPodSingleContainer, SingleSocketUncore, PartialUncore, ExpectBestEffortAllocTwoUncore", L, 4, "0-3",
     all_cpus(L) - {8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27}, [8], True, None, [0, 1]),
    ("odd integer cpu required on smt-disabled", L, 4, "0-3", all_cpus(L), [5], True, "8,9,10,11,12", None),
    ("odd integer required on smt-enabled", B, 4, "0,1,64,65", all_cpus(B), [3], False, "2,3,66", None),
    ("odd integer required on odd integer partial uncore", B, 3, "0,1,64", all_cpus(B), [3], False,
     "2,65,66", None),
    ("even integer required on odd integer partial uncore", B, 3, "0,1,64", all_cpus(B), [4], False,
     "4,5,68,69", None),
    ("large odd integer required on smt-enabled", B, 3, "0,1,64", all_cpus(B), [11], False,
     "2,65,66,4,5,6,7,68,69,70,71", None),
    # upstream feeds CPUs 0-127 (topology B's) to topology H here; kept as written
    ("odd integer required on HT monolithic uncore", H, 3, "0,1,120", all_cpus(B), [5], False,
     "2,3,121,122,123", None),
    ("even integer required on HT monolithic uncore", H, 3, "0,1,120", all_cpus(B), [4], False,
     "2,3,122,123", None),
    ("GuPodSingleContainer, SingleSocketSMTSmallUncore, StrictReserveCompatability", B, 4, "0,1,64,65",
     all_cpus(B), [2], False, "2,66", None),
    ("GuPodSingleContainer, DualSocketHTMonoUncore, StrictReserveCompatability", H, 4, "0,1,120,121",
     all_cpus(H), [4], False, "2,3,122,123", None),
]
for d, t, nr, res, dflt, reqs, full, e, l3 in UNCORE:
    pc("TestStaticPolicyAddWithUncoreAlignment/" + d, t, dflt, reqs, num_reserved=nr, reserved=res,
       full_cores=full, align_l3=True, expect=e, expect_l3=l3)

topologies = {}
for name, (h, r) in T.items():
    topologies[name] = {"header": h, "cpus": r}
    if name in RECONSTRUCTED:
        topologies[name]["reconstructed"] = True

out = {"source": "kubernetes pkg/kubelet/cm/cpumanager tests, see gen_kubelet_cases.py",
       "topologies": topologies, "free_units": free_units, "cpu_order": cpu_order, "take": take,
       "policy": policy}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kubelet_cases.json")
with open(path, "w") as f:
    # one topology row or one case per line keeps diffs readable
    f.write("{\n")
    f.write('"source": %s,\n' % json.dumps(out["source"]))
    f.write('"topologies": {\n')
    names = list(topologies)
    for i, name in enumerate(names):
        tp = topologies[name]
        f.write('%s: {"header": %s,%s\n "cpus": [\n' % (
            json.dumps(name), json.dumps(tp["header"]),
            ' "reconstructed": true,' if tp.get("reconstructed") else ""))
        f.write(",\n".join("  " + json.dumps(r) for r in tp["cpus"]))
        f.write("]}%s\n" % ("," if i + 1 < len(names) else ""))
    f.write("},\n")
    for j, key in enumerate(["free_units", "cpu_order", "take", "policy"]):
        f.write('"%s": [\n' % key)
        f.write(",\n".join(json.dumps(c) for c in out[key]))
        f.write("\n]%s\n" % ("," if j < 3 else ""))
    f.write("}\n")
print("%s: %d topologies, %d free_units, %d cpu_order, %d take, %d policy" % (
    path, len(topologies), len(free_units), len(cpu_order), len(take), len(policy)))

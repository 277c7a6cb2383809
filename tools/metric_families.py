#!/usr/bin/python3
"""The metric families of dra-cpu, read from user/obs/metric_families.def.

The .def file is the one place a family's name, type, labels, help and
buckets are written; the C code registers families by id from it. This
module reads it for the checks that cannot run in C (dashboards, alert rules,
docs, the live /metrics: test/integration/test_metrics_table.py and
test_dashboards.py) and writes docs/metrics.md from it.

Usage:
  tools/metric_families.py --markdown   print docs/metrics.md as the table says
  tools/metric_families.py --write      rewrite docs/metrics.md
  tools/metric_families.py --check      exit 1 when docs/metrics.md differs
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF = os.path.join("user", "obs", "metric_families.def")
DOC = os.path.join("docs", "metrics.md")
PREFIX = "dra_cpu_"
TYPES = {"COUNTER": "counter", "GAUGE": "gauge", "HISTOGRAM": "histogram"}
HIST_SUFFIXES = ("_bucket", "_sum", "_count")
NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")

Family = collections.namedtuple(
    "Family", "id type name labels when buckets help section")
Table = collections.namedtuple("Table", "families when buckets")


class TableError(ValueError):
    pass


def _args(text, start):
    """The arguments of the macro call whose '(' is at text[start], as raw
    strings (split at top-level commas), and the index after its ')'."""
    args, cur, depth, i = [], [], 0, start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    raise TableError("unterminated macro call at offset %d" % start)


def _string(arg, what):
    """A C string argument (adjacent literals joined, \\" and \\\\ undone)."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', arg)
    if not parts or re.sub(r'"((?:[^"\\]|\\.)*)"|\s', "", arg):
        raise TableError("%s: not a string literal: %s" % (what, arg))
    s = "".join(parts)
    if re.search(r"\\[^\\\"]", s):
        raise TableError("%s: escape other than \\\" or \\\\: %s" % (what, arg))
    return s.replace('\\"', '"').replace("\\\\", "\\")


def parse(text):
    """Table of the .def text; raises TableError on anything it cannot read
    or that breaks the table's rules."""
    # Comments out, but a one-line comment before family entries names a section.
    calls = list(re.finditer(r"^(M[WBF])\(|^/\* ([^\n]*) \*/$|/\*.*?\*/", text, re.M | re.S))
    fams, when, buckets = collections.OrderedDict(), collections.OrderedDict(), {}
    section, pos, ids = "", 0, set()
    for m in calls:
        if m.start() < pos:
            continue  # inside a call already read
        if m.group(2) is not None:
            section = m.group(2)
            pos = m.end()
            continue
        if m.group(1) is None:
            pos = m.end()
            continue
        args, pos = _args(text, m.end() - 1)
        kind = m.group(1)
        if kind == "MW":
            if len(args) != 2:
                raise TableError("MW(%s): want (when, doc)" % ", ".join(args))
            when[args[0]] = _string(args[1], "MW(%s)" % args[0])
        elif kind == "MB":
            vals = [float(a) for a in args[1:]]
            if not vals or any(b <= a for a, b in zip(vals, vals[1:])):
                raise TableError("MB(%s): bounds not ascending" % args[0])
            buckets[args[0]] = (tuple(args[1:]), tuple(vals))
        else:
            if len(args) != 7:
                raise TableError("MF(%s): want 7 arguments, got %d" % (args[0], len(args)))
            fid, typ, name, labels, w, bset, help_ = args
            name = _string(name, "MF(%s) name" % fid)
            labels = () if labels == "NULL" else tuple(
                _string(labels, "MF(%s) labels" % fid).split(","))
            help_ = _string(help_, "MF(%s) help" % fid)
            if typ not in TYPES:
                raise TableError("MF(%s): type %s" % (fid, typ))
            if not name.startswith(PREFIX) or not NAME_RE.match(name):
                raise TableError("MF(%s): bad name %s" % (fid, name))
            if fid != name[len(PREFIX):].upper():
                raise TableError("MF(%s): id is not %s in capitals" % (fid, name[len(PREFIX):]))
            if fid in ids or name in fams:
                raise TableError("MF(%s): twice" % fid)
            if not all(LABEL_RE.match(lb) for lb in labels) or len(set(labels)) != len(labels):
                raise TableError("MF(%s): bad labels %s" % (fid, ",".join(labels)))
            if w not in when:
                raise TableError("MF(%s): when %s is not an MW() above" % (fid, w))
            if (typ == "HISTOGRAM") != (bset != "NONE") or (bset != "NONE" and
                                                             bset not in buckets):
                raise TableError("MF(%s): bucket set %s for a %s" % (fid, bset, typ))
            if not help_ or not help_.endswith("."):
                raise TableError("MF(%s): help must be a sentence" % fid)
            if typ == "COUNTER" and not name.endswith("_total"):
                raise TableError("MF(%s): a counter's name ends in _total" % fid)
            ids.add(fid)
            fams[name] = Family(fid, TYPES[typ], name, labels, w,
                                buckets[bset][1] if bset != "NONE" else (), help_, section)
    n_calls = len(re.findall(r"^M[WBF]\(", text, re.M))
    if n_calls != len(when) + len(buckets) + len(fams):
        raise TableError("read %d entries of %d macro calls" %
                         (len(when) + len(buckets) + len(fams), n_calls))
    return Table(fams, when, {k: v[1] for k, v in buckets.items()})


def load(root=ROOT):
    with open(os.path.join(root, DEF), encoding="utf-8") as f:
        return parse(f.read())


def family_of(name, families):
    """The family a series name belongs to (histogram suffixes stripped), or None."""
    if name in families:
        return name
    for s in HIST_SUFFIXES:
        base = name[:-len(s)]
        if name.endswith(s) and base in families and families[base].type == "histogram":
            return base
    return None


def _num(v):
    s = repr(v)
    return (s[:-2] if s.endswith(".0") else s).replace("e-0", "e-")


def markdown(table):
    """docs/metrics.md."""
    out = ["# Metrics", "",
           "`/metrics` (on `--bind-address`) serves these families in the Prometheus text",
           "format. This page is written from `user/obs/metric_families.def`, the one",
           "table the driver registers its families from "
           "(`tools/metric_families.py --write`);",
           "`test/integration/test_metrics_table.py` checks that it, the dashboards, the alert",
           "rules and the driver's own `/metrics` agree with that table.",
           "",
           "To add a metric: add an `MF()` line to the table, register it where it is",
           "counted with `metrics_family(m, MF_<ID>)` (`user/obs/metrics.h`), run",
           "`tools/metric_families.py --write`, and say in the docs of its feature what",
           "it tells an operator.", "",
           "## When a family is there", "",
           "| when | the family is on `/metrics` |", "|---|---|"]
    used = {f.when for f in table.families.values()}
    for w, doc in table.when.items():
        if w in used:
            out.append("| `%s` | %s |" % (w.lower(), doc))
    section = None
    for f in table.families.values():
        if f.section != section:
            section = f.section
            out += ["", "## " + section, "", "| family | type | labels | when | help |",
                    "|---|---|---|---|---|"]
        help_ = f.help.replace("|", "\\|")
        if f.buckets:
            help_ += " Buckets: %s, +Inf." % ", ".join(_num(b) for b in f.buckets)
        out.append("| `%s` | %s | %s | %s | %s |" % (
            f.name, f.type, ", ".join("`%s`" % lb for lb in f.labels) or "-",
            f.when.lower(), help_))
    out += ["", "%d families." % len(table.families), ""]
    return "\n".join(out)


def main(argv):
    if len(argv) != 2 or argv[1] not in ("--markdown", "--write", "--check"):
        sys.stderr.write(__doc__)
        return 2
    try:
        text = markdown(load())
    except (OSError, TableError) as e:
        sys.stderr.write("metric_families: %s\n" % e)
        return 2
    path = os.path.join(ROOT, DOC)
    if argv[1] == "--markdown":
        sys.stdout.write(text)
    elif argv[1] == "--write":
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                sys.stderr.write("%s differs from the table: tools/metric_families.py "
                                 "--write\n" % DOC)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

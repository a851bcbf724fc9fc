#!/usr/bin/env python3
"""Summarises bench/device/issue25.sh's JSON lines (issue25.jsonl).

Prints, per measurement and P, the median over rounds and repeats with its
range, and the ratios the issue asks for, formed within each round and then
summarised: libweft-omp / libgomp (omp_*), spsc-pairs / mpsc (kneighbor),
and the ratios the programs report themselves (tasks_overhead's vs_libgomp,
entry_overhead's objects/core, pingpong's latency / floor).

Usage: summarize25.py issue25.jsonl
"""
import collections
import json
import statistics
import sys


def rows(path):
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def key_of(r):
    """What one measurement is, beside its program and P."""
    parts = [r.get("metric", "?")]
    for k in ("runtime", "scheme", "pattern", "case", "start", "variant", "bytes", "level"):
        if k in r:
            parts.append("%s=%s" % (k, r[k]))
    return " ".join(str(p) for p in parts)


def fmt(xs):
    return "%.4g (%.4g-%.4g)" % (statistics.median(xs), min(xs), max(xs))


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    data = rows(argv[1])
    table = collections.defaultdict(list)
    by_round = collections.defaultdict(dict)
    ratios = collections.defaultdict(list)
    for r in data:
        what, p, k = r.get("what", "?"), r.get("p", 0), key_of(r)
        table[(what, p, k)].append(r["value"])
        by_round[(r.get("round"), p, k)][what] = r["value"]
        for field in ("vs_libgomp", "ratio", "vs_floor", "vs_ideal", "vs_no_tasks"):
            if field in r:
                ratios[(what, p, k + " " + field)].append(r[field])
    print("## medians over rounds and repeats")
    for (what, p, k), xs in sorted(table.items(), key=lambda x: (x[0][0], x[0][1], x[0][2])):
        print("%-26s P=%-3s %-60s %s" % (what, p, k, fmt(xs)))
    print("\n## ratios the programs report")
    for (what, p, k), xs in sorted(ratios.items(), key=lambda x: (x[0][0], x[0][1], x[0][2])):
        print("%-26s P=%-3s %-60s %s" % (what, p, k, fmt(xs)))
    print("\n## ratios formed per round")
    pairs = collections.defaultdict(list)
    for (rnd, p, k), whats in by_round.items():
        for w, v in whats.items():
            if w.endswith(".weft") and w[:-5] + ".libgomp" in whats:
                base = whats[w[:-5] + ".libgomp"]
                if base:
                    pairs[(w[:-5] + " weft/libgomp", p, k)].append(v / base)
            if w == "kneighbor.spsc-pairs" and "kneighbor.mpsc" in whats and whats["kneighbor.mpsc"]:
                pairs[("kneighbor spsc-pairs/mpsc", p, k)].append(v / whats["kneighbor.mpsc"])
    for (name, p, k), xs in sorted(pairs.items(), key=lambda x: (x[0][0], x[0][1], x[0][2])):
        print("%-26s P=%-3s %-60s %s" % (name, p, k, fmt(xs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

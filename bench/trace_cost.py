#!/usr/bin/env python3
"""What tracing costs the programs issue 30 names, as ratios to tracing off
in the same round (docs/tracing.md, "What it costs"): examples/jacobi2d and
examples/md with full and summary tracing, and objects-level kNeighbor at
16 B with full, summary and sampled (--weft:trace-sample=16) tracing. The
modes run interleaved within each round, so a change of the machine's load
hits them alike; prints per program and mode the median time, and the
median ratio to off with its min-max over the rounds (a Markdown table).

usage: bench/trace_cost.py [--build build/dev] [--rounds 5] [--dir /dev/shm]
                           [--only jacobi2d,md,kneighbor]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

PES = ["--weft:threads=2", "--weft:quiet"]


def jacobi2d(build):
    cmd = [os.path.join(build, "examples", "jacobi2d"), "2048", "16", "100", "0"] + PES

    def parse(out):
        m = re.search(r"parallel part took ([0-9.]+) s", out)
        return float(m.group(1)) if m else None
    return cmd, parse, "s"


def md(build):
    cmd = [os.path.join(build, "examples", "md"), "--md:steps=100"] + PES

    def parse(out):
        m = re.search(r"md: \d+ steps in ([0-9.]+) s", out)
        return float(m.group(1)) if m else None
    return cmd, parse, "s"


def kneighbor(build):
    cmd = [os.path.join(build, "bench", "kneighbor"), "--json", "--repeat", "3", "--level=objects",
           "--touch=false", "--iters=2000", "--bytes=16"] + PES

    def parse(out):
        for line in out.splitlines():
            if line.startswith("{"):
                return float(json.loads(line)["value"])
        return None
    return cmd, parse, "us/iter"


PROGRAMS = {"jacobi2d": (jacobi2d, ["off", "full", "summary"]),
            "md": (md, ["off", "full", "summary"]),
            "kneighbor": (kneighbor, ["off", "full", "summary", "sample16"])}


def trace_args(mode, where):
    if mode == "off":
        return []
    args = ["--weft:trace=" + where]
    if mode == "summary":
        return args + ["--weft:trace-mode=summary"]
    if mode.startswith("sample"):
        return args + ["--weft:trace-sample=" + mode[len("sample"):]]
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build/dev")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm", help="where the traces go (removed after each run)")
    ap.add_argument("--only", default="jacobi2d,md,kneighbor")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n]
    for n in names:
        if n not in PROGRAMS:
            sys.exit("trace_cost: unknown program %r (accepted: %s)" % (n, ", ".join(PROGRAMS)))
    times = {n: {m: [] for m in PROGRAMS[n][1]} for n in names}
    load0 = open("/proc/loadavg").read().split()[0]
    for r in range(a.rounds):
        for n in names:
            cmd, parse, _ = PROGRAMS[n][0](a.build)
            for mode in PROGRAMS[n][1]:
                where = tempfile.mkdtemp(prefix="weft-trace-cost.", dir=a.dir)
                shutil.rmtree(where)
                p = subprocess.run(cmd + trace_args(mode, where), capture_output=True, text=True,
                                   timeout=600)
                shutil.rmtree(where, ignore_errors=True)
                v = parse(p.stdout)
                if p.returncode != 0 or v is None:
                    sys.exit("trace_cost: %s %s failed (exit %d):\n%s%s"
                             % (n, mode, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
                times[n][mode].append(v)
        print("round %d of %d done" % (r + 1, a.rounds), file=sys.stderr)
    load1 = open("/proc/loadavg").read().split()[0]
    print("| program | mode | median time | ratio to off: median (min-max) |")
    print("|---|---|---|---|")
    for n in names:
        unit = PROGRAMS[n][0](a.build)[2]
        off = times[n]["off"]
        for mode in PROGRAMS[n][1]:
            t = times[n][mode]
            ratios = [x / o for x, o in zip(t, off)]
            print("| %s | %s | %.4g %s | %.3f (%.3f-%.3f) |"
                  % (n, mode, statistics.median(t), unit, statistics.median(ratios), min(ratios),
                     max(ratios)))
    print("\n%d rounds, traces in %s, load average %s before and %s after"
          % (a.rounds, a.dir, load0, load1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

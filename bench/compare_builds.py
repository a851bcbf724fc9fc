#!/usr/bin/env python3
"""Two builds side by side: the ping-pong (one node and two processes over
shm, mpi and ucx) and kNeighbor (core and objects levels) of a base build
against a new build, in interleaved rounds (the order alternates per round,
so drift of a noisy machine falls on both), as a table of new / base per
measure: the median of the per-round ratios and their range.

Usage: compare_builds.py BASE_BENCH_DIR NEW_BENCH_DIR [ROUNDS=5]
  e.g. git worktree add /tmp/base <rev>; cmake -S /tmp/base -B /tmp/base/build
       -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF; ninja -C
       /tmp/base/build bench/pingpong bench/kneighbor; then
       bench/compare_builds.py /tmp/base/build/bench build/release/bench 11
Needs mpirun for the two-process rows (a failed run is reported and left out).
"""
import json, os, subprocess, sys, statistics

BASE, NEW, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    rows = []
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    if out.returncode != 0:
        print("FAILED", cmd, out.stderr[-500:], file=sys.stderr)
    return rows

def cases(bindir):
    mp = ["mpirun", "--oversubscribe", "-n", "2"]
    return {
        "pingpong": ([f"{bindir}/pingpong", "--json", "--repeat", "3", "--bytes=16,1024,65536",
                      "--iters=20000", "--weft:threads=2", "--weft:quiet"],
                     lambda r: r.get("metric") == "oneway_ns", lambda r: f"pingpong {r['bytes']} B one-way ns"),
        "kneighbor": ([f"{bindir}/kneighbor", "--json", "--repeat", "3", "--bytes=16", "--touch=false",
                       "--level=both", "--iters=20000", "--weft:quiet"],
                      lambda r: r.get("metric") == "iter_us", lambda r: f"kneighbor {r['level']} 16 B us/iter"),
    } | {
        f"pingpong_nodes_{t}": (mp + [f"{bindir}/pingpong", "--json", "--repeat", "3", "--bytes=8,65536",
                                      "--iters=2000", "--touch=true", f"--weft:transport={t}",
                                      "--weft:threads=1", "--weft:quiet"],
                                lambda r: r.get("metric", "").startswith("oneway"),
                                (lambda t: lambda r: f"pingpong_nodes {t} {r.get('bytes')} B {r['metric']}")(t))
        for t in ("shm", "mpi", "ucx")
    }

ratios = {}
for rnd in range(ROUNDS):
    cb, cn = cases(BASE), cases(NEW)
    for name in cb:
        vals = {}
        order = ("base", "new") if rnd % 2 == 0 else ("new", "base")
        for who in order:
            cmd, pick, label = (cb if who == "base" else cn)[name]
            for r in run(cmd):
                if pick(r):
                    vals.setdefault(label(r), {})[who] = r["value"]
        for lab, v in vals.items():
            if "base" in v and "new" in v and v["base"] > 0:
                ratios.setdefault(lab, []).append(v["new"] / v["base"])
    print(f"round {rnd + 1} done", file=sys.stderr, flush=True)

print(f"| measure | new ÷ base, median of {ROUNDS} interleaved rounds | range |")
print("|---|---|---|")
for lab, rs in ratios.items():
    print(f"| {lab} | {statistics.median(rs):.3f} | {min(rs):.3f}–{max(rs):.3f} |")

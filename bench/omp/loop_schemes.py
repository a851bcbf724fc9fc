#!/usr/bin/env python3
"""libweft-omp's loop schemes against libgomp, side by side (docs/omp.md,
"Loop schemes").

Runs omp_loop_schemes_gomp under OMP_SCHEDULE=static and dynamic and
omp_loop_schemes_weft under OMP_SCHEDULE=static with WEFT_OMP_SCHEME=static,
idle and history, one after another in each of --rounds rounds (so that
every configuration sees the same load of a shared machine), and prints per
loop (balanced, imbalanced) the median microseconds per loop over the rounds
with their spread ((max - min) / median), the medians of the per-round
ratios to libgomp's static and to libweft-omp's static blocks, and the best
round's time with its ratio to the best of weft static (on a machine others
load, the best rounds are those the load disturbed least).

  bench/omp/loop_schemes.py --bin build/dev/bench [--rounds 7] [--threads 2]
                            [--repeat 3] [-- program flags, e.g. --iters=40000]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CONFIGS = [
    # name, program, environment
    ("libgomp static", "omp_loop_schemes_gomp", {"OMP_SCHEDULE": "static"}),
    ("libgomp dynamic", "omp_loop_schemes_gomp", {"OMP_SCHEDULE": "dynamic"}),
    ("weft static", "omp_loop_schemes_weft", {"OMP_SCHEDULE": "static",
                                              "WEFT_OMP_SCHEME": "static"}),
    ("weft idle", "omp_loop_schemes_weft", {"OMP_SCHEDULE": "static",
                                            "WEFT_OMP_SCHEME": "idle"}),
    ("weft history", "omp_loop_schemes_weft", {"OMP_SCHEDULE": "static",
                                               "WEFT_OMP_SCHEME": "history"}),
]
LOOPS = ["balanced", "imbalanced"]


def run(bindir, program, env_extra, threads, repeat, extra):
    env = dict(os.environ)
    for var in ("OMP_SCHEDULE", "WEFT_OMP_SCHEME", "WEFT_THREADS"):
        env.pop(var, None)
    env.update(env_extra)
    env["OMP_NUM_THREADS"] = str(threads)
    cmd = [os.path.join(bindir, program), "--json", "--repeat", str(repeat)] + extra
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["loop"]] = float(row["value"])
    missing = [loop for loop in LOOPS if loop not in rows]
    if missing:
        sys.exit(f"error: {program} printed no {', '.join(missing)} line: {out!r}")
    return rows


def spread(xs):
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m if m > 0 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="the build's bench folder")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3, help="measurements per run (their median)")
    ap.add_argument("extra", nargs="*", help="flags for the program (after --)")
    a = ap.parse_args()
    if a.rounds < 1 or a.threads < 1 or a.repeat < 1:
        sys.exit("error: --rounds, --threads and --repeat take positive integers")
    for _, program, _ in CONFIGS:
        if not os.access(os.path.join(a.bin, program), os.X_OK):
            sys.exit(f"error: no {program} in {a.bin} (build it: ninja {program})")
    times = {(c[0], loop): [] for c in CONFIGS for loop in LOOPS}
    for r in range(a.rounds):
        for name, program, env in CONFIGS:
            rows = run(a.bin, program, env, a.threads, a.repeat, a.extra)
            for loop in LOOPS:
                times[(name, loop)].append(rows[loop])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"{a.threads} threads, {a.rounds} rounds of {a.repeat} measurements; "
          f"program flags: {' '.join(a.extra) or '(defaults)'}")
    print("| loop | configuration | us per loop (spread) | / libgomp static | / weft static "
          "| best us | best / best weft static |")
    print("|---|---|---|---|---|---|---|")
    for loop in LOOPS:
        for name, _, _ in CONFIGS:
            xs = times[(name, loop)]
            gomp = [x / g for x, g in zip(xs, times[("libgomp static", loop)])]
            weft = [x / w for x, w in zip(xs, times[("weft static", loop)])]
            print(f"| {loop} | {name} | {statistics.median(xs):.0f} ({spread(xs):.2f}) | "
                  f"{statistics.median(gomp):.3f} ({min(gomp):.2f}-{max(gomp):.2f}) | "
                  f"{statistics.median(weft):.3f} ({min(weft):.2f}-{max(weft):.2f}) | "
                  f"{min(xs):.0f} | {min(xs) / min(times[('weft static', loop)]):.3f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The affinity study (issue 29, docs/affinity.md; paper 002 is the study it
repeats): runs the NAS kernels of bench/affinity (EP: CPU-bound, MG:
memory-bound) over threads x CPU binding {none, compact, scatter} x memory
policy {first-touch, local, interleave, bind:0} x OpenMP runtime {libgomp,
libweft-omp}, repeated in interleaved rounds (every configuration once per
round, so that a slow minute of a shared machine hits them all alike).

Writes, under --out:
  runs.jsonl    one JSON object per run: kernel, class, runtime, threads,
                bind, mem, round, seconds, verified, migrations (the thread
                migrations during the timed part, from /proc; null where the
                kernel has no scheduler statistics), counters (cycles,
                instructions, llc_load_misses, context_switches,
                cpu_migrations of the team's threads during the timed part,
                perf_event_open; null where the machine refuses one, as a
                virtual machine without a PMU does for the hardware ones),
                placement (how the binding and policy were applied), and
                error for a run that failed;
  speedup.png   median time at 1 thread / median time at T, per kernel,
                class and runtime, with no binding and first-touch;
  policies.png  median time of each (binding, memory policy) over that of
                the default (no binding, first-touch), per runtime, at the
                largest thread count: below 1 is faster than the default;
  counters.png  beside it, the median of each readable counter (migrations,
                context switches, and the hardware counters where the
                machine has them) per placement, at the same thread count;
  summary.txt   the table of medians, spreads and ratios printed at the end.

How each runtime is placed: libweft-omp by its own variables (WEFT_THREADS,
WEFT_BIND=none|compact|scatter, WEFT_MEM=first-touch|local|interleave|bind:N,
docs/omp.md); libgomp by OMP_PROC_BIND (false; close or spread over
OMP_PLACES=cores) and, for memory, numactl (--localalloc, --interleave=all,
--membind=N); without numactl the libgomp runs keep first-touch and the
other policies are skipped for libgomp, which the output says. The OpenMP
and WEFT_ variables of the caller's environment are removed from every run
except OMP_WAIT_POLICY, which passes through to libgomp.

Exit status: 0 when every run verified, 1 when a run failed or did not
verify, 2 on bad arguments."""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure  # noqa: E402  (bench/affinity/figure.py: PNG without matplotlib)

KERNELS = ("ep", "mg")
CLASSES = "SWABC"
BINDS = ("none", "compact", "scatter")
MEMS = ("first-touch", "local", "interleave", "bind:0")
RUNTIMES = ("gomp", "weft")
RUNTIME_NAMES = {"gomp": "libgomp", "weft": "libweft-omp"}


def fail(msg):
    print("study.py: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def parse_list(text, accepted, what):
    items = [t for t in text.split(",") if t]
    for t in items:
        if t not in accepted:
            fail("--%s: '%s' is not one of %s" % (what, t, ", ".join(accepted)))
    if not items:
        fail("--%s: empty list; accepted: %s" % (what, ", ".join(accepted)))
    return items


def parse_mems(text):
    items = [t for t in text.split(",") if t]
    for t in items:
        if t in MEMS[:3]:
            continue
        nodes = t[5:] if t.startswith("bind:") else ""
        if not nodes or not all(p.isdigit() for p in nodes.replace("-", ",").split(",")):
            fail("--mems: '%s' is not one of first-touch, local, interleave, bind:NODES (e.g. bind:0)"
                 % t)
    if not items:
        fail("--mems: empty list; accepted: first-touch, local, interleave, bind:NODES")
    return items


def parse_threads(text):
    try:
        out = sorted({int(t) for t in text.split(",") if t})
    except ValueError:
        out = []
    if not out or out[0] < 1:
        fail("--threads: '%s' is not a list of positive integers (e.g. 1,2,4)" % text)
    return out


def load_average():
    """The 1-minute load average, or None: beside the figures, how busy the
    machine was (others' work shares the CPUs the runs are timed on)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def numa_nodes():
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    return len(nodes) if nodes else 1


def find_bin_dir(given):
    if given:
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for d in ("build/release", "build/dev", "build"):
        cand = os.path.join(root, d, "bench", "affinity")
        if os.path.exists(os.path.join(cand, "affinity_ep_gomp")):
            return cand
    fail("no affinity_* programs found under build/release, build/dev or build "
         "(bench/affinity); give --bin-dir DIR")


def placement(runtime, threads, bind, mem, numactl):
    """(command prefix, environment additions, description) for one run, or
    None when this runtime cannot apply `mem` here."""
    env = {"OMP_NUM_THREADS": str(threads)}
    prefix = []
    if runtime == "weft":
        env.update(WEFT_THREADS=str(threads), WEFT_BIND=bind, WEFT_MEM=mem)
        return prefix, env, "WEFT_BIND=%s WEFT_MEM=%s" % (bind, mem)
    proc_bind = {"none": "false", "compact": "close", "scatter": "spread"}[bind]
    env["OMP_PROC_BIND"] = proc_bind
    if bind != "none":
        env["OMP_PLACES"] = "cores"
    desc = "OMP_PROC_BIND=%s%s" % (proc_bind, " OMP_PLACES=cores" if bind != "none" else "")
    if mem != "first-touch":
        if not numactl:
            return None
        opt = {"local": "--localalloc", "interleave": "--interleave=all"}.get(mem)
        if opt is None:
            opt = "--membind=" + mem[5:]
        prefix = [numactl, opt]
        desc += " numactl " + opt
    return prefix, env, desc


def clean_environment():
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("OMP_") or k.startswith("GOMP_") or k.startswith("WEFT_"))}
    if "OMP_WAIT_POLICY" in os.environ:
        env["OMP_WAIT_POLICY"] = os.environ["OMP_WAIT_POLICY"]
    return env


def run_one(bin_dir, kernel, cls, runtime, threads, bind, mem, numactl, timeout):
    prefix, extra, desc = placement(runtime, threads, bind, mem, numactl)
    program = os.path.join(bin_dir, "affinity_%s_%s" % (kernel, runtime))
    env = clean_environment()
    env.update(extra)
    row = {"kernel": kernel, "class": cls, "runtime": runtime, "threads": threads, "bind": bind,
           "mem": mem, "seconds": None, "verified": False, "migrations": None,
           "counters": None, "placement": desc}
    try:
        p = subprocess.run(prefix + [program, "--class=" + cls, "--quiet"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        row["error"] = "no result within %d s" % timeout
        return row
    except OSError as e:
        row["error"] = "cannot run %s: %s" % (program, e.strerror or e)
        return row
    result = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                pass
    if result is None:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        row["error"] = "exit %d, no result line: %s" % (p.returncode, tail)
        return row
    row.update(seconds=result["seconds"], verified=bool(result["verified"]) and p.returncode == 0,
               migrations=result.get("migrations"), counters=result.get("counters"))
    if result.get("threads") != threads:
        row["verified"] = False
        row["error"] = "ran %s threads, not %d" % (result.get("threads"), threads)
    elif not row["verified"]:
        row["error"] = "exit %d: result not verified" % p.returncode
    return row


def median(xs):
    return statistics.median(xs) if xs else None


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def summarize(rows):
    """{(kernel, class, runtime, threads, bind, mem): [seconds...]} of verified runs."""
    groups = {}
    for r in rows:
        if r["verified"] and r["seconds"] is not None:
            key = (r["kernel"], r["class"], r["runtime"], r["threads"], r["bind"], r["mem"])
            groups.setdefault(key, []).append(r["seconds"])
    return groups


def table(groups, rows, one_node):
    migrations, switches, unread = {}, {}, set()
    for r in rows:
        if not r["verified"]:
            continue
        key = (r["kernel"], r["class"], r["runtime"], r["threads"], r["bind"], r["mem"])
        if r["migrations"] is not None:
            migrations.setdefault(key, []).append(r["migrations"])
        counters = r.get("counters") or {}
        unread |= {name for name, v in counters.items() if v is None}
        if counters.get("context_switches") is not None:
            switches.setdefault(key, []).append(counters["context_switches"])
    lines = ["%-4s %-5s %-12s %7s %-8s %-12s %10s %10s %10s %4s %8s %9s %9s" %
             ("kern", "class", "runtime", "threads", "bind", "mem", "median_s", "min_s", "max_s",
              "n", "vs_def", "migr_med", "cswch_med")]
    for key in sorted(groups):
        k, c, rt, t, b, m = key
        xs = groups[key]
        base = groups.get((k, c, rt, t, "none", "first-touch"))
        ratio = median(xs) / median(base) if base else None
        mig, cs = migrations.get(key), switches.get(key)
        lines.append("%-4s %-5s %-12s %7d %-8s %-12s %10.5f %10.5f %10.5f %4d %8s %9s %9s" %
                     (k, c, RUNTIME_NAMES[rt], t, b, m, median(xs), min(xs), max(xs), len(xs),
                      "%.3f" % ratio if ratio else "-", "%g" % median(mig) if mig else "-",
                      "%g" % median(cs) if cs else "-"))
    speedups = []
    for key in sorted(groups):
        k, c, rt, t, b, m = key
        one = groups.get((k, c, rt, 1, b, m))
        if t > 1 and one and b == "none" and m == "first-touch":
            speedups.append("%s %s %s: %.2f at %d threads" %
                            (k, c, RUNTIME_NAMES[rt], median(one) / median(groups[key]), t))
    if speedups:
        lines.append("speedup (median 1 thread / median T, no binding, first-touch): " +
                     "; ".join(speedups))
    if unread:
        lines.append("counters not readable here: %s (perf_event_open refused them; null in "
                     "runs.jsonl)" % ", ".join(sorted(unread)))
    if one_node:
        lines.append("one NUMA node: memory policies are equivalent here (every policy puts "
                     "every page on node 0); their rows measure noise, not placement")
    return "\n".join(lines)


def draw_speedup(groups, path, notes):
    series = {}
    for (k, c, rt, t, b, m), xs in groups.items():
        if b == "none" and m == "first-touch":
            series.setdefault((k, c, rt), {})[t] = median(xs)
    threads = sorted({t for s in series.values() for t in s})
    cv = figure.Canvas(860, 480)
    cv.text(430, 8, "NAS kernels: speedup against threads (no binding, first-touch)", scale=1,
            anchor="center")
    for i, line in enumerate(notes):
        cv.text(430, 20 + 12 * i, line, anchor="center", c=figure.GREY)
    if not series:
        cv.text(380, 200, "no verified runs", anchor="center")
        cv.save(path)
        return
    ups = {}
    for key, by_t in series.items():
        t0 = min(by_t)
        ups[key] = {t: by_t[t0] / by_t[t] * t0 for t in sorted(by_t)}
    top = max(max(threads), max(v for s in ups.values() for v in s.values()))
    panel = figure.Panel(cv, 80, 70, 480, 340, (min(threads), max(threads)), (0, top),
                         "", "threads", "speedup", xticks=threads)
    panel.cv.line(panel.px(min(threads)), panel.py(min(threads)), panel.px(max(threads)),
                  panel.py(max(threads)), figure.BLACK, dash=2)
    entries = [("ideal", figure.BLACK, True)]
    for n, key in enumerate(sorted(ups)):
        colour = figure.PALETTE[n % len(figure.PALETTE)]
        pts = sorted(ups[key].items())
        for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
            cv.line(panel.px(t0), panel.py(v0), panel.px(t1), panel.py(v1), colour, width=2,
                    dash=4 if key[2] == "gomp" else 0)
        for t, v in pts:
            cv.rect(panel.px(t) - 2, panel.py(v) - 2, panel.px(t) + 2, panel.py(v) + 2, colour)
        entries.append(("%s %s %s" % (key[0], key[1], RUNTIME_NAMES[key[2]]), colour,
                        key[2] == "gomp"))
    figure.legend(cv, 590, 80, entries)
    cv.save(path)


def draw_policies(groups, path, notes):
    """policies.png: per kernel and class, time per placement over the default."""
    tmax = max((key[3] for key in groups), default=None)
    panels = [("%s class %s" % kc, {key[2:]: xs for key, xs in groups.items() if key[:2] == kc})
              for kc in sorted({key[:2] for key in groups if key[3] == tmax})]
    draw_bars(panels, tmax, path, "median time per placement / median time with no binding and "
              "first-touch, %s threads (lines: quartiles of the runs)" % tmax, "ratio to default",
              notes, normalise=True)


def draw_counters(rows, path, notes):
    """counters.png: per kernel, class and readable counter, its median per
    placement (the counters beside the times); None when no run has any."""
    by = {}
    for r in rows:
        if not r["verified"]:
            continue
        key = (r["runtime"], r["threads"], r["bind"], r["mem"])
        values = dict(r.get("counters") or {})
        values["migrations"] = r.get("migrations")
        for name, v in values.items():
            if v is not None:
                by.setdefault((r["kernel"], r["class"], name), {}).setdefault(key, []).append(v)
    if not by:
        return None
    tmax = max(key[1] for panel in by.values() for key in panel)
    names = ["migrations", "cpu_migrations", "context_switches", "cycles", "instructions",
             "llc_load_misses"]
    panels = [("%s class %s: %s" % kcn, by[kcn])
              for kcn in sorted(by, key=lambda kcn: (kcn[0], kcn[1], names.index(kcn[2])
                                                      if kcn[2] in names else 99))]
    draw_bars(panels, tmax, path, "counters per placement (median of the runs, lines: "
              "quartiles), %s threads" % tmax, "count", notes, normalise=False)
    return path


def draw_bars(panels, tmax, path, title, ylabel, notes, normalise):
    """One panel per (title, {(runtime, threads, bind, mem): [values]}): a bar
    per placement at `tmax` threads, grouped by runtime, with the
    quartiles as a line; `normalise` divides by the default placement's
    median (no binding, first-touch) and draws 1 dashed."""
    configs = sorted({key[2:] for _, data in panels for key in data if key[1] == tmax},
                     key=lambda bm: (BINDS.index(bm[0]) if bm[0] in BINDS else 9,
                                     MEMS.index(bm[1]) if bm[1] in MEMS else 9, bm))
    width, ph = 900, 250
    cv = figure.Canvas(width, 80 + max(1, len(panels)) * (ph + 70) + 12 * len(configs) + 30)
    cv.text(width // 2, 8, title, anchor="center")
    for i, line in enumerate(notes):
        cv.text(width // 2, 20 + 12 * i, line, anchor="center", c=figure.GREY)
    if not panels:
        cv.text(width // 2, 100, "no verified runs", anchor="center")
        cv.save(path)
        return
    for n, (panel_title, data) in enumerate(panels):
        bars = {}
        for rt in RUNTIMES:
            base = data.get((rt, tmax, "none", "first-touch"))
            scale = median(base) if normalise and base else 1.0
            if normalise and not (base and scale > 0):
                continue
            for bm in configs:
                xs = data.get((rt, tmax) + bm)
                if xs:
                    q1, q3 = quartiles(xs)
                    bars[(rt, bm)] = (median(xs) / scale, q1 / scale, q3 / scale)
        # The axis follows the medians and quartiles: a single run that a
        # busy machine stretched tenfold would flatten every bar.
        hi = max([1.2 if normalise else 1.0] + [1.1 * v[2] for v in bars.values()])
        y = 70 + n * (ph + 70)
        runtimes = [rt for rt in RUNTIMES if any(key[0] == rt for key in bars)]
        panel = figure.Panel(cv, 80, y, width - 120, ph, (0, max(1, len(runtimes))), (0, hi),
                             panel_title, "", ylabel,
                             xticks=[(RUNTIME_NAMES[rt], i + 0.5) for i, rt in enumerate(runtimes)])
        if normalise:
            cv.line(panel.x, panel.py(1.0), panel.x + panel.w, panel.py(1.0), figure.BLACK, dash=3)
        slot = panel.w / max(1, len(runtimes))
        bar = slot * 0.8 / max(1, len(configs))
        for i, rt in enumerate(runtimes):
            for j, bm in enumerate(configs):
                v = bars.get((rt, bm))
                if v is None:
                    continue
                x0 = panel.x + i * slot + slot * 0.1 + j * bar
                colour = figure.PALETTE[j % len(figure.PALETTE)]
                cv.rect(x0 + 1, panel.py(v[0]), x0 + bar - 2, panel.py(0), colour)
                xm = x0 + bar / 2
                cv.line(xm, panel.py(v[1]), xm, panel.py(v[2]), figure.BLACK)  # quartiles
    figure.legend(cv, 80, cv.h - 12 * len(configs) - 20,
                  [("bind=%s mem=%s" % bm, figure.PALETTE[j % len(figure.PALETTE)], False)
                   for j, bm in enumerate(configs)])
    cv.save(path)


def replot_rows(path):
    """The rows of an earlier runs.jsonl, and the header line of its summary."""
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail("--replot %s: cannot read it as JSON lines: %s" % (path, e))
    need = ("kernel", "class", "runtime", "threads", "bind", "mem", "seconds", "verified")
    for n, r in enumerate(rows, 1):
        if not isinstance(r, dict) or any(k not in r for k in need):
            fail("--replot %s: line %d is not a run of study.py (needs %s)" %
                 (path, n, ", ".join(need)))
        r.setdefault("migrations", None)
    rounds = len({r.get("round") for r in rows})
    return rows, "%d runs, %d rounds\n" % (len(rows), rounds)


class Parser(argparse.ArgumentParser):
    """argparse whose errors are the project's one line (and exit 2)."""

    def error(self, message):
        fail("%s; see --help for the accepted options" % message)


def main():
    ap = Parser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", help="where affinity_{ep,mg}_{gomp,weft} are "
                    "(default: build/release, build/dev or build under the source tree)")
    ap.add_argument("--out", default="affinity-study", help="output directory (affinity-study)")
    ap.add_argument("--kernels", default="ep,mg", help="ep,mg")
    ap.add_argument("--classes", default="S,W", help="of S,W,A,B,C (S,W)")
    ap.add_argument("--threads", help="thread counts (1 and the CPUs of the process, "
                    "then powers of two up to them)")
    ap.add_argument("--binds", default=",".join(BINDS), help="of none,compact,scatter (all)")
    ap.add_argument("--mems", default=",".join(MEMS),
                    help="of first-touch,local,interleave,bind:NODES (all, bind:0)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="of gomp,weft (both)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run (900)")
    ap.add_argument("--replot", metavar="RUNS_JSONL",
                    help="run nothing: the summary and figures of an earlier runs.jsonl, "
                    "written under --out")
    ap.add_argument("--quick", action="store_true",
                    help="a tiny sweep: class S, 2 threads, binds none,compact, mems "
                    "first-touch,interleave, 1 round")
    args = ap.parse_args()

    kernels = parse_list(args.kernels, KERNELS, "kernels")
    classes = parse_list(args.classes, tuple(CLASSES), "classes")
    binds = parse_list(args.binds, BINDS, "binds")
    mems = parse_mems(args.mems)
    runtimes = parse_list(args.runtimes, RUNTIMES, "runtimes")
    cpus = len(os.sched_getaffinity(0))
    if args.threads:
        threads = parse_threads(args.threads)
    else:
        threads = sorted({1, cpus} | {1 << k for k in range(10) if (1 << k) <= cpus})
    rounds = args.rounds
    if rounds < 1:
        fail("--rounds: %d is not a positive integer" % rounds)
    if args.quick:
        classes, threads, binds, mems, rounds = ["S"], [2], ["none", "compact"], \
            ["first-touch", "interleave"], 1
    if args.replot:
        rows, header_note = replot_rows(args.replot)
        failed = sum(1 for r in rows if not r["verified"])
        nodes = min((r.get("numa_nodes") or 1) for r in rows) if rows else numa_nodes()
        notes = []
        if nodes <= 1:
            notes.append("one NUMA node: memory policies are equivalent here")
        gomp_mems = {r["mem"] for r in rows if r["runtime"] == "gomp"}
        if gomp_mems == {"first-touch"} and any(r["mem"] != "first-touch" for r in rows):
            notes.append("numactl not found: libgomp runs use first-touch only")
        one_node = nodes <= 1
        os.makedirs(args.out, exist_ok=True)
        jsonl = args.replot
        start = time.time()
        load_start = load_end = None
    else:
        bin_dir = find_bin_dir(args.bin_dir)
        for k in kernels:
            for rt in runtimes:
                exe = os.path.join(bin_dir, "affinity_%s_%s" % (k, rt))
                if not os.access(exe, os.X_OK):
                    fail("%s is missing (build the affinity_* targets, or give --bin-dir)" % exe)

        nodes = numa_nodes()
        one_node = nodes <= 1
        numactl = shutil.which("numactl")
        notes = []
        if one_node:
            notes.append("one NUMA node: memory policies are equivalent here")
        if "gomp" in runtimes and not numactl and any(m != "first-touch" for m in mems):
            notes.append("numactl not found: libgomp runs use first-touch only (%s skipped for "
                         "libgomp)" % ", ".join(m for m in mems if m != "first-touch"))
        for n in notes:
            print("study.py: " + n, file=sys.stderr)

        configs = []
        for k in kernels:
            for c in classes:
                for t in threads:
                    for rt in runtimes:
                        for b in binds:
                            for m in mems:
                                if placement(rt, t, b, m, numactl) is not None:
                                    configs.append((k, c, rt, t, b, m))
        os.makedirs(args.out, exist_ok=True)
        jsonl = os.path.join(args.out, "runs.jsonl")
        rows, failed = [], 0
        start, load_start = time.time(), load_average()
        with open(jsonl, "w") as out:
            for rnd in range(rounds):
                for (k, c, rt, t, b, m) in configs:
                    row = run_one(bin_dir, k, c, rt, t, b, m, numactl, args.timeout)
                    row["round"] = rnd
                    row["numa_nodes"] = nodes
                    rows.append(row)
                    out.write(json.dumps(row, sort_keys=True) + "\n")
                    out.flush()
                    if not row["verified"]:
                        failed += 1
                        print("study.py: %s class %s %s threads=%d bind=%s mem=%s: %s" %
                              (k, c, RUNTIME_NAMES[rt], t, b, m, row.get("error", "not verified")),
                              file=sys.stderr)
    groups = summarize(rows)
    fig_notes = notes or ["%d NUMA nodes" % nodes]
    draw_speedup(groups, os.path.join(args.out, "speedup.png"), fig_notes)
    draw_policies(groups, os.path.join(args.out, "policies.png"), fig_notes)
    counters_png = draw_counters(rows, os.path.join(args.out, "counters.png"), fig_notes)
    text = table(groups, rows, one_node)
    if not args.replot:
        load_end = load_average()
    header = ("affinity study: %d runs in %.0f s, %d CPUs, %d NUMA node%s, rounds %d, load "
              "average %s at the start and %s at the end%s\n" %
              (len(rows), time.time() - start, cpus, nodes, "" if nodes == 1 else "s", rounds,
               load_start, load_end, "; " + "; ".join(notes[1:]) if len(notes) > 1 else ""))
    if args.replot:
        header = "replotted from %s: %s" % (args.replot, header_note)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(header + text + "\n")
    print(header + text)
    print("study.py: wrote %sspeedup.png, policies.png, %ssummary.txt in %s" %
          ("" if args.replot else os.path.basename(jsonl) + ", ",
           "counters.png, " if counters_png else "", args.out), file=sys.stderr)
    if failed:
        print("study.py: %d of %d runs failed or did not verify" % (failed, len(rows)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""weft-trace migrations: the CPU each thread ran on over time, and how often
the OS moved it (the seed's thread-migration figure, paper 002 fig. 2).

The runtime looks at the CPU of each traced thread at its scheduler points
(a handler, loop chunk or region begins; every turn of an idle period) and
writes a `cpu` record (format version 3) when it changed, plus one when the
track begins and one at its end if the thread moved since. A thread's CPU is
therefore known as a step function over its track, exact to the nearest
scheduler point: a move inside a long handler shows at the handler's end.
A migration is a cpu record whose CPU differs from the track's previous one.

Text (or --json) on stdout: per thread its CPU set at the start (what it may
run on: one CPU when bound), samples, migrations, the kernel's own count of
its moves (the cpu-migrations counter, when it was opened: it also counts
moves between two samples), and its time on each CPU; with -o, a PNG of one
step plot per thread.
"""

import json

from .format import COUNTER, HEADER_BYTES, RECORD, RECORD_BYTES, TraceError
from .output import prepare_output
from .plots import pyplot, save_png
from .reader import load_trace, trace_ending

def kernel_migrations(track):
    """The kernel's count of the thread's migrations (the cpu-migrations
    counter at its last counter record), or None without that counter."""
    table = track.node.names.get("counter")
    ids = [int(k) for k, v in table.items() if v == "cpu-migrations"] if isinstance(table, dict) else []
    if not ids or not track.data:
        return None
    kinds = track.data[HEADER_BYTES::RECORD_BYTES]
    mark = bytes((COUNTER,))
    i = kinds.rfind(mark)
    while i >= 0:
        _, a, _, c, d = RECORD.unpack_from(track.data, HEADER_BYTES + i * RECORD_BYTES)
        if a == ids[0]:
            return c | (d << 32)
        i = kinds.rfind(mark, 0, i)
    return None


def format_cpus(cpus):
    """[0, 1, 2, 5] -> "0-2,5"."""
    if cpus is None:
        return "?"
    parts = []
    cpus = sorted(set(cpus))
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(parts) or "none"


class ThreadCpus:
    """One track's CPU over time: its steps, migrations and time per CPU."""

    def __init__(self, track):
        self.track = track
        node = track.node
        samples = [(tick, cpu) for _, tick, cpu in track.cpu_samples()]
        # [(start ns, end ns, cpu)] on the job's time line, one per sample.
        self.steps = []
        self.migrations = 0
        self.time_ns = {}
        end_tick = track.last_tick if track.last_tick is not None else 0
        for i, (tick, cpu) in enumerate(samples):
            nxt = samples[i + 1][0] if i + 1 < len(samples) else max(end_tick, tick)
            self.steps.append((node.ns(tick), node.ns(nxt), cpu))
            self.time_ns[cpu] = self.time_ns.get(cpu, 0.0) + (nxt - tick) * node.k
            if i and cpu != samples[i - 1][1]:
                self.migrations += 1
        self.samples = len(samples)
        self.kernel = kernel_migrations(track)
        self.span_ns = sum(self.time_ns.values())
        allowed = set(track.cpus) if track.cpus is not None else None
        # A thread rebound during the run (an OpenMP runtime applying its
        # places, the program itself) runs outside the set it began with.
        self.outside = (sum(1 for _, c in samples if c not in allowed) if allowed is not None else 0)

    def share(self):
        """{cpu: fraction of the sampled time}, by CPU."""
        total = self.span_ns
        return {c: (t / total if total > 0 else 0.0) for c, t in sorted(self.time_ns.items())}


def _label(track):
    return track.label if track.kind == "pe" else "node %d comm" % track.node.n


def _share_text(share):
    return ", ".join("cpu %d %.1f%%" % (c, 100.0 * f) for c, f in share.items()) or "-"


def cmd_migrations(args, issues):
    out = prepare_output(args.output) if args.output else None
    trace = load_trace(args.dir, issues)
    if trace.mode != "full":
        raise TraceError(args.dir, "a summary-mode trace has no CPU samples (expected mode \"full\": "
                                   "--weft:trace=DIR without --weft:trace-mode=summary; `weft-trace "
                                   "summary` shows its cpu-migrations counter per PE)")
    newest = max(n.version for n in trace.nodes)
    if newest < 3:
        raise TraceError(args.dir, "format version %d has no CPU samples (expected version 3 or later: "
                                   "a trace written by a weft that records them)" % newest)
    tracks = [t for t in trace.tracks
              if args.pes is None or (t.kind == "pe" and t.pe in args.pes)]
    if not tracks:
        raise TraceError(args.dir, "no PE of the trace is in --pes (the trace has PEs %s)"
                         % ", ".join(str(t.pe) for t in trace.pe_tracks))
    rows = [ThreadCpus(t) for t in tracks]
    total = sum(r.migrations for r in rows)
    all_time = {}
    for r in rows:
        for c, t in r.time_ns.items():
            all_time[c] = all_time.get(c, 0.0) + t
    all_span = sum(all_time.values())
    all_share = {c: t / all_span if all_span > 0 else 0.0 for c, t in sorted(all_time.items())}
    ending = trace_ending(trace)

    if args.json:
        doc = {"dir": trace.dir, "argv": trace.argv, "wall_ns": trace.end_ns(), "ended_early": ending,
               "migrations": total, "cpu_share": {str(c): f for c, f in all_share.items()},
               "threads": []}
        for r in rows:
            t = r.track
            doc["threads"].append({
                "thread": _label(t), "kind": t.kind, "pe": t.pe, "node": t.node.n,
                "cpus": t.cpus, "samples": r.samples, "migrations": r.migrations,
                "kernel_migrations": r.kernel,
                "outside_cpus": r.outside,
                "cpu_share": {str(c): f for c, f in r.share().items()},
                "time_ns": {str(c): v for c, v in sorted(r.time_ns.items())},
                "steps": [[a, cpu] for a, _, cpu in r.steps]})
        print(json.dumps(doc, indent=1))
    else:
        ms = trace.end_ns() / 1e6
        lines = ["weft trace %s: %s" % (trace.dir, " ".join(trace.argv) or "?"),
                 "CPU of each thread: %d thread%s, %d migration%s in %.3f ms "
                 "(checked at each handler, loop chunk, region and idle turn)"
                 % (len(rows), "" if len(rows) == 1 else "s", total, "" if total == 1 else "s", ms)]
        if ending:
            lines.append("The run ended early: " + ending)
        width = max(8, max(len(_label(r.track)) for r in rows))
        kernel = [r.kernel for r in rows if r.kernel is not None]

        def count(n):
            return "-" if n is None else str(n)
        lines.append("  %-*s %-12s %8s %10s %7s  %s" % (width, "thread", "CPU set", "samples", "migrations",
                                                         "kernel", "time share per CPU"))
        for r in rows:
            lines.append("  %-*s %-12s %8d %10d %7s  %s"
                         % (width, _label(r.track), format_cpus(r.track.cpus), r.samples, r.migrations,
                            count(r.kernel), _share_text(r.share())))
        lines.append("  %-*s %-12s %8d %10d %7s  %s"
                     % (width, "all", "", sum(r.samples for r in rows), total,
                        count(sum(kernel)) if kernel else "-", _share_text(all_share)))
        lines.append("  (migrations: changes of CPU between the samples; kernel: the thread's "
                     "cpu-migrations counter%s)" % ("" if kernel else ", not opened in this run"))
        for r in rows:
            if r.outside:
                lines.append("  %s: %d sample%s outside its CPU set at its start (%s): the thread was "
                             "rebound during the run" % (_label(r.track), r.outside,
                                                          "" if r.outside == 1 else "s",
                                                          format_cpus(r.track.cpus)))
            if not r.samples:
                lines.append("  %s: no CPU sample (its file holds no cpu record)" % _label(r.track))
        print("\n".join(lines))
    if out:
        draw(trace, rows, total, ending, out)
    return 0


def draw(trace, rows, total, ending, out):
    """One step plot per thread, CPU against time, on a shared time axis."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator
    n = len(rows)
    height = min(60.0, 1.0 + 1.25 * n)
    fig, axes = plt.subplots(n, 1, figsize=(12, height), sharex=True, squeeze=False)
    end_ms = trace.end_ns() / 1e6
    cpus = sorted({c for r in rows for c in r.time_ns} | {c for r in rows for c in (r.track.cpus or [])})
    lo, hi = (cpus[0], cpus[-1]) if cpus else (0, 1)
    for ax, r in zip(axes[:, 0], rows):
        if r.steps:
            xs = [a / 1e6 for a, _, _ in r.steps] + [r.steps[-1][1] / 1e6]
            ys = [c for _, _, c in r.steps] + [r.steps[-1][2]]
            ax.step(xs, ys, where="post", color="#1f5fa8", linewidth=1.2)
            ax.plot(xs[1:-1], ys[1:-1], linestyle="none", marker="|", color="#c0392b", markersize=6)
        ax.set_ylim(lo - 0.5, hi + 0.5)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(8, hi - lo + 1)))
        ax.set_ylabel("CPU")
        ax.grid(True, alpha=0.3)
        ax.set_title("%s: %d migration%s (CPU set %s%s)"
                     % (_label(r.track), r.migrations, "" if r.migrations == 1 else "s",
                        format_cpus(r.track.cpus), "" if r.samples else "; no CPU sample"),
                     fontsize="small", loc="left")
    axes[-1, 0].set_xlim(0, end_ms if end_ms > 0 else 1)
    axes[-1, 0].set_xlabel("wall-clock time (ms)")
    prog = trace.argv[0] if trace.argv else "?"
    fig.suptitle("%s: CPU of each thread over time, %d migration%s in all%s"
                 % (prog, total, "" if total == 1 else "s",
                    "\nthe run ended early: " + ending[:100] if ending else ""))
    fig.tight_layout()
    save_png(fig, plt, out)

"""weft-trace profile and timeline: the two PNG pictures, drawn with
matplotlib. profile: busy / overhead / idle as a percentage of PE time over
wall-clock bins (full and summary mode; in full mode the balancing steps
marked as bands); timeline: one row per PE, the
outermost busy slices colored by name (full mode only).

matplotlib is imported by pyplot() when one of them runs, not when the
package loads, so that the other commands run where it is missing. A row
with more slices than the plot has pixels is downsampled before drawing
(matplotlib takes minutes over a million sub-pixel bars and shows nothing
more).
"""

import argparse
import sys

from .format import BUSY_PAIRS, TraceError
from .output import prepare_output
from .reader import load_trace, trace_ending
from .walk import F_DATA, F_ID, F_PAIR, F_TICK, Visitor, walk


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")       # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise TraceError("matplotlib", "cannot import (%s); profile and timeline need python3-matplotlib "
                                       "for /usr/bin/python3" % e)
    return plt


def save_png(fig, plt, out):
    try:
        fig.savefig(out, format="png", dpi=110)
    except OSError as e:
        raise TraceError(out, "cannot write: %s" % (e.strerror or e))
    finally:
        plt.close(fig)
    print("weft-trace: wrote %s" % out, file=sys.stderr)


def spread(arr, width, t0, t1, amount=None):
    """Adds [t0, t1) (ns) to bins of `width`; `amount` spread evenly if given."""
    if t1 <= t0:
        return
    n = len(arr)
    scale = 1.0 if amount is None else amount / (t1 - t0)
    i = int(t0 // width)
    while i < n:
        lo = max(t0, i * width)
        hi = min(t1, (i + 1) * width)
        if hi <= lo:
            if i * width >= t1:
                break
            i += 1
            continue
        arr[i] += (hi - lo) * scale
        if hi >= t1:
            break
        i += 1
    if t1 > n * width and n:
        # Past the last bin (a record after the node's end): keep it in the last.
        arr[-1] += (t1 - max(t0, n * width)) * scale


class ProfileVisitor(Visitor):
    def __init__(self, track, busy, idle, width):
        self.node = track.node
        self.busy, self.idle, self.width = busy, idle, width

    def state(self, t0, t1, busy, idle):
        a, b = self.node.ns(t0), self.node.ns(t1)
        if busy:
            spread(self.busy, self.width, a, b)
        if idle:
            spread(self.idle, self.width, a, b)


def mark_lb_steps(ax, trace, issues):
    """The balancing steps on the time axis: a band from a step's first
    lb_begin to its last lb_end, and a line at its start (a step of a few
    microseconds is narrower than a pixel)."""
    from .lb import lb_steps
    steps, _ = lb_steps(trace, issues)
    for i, s in enumerate(steps):
        t0 = s.begin / 1e6
        t1 = (s.end if s.end is not None else trace.end_ns()) / 1e6
        ax.axvspan(t0, t1, color="#1f5fa8", alpha=0.3, linewidth=0)
        ax.axvline(t0, color="#1f5fa8", linewidth=0.8,
                   label="balancing step (%d)" % len(steps) if i == 0 else None)


def cmd_profile(args, issues):
    out = prepare_output(args.output)
    if args.bins < 1:
        raise TraceError(args.dir, "--bins %d (expected a number >= 1)" % args.bins)
    trace = load_trace(args.dir, issues)
    end = trace.end_ns()
    nb = args.bins
    width = end / nb if end > 0 else 1.0
    busy = [0.0] * nb
    idle = [0.0] * nb
    present = [0.0] * nb       # PE time covered by the PEs' records
    if trace.mode == "full":
        for t in trace.tracks:
            v = ProfileVisitor(t, busy, idle, width) if t.kind == "pe" else None
            walk(t, issues, v, strict=True)
            if t.kind == "pe" and t.nrec:
                spread(present, width, t.node.ns(t.first_tick), t.node.ns(t.last_tick))
        npes = len(trace.pe_tracks)
    else:
        npes = 0
        for node in trace.nodes:
            bin_ns = node.summary["bin_ns"]
            for pe in node.summary["pes"]:
                npes += 1
                wall = pe["wall_ns"]
                start = node.off_ns
                spread(present, width, start, start + wall)
                for j, (b, i) in enumerate(pe["bins"]):
                    lo = j * bin_ns
                    hi = min((j + 1) * bin_ns, wall) if wall > lo else (j + 1) * bin_ns
                    spread(busy, width, start + lo, start + hi, b)
                    spread(idle, width, start + lo, start + hi, i)
    cap = width * npes if npes else 1.0
    useful = [100.0 * b / cap for b in busy]
    idlep = [100.0 * i / cap for i in idle]
    # Overhead: the PEs' time that is neither busy nor idle (bin time minus
    # busy minus idle); never below zero in the picture.
    over = [max(0.0, 100.0 * (p - b - i) / cap) for p, b, i in zip(present, busy, idle)]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 5))
    # Bins drawn as steps over their edges: the last value repeats at the end.
    x = [j * width / 1e6 for j in range(nb + 1)]
    ax.stackplot(x, useful + useful[-1:], over + over[-1:], idlep + idlep[-1:],
                 labels=["useful (busy)", "overhead", "idle"],
                 colors=["#2e8b57", "#e07b39", "#c8c8c8"], linewidth=0, step="post")
    ax.set_xlim(0, end / 1e6 if end > 0 else 1)
    ax.set_ylim(0, 100)
    ax.set_xlabel("wall-clock time (ms)")
    ax.set_ylabel("%% of PE time (%d PEs)" % npes)
    prog = trace.argv[0] if trace.argv else "?"
    ax.set_title("%s: time profile of %d PEs on %d node%s (%s mode, %d bins of %.3g ms)"
                 % (prog, npes, len(trace.nodes), "" if len(trace.nodes) == 1 else "s",
                    trace.mode, nb, width / 1e6))
    if trace.mode == "full":
        mark_lb_steps(ax, trace, issues)
    ending = trace_ending(trace)
    if ending:
        ax.axvline(end / 1e6, color="red", linestyle="--", linewidth=1.5,
                   label="ended early: " + (ending if len(ending) <= 60 else ending[:57] + "..."))
    ax.legend(loc="upper right")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    save_png(fig, plt, out)
    return 0


class TimelineVisitor(Visitor):
    """Keeps the outermost busy slices (labelled) and the idle periods."""

    def __init__(self, track):
        self.node = track.node
        self.bars = []          # (t0 ns, t1 ns, label)
        self.idle = []          # (t0 ns, t1 ns)

    def begin(self, idx, frame):
        # For a handler: [longest entry name, its ticks] among the entries it ran.
        return [None, -1] if frame[F_PAIR] == "handler" else None

    def end(self, frame, tick, end_a, stack):
        pair = frame[F_PAIR]
        node = self.node
        if pair == "entry":
            for f in reversed(stack):
                if f[F_PAIR] == "handler":
                    d = tick - frame[F_TICK]
                    if d > f[F_DATA][1]:
                        f[F_DATA][0], f[F_DATA][1] = node.name("entry", frame[F_ID]), d
                    break
            else:
                # A sampled trace (--weft:trace-sample) records most entries
                # without their handler: such an entry is a bar of its own.
                if node.sample > 1 and not any(f[F_PAIR] in BUSY_PAIRS for f in stack):
                    self.bars.append((node.ns(frame[F_TICK]), node.ns(tick),
                                      node.name("entry", frame[F_ID])))
        elif pair in BUSY_PAIRS:
            if any(f[F_PAIR] in BUSY_PAIRS for f in stack):
                return
            if pair == "handler":
                # A handler is named by the entry method it ran, if any: the
                # generic element handler says little on its own.
                label = frame[F_DATA][0] or node.name("handler", frame[F_ID])
            elif pair == "region":
                label = node.name("user", frame[F_ID])
            else:
                label = "task"
            self.bars.append((node.ns(frame[F_TICK]), node.ns(tick), label))
        elif pair == "idle":
            if not any(f[F_PAIR] == "idle" for f in stack):
                self.idle.append((node.ns(frame[F_TICK]), node.ns(tick)))


def parse_pes(text):
    pes = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                a, b = int(a), int(b)
                if a < 0 or b < a:
                    raise ValueError
                pes.update(range(a, b + 1))
            else:
                a = int(part)
                if a < 0:
                    raise ValueError
                pes.add(a)
    except ValueError:
        raise argparse.ArgumentTypeError("%r (expected PEs as 0-3 or 0,2,5-7)" % text)
    return pes


TIMELINE_COLUMNS = 2000       # about the pixels of the plot's width
_IDLE = object()


def downsample(bars, idle, lo, hi, ncols=TIMELINE_COLUMNS):
    """One bar per column at most: what took most of each column's time.

    Drawing a million sub-pixel bars takes matplotlib minutes and shows
    nothing more; a row with more bars than columns is drawn as runs of
    columns, each colored by its majority (a name, idle, or overhead).
    """
    w = (hi - lo) / ncols
    cols = [{} for _ in range(ncols)]

    def add(a, b, label):
        i = min(ncols - 1, max(0, int((a - lo) // w)))
        while a < b and i < ncols:
            e = min(b, lo + (i + 1) * w)
            c = cols[i]
            c[label] = c.get(label, 0.0) + (e - a)
            a = e
            i += 1
    for a, b, nm in bars:
        add(a, b, nm)
    for a, b in idle:
        add(a, b, _IDLE)
    out_bars, out_idle = [], []
    run, start = _IDLE, None      # the current run's label and first column
    labels = []
    for c in cols:
        label, most = max(c.items(), key=lambda kv: kv[1]) if c else (_IDLE, 0.0)
        labels.append(label if most >= w - sum(c.values()) else "overhead")
    labels.append("end")
    for i, label in enumerate(labels):
        if start is not None and label == run:
            continue
        if start is not None and run != "overhead":
            span = (lo + start * w, lo + i * w)
            (out_idle.append(span) if run is _IDLE else out_bars.append(span + (run,)))
        run, start = label, i
    return out_bars, out_idle


def cmd_timeline(args, issues):
    out = prepare_output(args.output)
    trace = load_trace(args.dir, issues)
    if trace.mode != "full":
        raise TraceError(args.dir, "a summary-mode trace has no events to draw (expected mode \"full\" "
                                   "for timeline; summary and profile read summary mode)")
    tracks = [t for t in trace.pe_tracks if args.pes is None or t.pe in args.pes]
    if not tracks:
        raise TraceError(args.dir, "no PE of the trace is in --pes (the trace has PEs %s)"
                         % ", ".join(str(t.pe) for t in trace.pe_tracks))
    lo = args.from_ms * 1e6 if args.from_ms is not None else 0.0
    hi = args.to_ms * 1e6 if args.to_ms is not None else trace.end_ns()
    if hi <= lo:
        raise TraceError(args.dir, "empty time range %.6g..%.6g ms (expected --from-ms < --to-ms)"
                         % (lo / 1e6, hi / 1e6))
    rows = []
    totals = {}
    for t in tracks:
        v = TimelineVisitor(t)
        walk(t, issues, v, strict=True)
        bars = [(max(a, lo), min(b, hi), nm) for a, b, nm in v.bars if b >= lo and a <= hi]
        idle = [(max(a, lo), min(b, hi)) for a, b in v.idle if b >= lo and a <= hi]
        for a, b, nm in bars:
            totals[nm] = totals.get(nm, 0.0) + (b - a)
        rows.append((t, bars, idle))
    top = [nm for nm, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
    plt = pyplot()
    palette = plt.get_cmap("tab10").colors
    color = {nm: palette[i % 10] for i, nm in enumerate(top)}
    other_color, idle_color = "#555555", "#dddddd"
    height = min(60.0, max(3.0, 0.35 * len(rows) + 1.8))
    fig, ax = plt.subplots(figsize=(14, height))
    for y, (t, bars, idle) in enumerate(rows):
        bars = [(a, b, nm if nm in color else None) for a, b, nm in bars]
        if len(bars) + len(idle) > 2 * TIMELINE_COLUMNS:
            bars, idle = downsample(bars, idle, lo, hi)
        if idle:
            ax.broken_barh([(a / 1e6, (b - a) / 1e6) for a, b in idle], (y - 0.4, 0.8),
                           facecolors=idle_color, linewidth=0)
        groups = {}
        for a, b, nm in bars:
            groups.setdefault(nm if nm in color else None, []).append((a / 1e6, (b - a) / 1e6))
        for nm, spans in groups.items():
            ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=color.get(nm, other_color), linewidth=0)
    ending = trace_ending(trace)
    if ending:
        # Where each PE stopped: a red mark at its last record.
        stops = [(t.node.ns(t.last_tick) / 1e6, y) for y, (t, _, _) in enumerate(rows)
                 if t.nrec and t.node.unfinished and lo <= t.node.ns(t.last_tick) <= hi]
        if stops:
            ax.scatter([x for x, _ in stops], [y for _, y in stops], marker="|", s=400,
                       color="red", zorder=5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(["PE %d" % t.pe for t, _, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(lo / 1e6, hi / 1e6)
    ax.set_xlabel("wall-clock time (ms)")
    prog = trace.argv[0] if trace.argv else "?"
    ax.set_title("%s: timeline of %d PE%s (busy by entry method / handler; idle grey; overhead white)"
                 % (prog, len(rows), "" if len(rows) == 1 else "s")
                 + ("\nthe run ended early: %s (red: each PE's last record)" % ending[:100]
                    if ending else ""))
    from matplotlib.patches import Patch
    handles = [Patch(color=color[nm], label=nm) for nm in top]
    if len(totals) > len(top):
        handles.append(Patch(color=other_color, label="other"))
    handles.append(Patch(color=idle_color, label="idle"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    save_png(fig, plt, out)
    return 0

"""weft-trace lb: the load-balancing steps of a run, from the lb records
(docs/design/trace-format.md, "Load balancing"): per step its time and its
phases (collection, strategy, migration), the elements it moved and their
bytes, and what it did to the load -- the PEs' max/avg busy time between
the steps before it and after it, measured from the trace, beside what the
strategy saw and predicted.

Each PE records its part of a step as lb_begin ... lb_end and its phases as
lb_phase_begin ... lb_phase_end; they pair per collection and step (a step
spans many handlers), not with the track's slices. The PE that ran the
strategy (the collection's root) says so in its lb_begin, and its
strategy's end carries max/avg before and as predicted. A migration the
balancer made is a migrate_out with the balancer's flag on the PE the
element left; it is counted in the step of its collection that was open on
that PE.

Measured load: a PE's busy time (handlers, tasks, regions: the summary's
busy) in the window from the end of the collection's previous step (or the
start) to the step's first lb_begin, and from the step's last lb_end to the
next step's first lb_begin (or the end). max/avg is over every PE of the
trace; the gain is max/avg before over max/avg after (measured), and the
strategy's max/avg before over its prediction (predicted).
"""

import bisect
import json
import re
import struct

from .format import (HEADER_BYTES, LB_BEGIN, LB_END, LB_PHASE_BEGIN, LB_PHASE_END, LB_PHASES,
                     MIGRATE_BY_BALANCER, MIGRATE_BY_POINTER, MIGRATE_BYTES, MIGRATE_IN,
                     MIGRATE_OUT, RECORD, RECORD_BYTES, TraceError, i32)
from .reader import load_trace, trace_ending
from .walk import Visitor, walk

# Kinds 12-15 (migrate_out, migrate_in, lb_begin, lb_end) and 30-31 (phases).
_LB_KINDS = re.compile(b"[\\x0c-\\x0f\\x1e\\x1f]")
assert (MIGRATE_OUT, MIGRATE_IN, LB_BEGIN, LB_END, LB_PHASE_BEGIN, LB_PHASE_END) == \
    (0x0c, 0x0d, 0x0e, 0x0f, 0x1e, 0x1f)
_F32 = struct.Struct("<f")


def f32(bits):
    """A float32 field (0: not known)."""
    return _F32.unpack(struct.pack("<I", bits))[0] if bits else None


class Step:
    """One balancing step of one collection, over every PE."""

    def __init__(self, ctype, number, name):
        self.ctype = ctype
        self.number = number
        self.name = name
        self.spans = {}          # pe -> [begin ns, end ns or None]
        self.phases = {}         # pe -> {phase name: [t0, t1 or None]}
        self.root_pe = None
        self.strategy_before = None
        self.predicted = None
        self.moves = []          # (pe, to, index, bytes, by_pointer)
        self.arrived = 0         # the balancer's migrate_in records
        self.before = self.after = None

    @property
    def begin(self):
        return min(s[0] for s in self.spans.values())

    @property
    def end(self):
        ends = [s[1] for s in self.spans.values() if s[1] is not None]
        return max(ends) if ends else None

    def phase_ns(self):
        """{phase: duration} on the root PE (where the strategy ran), else
        the longest over the PEs."""
        out = {}
        pes = [self.root_pe] if self.root_pe in self.phases else list(self.phases)
        for pe in pes:
            for name, (t0, t1) in self.phases[pe].items():
                if t1 is not None:
                    out[name] = max(out.get(name, 0.0), t1 - t0)
        return out

    @property
    def gain_measured(self):
        if self.before and self.after and self.before["ratio"] and self.after["ratio"]:
            return self.before["ratio"] / self.after["ratio"]
        return None

    @property
    def gain_predicted(self):
        if self.strategy_before and self.predicted:
            return self.strategy_before / self.predicted
        return None


def lb_steps(trace, issues):
    """[Step] by their first lb_begin, and the migrations no step made
    ([(pe, to, index, bytes)]: migrate_to, or the balancer's outside a step
    of this PE)."""
    steps = {}
    others = []
    for track in trace.pe_tracks:
        data = track.data
        if not data:
            continue
        node, pe = track.node, track.pe
        kinds = data[HEADER_BYTES::RECORD_BYTES]
        open_steps = {}          # collection type -> Step open on this track
        for m in _LB_KINDS.finditer(kinds):
            w, a, b, c, d = RECORD.unpack_from(data, HEADER_BYTES + m.start() * RECORD_BYTES)
            kind, t = w & 0xFF, node.ns(w >> 8)
            if kind == MIGRATE_IN:
                s = open_steps.get(a) if d & MIGRATE_BY_BALANCER else None
                if s is not None:
                    s.arrived += 1
                continue
            if kind == MIGRATE_OUT:
                move = (pe, i32(b), c, d & MIGRATE_BYTES, bool(d & MIGRATE_BY_POINTER))
                s = open_steps.get(a) if d & MIGRATE_BY_BALANCER else None
                if s is None:
                    others.append(move[:4])
                else:
                    s.moves.append(move)
                continue
            ctype = b >> 8 if kind in (LB_PHASE_BEGIN, LB_PHASE_END) else b
            key = (ctype, a)
            s = steps.get(key)
            if s is None:
                s = steps[key] = Step(ctype, a, node.name("collection", ctype))
            if kind == LB_BEGIN:
                if pe in s.spans:
                    issues.warning(track.path, "lb_begin of %s step %d again on PE %d"
                                   % (s.name, a, pe))
                s.spans[pe] = [t, None]
                if c == 1:
                    s.root_pe = pe
                open_steps[ctype] = s
            elif kind == LB_END:
                span = s.spans.get(pe)
                if span is None or span[1] is not None:
                    issues.warning(track.path, "lb_end of %s step %d on PE %d has no lb_begin"
                                   % (s.name, a, pe))
                    continue
                span[1] = t
                open_steps.pop(ctype, None)
            else:
                phase = LB_PHASES.get(b & 0xFF, "phase %d" % (b & 0xFF))
                ph = s.phases.setdefault(pe, {})
                if kind == LB_PHASE_BEGIN:
                    ph[phase] = [t, None]
                elif phase in ph and ph[phase][1] is None:
                    ph[phase][1] = t
                    if phase == "strategy":
                        s.strategy_before, s.predicted = f32(c), f32(d)
                else:
                    issues.warning(track.path, "lb_phase_end %s of %s step %d on PE %d has no begin"
                                   % (phase, s.name, a, pe))
    out = [s for s in steps.values() if s.spans]
    out.sort(key=lambda s: (s.begin, s.ctype, s.number))
    return out, others


class BusyVisitor(Visitor):
    """A PE's busy stretches, in ns on the job's time line."""

    def __init__(self, track):
        self.node = track.node
        self.starts, self.ends = [], []

    def state(self, t0, t1, busy, idle):
        if busy:
            a, b = self.node.ns(t0), self.node.ns(t1)
            if self.ends and self.ends[-1] == a:
                self.ends[-1] = b
            else:
                self.starts.append(a)
                self.ends.append(b)

    def prefix(self):
        self.sums = [0.0]
        for a, b in zip(self.starts, self.ends):
            self.sums.append(self.sums[-1] + b - a)

    def busy(self, lo, hi):
        """Busy time within [lo, hi)."""
        if hi <= lo or not self.starts:
            return 0.0
        i = bisect.bisect_right(self.ends, lo)         # first stretch ending after lo
        j = bisect.bisect_left(self.starts, hi)        # stretches starting before hi
        if j <= i:
            return 0.0
        total = self.sums[j] - self.sums[i]
        total -= max(0.0, lo - self.starts[i])
        total -= max(0.0, self.ends[j - 1] - hi)
        return max(0.0, total)


def window(busy, prev, nxt, start, end):
    """max/avg of the PEs' busy time between two steps, or None when there
    is none: each PE's window runs from its own lb_end of step `prev` to its
    own lb_begin of step `nxt` (a PE leaves a step and enters the next at
    its own time: in an at_sync loop, a PE's window holds exactly its
    elements' work), or from `start` / to `end` (the job's) without one."""
    loads = []
    lo_all, hi_all = None, None
    for pe, v in busy:
        lo = prev.spans.get(pe, [None, None])[1] if prev is not None else start
        if lo is None:
            lo = prev.end if prev.end is not None else start
        hi = nxt.spans[pe][0] if nxt is not None and pe in nxt.spans else \
            (nxt.begin if nxt is not None else end)
        loads.append(v.busy(lo, hi))
        if hi > lo:
            lo_all = lo if lo_all is None else min(lo_all, lo)
            hi_all = hi if hi_all is None else max(hi_all, hi)
    if lo_all is None or not loads:
        return None
    avg = sum(loads) / len(loads)
    mx = max(loads)
    return {"from_ns": lo_all, "to_ns": hi_all, "max_ns": mx, "avg_ns": avg,
            "ratio": mx / avg if avg > 0 else None}


def measure(trace, steps, issues):
    """Sets each step's before and after from the PEs' busy time."""
    busy = []
    for t in trace.pe_tracks:
        v = BusyVisitor(t)
        walk(t, issues, v, strict=True)
        v.prefix()
        busy.append((t.pe, v))
    end = trace.end_ns()
    by_coll = {}
    for s in steps:
        by_coll.setdefault(s.ctype, []).append(s)
    for coll in by_coll.values():
        for i, s in enumerate(coll):
            prev = coll[i - 1] if i > 0 else None
            nxt = coll[i + 1] if i + 1 < len(coll) else None
            s.before = window(busy, prev, s, 0.0, end)
            s.after = window(busy, s, nxt, 0.0, end) if s.end is not None else None


def _num(x, fmt="%.3f"):
    return "-" if x is None else fmt % x


def step_json(s):
    return {"collection": s.name, "type": s.ctype, "step": s.number, "root_pe": s.root_pe,
            "pes": len(s.spans), "begin_ns": s.begin, "end_ns": s.end,
            "duration_ns": None if s.end is None else s.end - s.begin,
            "phases_ns": s.phase_ns(),
            "migrations": len(s.moves), "bytes": sum(m[3] for m in s.moves),
            "by_pointer": sum(1 for m in s.moves if m[4]), "arrived": s.arrived,
            "moves": [{"element": m[2], "from": m[0], "to": m[1], "bytes": m[3],
                       "by_pointer": m[4]} for m in s.moves],
            "before": s.before, "after": s.after,
            "strategy_before": s.strategy_before, "predicted": s.predicted,
            "gain_measured": s.gain_measured, "gain_predicted": s.gain_predicted}


def step_lines(s, npes):
    ms = 1e-6
    ph = s.phase_ns()
    phases = ", ".join("%s %.3f" % (n, ph[n] * ms) for n in ("collection", "strategy", "migration")
                       if n in ph)
    where = " on PE %d" % s.root_pe if s.root_pe is not None else ""
    dur = "unfinished" if s.end is None else "%.3f ms" % ((s.end - s.begin) * ms)
    nbytes = sum(m[3] for m in s.moves)
    lines = ["  %s step %d at %.3f ms: %s (%s%s), %d migration%s, %d bytes%s"
             % (s.name, s.number, s.begin * ms, dur, phases or "no phase", where, len(s.moves),
                "" if len(s.moves) == 1 else "s", nbytes,
                "" if len(s.spans) == npes else "; on %d of %d PEs" % (len(s.spans), npes))]

    def load(w):
        if w is None:
            return "-"
        return "%s (max %.3f ms, avg %.3f ms busy, %.3f to %.3f ms)" % (
            _num(w["ratio"]), w["max_ns"] * ms, w["avg_ns"] * ms, w["from_ns"] * ms, w["to_ns"] * ms)
    lines.append("    busy max/avg before %s" % load(s.before))
    lines.append("                 after  %s" % load(s.after))
    lines.append("    gain measured %s, predicted %s (strategy: max/avg %s -> predicted %s)"
                 % (_num(s.gain_measured, "%.3fx"), _num(s.gain_predicted, "%.3fx"),
                    _num(s.strategy_before), _num(s.predicted)))
    return lines


def cmd_lb(args, issues):
    trace = load_trace(args.dir, issues)
    if trace.mode != "full":
        raise TraceError(args.dir, "a summary-mode trace has no balancing steps (expected mode \"full\": "
                                   "--weft:trace=DIR without --weft:trace-mode=summary)")
    steps, others = lb_steps(trace, issues)
    if steps:
        measure(trace, steps, issues)
    npes = len(trace.pe_tracks)
    ending = trace_ending(trace)
    if args.json:
        doc = {"dir": trace.dir, "argv": trace.argv, "pes": npes, "wall_ns": trace.end_ns(),
               "ended_early": ending, "steps": [step_json(s) for s in steps],
               "other_migrations": len(others)}
        print(json.dumps(doc, indent=1))
        return 0
    lines = ["weft trace %s: %s" % (trace.dir, " ".join(trace.argv) or "?")]
    if ending:
        lines.append("The run ended early: " + ending)
    if not steps:
        lines.append("No balancing step in this trace (a step is recorded with at_sync(), "
                     "--weft:lb-period or weft::lb::balance())")
    else:
        moves = sum(len(s.moves) for s in steps)
        lines.append("Load balancing: %d step%s on %d PEs, %d migration%s, %d bytes (busy max/avg "
                     "between the steps, ms of the job's time line)"
                     % (len(steps), "" if len(steps) == 1 else "s", npes, moves,
                        "" if moves == 1 else "s", sum(m[3] for s in steps for m in s.moves)))
        for s in steps:
            lines.extend(step_lines(s, npes))
    if others:
        lines.append("Migrations outside the steps (migrate_to): %d" % len(others))
    print("\n".join(lines))
    return 0

"""The one pass over a track's records (walk): begins paired with their
ends on a stack of open slices, busy and idle time measured, time per name
counted; and from it the per-PE times (busy, idle, overhead) that summary
and check report, or their copy from a summary-mode run's files.

Every command that needs more than the headers walks its tracks once: a
Visitor subclass (perfetto's events, profile's bins, timeline's bars) gets
each begin, end and other record in record order, so the pairing rules and
their diagnostics live here only, not once per command. A frame of the
stack is a plain list indexed by the F_* constants rather than an object
with attributes: a walk makes one per slice.
"""

from .format import (BEGINS, BUSY_PAIRS, COUNTER, DROPPED, ENDS, ID_PAIRS, KIND_NAMES, NAMED_PAIRS,
                     TraceError)


# ---------------------------------------------------------------------------
# The one pass over a track's records.

class TrackResult:
    """What a walk measured, in ticks of the track's node."""

    def __init__(self):
        self.busy = 0           # time inside an outermost handler, task or region
        self.idle = 0           # time inside idle periods
        self.both = 0           # counted in both (an idle period inside busy time)
        self.both_at = None     # record where that first happened
        self.stats = {}         # (space, id) -> [count, total, self, max]
        self.counters = {}      # counter id -> last value
        self.slices = 0
        self.open_at_end = []   # slices open at the last record, outermost first


class Visitor:
    """Receives a track's events in record order; subclasses keep what they need."""

    def begin(self, idx, frame):
        """A begin record; returns what the walk keeps in frame[F_DATA]."""

    def end(self, frame, tick, end_a, stack):
        """The frame closes at `tick` (after it has left `stack`)."""

    def point(self, idx, kind, tick, a, b, c, d, stack):
        """A record that is neither begin nor end."""

    def state(self, t0, t1, busy, idle):
        """[t0, t1) was busy and/or idle (only called for such stretches)."""


# A frame of the open-slice stack.
F_PAIR, F_ID, F_IDX, F_TICK, F_A, F_B, F_C, F_D, F_CHILD, F_DATA = range(10)


def walk(track, issues, visitor=None, strict=True):
    """Pairs begins with ends, measures busy/idle and per-name times.

    strict (the non-check commands): an end with no begin and ticks that go
    back are errors (exit 2). Otherwise (check) they are listed as problems.
    """
    res = TrackResult()
    node = track.node
    path = track.path
    unfinished = node.aborted or not node.complete
    stack = []
    stats = res.stats
    busy_depth = idle_depth = 0
    last_t = track.first_tick or 0
    prev = -1
    backwards = 0
    v = visitor
    nested_idle_reported = False
    # A sampled trace has the handlers of 1 message in N only: its entries
    # (all recorded) are busy time too.
    sampled = node.sample > 1
    busy_pairs = BUSY_PAIRS | {"entry"} if sampled else BUSY_PAIRS
    dropped = False      # the track dropped events: ends may lack their begins

    def account(tick):
        # Called whenever busy or idle starts or stops: adds the stretch since
        # the last change. Busy and idle are measured independently, so a
        # writer that puts idle inside a handler shows up as double counting.
        nonlocal last_t
        dt = tick - last_t
        if dt > 0 and (busy_depth or idle_depth):
            if busy_depth:
                res.busy += dt
            if idle_depth:
                res.idle += dt
                if busy_depth:
                    res.both += dt
            if v:
                v.state(last_t, tick, busy_depth > 0, idle_depth > 0)
        last_t = tick

    def close(frame, tick, end_a):
        nonlocal busy_depth, idle_depth
        pair = frame[F_PAIR]
        dur = tick - frame[F_TICK]
        if stack:
            stack[-1][F_CHILD] += dur
        space = NAMED_PAIRS.get(pair)
        if space:
            key = (space, frame[F_ID] if frame[F_ID] is not None else 0)
            s = stats.get(key)
            if s is None:
                stats[key] = [1, dur, dur - frame[F_CHILD], dur]
            else:
                s[0] += 1
                s[1] += dur
                s[2] += dur - frame[F_CHILD]
                if dur > s[3]:
                    s[3] = dur
        if pair in busy_pairs:
            if busy_depth == 1:
                account(tick)
            busy_depth -= 1
        elif pair == "idle":
            if idle_depth == 1:
                account(tick)
            idle_depth -= 1
        res.slices += 1
        if v:
            v.end(frame, tick, end_a, stack)

    def describe(frame):
        pair = frame[F_PAIR]
        nm = ""
        if pair in NAMED_PAIRS and frame[F_ID] is not None:
            nm = " " + node.name(NAMED_PAIRS[pair], frame[F_ID])
        elif pair == "lb":
            nm = " phase %d" % frame[F_ID]
        return "%s_begin%s" % (pair, nm)

    idx = -1
    tick = last_t
    for idx, (w, a, b, c, d) in enumerate(track.records()):
        kind = w & 0xFF
        tick = w >> 8
        if tick < prev:
            if strict:
                raise TraceError(path, "record %d: tick %d after tick %d (expected non-decreasing ticks; "
                                       "weft-trace check lists every problem)" % (idx, tick, prev))
            backwards += 1
            if backwards == 1:
                issues.problem(path, "record %d: tick %d after tick %d (expected non-decreasing ticks "
                                     "within a file)" % (idx, tick, prev))
            tick = prev          # keep durations >= 0 for what follows
        prev = tick
        pair = BEGINS.get(kind)
        if pair is not None:
            ident = a if pair in ID_PAIRS else None
            frame = [pair, ident, idx, tick, a, b, c, d, 0, None]
            if pair in busy_pairs:
                if idle_depth and not nested_idle_reported and pair == "handler":
                    nested_idle_reported = True
                    issues.problem(path, "record %d: handler_begin %s inside an idle period "
                                         "(expected handlers never to run inside idle)"
                                   % (idx, node.name("handler", a)))
                if busy_depth == 0:
                    account(tick)
                    if idle_depth and res.both_at is None:
                        res.both_at = idx
                busy_depth += 1
            elif pair == "idle":
                if idle_depth == 0:
                    account(tick)
                    if busy_depth and res.both_at is None:
                        res.both_at = idx
                idle_depth += 1
            elif pair == "entry" and issues.checking and not sampled and not any(
                    f[F_PAIR] == "handler" for f in stack):
                issues.problem(path, "record %d: entry_begin %s outside any handler (expected an "
                                     "entry to run inside its handler)" % (idx, node.name("entry", a)))
            if v:
                frame[F_DATA] = v.begin(idx, frame)
            stack.append(frame)
            continue
        pair = ENDS.get(kind)
        if pair is not None:
            ident = a if pair in ID_PAIRS else None
            top = stack[-1] if stack else None
            if top is not None and top[F_PAIR] == pair and top[F_ID] == ident:
                stack.pop()
                close(top, tick, a)
                continue
            # Not the innermost: an end closes the innermost open begin of its
            # kind and id, so whatever is open above that begin lacks its end.
            j = len(stack) - 1
            while j >= 0 and not (stack[j][F_PAIR] == pair and stack[j][F_ID] == ident):
                j -= 1
            what = KIND_NAMES[kind]
            if ident is not None and pair in NAMED_PAIRS:
                what += " " + node.name(NAMED_PAIRS[pair], ident)
            elif pair == "lb":
                what += " phase %d" % ident
            if j < 0:
                if dropped:
                    continue     # its begin was dropped
                if strict:
                    raise TraceError(path, "record %d: %s has no begin (expected a %s_begin before it on "
                                           "this track)" % (idx, what, pair))
                issues.problem(path, "record %d: %s has no begin (expected a %s_begin before it on "
                                     "this track)" % (idx, what, pair))
                continue
            while len(stack) > j + 1:
                inner = stack.pop()
                issues.problem(path, "record %d: %s has no end (still open at record %d, %s; "
                                     "closed there)" % (inner[F_IDX], describe(inner), idx, what))
                close(inner, tick, None)
            close(stack.pop(), tick, a)
            continue
        if kind == DROPPED:
            # Nothing was recorded from the tick it began dropping: what was
            # open then ended unseen, closed there.
            at = min(tick, max(c | (d << 32), last_t))
            while stack:
                frame = stack.pop()
                close(frame, max(at, frame[F_TICK]), None)
            dropped = True
        if kind == COUNTER:
            res.counters[a] = c | (d << 32)
        if v:
            v.point(idx, kind, tick, a, b, c, d, stack)

    if backwards > 1:
        issues.problem(path, "ticks go back %d times in all" % backwards)
    # Open slices at the end: an aborted or killed run stops anywhere, so
    # close them at the track's last tick; in a finished run it is a bug.
    res.open_at_end = [describe(f).replace("_begin", "", 1) for f in stack]
    while stack:
        frame = stack.pop()
        msg = ("record %d: %s has no end (closed at the track's last tick, record %d)"
               % (frame[F_IDX], describe(frame), idx))
        if unfinished:
            issues.warning(path, msg)
        else:
            issues.problem(path, msg)
        close(frame, tick, None)
    return res


# ---------------------------------------------------------------------------
# Per-PE times (summary, check): busy, idle, overhead.

def pe_times(trace, issues, strict=True):
    """Walks every track; per PE track its times in ns, plus name statistics."""
    pes = []
    names = {}                  # (space, name) -> [count, total_ns, self_ns, max_ns]
    opened = trace.open_at_end = {}   # id(track) -> slices open at its last record
    for t in trace.tracks:
        node = t.node
        r = walk(t, issues, None, strict)
        opened[id(t)] = r.open_at_end
        k = node.k
        for (space, ident), (cnt, tot, slf, mx) in r.stats.items():
            key = (space, node.name(space, ident))
            s = names.get(key)
            if s is None:
                names[key] = [cnt, tot * k, slf * k, mx * k]
            else:
                s[0] += cnt
                s[1] += tot * k
                s[2] += slf * k
                s[3] = max(s[3], mx * k)
        if t.kind != "pe":
            continue
        span = (t.last_tick - t.first_tick) * k if t.nrec else 0.0
        busy, idle = r.busy * k, r.idle * k
        counters = {}
        for cid, val in sorted(r.counters.items()):
            counters[node.name("counter", cid)] = val
        pes.append({"pe": t.pe, "node": node.n, "busy_ns": busy, "idle_ns": idle,
                    "overhead_ns": span - busy - idle, "wall_ns": span,
                    "both_ns": r.both * k, "both_at": r.both_at, "counters": counters,
                    "track": t, "records": t.nrec, "slices": r.slices})
    return pes, names


def summary_mode_times(trace):
    """Per PE times and name statistics from the summary files; a name's list
    has a fifth element, its slices that were timed (the others are counted,
    and its total and self are estimated from the timed ones)."""
    pes = []
    names = {}
    for node in trace.nodes:
        for pe in node.summary["pes"]:
            pes.append({"pe": pe["pe"], "node": node.n, "busy_ns": pe["busy_ns"], "idle_ns": pe["idle_ns"],
                        "overhead_ns": pe["wall_ns"] - pe["busy_ns"] - pe["idle_ns"],
                        "wall_ns": pe["wall_ns"], "counters": pe["counters"]})
            for nm in pe["names"]:
                key = (nm["space"], node.name(nm["space"], nm["id"]))
                s = names.get(key)
                if s is None:
                    names[key] = [nm["count"], nm["total_ns"], nm["self_ns"], nm["max_ns"], nm["timed"]]
                else:
                    s[0] += nm["count"]
                    s[1] += nm["total_ns"]
                    s[2] += nm["self_ns"]
                    s[3] = max(s[3], nm["max_ns"])
                    s[4] += nm["timed"]
    return pes, names

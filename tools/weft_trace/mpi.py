"""weft-trace mpi: the MPI calls of each rank, the way mpiP reports them --
per rank and per call its count, time, the time it waited inside and the
bytes it sent or received -- from the mpi_begin / mpi_end / mpi_wait_begin
/ mpi_wait_end records (format version 3, docs/design/trace-format.md).

A rank is a fiber on its PE's thread, so its records are in its PE's file,
interleaved with the other ranks of that PE; each names its rank, and the
calls of one rank nest (an end closes the rank's innermost open call).
`rank_calls` is the one pass the other commands share (summary's MPI
section, the Perfetto tracks of the ranks, check's rules).
"""

import json
import re

from .format import (DROPPED, HEADER_BYTES, MPI_BEGIN, MPI_END, MPI_WAIT_BEGIN, MPI_WAIT_END,
                     RECORD, RECORD_BYTES, TraceError, i32)
from .reader import load_trace, trace_ending

_MPI_KINDS = re.compile(b"[\\x1a-\\x1d\\x20]")   # kinds 26..29, and 32 (dropped)
assert (MPI_BEGIN, MPI_END, MPI_WAIT_BEGIN, MPI_WAIT_END, DROPPED) == (0x1a, 0x1b, 0x1c, 0x1d, 0x20)

NO_PEER = -3      # a call that sends or receives nothing (src/mpi/tracing.cpp)


class Rank:
    def __init__(self, rank, track):
        self.rank = rank
        self.pe = track.pe
        self.node = track.node.n
        self.open = []       # [name, t0_ns, comm, waited_ns, wait_t0_ns or None]
        self.calls = {}      # name -> [count, total_ns, waited_ns, bytes, max_ns]
        self.spans = []      # (name, t0, t1, peer, tag, bytes, comm, waited_ns, depth)
        self.waits = []      # (t0, t1)
        # Its track dropped events (the writer fell behind): the calls open
        # then lost their ends, and ends may come without their begins.
        self.dropped = False

    @property
    def mpi_ns(self):
        """Time inside outermost calls."""
        return sum(s[2] - s[1] for s in self.spans if s[8] == 0)

    @property
    def waited_ns(self):
        return sum(t1 - t0 for t0, t1 in self.waits)


def rank_calls(trace, issues):
    """{world rank: Rank} over every PE track (empty for a trace without MPI)."""
    ranks = {}
    for track in trace.pe_tracks:
        data = track.data
        if not data or track.version < 3:
            continue
        node = track.node
        kinds = data[HEADER_BYTES::RECORD_BYTES]
        for m in _MPI_KINDS.finditer(kinds):
            idx = m.start()
            w, a, b, c, d = RECORD.unpack_from(data, HEADER_BYTES + idx * RECORD_BYTES)
            kind, t = w & 0xFF, node.ns(w >> 8)
            if kind == DROPPED:
                # The ranks of this PE: what was open is lost (not counted).
                for r in ranks.values():
                    if r.node == node.n and r.pe == track.pe:
                        r.open.clear()
                        r.dropped = True
                continue
            r = ranks.get(a)
            if r is None:
                r = ranks[a] = Rank(a, track)
            if kind == MPI_BEGIN:
                r.open.append([node.name("mpi", b), t, c, 0.0, None])
            elif kind == MPI_END:
                if not r.open and r.dropped:
                    continue     # its begin was dropped
                if not r.open:
                    issues.problem(track.path, "record %d: mpi_end of rank %d, which is in no call "
                                               "(expected an mpi_begin of the rank before it)" % (idx, a))
                    continue
                name, t0, comm, waited, w0 = r.open.pop()
                if w0 is not None:
                    issues.problem(track.path, "record %d: rank %d's %s ends while it waits (expected "
                                               "mpi_wait_end first)" % (idx, a, name))
                s = r.calls.setdefault(name, [0, 0.0, 0.0, 0, 0.0])
                s[0] += 1
                s[1] += t - t0
                s[2] += waited
                s[3] += d
                s[4] = max(s[4], t - t0)
                r.spans.append((name, t0, t, i32(b), i32(c), d, comm, waited, len(r.open)))
                if r.open:  # an enclosing call waited as long
                    r.open[-1][3] += waited
            elif kind == MPI_WAIT_BEGIN:
                if not r.open or r.open[-1][4] is not None:
                    issues.problem(track.path, "record %d: mpi_wait_begin of rank %d %s"
                                   % (idx, a, "outside any call" if not r.open else "inside a wait"))
                    continue
                r.open[-1][4] = t
            else:
                if (not r.open or r.open[-1][4] is None) and r.dropped:
                    continue
                if not r.open or r.open[-1][4] is None:
                    issues.problem(track.path, "record %d: mpi_wait_end of rank %d, which does not "
                                               "wait" % (idx, a))
                    continue
                r.open[-1][3] += t - r.open[-1][4]
                r.waits.append((r.open[-1][4], t))
                r.open[-1][4] = None
    for r in ranks.values():
        if r.open and trace.complete:
            issues.problem("rank %d" % r.rank, "%d MPI call(s) without an end in a complete trace: %s"
                           % (len(r.open), ", ".join(o[0] for o in r.open)))
    return ranks


def totals(ranks):
    """name -> [count, total_ns, waited_ns, bytes, max_ns] over every rank."""
    out = {}
    for r in ranks.values():
        for name, s in r.calls.items():
            t = out.setdefault(name, [0, 0.0, 0.0, 0, 0.0])
            for i in range(4):
                t[i] += s[i]
            t[4] = max(t[4], s[4])
    return out


def call_rows(calls):
    return [{"call": name, "count": s[0], "total_ns": s[1], "mean_ns": s[1] / s[0] if s[0] else 0.0,
             "max_ns": s[4], "waited_ns": s[2], "bytes": s[3]}
            for name, s in sorted(calls.items(), key=lambda kv: (-kv[1][1], kv[0]))]


def as_json(ranks):
    return {"ranks": [{"rank": r.rank, "pe": r.pe, "node": r.node, "mpi_ns": r.mpi_ns,
                       "waited_ns": r.waited_ns, "calls": call_rows(r.calls)}
                      for r in sorted(ranks.values(), key=lambda r: r.rank)],
            "calls": call_rows(totals(ranks))}


def call_table(calls, limit=None):
    rows = call_rows(calls)
    shown = rows if limit is None else rows[:limit]
    lines = ["  %-24s %9s %11s %10s %10s %11s %12s"
             % ("call", "count", "total ms", "mean µs", "max µs", "waited ms", "bytes")]
    for row in shown:
        lines.append("  %-24s %9d %11.3f %10.3f %10.3f %11.3f %12d"
                     % (row["call"][:24], row["count"], row["total_ns"] / 1e6, row["mean_ns"] / 1e3,
                        row["max_ns"] / 1e3, row["waited_ns"] / 1e6, row["bytes"]))
    if len(shown) < len(rows):
        lines.append("  (%d more)" % (len(rows) - len(shown)))
    return lines


def cmd_mpi(args, issues):
    trace = load_trace(args.dir, issues)
    if trace.mode != "full":
        raise TraceError(args.dir, "a summary-mode trace has no MPI calls (expected mode \"full\": "
                              "--weft:trace=DIR without --weft:trace-mode=summary)")
    ranks = rank_calls(trace, issues)
    if args.json:
        doc = dict(as_json(ranks), dir=trace.dir, argv=trace.argv, wall_ns=trace.end_ns(),
                   ended_early=trace_ending(trace))
        print(json.dumps(doc, indent=1))
        return 0
    wall = trace.end_ns()
    lines = ["weft trace %s: %s" % (trace.dir, " ".join(trace.argv) or "?")]
    ending = trace_ending(trace)
    if ending:
        lines.append("The run ended early: " + ending)
    if not ranks:
        lines.append("No MPI call in the trace (a program linked by weft-mpicc records its calls; "
                     "format version 3 or later)")
        print("\n".join(lines))
        return 0
    mpi = sum(r.mpi_ns for r in ranks.values())
    waited = sum(r.waited_ns for r in ranks.values())
    lines.append("MPI: %d rank%s, wall %.3f ms; inside MPI calls %.3f ms of the ranks' time, "
                 "%.3f ms of it waiting (suspended, the PE free for others)"
                 % (len(ranks), "" if len(ranks) == 1 else "s", wall / 1e6, mpi / 1e6, waited / 1e6))
    lines.append("")
    lines.append("Per call, all ranks (by total time; waited: suspended inside the call; bytes: "
                 "of point-to-point operations)")
    lines += call_table(totals(ranks))
    lines.append("")
    lines.append("Per rank")
    lines.append("  %6s %5s %4s %9s %11s %11s  %s" % ("rank", "PE", "node", "calls", "in MPI ms", "waited ms",
                                                     "most time in"))
    for r in sorted(ranks.values(), key=lambda r: r.rank):
        top = max(r.calls.items(), key=lambda kv: kv[1][1])[0] if r.calls else "-"
        lines.append("  %6d %5d %4d %9d %11.3f %11.3f  %s"
                     % (r.rank, r.pe, r.node, sum(s[0] for s in r.calls.values()), r.mpi_ns / 1e6,
                        r.waited_ns / 1e6, top))
    if args.calls:
        for r in sorted(ranks.values(), key=lambda r: r.rank):
            lines.append("")
            lines.append("Rank %d (PE %d)" % (r.rank, r.pe))
            lines += call_table(r.calls)
    print("\n".join(lines))
    return 0


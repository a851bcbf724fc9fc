"""weft-trace perfetto: a Chrome/Perfetto trace-event JSON file (one
process per node, one thread per PE and comm thread, and one per MPI rank;
slices, instants, counters and message flow arrows) for
https://ui.perfetto.dev.

The file is written one track at a time, the events of a track complete
once its walk is over, so memory holds one track's events only; they are
encoded by one json.JSONEncoder a chunk of events at a time (one call of
the C encoder per chunk, not per event), into a temporary file renamed over
the output at the end.
"""

import argparse
import json
import os
import sys

from .format import (COUNTER, CPU, HQ_NODE_QUEUE, HQ_REMOTE, MARK, MIGRATE_IN, MIGRATE_OUT, REDUCTION,
                     REDUCTION_STEPS, SEND, SEND_BROADCAST, SEND_REMOTE, SEND_TO_NODE, STEAL,
                     VERSION, TraceError, i32)
from .messages import match_messages
from .mpi import rank_calls
from .output import prepare_output
from .reader import load_trace, node_ending, trace_ending
from .walk import F_A, F_B, F_C, F_D, F_DATA, F_PAIR, F_TICK, Visitor, walk


RANK_TID_BASE = 200000        # tid of MPI rank R: after every PE and comm thread


def rank_events(trace, issues):
    """Each MPI rank as a thread of its node, after the PEs (named with its
    PE): a slice per call (peer, tag, bytes, communicator, time waited) and,
    inside it, a slice per wait."""
    meta, events = [], []
    for r in sorted(rank_calls(trace, issues).values(), key=lambda r: r.rank):
        tid = RANK_TID_BASE + r.rank
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": r.node, "tid": tid,
                     "args": {"name": "rank %d (PE %d)" % (r.rank, r.pe)}})
        meta.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": r.node, "tid": tid,
                     "args": {"sort_index": tid}})
        for name, t0, t1, peer, tag, nbytes, comm, waited, _ in r.spans:
            args = {"rank": r.rank, "communicator": comm, "waited_us": us(waited)}
            if peer != -3:
                args.update(peer=peer, tag=tag, bytes=nbytes)
            events.append({"name": name, "cat": "mpi", "ph": "X", "ts": us(t0), "dur": us(t1 - t0),
                           "pid": r.node, "tid": tid, "args": args})
        for t0, t1 in r.waits:
            events.append({"name": "waiting", "cat": "mpi", "ph": "X", "ts": us(t0), "dur": us(t1 - t0),
                           "pid": r.node, "tid": tid})
    # Sorted by start, the longer first at one time: a call before the wait
    # it holds.
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    return meta, events


def us(ns):
    """Trace-event time: microseconds, kept to the nanosecond."""
    return round(ns / 1000.0, 3)


class PerfettoVisitor(Visitor):
    """Builds a track's trace events in record order (so sorted by time)."""

    def __init__(self, track, flows):
        self.t = track
        self.node = track.node
        self.pid = track.node.n
        self.tid = track.tid
        self.flows = flows.get(id(track), {})   # record index -> [flow events]
        self.events = []

    def _ev(self, name, cat, ph, tick, args=None):
        ev = {"name": name, "cat": cat, "ph": ph, "ts": us(self.node.ns(tick)),
              "pid": self.pid, "tid": self.tid}
        if args:
            ev["args"] = args
        return ev

    def _flows(self, idx, tick):
        for fl in self.flows.get(idx, ()):
            fl["ts"] = us(self.node.ns(tick))
            fl["pid"] = self.pid
            fl["tid"] = self.tid
            self.events.append(fl)

    def begin(self, idx, frame):
        pair, node = frame[F_PAIR], self.node
        a, b, c, d = frame[F_A], frame[F_B], frame[F_C], frame[F_D]
        tick = frame[F_TICK]
        if pair == "handler":
            args = {"handler_id": a, "source_pe": i32(b), "bytes": c, "seq": d & 0xFF}
            if d & HQ_NODE_QUEUE:
                args["node_queue"] = True
            if d & HQ_REMOTE:
                args["from_other_node"] = True
            ev = self._ev(node.name("handler", a), "handler", "X", tick, args)
        elif pair == "entry":
            ev = self._ev(node.name("entry", a), "entry", "X", tick,
                          {"collection": node.name("collection", b), "index": c})
        elif pair == "task":
            ev = self._ev("task", "task", "X", tick,
                          {"owner_pe": i32(a), "first": b, "iterations": c, "stolen": bool(d)})
        elif pair == "region":
            ev = self._ev(node.name("user", a), "region", "X", tick)
        elif pair == "ult":
            ev = self._ev(node.name("user", a), "ult", "X", tick, {"pe": c})
        elif pair == "idle":
            ev = self._ev("idle", "idle", "X", tick)
        elif pair == "progress":
            ev = self._ev("progress", "progress", "X", tick)
        elif pair == "flush":
            ev = self._ev("trace flush", "trace", "X", tick)
        else:
            ev = self._ev("lb phase %d" % a, "lb", "X", tick, {"phase": a})
        self.events.append(ev)
        self._flows(idx, tick)
        return ev

    def end(self, frame, tick, end_a, stack):
        ev = frame[F_DATA]
        b = self.node.ns(frame[F_TICK])
        e = self.node.ns(tick)
        ev["dur"] = round(us(e) - us(b), 3)
        pair = frame[F_PAIR]
        if end_a is not None:
            if pair == "progress":
                ev["args"] = {"moved": end_a}
            elif pair == "flush":
                ev["args"] = {"records": end_a}
        if pair == "entry":
            # The message that ran the entry: its enclosing handler_begin.
            for f in reversed(stack):
                if f[F_PAIR] == "handler":
                    ev["args"]["source_pe"] = i32(f[F_B])
                    ev["args"]["bytes"] = f[F_C]
                    break

    def point(self, idx, kind, tick, a, b, c, d, stack):
        node = self.node
        if kind == SEND:
            self._flows(idx, tick)
            return
        if kind == COUNTER:
            name = node.name("counter", a)
            ev = self._ev("PE %d %s" % (self.t.pe, name) if self.t.kind == "pe" else "comm %s" % name,
                          "counter", "C", tick, {"value": c | (d << 32)})
            self.events.append(ev)
            return
        if kind == CPU:
            # A counter track per thread: its CPU over time, a step at each move.
            ev = self._ev("PE %d cpu" % self.t.pe if self.t.kind == "pe" else "comm cpu",
                          "cpu", "C", tick, {"cpu": a})
            self.events.append(ev)
            return
        if kind == MARK:
            ev = self._ev(node.name("user", a), "mark", "i", tick)
        elif kind == STEAL:
            ev = self._ev("steal", "task", "i", tick, {"victim_pe": i32(a), "tasks": b})
        elif kind == REDUCTION:
            ev = self._ev("reduction", "reduction", "i", tick,
                          {"collection": node.name("collection", a),
                           "step": REDUCTION_STEPS.get(b, "step %d" % b), "round": c})
        elif kind == MIGRATE_OUT:
            ev = self._ev("migrate out", "migration", "i", tick,
                          {"collection": node.name("collection", a), "to_pe": i32(b), "index": c})
        elif kind == MIGRATE_IN:
            ev = self._ev("migrate in", "migration", "i", tick,
                          {"collection": node.name("collection", a), "from_pe": i32(b), "index": c})
        else:
            return
        ev["s"] = "t"
        self.events.append(ev)


def parse_flows(text):
    if text == "all":
        return 1
    if text == "none":
        return 0
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError("%r (expected all, none or a number >= 1)" % text)
    return n


def trace_strings(trace):
    """Every free text that can appear in an event: names, hosts, argv."""
    for node in trace.nodes:
        yield node.host
        yield from node.argv
        yield node.end_message or ""
        for table in node.names.values():
            if isinstance(table, dict):
                for v in table.values():
                    if isinstance(v, str):
                        yield v


def cmd_perfetto(args, issues):
    out = prepare_output(args.output)
    trace = load_trace(args.dir, issues)
    if trace.mode != "full":
        raise TraceError(args.dir, "a summary-mode trace has no events (expected mode \"full\" for perfetto)")
    flows = {}          # id(track) -> record index -> [flow events]
    nflows = 0
    matched, unmatched = match_messages(trace) if args.flows else ([], 0)
    for n, (snd, rcv) in enumerate(matched):
        if n % args.flows:
            continue
        st, si, _, nbytes, d = snd
        rt, ri, _ = rcv
        fid = nflows
        nflows += 1
        args_ = {"from_pe": st.pe, "to_pe": rt.pe, "bytes": nbytes, "seq": d & 0xFF}
        if d & SEND_TO_NODE:
            args_["node_queue"] = True
        if d & SEND_BROADCAST:
            args_["broadcast"] = True
        if d & SEND_REMOTE:
            args_["to_other_node"] = True
        flows.setdefault(id(st), {}).setdefault(si, []).append(
            {"name": "message", "cat": "message", "ph": "s", "id": fid, "args": args_})
        flows.setdefault(id(rt), {}).setdefault(ri, []).append(
            {"name": "message", "cat": "message", "ph": "f", "bp": "e", "id": fid, "args": args_})

    other = {"tool": "weft-trace", "trace_dir": os.path.abspath(trace.dir), "format_version": VERSION,
             "argv": trace.argv, "nodes": len(trace.nodes), "total_pes": trace.total_pes,
             "complete": trace.complete, "ended_early": trace_ending(trace),
             "messages_matched": len(matched),
             "receives_without_send": unmatched, "flows": nflows}
    # One encoder for the whole file, fed a list at a time: the C encoder
    # then runs once per chunk instead of once per event.
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    # An event a line, by splitting the chunk at "},{" -- only safe when no
    # string of the trace (names, host) contains that sequence itself.
    split_chunks = not any("},{" in text for text in trace_strings(trace))
    tmp = out + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write('{"traceEvents":[\n')
            first = True

            def emit(events, chunk=20000):
                nonlocal first
                for i in range(0, len(events), chunk):
                    if split_chunks:
                        text = encoder.encode(events[i:i + chunk])[1:-1].replace("},{", "},\n{")
                    else:
                        text = ",\n".join(map(encoder.encode, events[i:i + chunk]))
                    if text:
                        f.write(text if first else ",\n" + text)
                        first = False
            meta = []
            for node in trace.nodes:
                meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": node.n, "tid": 0,
                             "args": {"name": "node %d (%s)" % (node.n, node.host)}})
                meta.append({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": node.n, "tid": 0,
                             "args": {"sort_index": node.n}})
                for t in node.tracks:
                    meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": node.n, "tid": t.tid,
                                 "args": {"name": t.label}})
                    meta.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": node.n,
                                 "tid": t.tid, "args": {"sort_index": t.tid}})
            rank_meta, rank_slices = rank_events(trace, issues)
            emit(meta + rank_meta)
            emit(rank_slices)
            # One track at a time: its events are complete (every dur known)
            # once its walk is over, and memory holds one track only.
            ends = {}
            for t in trace.tracks:
                v = PerfettoVisitor(t, flows)
                r = walk(t, issues, v, strict=True)
                how = node_ending(t.node)
                if how is not None and t.nrec:
                    # Where this track stopped, and what it was inside then.
                    ev = v._ev("run ended early", "end", "i", t.last_tick,
                               {"how": how, "end_record": t.end[0] if t.end else None,
                                "open": r.open_at_end})
                    ev["s"] = "t"
                    v.events.append(ev)
                    ends[t.node.n] = max(ends.get(t.node.n, 0), t.last_tick)
                emit(v.events)
            for node in trace.nodes:
                if node.n in ends:
                    tick = max(ends[node.n], node.end_tick or 0)
                    emit([{"name": "the run ended early: " + node_ending(node), "cat": "end", "ph": "i",
                           "s": "g", "ts": us(node.ns(tick)), "pid": node.n, "tid": 0}])
            f.write('\n],\n"displayTimeUnit":"ns",\n"otherData":%s}\n' % encoder.encode(other))
        os.replace(tmp, out)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TraceError(out, "cannot write: %s" % (e.strerror or e))
    print("weft-trace: wrote %s: %d tracks, %d flow arrows (%d messages matched)"
          % (out, len(trace.tracks), nflows, len(matched)), file=sys.stderr)
    return 0

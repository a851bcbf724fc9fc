"""weft-trace summary: a text report (or one JSON object) of time per name,
per PE busy / idle / overhead, and the imbalance. It reads both modes: a
full trace through the walk (walk.pe_times), a summary-mode trace from its
summary files (walk.summary_mode_times); the report is the same.
"""

import json

from .format import HEADER_BYTES, RECORD_BYTES, SEND
from .mpi import as_json, call_table, rank_calls, totals
from .reader import end_where, load_trace, node_ending, trace_ending
from .walk import pe_times, summary_mode_times


def sampled_sends(trace):
    """A sampled trace's send records: (recorded, about how many were sent)."""
    kind = bytes([SEND])
    recorded = sum(t.data[HEADER_BYTES::RECORD_BYTES].count(kind) for t in trace.tracks)
    return recorded, recorded * trace.sample


def sample_note(trace):
    """What a sampled trace's rows count (--weft:trace-sample), for the report."""
    recorded, sent = sampled_sends(trace)
    n = trace.sample
    def nth(k):
        suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
        return "%d%s" % (k, suffix)
    return ["Sampled trace (--weft:trace-sample=%d): 1 message in %d has its send and handler "
            "records, so the handler rows (counts and times) cover those messages only; every "
            "entry method call is recorded, and entry rows count them all." % (n, n),
            "  messages: %d sends recorded, about %d sent (each thread keeps its 1st, %s, "
            "%s, ... send)" % (recorded, sent, nth(n + 1), nth(2 * n + 1))]


def cmd_summary(args, issues):
    trace = load_trace(args.dir, issues)
    ranks = {}
    if trace.mode == "full":
        pes, names = pe_times(trace, issues)
        ranks = rank_calls(trace, issues)
    else:
        pes, names = summary_mode_times(trace)
    pes.sort(key=lambda p: p["pe"])
    rows = sorted(names.items(), key=lambda kv: (-kv[1][1], kv[0]))
    busy = [p["busy_ns"] for p in pes]
    mean_busy = sum(busy) / len(busy) if busy else 0.0
    imbalance = max(busy) / mean_busy if mean_busy > 0 else None
    by_busy = sorted(pes, key=lambda p: (-p["busy_ns"], p["pe"]))
    least = sorted(pes, key=lambda p: (p["busy_ns"], p["pe"]))
    wall = max((n.wall_ns for n in trace.nodes if n.wall_ns is not None), default=None)
    job_ns = trace.end_ns()
    ending = trace_ending(trace)
    dropped = [t for t in trace.tracks if t.dropped]
    total_dropped = sum(t.dropped for t in dropped)

    if args.json:
        out = {
            "dir": trace.dir, "mode": trace.mode, "sample": trace.sample, "argv": trace.argv,
            "nodes": len(trace.nodes), "total_pes": trace.total_pes,
            "complete": trace.complete,
            "aborted": any(n.aborted for n in trace.nodes),
            "ended_early": ending,
            "end": [{"node": n.n, "how": n.end_how or ("killed" if n.unfinished else "exit"),
                     "text": node_ending(n), "message": n.end_message,
                     "tracks": [{"file": t.file, "pe": t.pe, "records": t.nrec,
                                 "last_ns": t.node.ns(t.last_tick) if t.nrec else None,
                                 "end_record": t.end[0] if t.end else None,
                                 "open": trace.open_at_end.get(id(t), []),
                                 "dropped": t.dropped}
                                for t in n.tracks]}
                    for n in trace.nodes],
            "dropped": total_dropped,
            "wall_ns": job_ns,
            "node_wall_ns": {str(n.n): n.wall_ns for n in trace.nodes},
            "pes": [{"pe": p["pe"], "node": p["node"], "busy_ns": p["busy_ns"], "idle_ns": p["idle_ns"],
                     "overhead_ns": p["overhead_ns"], "wall_ns": p["wall_ns"], "counters": p["counters"]}
                    for p in pes],
            "names": [{"space": sp, "name": nm, "count": s[0], "total_ns": s[1], "self_ns": s[2],
                       "max_ns": s[3], "mean_ns": s[1] / s[0] if s[0] else 0.0,
                       "timed": s[4] if len(s) > 4 else s[0]}
                      for (sp, nm), s in rows],
            "imbalance": {"max_over_mean_busy": imbalance, "mean_busy_ns": mean_busy,
                          "busiest": [p["pe"] for p in by_busy[:3]],
                          "least_busy": [p["pe"] for p in least[:3]]},
        }
        if ranks:
            out["mpi"] = as_json(ranks)
        if trace.sample > 1:
            recorded, sent = sampled_sends(trace)
            out["sampled_messages"] = {"sends_recorded": recorded, "sent_about": sent,
                                       "handler_rows": "sampled messages only"}
        print(json.dumps(out, indent=1))
        return 0

    ms = lambda ns: ns / 1e6
    lines = []
    status = "complete" if trace.complete else (
        "ABORTED" if any(n.aborted for n in trace.nodes) else "INCOMPLETE")
    lines.append("weft trace %s: %s" % (trace.dir, " ".join(trace.argv) or "?"))
    lines.append("mode %s, %d node%s, %d PEs, %s, wall %.3f ms (node wall %s)"
                 % (trace.mode, len(trace.nodes), "" if len(trace.nodes) == 1 else "s",
                    trace.total_pes, status, ms(job_ns),
                    "%.3f ms" % ms(wall) if wall is not None else "unknown"))
    if ending:
        lines.append("The run ended early: " + ending)
        for w in end_where(trace, trace.open_at_end):
            lines.append("  " + w)
    if trace.sample > 1:
        lines += sample_note(trace)
    estimated = [nm for (_, nm), s in rows if len(s) > 4 and s[4] < s[0]]
    if estimated:
        every = max(pe.get("time_every", 1) for n in trace.nodes for pe in n.summary["pes"])
        lines.append("Summary mode sampled %d of %d names (of a name with slices under 8 µs, "
                     "the first 16 slices and then 1 in up to %d, --weft:trace-time-every, are "
                     "timed); their rows, marked ~, have exact counts and totals estimated from "
                     "the timed slices (max: the longest timed); busy time is estimated likewise"
                     % (len(estimated), len(rows), every))
    if dropped:
        lines.append("%d event%s dropped: the writer fell behind; a larger --weft:trace-buffer or "
                     "--weft:trace-pool, or fewer events (summary mode, fewer marks), keeps them"
                     % (total_dropped, "" if total_dropped == 1 else "s"))
        for t in dropped:
            where = t.label if t.kind == "pe" else "comm thread of node %d" % t.node.n
            lines.append("  %s: %d dropped" % (where, t.dropped))
    lines.append("")
    shown = rows if args.all else rows[:30]
    lines.append("Time per name (%s of %d, by total)%s"
                 % ("all" if len(shown) == len(rows) else "top %d" % len(shown), len(rows),
                    "" if len(shown) == len(rows) else "; --all for every row"))
    if rows:
        width = max(24, min(60, max(len(nm) for (_, nm), _ in shown)))
        lines.append("  %-8s %-*s %9s %11s %11s %11s %11s"
                     % ("space", width, "name", "count", "total ms", "self ms", "mean µs", "max µs"))
        for (sp, nm), s in shown:
            cnt, tot, slf, mx = s[:4]
            mark = "~" if len(s) > 4 and s[4] < cnt else " "
            lines.append("  %-8s %-*s %9d %s%10.3f %s%10.3f %s%10.3f %11.3f"
                         % (sp, width, nm[:width], cnt, mark, ms(tot), mark, ms(slf), mark,
                            tot / cnt / 1e3 if cnt else 0.0, mx / 1e3))
    else:
        lines.append("  (no handler, entry, task or region)")
    lines.append("")
    lines.append("Per PE (busy: outermost handler, %stask or region; idle: idle periods; "
                 "overhead: the rest of the PE's time)" % ("entry, " if trace.sample > 1 else ""))
    lines.append("  %5s %4s %11s %6s %11s %6s %11s %6s %11s"
                 % ("PE", "node", "busy ms", "%", "idle ms", "%", "overhead ms", "%", "wall ms"))

    def pct(x, w):
        return 100.0 * x / w if w > 0 else 0.0
    for p in pes:
        w = p["wall_ns"]
        lines.append("  %5d %4d %11.3f %6.1f %11.3f %6.1f %11.3f %6.1f %11.3f"
                     % (p["pe"], p["node"], ms(p["busy_ns"]), pct(p["busy_ns"], w), ms(p["idle_ns"]),
                        pct(p["idle_ns"], w), ms(p["overhead_ns"]), pct(p["overhead_ns"], w), ms(w)))
    if pes:
        tw = sum(p["wall_ns"] for p in pes)
        tb, ti, to = (sum(p[k] for p in pes) for k in ("busy_ns", "idle_ns", "overhead_ns"))
        lines.append("  %5s %4s %11.3f %6.1f %11.3f %6.1f %11.3f %6.1f %11.3f"
                     % ("all", "", ms(tb), pct(tb, tw), ms(ti), pct(ti, tw), ms(to), pct(to, tw), ms(tw)))
    lines.append("")
    if imbalance is not None:
        lines.append("Imbalance: max busy / mean busy = %.3f (mean busy %.3f ms)" % (imbalance, ms(mean_busy)))
        lines.append("  busiest:    " + ", ".join("PE %d (%.3f ms)" % (p["pe"], ms(p["busy_ns"])) for p in by_busy[:3]))
        lines.append("  least busy: " + ", ".join("PE %d (%.3f ms)" % (p["pe"], ms(p["busy_ns"])) for p in least[:3]))
    else:
        lines.append("Imbalance: no busy time on any PE")
    if ranks:
        lines.append("")
        lines.append("MPI calls of %d rank%s (all ranks; waited: suspended inside the call; "
                     "`weft-trace mpi` for each rank)" % (len(ranks), "" if len(ranks) == 1 else "s"))
        lines += call_table(totals(ranks), None if args.all else 15)
    counters = [p for p in pes if p["counters"]]
    if counters:
        lines.append("")
        lines.append("Counters (per PE, since its start)")
        for p in counters:
            lines.append("  PE %d: " % p["pe"] + ", ".join("%s %d" % kv for kv in p["counters"].items()))
    print("\n".join(lines))
    return 0

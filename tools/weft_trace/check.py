"""weft-trace check: validates a trace against the spec and lists every
problem (exit 1) and warning, with what was checked. The rules of the
records themselves (framing, kinds, ticks, pairing and nesting) are the
loader's and the walk's, run here with an Issues that collects instead of
printing and with strict=False, so that one broken record does not hide
the rest; this module adds the rules across records: each PE's busy + idle
+ overhead against the node's wall time, and the summary files' sums.
"""

from .messages import match_messages
from .mpi import rank_calls
from .reader import Issues, end_where, load_trace, trace_ending
from .walk import pe_times


COVERAGE_TOLERANCE = 0.01     # check: busy + idle + overhead vs node wall


def cmd_check(args, _issues):
    issues = Issues(checking=True)
    trace = load_trace(args.dir, issues)
    print("weft-trace check %s" % trace.dir)
    for node in trace.nodes:
        print("node %d (%s): mode %s, PEs %d..%d of %d, %s, wall %s"
              % (node.n, node.host, node.mode, node.first_pe, node.first_pe + node.pes - 1,
                 node.total_pes,
                 "aborted" if node.aborted else ("complete" if node.complete else "incomplete"),
                 "%.3f ms" % (node.wall_ns / 1e6) if node.wall_ns is not None else "unknown"))
    checked = ["metadata: format, version, node numbers, PE ranges, tracks listed and present"]
    if trace.mode == "full":
        check_full(trace, issues, checked)
    else:
        check_summary(trace, issues, checked)
    ending = trace_ending(trace)
    if ending:
        print("the run ended early: " + ending)
        for w in end_where(trace, trace.open_at_end):
            print("  " + w)
    print("checked:")
    for c in checked:
        print("  - " + c)
    if issues.warnings:
        print("warnings (%d):" % len(issues.warnings))
        for w in issues.warnings:
            print("  " + w)
    if issues.problems:
        print("problems (%d):" % len(issues.problems))
        for p in issues.problems:
            print("  " + p)
        print("result: FAILED (%d problem%s)" % (len(issues.problems), "" if len(issues.problems) == 1 else "s"))
        return 1
    print("result: OK" + (" (with %d warnings)" % len(issues.warnings) if issues.warnings else ""))
    return 0


def check_full(trace, issues, checked):
    pes, _ = pe_times(trace, issues, strict=False)
    nrec = sum(t.nrec for t in trace.tracks)
    checked.append("%d track headers (%d PE, %d comm): magic, version, record size, node, PE and kind "
                   "against file name and metadata" % (len(trace.tracks), len(trace.pe_tracks),
                                                       len(trace.tracks) - len(trace.pe_tracks)))
    checked.append("%d records: known kinds, ticks non-decreasing per file, every begin with its end, "
                   "properly nested per track (entries inside handlers, no handler inside idle)" % nrec)
    ranks = rank_calls(trace, issues)
    if ranks:
        checked.append("MPI calls of %d ranks: each rank's calls nest (an mpi_end closes the rank's "
                       "innermost call), its waits lie inside its calls, every call ends in a complete "
                       "trace" % len(ranks))
    for t in trace.tracks:
        print("%s: %s, %d records" % (t.file, t.label if t.kind == "pe" else "comm thread of node %d" % t.node.n,
                                       t.nrec))
    for p in pes:
        t = p["track"]
        node = t.node
        wall = node.wall_ns
        where = t.path
        sum_ns = p["busy_ns"] + p["idle_ns"] + p["overhead_ns"]
        line = ("PE %d: busy %.3f + idle %.3f + overhead %.3f = %.3f ms"
                % (p["pe"], p["busy_ns"] / 1e6, p["idle_ns"] / 1e6, p["overhead_ns"] / 1e6, sum_ns / 1e6))
        incomplete = node.aborted or not node.complete
        report = issues.warning if incomplete else issues.problem
        if wall is None:
            print(line + "; node wall unknown")
            issues.warning(where, "PE %d: the node's end is unknown, so its time is not checked "
                                  "against the wall time" % p["pe"])
            continue
        print(line + " of node wall %.3f ms (%.1f%%)" % (wall / 1e6, 100.0 * sum_ns / wall if wall else 0.0))
        if p["records"] == 0:
            report(where, "PE %d: no records (expected its time from start to end)" % p["pe"])
            continue
        if abs(sum_ns - wall) > COVERAGE_TOLERANCE * wall:
            first = t.node.ns(t.first_tick) - node.off_ns
            last = t.node.ns(t.last_tick) - node.off_ns
            report(where, "PE %d: busy + idle + overhead = %.3f ms, %.1f%% of the node's wall time %.3f ms "
                          "(records from %.3f to %.3f ms; expected them to cover the run within %g%%)"
                   % (p["pe"], sum_ns / 1e6, 100.0 * sum_ns / wall if wall else 0.0, wall / 1e6,
                      first / 1e6, last / 1e6, COVERAGE_TOLERANCE * 100))
        if p["overhead_ns"] < -1.0:
            why = ""
            if p["both_ns"] > 0:
                why = ("; %.3f ms counted both busy and idle, first at record %d (an idle period "
                       "inside a handler, task or region)" % (p["both_ns"] / 1e6, p["both_at"]))
            report(where, "PE %d: overhead %.3f ms is negative (busy %.3f + idle %.3f ms exceed the PE's "
                          "span %.3f ms%s; expected overhead >= 0)"
                   % (p["pe"], p["overhead_ns"] / 1e6, p["busy_ns"] / 1e6, p["idle_ns"] / 1e6,
                      p["wall_ns"] / 1e6, why))
    checked.append("per PE: busy + idle + overhead = the node's wall time (mono_ns_end - mono_ns_base) "
                   "within %g%%, overhead >= 0" % (COVERAGE_TOLERANCE * 100))
    check_cpu_records(trace, issues, checked)
    matched, unmatched = match_messages(trace)
    checked.append("messages: %d receives matched to their sends (by source PE and seq)" % len(matched))
    if unmatched:
        issues.warning(trace.dir, "%d handler_begin record%s from a PE with no matching send (source PE, "
                                  "seq, destination)" % (unmatched, "" if unmatched == 1 else "s"))


def check_cpu_records(trace, issues, checked):
    """Version 3: a track's cpu records begin at its start and each names
    another CPU than the one before; a CPU outside the track's CPU set is a
    thread rebound while it ran (said, not a problem)."""
    tracks = [t for t in trace.tracks if t.version >= 3 and t.nrec]
    if not tracks:
        return
    for t in tracks:
        samples = t.cpu_samples()
        report = issues.warning if t.node.unfinished else issues.problem
        if not samples:
            # The runtime writes none where sched_getcpu fails (a system
            # without getcpu): not a broken trace, but worth saying.
            issues.warning(t.path, "no cpu record (the thread's CPU number was not available; "
                                   "migrations has nothing to show for it)")
            continue
        if samples[0][1] != t.first_tick:
            report(t.path, "record %d: the first cpu record is at tick %d, after the track's first record "
                           "at tick %d (expected one at the start)" % (samples[0][0], samples[0][1], t.first_tick))
        for (_, _, prev), (idx, _, cpu) in zip(samples, samples[1:]):
            if cpu == prev:
                report(t.path, "record %d: a cpu record naming CPU %d, as the one before it (expected one "
                               "only when the CPU changed)" % (idx, cpu))
                break
        if t.cpus is not None:
            outside = sorted({cpu for _, _, cpu in samples if cpu not in t.cpus})
            if outside:
                issues.warning(t.path, "ran on CPU%s %s, outside the CPU set it began with (the thread "
                                       "was rebound)" % ("s" if len(outside) > 1 else "",
                                                         ", ".join(map(str, outside))))
    checked.append("cpu records of %d tracks: one at each track's start, each naming another CPU than the "
                   "one before" % len(tracks))


def check_summary(trace, issues, checked):
    for node in trace.nodes:
        s = node.summary
        path = s["path"]
        seen = set()
        incomplete = node.aborted or not node.complete
        for pe in s["pes"]:
            p = pe["pe"]
            if not node.first_pe <= p < node.first_pe + node.pes:
                issues.problem(path, "PE %d is not a PE of node %d (expected %d..%d)"
                               % (p, node.n, node.first_pe, node.first_pe + node.pes - 1))
            if p in seen:
                issues.problem(path, "PE %d listed twice" % p)
            seen.add(p)
            over = pe["wall_ns"] - pe["busy_ns"] - pe["idle_ns"]
            print("PE %d: busy %.3f + idle %.3f + overhead %.3f = wall %.3f ms"
                  % (p, pe["busy_ns"] / 1e6, pe["idle_ns"] / 1e6, over / 1e6, pe["wall_ns"] / 1e6))
            if over < -1.0:
                issues.problem(path, "PE %d: busy + idle exceed wall_ns by %.3f ms (expected overhead >= 0)"
                               % (p, -over / 1e6))
            if node.wall_ns is not None and abs(pe["wall_ns"] - node.wall_ns) > COVERAGE_TOLERANCE * node.wall_ns:
                (issues.warning if incomplete else issues.problem)(
                    path, "PE %d: wall_ns %.3f ms but the node's wall time is %.3f ms (expected within %g%%)"
                    % (p, pe["wall_ns"] / 1e6, node.wall_ns / 1e6, COVERAGE_TOLERANCE * 100))
            for col, key in ((0, "busy_ns"), (1, "idle_ns")):
                total = sum(b[col] for b in pe["bins"])
                if pe["bins"] and abs(total - pe[key]) > max(1.0, COVERAGE_TOLERANCE * pe[key]):
                    issues.problem(path, "PE %d: the bins' %s add up to %.3f ms, %s is %.3f ms "
                                         "(expected the same within %g%%)"
                                   % (p, key[:-3], total / 1e6, key, pe[key] / 1e6, COVERAGE_TOLERANCE * 100))
        for p in range(node.first_pe, node.first_pe + node.pes):
            if p not in seen:
                issues.problem(path, "PE %d missing (expected one entry per PE of the node)" % p)
    checked.append("summary files: format, version, node, one entry per PE, busy + idle <= wall, wall = node "
                   "wall within %g%%, bins add up to busy and idle" % (COVERAGE_TOLERANCE * 100))

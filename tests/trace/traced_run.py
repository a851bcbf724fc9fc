#!/usr/bin/python3
"""A traced run of a real program, read back by tools/weft-trace.

    traced_run.py --tool TOOL --case CASE -- COMMAND...

Runs COMMAND (a weft program, maybe under mpirun) with --weft:trace=DIR
appended (or, with --trace-env, WEFT_TRACE=DIR in its environment: a plain
OpenMP program on libweft-omp reads no --weft: arguments), then checks what
the case asks for. Cases:

  full       the run succeeds; `weft-trace check` passes (every begin has its
             end, per-PE busy + idle + overhead = the node's wall time within
             1%); the Perfetto JSON parses, every event has its fields,
             timestamps are monotonic per track and slices nest; it has entry
             slices, flow arrows, idle slices, and (with tasks) task slices;
             summary, profile and timeline work (PNG files written).
  summary    --weft:trace-mode=summary: summary and profile work from the
             summary file; no event files are written.
  abort      the program ends with a fatal error: exit code 3, the metadata
             says aborted, the tools read what was written without a
             traceback.
  truncated  a full run whose PE file is then cut mid-record: every tool
             command gives one clear error line naming the file, exit 2.
  timeout    COMMAND hangs (trace_program ... hang) and --weft:timeout ends
             it: exit 124; the metadata lists every track and says aborted,
             end.how "timeout"; every record the PEs made is in the files
             (all the marks the hanging PE recorded), each file ends with its
             end record; the tools read it and say "timed out" and where
             each PE was (the hanging PE inside its entry method).
  sigterm    COMMAND hangs and gets SIGTERM once it says it hangs: it dies of
             the signal; everything recorded is written, end records and
             metadata say SIGTERM, the tools say so.
  sigkill    the same with SIGKILL, which no handler sees: the metadata
             (written once every PE had begun) lists every track, the files
             keep what was flushed (at least one full buffer of marks); a
             record cut off at the end of a file is left out with a warning;
             the tools say "killed (no end record)" and each PE's last
             record.
  utf8       the program gets arguments that are not UTF-8 (0xff, a cut
             sequence, a surrogate, an overlong form): the run succeeds,
             nodeN.json is valid UTF-8 JSON with U+FFFD for the bad bytes,
             and so are the tools' JSON outputs.
  cpus       (COMMAND with --weft:bind=none) every PE track begins with a
             cpu record and its CPU set in the metadata is the whole of the
             process's; every sample is in it; `weft-trace migrations`
             writes a PNG and counts, per PE, the changes of CPU its records
             hold, never more than the kernel's cpu-migrations counter (where
             it is opened); check passes.
  cpus-bound (COMMAND with a binding, e.g. --weft:bind=compact) the same,
             and each PE's CPU set is one CPU, all its samples name it, and
             no migration is counted, by the samples or by the kernel.
  dropped    (COMMAND trace_program STEPS marks --weft:trace-buffer=1) a
             writer thread made slow (WEFT_TRACE_TEST_SLOW_WRITER) with two
             buffers per track (--weft:trace-pool, as WEFT_TRACE_POOL) falls behind the bursts of
             marks: the run succeeds, the PEs' files hold dropped records,
             `summary` says how many events were dropped, in all and per
             PE, and its JSON agrees with the files; the marks in the files
             and the dropped events are at least the marks the program made
             (the dropped count also has the other events lost); `check`
             passes.
Exit 0 when everything held; otherwise each failure on its own line, exit 1.
"""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what, flush=True)


def run(cmd, env=None, expect=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    if expect is not None and p.returncode != expect:
        fail("%s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s"
             % (" ".join(cmd), p.returncode, expect, p.stdout[-4000:], p.stderr[-4000:]))
    if "Traceback" in p.stderr:
        fail("%s printed a Python traceback:\n%s" % (" ".join(cmd), p.stderr[-4000:]))
    return p


def check_perfetto(path, want_tasks, want_flows, want_idle, want_comm=False,
                   want_name="Worker::step"):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s does not parse as JSON: %s" % (path, e))
        return
    events = doc.get("traceEvents")
    if not isinstance(events, list) or not events:
        fail("%s: no traceEvents list" % path)
        return
    tracks = {}
    names = set()
    phases = {}
    for i, e in enumerate(events):
        for field in ("name", "ph", "pid", "tid"):
            if field not in e:
                fail("%s: event %d has no %r: %r" % (path, i, field, e))
                return
        ph = e["ph"]
        phases[ph] = phases.get(ph, 0) + 1
        if ph == "M":
            continue
        if "ts" not in e:
            fail("%s: event %d (%s) has no ts" % (path, i, ph))
            return
        if ph == "X":
            if "dur" not in e or e["dur"] < 0:
                fail("%s: slice %d has no or a negative dur: %r" % (path, i, e))
                return
            names.add(e["name"])
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, evs in tracks.items():
        last = None
        stack = []
        for e in evs:
            if last is not None and e["ts"] < last:
                fail("%s: track %r: ts goes back from %r to %r" % (path, key, last, e["ts"]))
                break
            last = e["ts"]
            if e["ph"] != "X":
                continue
            end = e["ts"] + e["dur"]
            while stack and stack[-1] <= e["ts"] + 1e-6:
                stack.pop()
            # Rounding to microsecond floats: allow a nanosecond of slack.
            if stack and end > stack[-1] + 1e-3:
                fail("%s: track %r: slice %r at %r overlaps its parent" % (path, key, e["name"],
                                                                         e["ts"]))
                break
            stack.append(end)
    if want_idle and "idle" not in names:
        fail("%s: no idle slice" % path)
    if not any(want_name in n for n in names):
        fail("%s: no slice named %s (names: %s)" % (path, want_name, sorted(names)[:20]))
    if want_tasks and "task" not in names:
        fail("%s: no task slice (idle PEs should have stolen loop chunks)" % path)
    if want_comm:
        comm = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"
                and "comm" in str(e.get("args", {}).get("name", ""))]
        if not comm:
            fail("%s: no comm thread track" % path)
        if "progress" not in names:
            fail("%s: no progress slice (the comm thread moved messages)" % path)
    if want_flows and not (phases.get("s") and phases.get("f")):
        fail("%s: no flow arrows (phases: %r)" % (path, phases))
    if phases.get("s", 0) != phases.get("f", 0):
        fail("%s: %d flow starts but %d flow ends" % (path, phases.get("s", 0), phases.get("f", 0)))


def check_png(path):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        fail("%s not written: %s" % (path, e))
        return
    if head != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG file" % path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--case", required=True,
                    choices=["full", "summary", "abort", "truncated", "timeout", "sigterm", "sigkill",
                             "utf8", "cpus", "cpus-bound", "mpi", "dropped"])
    ap.add_argument("--no-tasks", action="store_true", help="the run has no loop chunks to steal")
    ap.add_argument("--no-idle", action="store_true", help="the run's PEs never wait")
    ap.add_argument("--expect-name", default="Worker::step",
                    help="a slice name the trace must have (default: Worker::step)")
    ap.add_argument("--trace-env", action="store_true",
                    help="ask for the trace through WEFT_TRACE, not --weft:trace")
    ap.add_argument("--comm", action="store_true",
                    help="the nodes have a comm thread: its track and progress slices must show")
    ap.add_argument("--ranks", type=int, default=4, help="mpi: the ranks of the run (tests/mpi/ring.c)")
    ap.add_argument("--keep", help="leave the trace and outputs in this directory")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no command")
    work = a.keep or tempfile.mkdtemp(prefix="weft-traced-run-")
    os.makedirs(work, exist_ok=True)
    trace = os.path.join(work, "trace")
    shutil.rmtree(trace, ignore_errors=True)
    extra = ["--weft:trace=" + trace]
    if a.case == "summary":
        extra.append("--weft:trace-mode=summary")
    env = None
    if a.trace_env:
        env = dict(os.environ, WEFT_TRACE=trace)
        if a.case == "summary":
            env["WEFT_TRACE_MODE"] = "summary"
        extra = []
    tool = [sys.executable, a.tool]
    if a.case == "dropped":
        env = dict(env or os.environ, WEFT_TRACE_TEST_SLOW_WRITER="50", WEFT_TRACE_POOL="2")

    if a.case in ("timeout", "sigterm", "sigkill"):
        ended_early(a.case, cmd + extra, env, trace, tool, work)
        return finish(work, a.keep)
    if a.case == "utf8":
        extra += BAD_ARGS
    p = run(cmd + extra, env=env, expect=3 if a.case == "abort" else 0)
    if failures:
        return finish(work, a.keep)
    meta_path = os.path.join(trace, "node0.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (meta_path, e))
        return finish(work, a.keep)

    if a.case == "full":
        c = run(tool + ["check", trace], expect=0)
        print(c.stdout)
        out = os.path.join(work, "run.json")
        run(tool + ["perfetto", trace, "-o", out], expect=0)
        check_perfetto(out, want_tasks=not a.no_tasks, want_flows=True, want_idle=not a.no_idle,
                       want_comm=a.comm, want_name=a.expect_name)
        s = run(tool + ["summary", trace], expect=0)
        if a.expect_name not in s.stdout:
            fail("summary does not name %s:\n%s" % (a.expect_name, s.stdout))
        sj = run(tool + ["summary", "--json", trace], expect=0)
        try:
            doc = json.loads(sj.stdout)
            pes = doc.get("pes", [])
            want = meta["pes"] * meta["nodes"]
            if len(pes) != want:
                fail("summary --json lists %d PEs, the run had %d" % (len(pes), want))
            for pe in pes:
                total = pe["busy_ns"] + pe["idle_ns"] + pe["overhead_ns"]
                if abs(total - pe["wall_ns"]) > 0.01 * pe["wall_ns"]:
                    fail("PE %r: busy + idle + overhead = %d ns, wall %d ns" % (pe.get("pe"), total,
                                                                               pe["wall_ns"]))
                if pe["busy_ns"] <= 0:
                    fail("PE %r was never busy" % pe.get("pe"))
        except (ValueError, KeyError, TypeError) as e:
            fail("summary --json: %s\n%s" % (e, sj.stdout[:2000]))
        run(tool + ["profile", trace, "-o", os.path.join(work, "util.png")], expect=0)
        check_png(os.path.join(work, "util.png"))
        run(tool + ["timeline", trace, "-o", os.path.join(work, "timeline.png"), "--pes", "0-1"],
            expect=0)
        check_png(os.path.join(work, "timeline.png"))
    elif a.case == "summary":
        if meta.get("mode") != "summary":
            fail("metadata mode is %r, not summary" % meta.get("mode"))
        events = [f for f in os.listdir(trace) if f.endswith(".events")]
        if events:
            fail("summary mode wrote event files: %s" % events)
        s = run(tool + ["summary", trace], expect=0)
        if a.expect_name not in s.stdout:
            fail("summary does not name %s:\n%s" % (a.expect_name, s.stdout))
        run(tool + ["profile", trace, "-o", os.path.join(work, "util.png")], expect=0)
        check_png(os.path.join(work, "util.png"))
        check_summary_counts(cmd + extra, env, trace, tool, work, a.expect_name)
    elif a.case == "abort":
        if not meta.get("aborted"):
            fail("metadata of the aborted run does not say aborted: %r" % meta)
        if "never registered" not in p.stderr:
            fail("the fatal error is not the one the program causes:\n" + p.stderr[-2000:])
        c = run(tool + ["check", trace])
        if c.returncode not in (0, 1):
            fail("check on an aborted trace exited %d:\n%s" % (c.returncode, c.stderr))
        if "abort" not in (c.stdout + c.stderr).lower():
            fail("check does not say the run aborted:\n" + c.stdout + c.stderr)
        run(tool + ["perfetto", trace, "-o", os.path.join(work, "run.json")], expect=0)
        run(tool + ["summary", trace], expect=0)
    elif a.case == "utf8":
        check_utf8(trace, tool, work)
    elif a.case in ("cpus", "cpus-bound"):
        check_cpus(trace, meta, tool, work, bound=a.case == "cpus-bound")
    elif a.case == "mpi":
        check_mpi(trace, tool, work, a.ranks)
    elif a.case == "dropped":
        check_dropped(trace, tool, p.stdout)
    elif a.case == "truncated":
        pe0 = os.path.join(trace, "node0.pe0.events")
        size = os.path.getsize(pe0)
        with open(pe0, "r+b") as f:
            f.truncate(size - 5)
        for sub in (["check", trace], ["summary", trace],
                    ["perfetto", trace, "-o", os.path.join(work, "run.json")],
                    ["profile", trace, "-o", os.path.join(work, "util.png")]):
            r = run(tool + sub, expect=2)
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            if len(lines) != 1 or not lines[0].startswith("weft-trace: error:") \
                    or "node0.pe0.events" not in lines[0] or "truncated" not in lines[0]:
                fail("%s on a truncated file: want one error line naming node0.pe0.events and "
                     "'truncated', got:\n%s" % (sub[0], r.stderr))
    return finish(work, a.keep)


def summary_json(tool, trace):
    sj = run(tool + ["summary", "--json", trace], expect=0)
    try:
        return json.loads(sj.stdout)
    except ValueError as e:
        fail("summary --json: %s\n%s" % (e, sj.stdout[:2000]))
        return None


def check_summary_counts(cmd, env, trace, tool, work, name):
    """Summary mode counts every slice, timing some (--weft:trace-time-every):
    its rows have 0 < timed <= count, per PE busy + idle <= wall, and the
    count of `name` (an entry method the program calls a fixed number of
    times) is the one a full trace of the same program has, with the
    default stride and with a stride of 2."""
    doc = summary_json(tool, trace)
    if doc is None:
        return
    for row in doc["names"]:
        if not 0 < row["timed"] <= row["count"]:
            fail("summary row %s: timed %d, count %d" % (row["name"], row["timed"], row["count"]))
    for pe in doc["pes"]:
        if pe["busy_ns"] + pe["idle_ns"] > pe["wall_ns"] * 1.0001 + 1000:
            fail("PE %d: busy %d + idle %d ns > wall %d ns" % (pe["pe"], pe["busy_ns"], pe["idle_ns"],
                                                               pe["wall_ns"]))
    # The runs below ask through arguments: a trace the environment asks for
    # (--trace-env) would be the same for all three.
    env = {k: v for k, v in (env or os.environ).items() if not k.startswith("WEFT_TRACE")}
    counts = {}
    for label, args in (("summary", []), ("summary, stride 2", ["--weft:trace-time-every=2"]),
                        ("full", None)):
        run_dir = os.path.join(work, "trace-" + label.replace(", ", "-").replace(" ", ""))
        shutil.rmtree(run_dir, ignore_errors=True)
        if args is None:
            c = [x for x in cmd if not x.startswith("--weft:trace")] + ["--weft:trace=" + run_dir]
        else:
            c = [x for x in cmd if not x.startswith("--weft:trace=")] + ["--weft:trace=" + run_dir] + args
        run(c, env=env, expect=0)
        d = summary_json(tool, run_dir)
        if d is None:
            return
        counts[label] = sum(r["count"] for r in d["names"] if r["name"] == name)
    print("counts of %s: %s" % (name, counts))
    if len(set(counts.values())) != 1 or not counts["full"]:
        fail("%s is counted differently: %s" % (name, counts))


# Arguments that are not UTF-8: a lone 0xff, a sequence cut short, an
# encoded surrogate, an overlong '/', and a sequence cut at the very end.
BAD_ARGS = [b"\xff", b"a\xc3(b", b"\xed\xa0\x80", b"\xc0\xaf", b"tail\xe2\x82"]

END_KIND, MARK_KIND, CPU_KIND, DROPPED_KIND = 24, 18, 25, 32
HANG_MARKS = 100000                      # trace_program's hang_marks
BUFFER_RECORDS = (1 << 20) // 24         # --weft:trace-buffer=1


def check_dropped(trace, tool, stdout):
    m = re.search(r"trace_program: marks=(\d+)", stdout)
    if not m:
        fail("the program did not say how many marks it made:\n" + stdout[-2000:])
        return
    made = int(m.group(1))
    marks = dropped = 0
    per_file = {}
    for f in sorted(os.listdir(trace)):
        if f.endswith(".events"):
            with open(os.path.join(trace, f), "rb") as fh:
                body = fh.read()[32:]
            n = 0
            for w, a, b, _, _ in struct.iter_unpack("<QIIII", body):
                if w & 0xFF == MARK_KIND:
                    marks += 1
                elif w & 0xFF == DROPPED_KIND:
                    n += a | (b << 32)
            per_file[f] = n
            dropped += n
    if dropped == 0:
        fail("no dropped record in the files: the slow writer never fell behind")
    if marks + dropped < made:
        fail("%d marks in the files and %d events dropped, fewer than the %d marks made"
             % (marks, dropped, made))
    if marks >= made:
        fail("all %d marks are in the files, yet %d events were dropped" % (made, dropped))
    s = run(tool + ["summary", trace], expect=0)
    if "%d events dropped: the writer fell behind" % dropped not in s.stdout:
        fail("summary does not say %d events dropped:\n%s" % (dropped, s.stdout[:3000]))
    sj = run(tool + ["summary", "--json", trace], expect=0)
    try:
        doc = json.loads(sj.stdout)
        if doc["dropped"] != dropped:
            fail("summary --json says %r dropped, the files %d" % (doc["dropped"], dropped))
        for t in doc["end"][0]["tracks"]:
            if t["dropped"] != per_file.get(t["file"]):
                fail("summary --json: %s dropped %r, its file %r" % (t["file"], t["dropped"],
                                                                   per_file.get(t["file"])))
    except (ValueError, KeyError, TypeError, IndexError) as e:
        fail("summary --json: %s\n%s" % (e, sj.stdout[:2000]))
    c = run(tool + ["check", trace], expect=0)
    print(c.stdout)


def read_records(path):
    """(kind, a, b) of each whole record of an event file."""
    with open(path, "rb") as f:
        data = f.read()
    body = data[32:]
    body = body[:len(body) - len(body) % 24]
    return [(w & 0xFF, a, b) for w, a, b, _, _ in struct.iter_unpack("<QIIII", body)]


def ended_early(case, cmd, env, trace, tool, work):
    """A hung run ended by --weft:timeout, SIGTERM or SIGKILL, and its trace."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = []
    deadline = time.monotonic() + 200
    if case != "timeout":
        # Until the hanging PE has recorded its marks: then kill.
        for line in iter(proc.stdout.readline, b""):
            out.append(line.decode("utf-8", "replace"))
            if b"trace_program: hanging" in line or time.monotonic() > deadline:
                break
        if case == "sigkill":
            # A full buffer goes to the writer thread, which writes it a
            # moment later: SIGKILL keeps what is in the files, so wait for
            # one of the PEs' files to hold a whole buffer.
            while time.monotonic() < deadline and not any(
                    f.endswith(".events") and os.path.getsize(os.path.join(trace, f)) >= 32 + BUFFER_RECORDS * 24
                    for f in os.listdir(trace)):
                time.sleep(0.01)
        proc.send_signal(signal.SIGTERM if case == "sigterm" else signal.SIGKILL)
    try:
        rest, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, err = proc.communicate()
        fail("the run did not end (%s)" % case)
        return
    out = "".join(out) + rest.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    want_rc = {"timeout": 124, "sigterm": -signal.SIGTERM, "sigkill": -signal.SIGKILL}[case]
    if proc.returncode != want_rc:
        fail("%s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s"
             % (" ".join(cmd), proc.returncode, want_rc, out[-4000:], err[-4000:]))
        return
    if "trace_program: hanging" not in out:
        fail("the program did not say it hangs:\n" + out[-2000:])
    meta_path = os.path.join(trace, "node0.json")
    try:
        with open(meta_path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        fail("%s: %s" % (meta_path, e))
        return
    pe_files = sorted(t["file"] for t in meta.get("tracks", []) if t.get("kind") == "pe")
    want_files = ["node0.pe%d.events" % i for i in range(meta.get("pes", 0))]
    if pe_files != want_files:
        fail("the metadata lists PE tracks %r (expected %r): a run that ends early must leave "
             "them listed" % (pe_files, want_files))
    end = meta.get("end") or {}
    if case == "sigkill":
        if meta.get("complete") or meta.get("aborted") or end:
            fail("metadata of a killed run says complete %r, aborted %r, end %r (nothing can "
                 "write them on SIGKILL)" % (meta.get("complete"), meta.get("aborted"), end))
    else:
        want_how = "timeout" if case == "timeout" else "signal"
        if not meta.get("aborted") or meta.get("complete") or end.get("how") != want_how:
            fail("metadata: aborted %r, complete %r, end %r (expected aborted, end.how %r)"
                 % (meta.get("aborted"), meta.get("complete"), end, want_how))
        if case == "sigterm" and (end.get("signal") != signal.SIGTERM or end.get("message") != "SIGTERM"):
            fail("metadata end %r does not name SIGTERM" % end)
    marks = 0
    for f in want_files:
        recs = read_records(os.path.join(trace, f))
        marks += sum(1 for k, _, _ in recs if k == MARK_KIND)
        last = recs[-1] if recs else None
        if case == "sigkill":
            if last is not None and last[0] == END_KIND:
                fail("%s ends with an end record after SIGKILL" % f)
        else:
            want = (END_KIND, 2, 0) if case == "timeout" else (END_KIND, 3, signal.SIGTERM)
            if last != want:
                fail("%s: last record %r (expected the end record %r)" % (f, last, want))
    # Everything recorded (timeout, SIGTERM: the handler wrote the buffers),
    # or at least what was flushed (SIGKILL: the hanging PE filled a buffer).
    want_marks = HANG_MARKS if case != "sigkill" else BUFFER_RECORDS // 2
    if marks < want_marks:
        fail("the files hold %d marks of the hanging PE (expected at least %d)" % (marks, want_marks))
    if case == "sigkill":
        # A kill in the middle of a write leaves part of a record: cut the
        # largest file so, as such a kill would.
        big = max(want_files, key=lambda f: os.path.getsize(os.path.join(trace, f)))
        path = os.path.join(trace, big)
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) - 5)
    how = {"timeout": "timed out (--weft:timeout expired)",
           "sigterm": "killed by SIGTERM (signal 15; the PEs' buffers were written on it)",
           "sigkill": "killed (no end record)"}[case]
    s = run(tool + ["summary", trace], expect=0)
    if "The run ended early: " + how not in s.stdout:
        fail("summary does not say 'The run ended early: %s':\n%s" % (how, s.stdout[:3000]))
    where = [l for l in s.stdout.splitlines()
             if l.startswith("  PE ") and ("last record at" in l or "no records written" in l)]
    if len(where) != meta.get("pes", 0):
        fail("summary does not say where each PE stopped:\n" + s.stdout[:3000])
    if not any("Worker::hang" in l for l in where):
        fail("summary does not show the hanging PE inside Worker::hang:\n" + "\n".join(where))
    if case == "sigkill" and "trailing bytes" not in s.stderr:
        fail("summary does not warn about the record cut off:\n" + s.stderr)
    c = run(tool + ["check", trace])
    if c.returncode not in (0, 1) or "the run ended early: " + how not in c.stdout:
        fail("check exited %d without 'the run ended early: %s':\n%s%s"
             % (c.returncode, how, c.stdout[-3000:], c.stderr[-2000:]))
    out_json = os.path.join(work, "run.json")
    run(tool + ["perfetto", trace, "-o", out_json], expect=0)
    try:
        with open(out_json, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
        ends = [e for e in doc["traceEvents"] if e.get("cat") == "end"]
        # One per track with records (after SIGKILL the PEs that never
        # filled a buffer have none), one for the node.
        with_records = sum(1 for f in want_files if len(read_records(os.path.join(trace, f))) > 0)
        if len(ends) < with_records + 1:
            fail("perfetto marks %d ends (expected one per track with records, %d, and one for "
                 "the node)" % (len(ends), with_records))
        if doc["otherData"].get("ended_early") != how:
            fail("perfetto otherData.ended_early is %r" % doc["otherData"].get("ended_early"))
    except (OSError, ValueError, KeyError) as e:
        fail("%s: %s" % (out_json, e))
    run(tool + ["timeline", trace, "-o", os.path.join(work, "tl.png")], expect=0)
    check_png(os.path.join(work, "tl.png"))


def check_cpus(trace, meta, tool, work, bound):
    """Each PE's CPU over time (cpu records) and weft-trace migrations on it."""
    if meta.get("version") != 3:
        fail("metadata version %r (expected 3, the version with cpu records)" % meta.get("version"))
    process_cpus = sorted(os.sched_getaffinity(0))
    want = {}                        # PE -> (samples, migrations) read from its file
    for t in meta.get("tracks", []):
        if t.get("kind") != "pe":
            continue
        pe, cpus = t["pe"], t.get("cpus")
        if not isinstance(cpus, list) or not cpus:
            fail("PE %d: the metadata gives no CPU set (cpus %r)" % (pe, cpus))
            continue
        if bound and len(cpus) != 1:
            fail("PE %d is bound but its CPU set is %r (expected one CPU)" % (pe, cpus))
        if not bound and cpus != process_cpus:
            fail("PE %d (bind=none) has CPU set %r (expected the process's, %r)" % (pe, cpus, process_cpus))
        with open(os.path.join(trace, t["file"]), "rb") as f:
            data = f.read()
        recs = list(struct.iter_unpack("<QIIII", data[32:]))
        samples = [(w >> 8, a) for w, a, _, _, _ in recs if w & 0xFF == CPU_KIND]
        if not samples:
            fail("PE %d: no cpu record in %s" % (pe, t["file"]))
            continue
        if samples[0][0] != recs[0][0] >> 8:
            fail("PE %d: its first cpu record is at tick %d, after the track's start %d"
                 % (pe, samples[0][0], recs[0][0] >> 8))
        outside = sorted({c for _, c in samples if c not in cpus})
        if outside:
            fail("PE %d ran on CPUs %r outside its CPU set %r" % (pe, outside, cpus))
        moves = sum(1 for x, y in zip(samples, samples[1:]) if x[1] != y[1])
        if moves != len(samples) - 1:
            fail("PE %d: %d cpu records after the first but %d changes of CPU (expected a record only "
                 "when the CPU changed)" % (pe, len(samples) - 1, moves))
        want[pe] = (len(samples), moves)
    png = os.path.join(work, "migrations.png")
    j = run(tool + ["migrations", trace, "-o", png, "--json"], expect=0)
    check_png(png)
    try:
        doc = json.loads(j.stdout)
        got = {th["pe"]: (th["samples"], th["migrations"]) for th in doc["threads"] if th["kind"] == "pe"}
        for th in doc["threads"]:
            # Each change of CPU the samples saw is at least one move the
            # kernel counted (when it lets the thread count them); a bound
            # thread has none.
            k = th["kernel_migrations"]
            if k is not None and (k < th["migrations"] or bound and k != 0):
                fail("%s: %d migrations seen, the kernel's cpu-migrations counter says %d"
                     % (th["thread"], th["migrations"], k))
        if got != want:
            fail("migrations --json counts (samples, migrations) per PE %r (expected %r, from the files)"
                 % (got, want))
        if doc["migrations"] != sum(th["migrations"] for th in doc["threads"]):
            fail("migrations --json: the total %r is not the threads' sum" % doc["migrations"])
        if bound and doc["migrations"] != 0:
            fail("bound PEs migrated %d times (expected 0)" % doc["migrations"])
        for th in doc["threads"]:
            if abs(sum(th["cpu_share"].values()) - 1.0) > 1e-6:
                fail("%s: time shares per CPU add up to %r" % (th["thread"], sum(th["cpu_share"].values())))
    except (ValueError, KeyError, TypeError) as e:
        fail("migrations --json: %s\n%s" % (e, j.stdout[:2000]))
    text = run(tool + ["migrations", trace], expect=0).stdout
    for pe in want:
        if not re.search(r"^  PE %d\s" % pe, text, re.M):
            fail("migrations does not list PE %d:\n%s" % (pe, text))
    c = run(tool + ["check", trace], expect=0)
    if "result: OK" not in c.stdout:
        fail("check:\n" + c.stdout[-3000:])


RING_ROUNDS = 50   # tests/mpi/ring.c: each rank sends and receives a long a round


def check_mpi(trace, tool, work, ranks):
    """tests/mpi/ring.c traced: each rank's calls as the program made them
    (mpi --json), check passes and names the ranks, the summary has its
    MPI section, Perfetto a thread per rank whose slices nest."""
    c = run(tool + ["check", trace], expect=0)
    if "MPI calls of %d ranks" % ranks not in c.stdout:
        fail("check does not say it checked the MPI calls of %d ranks:\n%s" % (ranks, c.stdout))
    j = run(tool + ["mpi", "--json", trace], expect=0)
    try:
        doc = json.loads(j.stdout)
        got = sorted(r["rank"] for r in doc["ranks"])
        if got != list(range(ranks)):
            fail("mpi --json has ranks %s, the run had 0..%d" % (got, ranks - 1))
        for r in doc["ranks"]:
            calls = {c["call"]: c for c in r["calls"]}
            for name, bytes_ in (("MPI_Send", 8 * RING_ROUNDS), ("MPI_Recv", 8 * RING_ROUNDS)):
                cl = calls.get(name)
                if cl is None or cl["count"] != RING_ROUNDS or cl["bytes"] != bytes_:
                    fail("rank %d: %s is %r, expected %d calls of %d bytes in all"
                         % (r["rank"], name, cl, RING_ROUNDS, bytes_))
            for name in ("MPI_Init", "MPI_Finalize", "MPI_Comm_rank", "MPI_Comm_size"):
                if calls.get(name, {}).get("count") != 1:
                    fail("rank %d: %s is %r, expected one call" % (r["rank"], name, calls.get(name)))
            if not 0 <= r["waited_ns"] <= r["mpi_ns"]:
                fail("rank %d waited %r ns of %r ns in MPI" % (r["rank"], r["waited_ns"], r["mpi_ns"]))
            for cl in r["calls"]:
                if not 0 <= cl["waited_ns"] <= cl["total_ns"] + 1:
                    fail("rank %d: %s waited %r of %r ns" % (r["rank"], cl["call"], cl["waited_ns"],
                                                             cl["total_ns"]))
        if sum(r["waited_ns"] for r in doc["ranks"]) <= 0:
            fail("no rank waited in a ring of blocking receives")
    except (ValueError, KeyError, TypeError) as e:
        fail("mpi --json: %s\n%s" % (e, j.stdout[:2000]))
    t = run(tool + ["mpi", "--calls", trace], expect=0)
    if "Rank %d (PE" % (ranks - 1) not in t.stdout:
        fail("mpi --calls has no table of rank %d:\n%s" % (ranks - 1, t.stdout))
    s = run(tool + ["summary", trace], expect=0)
    if "MPI calls of %d ranks" % ranks not in s.stdout:
        fail("summary has no MPI section:\n%s" % s.stdout)
    # Each rank's switches in and out (ult_begin/ult_end) are a named slice:
    # the summary lists each rank's time switched in.
    for r in range(ranks):
        if not re.search(r"\bMPI rank %d\b" % r, s.stdout):
            fail("summary lists no switched-in time of MPI rank %d:\n%s" % (r, s.stdout))
    out = os.path.join(work, "run.json")
    run(tool + ["perfetto", trace, "-o", out], expect=0)
    try:
        with open(out) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError) as e:
        fail("perfetto output: %s" % e)
        return
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"]["name"].startswith("rank ")}
    if len(names) != ranks:
        fail("perfetto has %d rank threads, expected %d: %s" % (len(names), ranks, names))
    ults = [e for e in events if e.get("cat") == "ult"]
    if {e["name"] for e in ults} != {"MPI rank %d" % r for r in range(ranks)}:
        fail("perfetto's logical-thread slices name %s, expected MPI ranks 0..%d"
             % (sorted({e["name"] for e in ults}), ranks - 1))
    by_tid = {}
    for e in events:
        if e.get("cat") == "mpi":
            by_tid.setdefault(e["tid"], []).append(e)
    for tid, evs in by_tid.items():
        if tid not in names:
            fail("an MPI slice on thread %r, which is no rank's" % tid)
        stack = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1] - 1e-3:
                stack.pop()
            end = e["ts"] + e["dur"]
            if stack and end > stack[-1] + 1e-3:
                fail("%s: slice %s at %.3f us ends after the slice around it" % (names[tid], e["name"], e["ts"]))
                break
            stack.append(end)


def check_utf8(trace, tool, work):
    """Every JSON file of the trace and of the tools is UTF-8, the bad bytes U+FFFD."""
    for name in sorted(os.listdir(trace)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(trace, name)
        with open(path, "rb") as f:
            raw = f.read()
        try:
            doc = json.loads(raw.decode("utf-8"))       # strict: no surrogateescape
        except (UnicodeDecodeError, ValueError) as e:
            fail("%s is not valid UTF-8 JSON: %s" % (path, e))
            continue
        if name == "node0.json":
            # How many U+FFFD a bad sequence gives is the JSON library's
            # choice (one per byte or per maximal prefix): compare with runs
            # of them made one.
            argv = [re.sub("\ufffd+", "\ufffd", a) for a in doc.get("argv", [])]
            want = [re.sub("\ufffd+", "\ufffd", b.decode("utf-8", "replace")) for b in BAD_ARGS]
            if argv[-len(BAD_ARGS):] != want:
                fail("argv in %s is %r (expected the bad bytes as U+FFFD: %r)"
                     % (path, argv[-len(BAD_ARGS):], want))
    out_json = os.path.join(work, "run.json")
    run(tool + ["perfetto", trace, "-o", out_json], expect=0)
    s = run(tool + ["summary", "--json", trace], expect=0)
    for what, raw in (("perfetto output", open(out_json, "rb").read()),
                      ("summary --json", s.stdout.encode("utf-8"))):
        try:
            json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            fail("%s is not valid UTF-8 JSON: %s" % (what, e))


def finish(work, keep):
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
Exit 0 when everything held; otherwise each failure on its own line, exit 1.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

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
    ap.add_argument("--case", required=True, choices=["full", "summary", "abort", "truncated"])
    ap.add_argument("--no-tasks", action="store_true", help="the run has no loop chunks to steal")
    ap.add_argument("--no-idle", action="store_true", help="the run's PEs never wait")
    ap.add_argument("--expect-name", default="Worker::step",
                    help="a slice name the trace must have (default: Worker::step)")
    ap.add_argument("--trace-env", action="store_true",
                    help="ask for the trace through WEFT_TRACE, not --weft:trace")
    ap.add_argument("--comm", action="store_true",
                    help="the nodes have a comm thread: its track and progress slices must show")
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

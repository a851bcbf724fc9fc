#!/usr/bin/python3
"""Traced runs of tests/trace/sample_program, read back (issue 30).

    sampled_run.py --tool TOOL --pings P --spin-us S [--sample N] -- COMMAND...

Runs COMMAND with --weft:trace=DIR appended (and --weft:trace-sample=N when
--sample is given), then checks, from the records and from weft-trace:

  always    the run succeeds; `weft-trace check` passes; every element's
            coroutine entry method Worker::run has an entry span for its
            first part and one for each part after a co_await that
            suspended it (at least one: an all_reduce), each naming the
            element (collection type, index) as the first does, and its
            resumed spans hold the two spins (at least 2 x S); the main
            coroutine has a second `main` span, after its co_await, that
            holds its spin; summary --json charges those times to
            Worker::run and main.
  full      (no --sample) each resumed span runs inside the runtime handler
            that resumed it; every ping's send is recorded.
  sampled   (--sample N) the metadata says N; every Worker::ping call has
            its entry span; about 1 send in N is recorded, and each recorded
            receive (handler_begin from a PE) has its recorded send (check's
            matching); the summary says the trace is sampled.

The spins read the clock inside the spans, so the lower bounds hold on a
loaded machine. Exit 0 when everything held; otherwise each failure on its
own line, exit 1.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

ELEMENTS = 8
HANDLER_BEGIN, HANDLER_END, ENTRY_BEGIN, ENTRY_END, SEND = 1, 2, 3, 4, 5
MAIN_HANDLER = 0xFFFFFFFF
from run_common import fail, failures, run


def i32(x):
    return x - (1 << 32) if x & 0x80000000 else x


def spans(path, k):
    """A track's entry and handler spans: dicts with kind, id, b, c, t0, t1 (ns),
    the enclosing handler's id (None: none) and the track's sends."""
    data = open(path, "rb").read()
    out, stack, sends, recvs = [], [], 0, 0
    for w, a, b, c, d in struct.iter_unpack("<QIIII", memoryview(data)[32:]):
        kind, t = w & 0xFF, (w >> 8) * k
        if kind in (HANDLER_BEGIN, ENTRY_BEGIN):
            outer = next((f["id"] for f in reversed(stack) if f["kind"] == HANDLER_BEGIN), None)
            stack.append({"kind": kind, "id": a, "b": b, "c": c, "t0": t, "outer": outer})
            if kind == HANDLER_BEGIN and a != MAIN_HANDLER and i32(b) >= 0:
                recvs += 1
        elif kind in (HANDLER_END, ENTRY_END):
            want = HANDLER_BEGIN if kind == HANDLER_END else ENTRY_BEGIN
            if not stack or stack[-1]["kind"] != want or stack[-1]["id"] != a:
                fail("%s: %s %d does not close the innermost open span"
                     % (path, "handler_end" if kind == HANDLER_END else "entry_end", a))
                return out, sends, recvs
            f = stack.pop()
            f["t1"] = t
            out.append(f)
        elif kind == SEND:
            sends += 1
    return out, sends, recvs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--pings", type=int, required=True)
    ap.add_argument("--spin-us", type=int, required=True)
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("command", nargs="+")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="weft-sampled-")
    trace = os.path.join(work, "trace")
    cmd = args.command + ["--weft:trace=" + trace]
    if args.sample:
        cmd.append("--weft:trace-sample=%d" % args.sample)
    p = run(cmd)
    if failures:
        return finish(work, args.keep)
    if "sample_program: pings=" not in p.stdout:
        fail("the program did not print its result:\n" + p.stdout[-2000:])
    tool = [sys.executable, args.tool]
    run(tool + ["check", trace])
    summary = json.loads(run(tool + ["summary", "--json", trace]).stdout or "{}")
    text = run(tool + ["summary", trace]).stdout

    meta = json.load(open(os.path.join(trace, "node0.json")))
    clock = meta["clock"]
    k = (clock["mono_ns_end"] - clock["mono_ns_base"]) / clock["tick_end"]
    entry_ids = {v: int(i) for i, v in meta["names"]["entry"].items()}
    handler_names = {int(i): v for i, v in meta["names"]["handler"].items()}
    run_id, ping_id = entry_ids.get("Worker::run"), entry_ids.get("Worker::ping")
    if run_id is None or ping_id is None:
        fail("the metadata names no Worker::run or Worker::ping entry: %s" % meta["names"]["entry"])
        return finish(work, args.keep)
    every, sends, recvs = [], 0, 0
    for t in meta["tracks"]:
        s, n, r = spans(os.path.join(trace, t["file"]), k)
        every += s
        sends += n
        recvs += r
    spin_ns = args.spin_us * 1000.0
    full = not args.sample

    # The coroutine entry method: a span per part, the resumed ones holding the spins.
    for i in range(ELEMENTS):
        mine = sorted((s for s in every if s["kind"] == ENTRY_BEGIN and s["id"] == run_id
                       and s["c"] == i), key=lambda s: s["t0"])
        if len(mine) < 2:
            fail("element %d: %d Worker::run span(s) (expected its first part and at least one "
                 "after a co_await: the all_reduce suspends it)" % (i, len(mine)))
            continue
        first, resumed = mine[0], mine[1:]
        if any(s["b"] != first["b"] for s in resumed):
            fail("element %d: a resumed Worker::run span names collection type %s (expected %d, "
                 "as its first part)" % (i, [s["b"] for s in resumed], first["b"]))
        after = sum(s["t1"] - s["t0"] for s in resumed)
        if after < 2 * spin_ns * 0.9:
            fail("element %d: the resumed Worker::run spans last %.0f us (expected at least the "
                 "two spins, %d us)" % (i, after / 1e3, 2 * args.spin_us))
        if full:
            for s in resumed:
                if s["outer"] is None or not handler_names.get(s["outer"], "").startswith("objects."):
                    fail("element %d: a resumed Worker::run span inside handler %s (expected the "
                         "objects handler that resumed it)" % (i, s["outer"]))
    mains = sorted((s for s in every if s["kind"] == HANDLER_BEGIN and s["id"] == MAIN_HANDLER),
                   key=lambda s: s["t0"])
    if len(mains) < 2:
        fail("%d main span(s) (expected its first part and the part after co_await)" % len(mains))
    elif mains[-1]["t1"] - mains[-1]["t0"] < spin_ns * 0.9:
        fail("main's last span lasts %.0f us (expected at least its spin, %d us)"
             % ((mains[-1]["t1"] - mains[-1]["t0"]) / 1e3, args.spin_us))
    elif full and mains[-1]["outer"] is None:
        fail("main's resumed span runs in no handler (expected inside objects.control)")
    rows = {(r["space"], r["name"]): r for r in summary.get("names", [])}
    run_row, main_row = rows.get(("entry", "Worker::run")), rows.get(("handler", "main"))
    if run_row is None or run_row["total_ns"] < ELEMENTS * 2 * spin_ns * 0.9:
        fail("summary: Worker::run %s (expected a total of at least %d x 2 spins)"
             % (run_row, ELEMENTS))
    if main_row is None or main_row["total_ns"] < spin_ns * 0.9:
        fail("summary: main %s (expected a total of at least its spin)" % main_row)

    # Sampling: all entries, 1 message in N.
    pings = sum(1 for s in every if s["kind"] == ENTRY_BEGIN and s["id"] == ping_id)
    if pings != ELEMENTS * args.pings:
        fail("%d Worker::ping spans (expected every call: %d)" % (pings, ELEMENTS * args.pings))
    ping_row = rows.get(("entry", "Worker::ping"))
    if ping_row is None or ping_row["count"] != ELEMENTS * args.pings:
        fail("summary: Worker::ping %s (expected count %d)" % (ping_row, ELEMENTS * args.pings))
    if recvs > sends:
        fail("%d receives from PEs recorded but %d sends (expected each recorded receive to "
             "have its recorded send)" % (recvs, sends))
    if full:
        if sends < ELEMENTS * args.pings:
            fail("%d sends recorded (expected every one, at least the %d pings)"
                 % (sends, ELEMENTS * args.pings))
        if meta.get("sample", 1) != 1 or "Sampled trace" in text:
            fail("a full trace says it is sampled (metadata sample %s)" % meta.get("sample"))
    else:
        n = args.sample
        if meta.get("sample") != n:
            fail("metadata sample %s (expected %d)" % (meta.get("sample"), n))
        threads = len(meta["tracks"]) + 1
        # The pings and a few dozen other messages (broadcast, reductions,
        # tokens, the future), each thread keeping its 1st, (N+1)th, ...
        low, high = ELEMENTS * args.pings // n - threads, (ELEMENTS * args.pings + 400) // n + threads
        if not low <= sends <= high:
            fail("%d sends recorded (expected about 1 in %d of the %d pings and the few other "
                 "messages: %d..%d)" % (sends, n, ELEMENTS * args.pings, low, high))
        if "Sampled trace (--weft:trace-sample=%d)" % n not in text:
            fail("the summary does not say the trace is sampled:\n" + text[:2000])
        sm = summary.get("sampled_messages", {})
        if sm.get("sends_recorded") != sends or summary.get("sample") != n:
            fail("summary --json: sample %s, sampled_messages %s (expected %d and %d sends "
                 "recorded)" % (summary.get("sample"), sm, n, sends))
    return finish(work, args.keep)


def finish(work, keep):
    if keep or failures:
        print("trace kept in " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

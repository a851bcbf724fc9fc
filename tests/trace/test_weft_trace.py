#!/usr/bin/python3
"""Unit tests of tools/weft-trace on synthetic traces.

A small writer of our own (TraceDir) follows docs/design/trace-format.md, so
these tests pin the reader to the spec, not to the C++ writer. The tool runs
as a subprocess, as users run it: path from $WEFT_TRACE_TOOL, default
tools/weft-trace of this repository. No timing is asserted.

    /usr/bin/python3 tests/trace/test_weft_trace.py -v
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("WEFT_TRACE_TOOL", os.path.join(REPO, "tools", "weft-trace"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Event kinds (spec table).
HB, HE, EB, EE, SEND, IB, IE, TB, TE, STEAL, RED, MOUT, MIN, LBB, LBE, PB, PE_, MARK, RB, RE, CTR, FB, FE, END, CPU = range(1, 26)
EXIT, FATAL, TIMEOUT, SIGNAL = range(4)                 # END's a (version 2)
MAIN, TIMER = 0xFFFFFFFF, 0xFFFFFFFE
HQ_NODE_QUEUE, HQ_REMOTE = 1 << 8, 1 << 9               # handler_begin d flags
TO_NODE, TO_REMOTE = 1 << 8, 1 << 10                    # send d flags

R0 = 1764000000000000000     # real_ns_base of node 0
NODE1_OFFSET_NS = 1000       # node 1 started 1 us later on the real clock


def u32(x):
    return x & 0xFFFFFFFF


def record(kind, tick, a=0, b=0, c=0, d=0):
    return struct.pack("<QIIII", (tick << 8) | kind, u32(a), u32(b), u32(c), u32(d))


def header(node, pe, kind, magic=b"WEFTTRC\0", version=1, rbytes=24):
    return struct.pack("<8sIIiiII", magic, version, rbytes, node, pe, kind, 0)


class TraceDir:
    """Writes a trace directory as the spec says. Events are given in ns of
    the node's monotonic clock and written as ticks of the node's clock."""

    def __init__(self, root):
        self.root = root
        os.makedirs(root, exist_ok=True)

    def node(self, n, *, nodes, first_pe, pes, k, wall_ns, real_ns_base, tracks,
             names=None, mode="full", complete=True, aborted=False, host=None,
             summary=None, ns_per_tick=None, with_end=True, version=1, end=None, unlisted=(),
             argv=None, cpus=None):
        """tracks: {"peL" or "comm": [(ns, kind, a, b, c, d), ...]}

        version 2: `end` is the metadata's "end" object (None: none); tracks
        named in `unlisted` are written but left out of the metadata.
        version 3: `cpus` {"peL" or "comm": [cpu, ...]}, each track's CPU set."""
        mono_base = 5000000000 + n * 2000000000
        tick_end = int(round(wall_ns / k))
        clock = {"tsc_base": 123456 + n, "ns_per_tick": ns_per_tick or k * 1.01,
                 "mono_ns_base": mono_base, "real_ns_base": real_ns_base}
        if with_end:
            clock["tick_end"] = tick_end
            clock["mono_ns_end"] = mono_base + wall_ns
        meta = {"format": "weft-trace", "version": version, "mode": mode, "node": n, "nodes": nodes,
                "first_pe": first_pe, "pes": pes, "total_pes": nodes * pes,
                "host": host or "host%d" % n, "pid": 1000 + n,
                "argv": argv or ["./jacobi2d", "--size", "64"],
                "clock": clock, "names": names or {},
                "counters": {"requested": ["cycles"], "opened": ["cycles"], "note": ""},
                "tracks": [], "complete": complete, "aborted": aborted}
        for name, events in tracks.items():
            if name == "comm":
                fname, pe, kind = "node%d.comm.events" % n, -1, 1
            else:
                rank = int(name[2:])
                fname, pe, kind = "node%d.pe%d.events" % (n, rank), first_pe + rank, 0
            if name not in unlisted:
                meta["tracks"].append({"file": fname, "kind": "pe" if kind == 0 else "comm", "pe": pe})
                if cpus and name in cpus:
                    meta["tracks"][-1]["cpus"] = cpus[name]
            body = b"".join(record(e[1], int(round(e[0] / k)), *e[2:]) for e in events)
            with open(os.path.join(self.root, fname), "wb") as f:
                f.write(header(n, pe, kind, version=version) + body)
        if end is not None:
            meta["end"] = end
        if mode == "summary":
            del meta["tracks"]
            meta["summary_file"] = "node%d.summary.json" % n
            with open(os.path.join(self.root, meta["summary_file"]), "w") as f:
                json.dump(summary, f)
        with open(os.path.join(self.root, "node%d.json" % n), "w") as f:
            json.dump(meta, f, indent=1)
        return meta

    def path(self, name):
        return os.path.join(self.root, name)


NAMES0 = {"handler": {"0": "core.exit", "7": "objects.element"}, "entry": {"3": "Block::ghost"},
          "collection": {"1": "Block[2d]"}, "user": {"0": "phase", "1": "checkpoint"},
          "counter": {"0": "cycles", "1": "instructions"}}
NAMES1 = dict(NAMES0, counter={"0": "context-switches"})

# The 2-node, 2-PE-per-node job. Times in ns of each node's own clock; node 0
# runs at 0.5 ns per tick, node 1 at 0.25, both 1 ms of wall time.
PE0 = [  # PE 0, node 0: main with a region, sends, a task, a mark; then a message from PE 3
    (0, CTR, 0, 0, 0, 0), (0, CTR, 1, 0, 0, 0),
    (0, HB, MAIN, -1, 0, 0),
    (10000, RB, 0),
    (20000, SEND, 1, 64, 7, 0),                          # seq 0 -> PE 1
    (30000, SEND, 2, 128, 7, 1 | TO_REMOTE),             # seq 1 -> PE 2 (node 1)
    (40000, SEND, 1, 32, 7, 2 | TO_NODE | TO_REMOTE),    # seq 2 -> node 1's queue
    (50000, TB, 0, 0, 100, 0), (150000, TE),
    (200000, MARK, 1),
    (300000, RE, 0),
    (310000, PB), (320000, PE_, 3),
    (400000, HE, MAIN),
    (400000, IB), (600000, IE),
    (600000, HB, 7, 3, 256, 0 | HQ_REMOTE),               # from PE 3, seq 0
    (610000, EB, 3, 1, 42), (690000, EE, 3),
    (700000, HE, 7),
    (700000, IB), (950000, IE),
    (960000, FB), (980000, FE, 17),
    (1000000, CTR, 0, 0, 5000, 0), (1000000, CTR, 1, 0, 7, 2),
]
PE1 = [  # PE 1, node 0: a message from PE 0, a stolen task, a node-queue message from PE 2
    (0, CTR, 0, 0, 0, 0), (0, CTR, 1, 0, 0, 0),
    (0, IB), (100000, IE),
    (100000, HB, 7, 0, 64, 0),                           # from PE 0, seq 0
    (110000, EB, 3, 1, 1), (290000, EE, 3),
    (300000, HE, 7),
    (305000, STEAL, 0, 1),
    (310000, TB, 0, 50, 50, 1), (400000, TE),
    (450000, HB, 7, 2, 48, 0 | HQ_NODE_QUEUE | HQ_REMOTE),  # from PE 2, seq 0, node queue
    (460000, EB, 5, 1, 9), (540000, EE, 5),              # entry 5 has no name
    (550000, HE, 7),
    (560000, MOUT, 1, 3, 9),
    (580000, RED, 1, 0, 0),
    (600000, IB), (1000000, IE),
    (1000000, CTR, 0, 0, 4000, 0), (1000000, CTR, 1, 0, 9, 0),
]
PE2 = [  # PE 2, node 1: a message from PE 0 that sends to node 0's queue; a region
    (0, CTR, 0, 0, 0, 0),
    (0, IB), (40000, IE),
    (40000, HB, 7, 0, 128, 1 | HQ_REMOTE),               # from PE 0, seq 1
    (50000, EB, 3, 1, 7),
    (100000, SEND, 0, 48, 7, 0 | TO_NODE | TO_REMOTE),   # seq 0 -> node 0's queue
    (130000, EE, 3),
    (135000, RED, 1, 1, 0),
    (140000, HE, 7),
    (200000, RB, 9), (300000, RE, 9),                    # user name 9 has no name
    (300000, IB), (1000000, IE),
]
PE3 = [  # PE 3, node 1: the node-queue message from PE 0, an lb phase, a timer
    (0, CTR, 0, 0, 0, 0),
    (0, IB), (50000, IE),
    (50000, HB, 7, 0, 32, 2 | HQ_NODE_QUEUE | HQ_REMOTE),  # from PE 0, seq 2
    (60000, EB, 3, 1, 8),
    (70000, SEND, 0, 256, 7, 0 | TO_REMOTE),             # seq 0 -> PE 0
    (240000, EE, 3),
    (250000, HE, 7),
    (250000, LBB, 0), (300000, MIN, 1, 1, 9), (400000, LBE, 0),
    (400000, IB), (500000, IE),
    (500000, HB, TIMER, -1, 0, 0), (520000, HE, TIMER),
    (520000, IB), (1000000, IE),
    (1000000, CTR, 0, 0, 12, 0),
]
COMM0 = [(0, IB), (200000, IE), (200000, PB), (210000, PE_, 2), (210000, IB), (1000000, IE)]
COMM1 = [(500000, PB), (505000, PE_, 1)]

# What the job above must give.
EXPECTED_PES = {  # pe: (node, busy, idle, overhead, wall) in ns
    0: (0, 500000, 450000, 50000, 1000000),
    1: (0, 390000, 500000, 110000, 1000000),
    2: (1, 200000, 740000, 60000, 1000000),
    3: (1, 220000, 630000, 150000, 1000000),
}
EXPECTED_NAMES = {  # (space, name): (count, total, self, max) in ns
    ("handler", "main"): (1, 400000, 100000, 400000),
    ("handler", "objects.element"): (5, 700000, 100000, 200000),
    ("handler", "timer/condition"): (1, 20000, 20000, 20000),
    ("entry", "Block::ghost"): (4, 520000, 520000, 180000),
    ("entry", "entry#5"): (1, 80000, 80000, 80000),
    ("user", "phase"): (1, 290000, 190000, 290000),
    ("user", "user#9"): (1, 100000, 100000, 100000),
    ("task", "task"): (2, 190000, 190000, 100000),
}
# Flow arrows: (pid, tid, ts us) of the send -> of the handler_begin, on the
# job's time line (node 1 is 1 us later).
EXPECTED_FLOWS = {
    ((0, 0, 20.0), (0, 1, 100.0)),
    ((0, 0, 30.0), (1, 2, 41.0)),
    ((0, 0, 40.0), (1, 3, 51.0)),
    ((1, 2, 101.0), (0, 1, 450.0)),
    ((1, 3, 71.0), (0, 0, 600.0)),
}


def write_job(root, pe0=PE0, pe1=PE1, pe2=PE2, pe3=PE3, **node0_kw):
    td = TraceDir(root)
    td.node(0, nodes=2, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0,
            names=NAMES0, tracks={"pe0": pe0, "pe1": pe1, "comm": COMM0}, **node0_kw)
    td.node(1, nodes=2, first_pe=2, pes=2, k=0.25, wall_ns=1000000, real_ns_base=R0 + NODE1_OFFSET_NS,
            names=NAMES1, tracks={"pe0": pe2, "pe1": pe3, "comm": COMM1})
    return td


def run(*args):
    return run_tool(TOOL, *args)


def run_tool(tool, *args):
    p = subprocess.run([tool] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="weft-trace-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def job(self, name="job", **kw):
        return write_job(os.path.join(self.tmp, name), **kw)

    def assertOk(self, res):
        rc, out, err = res
        self.assertEqual(rc, 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (rc, out, err))
        self.assertNotIn("Traceback", err)

    def assertBadInput(self, res, *names):
        """Exit 2, one line `weft-trace: error: ...` naming the file, no traceback."""
        rc, out, err = res
        self.assertEqual(rc, 2, "exit %d\nstdout:\n%s\nstderr:\n%s" % (rc, out, err))
        self.assertNotIn("Traceback", err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, "expected one line on stderr, got:\n" + err)
        self.assertTrue(lines[0].startswith("weft-trace: error: "), lines[0])
        for n in names:
            self.assertIn(n, lines[0])
        return lines[0]

    def assertPng(self, path):
        with open(path, "rb") as f:
            data = f.read()
        self.assertTrue(data.startswith(PNG_SIGNATURE), "not a PNG: %s" % path)
        self.assertGreater(len(data), 1000)


def load_perfetto(test, td, *extra):
    out = os.path.join(test.tmp, "out", "sub", "run.json")   # the directory does not exist yet
    test.assertOk(run("perfetto", td.root, "-o", out, *extra))
    with open(out) as f:
        return json.load(f)


class PerfettoTest(Base):
    def test_events_fields_order_nesting(self):
        doc = load_perfetto(self, self.job())
        self.assertEqual(doc["displayTimeUnit"], "ns")
        self.assertIsInstance(doc["otherData"], dict)
        events = doc["traceEvents"]
        self.assertGreater(len(events), 50)
        last_ts = {}
        stacks = {}
        for ev in events:
            for key in ("name", "ph", "ts", "pid", "tid"):
                self.assertIn(key, ev, ev)
            track = (ev["pid"], ev["tid"])
            self.assertGreaterEqual(ev["ts"], last_ts.get(track, 0.0), "ts goes back on %s: %s" % (track, ev))
            last_ts[track] = ev["ts"]
            if ev["ph"] == "X":
                self.assertIn("dur", ev)
                self.assertGreaterEqual(ev["dur"], 0)
                st = stacks.setdefault(track, [])
                end = ev["ts"] + ev["dur"]
                while st and ev["ts"] >= st[-1][0] - 1e-6:
                    st.pop()
                if st:
                    self.assertLessEqual(end, st[-1][0] + 1e-6,
                                         "%s overlaps %s on %s" % (ev["name"], st[-1][1], track))
                st.append((end, ev["name"]))

    def test_tracks_and_names(self):
        events = load_perfetto(self, self.job())["traceEvents"]
        meta = {(e["name"], e["pid"], e["tid"]): e["args"] for e in events if e["ph"] == "M"}
        self.assertEqual(meta[("process_name", 0, 0)]["name"], "node 0 (host0)")
        self.assertEqual(meta[("process_name", 1, 0)]["name"], "node 1 (host1)")
        for pe, node in ((0, 0), (1, 0), (2, 1), (3, 1)):
            self.assertEqual(meta[("thread_name", node, pe)]["name"], "PE %d" % pe)
            self.assertIn(("thread_sort_index", node, pe), meta)
        self.assertEqual(meta[("thread_name", 0, 100000)]["name"], "comm thread")
        self.assertEqual(meta[("thread_name", 1, 100001)]["name"], "comm thread")
        self.assertIn(("process_sort_index", 1, 0), meta)

        def slices(name, tid=None):
            return [e for e in events if e["ph"] == "X" and e["name"] == name and (tid is None or e["tid"] == tid)]
        main = slices("main")
        self.assertEqual(len(main), 1)
        self.assertAlmostEqual(main[0]["ts"], 0.0)
        self.assertAlmostEqual(main[0]["dur"], 400.0)
        self.assertEqual(len(slices("timer/condition", 3)), 1)
        self.assertEqual(len(slices("objects.element")), 5)
        self.assertEqual(len(slices("entry#5", 1)), 1)
        self.assertEqual(len(slices("user#9", 2)), 1)
        self.assertEqual(len(slices("phase", 0)), 1)
        # lb_begin / lb_end pair per collection and step, not with the
        # track's slices (weft-trace lb reads them): no slice of their own.
        self.assertEqual(len(slices("lb phase 0", 3)), 0)
        self.assertEqual(len(slices("idle", 0)), 2)
        self.assertEqual(slices("idle")[0]["cat"], "idle")
        flush = slices("trace flush", 0)
        self.assertEqual(len(flush), 1)
        progress = slices("progress", 0)
        self.assertEqual(progress[0]["args"]["moved"], 3)
        self.assertEqual(len(slices("progress", 100000)), 1)
        # Node 1 is shifted by its real-time start: PE 2's handler at 40 us local.
        h2 = slices("objects.element", 2)[0]
        self.assertAlmostEqual(h2["ts"], 41.0)
        self.assertAlmostEqual(h2["dur"], 100.0)
        # An entry's args: its collection and index, and its handler's source and bytes.
        ghost = slices("Block::ghost", 0)[0]
        self.assertEqual(ghost["args"]["collection"], "Block[2d]")
        self.assertEqual(ghost["args"]["index"], 42)
        self.assertEqual(ghost["args"]["source_pe"], 3)
        self.assertEqual(ghost["args"]["bytes"], 256)
        self.assertAlmostEqual(ghost["dur"], 80.0)
        tasks = {e["tid"]: e["args"] for e in slices("task")}
        self.assertEqual(tasks[0], {"owner_pe": 0, "first": 0, "iterations": 100, "stolen": False})
        self.assertEqual(tasks[1], {"owner_pe": 0, "first": 50, "iterations": 50, "stolen": True})

        instants = [e for e in events if e["ph"] == "i"]
        for e in instants:
            self.assertEqual(e["s"], "t")
        by_name = {e["name"]: e for e in instants}
        self.assertEqual(by_name["checkpoint"]["tid"], 0)
        self.assertEqual(by_name["steal"]["args"], {"victim_pe": 0, "tasks": 1})
        self.assertEqual(by_name["migrate out"]["args"]["to_pe"], 3)
        self.assertEqual(by_name["migrate in"]["args"]["from_pe"], 1)
        self.assertEqual(len([e for e in instants if e["name"] == "reduction"]), 2)

        counters = [e for e in events if e["ph"] == "C"]
        last = {}
        for e in counters:
            last[(e["pid"], e["name"])] = e["args"]["value"]
        self.assertEqual(last[(0, "PE 0 instructions")], (2 << 32) + 7)
        self.assertEqual(last[(0, "PE 0 cycles")], 5000)
        self.assertEqual(last[(1, "PE 3 context-switches")], 12)

    def flows(self, events):
        by_id = {}
        for e in events:
            if e["ph"] in ("s", "f"):
                self.assertEqual(e["cat"], "message")
                by_id.setdefault(e["id"], {})[e["ph"]] = e
        pairs = set()
        for fid, d in by_id.items():
            self.assertEqual(set(d), {"s", "f"}, "flow %s lacks an end" % fid)
            self.assertEqual(d["f"]["bp"], "e")
            self.assertEqual(d["s"]["name"], d["f"]["name"])
            pairs.add(((d["s"]["pid"], d["s"]["tid"], round(d["s"]["ts"], 3)),
                       (d["f"]["pid"], d["f"]["tid"], round(d["f"]["ts"], 3))))
        return pairs

    def test_flows_all(self):
        events = load_perfetto(self, self.job())["traceEvents"]
        self.assertEqual(self.flows(events), EXPECTED_FLOWS)
        # Each arrow ends where a handler slice begins on that track.
        starts = {(e["pid"], e["tid"], round(e["ts"], 3)) for e in events
                  if e["ph"] == "X" and e["cat"] == "handler"}
        for _, dst in EXPECTED_FLOWS:
            self.assertIn(dst, starts)

    def test_flows_every_nth_and_none(self):
        td = self.job()
        self.assertEqual(len(self.flows(load_perfetto(self, td, "--flows", "2")["traceEvents"])), 3)
        self.assertEqual(len(self.flows(load_perfetto(self, td, "--flows", "none")["traceEvents"])), 0)
        self.assertEqual(len(self.flows(load_perfetto(self, td, "--flows", "all")["traceEvents"])), 5)
        self.assertBadInput(run("perfetto", td.root, "-o", os.path.join(self.tmp, "x.json"), "--flows", "0"))

    def test_flow_matching_repeated_seq(self):
        # seq wraps at 256: PE 0 has three sends with seq 5. PE 1's two
        # receives take the earliest unmatched sends *to PE 1*, in order; PE
        # 2's takes the one to PE 2 although it was sent first.
        td = TraceDir(os.path.join(self.tmp, "wrap"))
        pe0 = [(0, IB), (5000, IE), (5000, HB, MAIN, -1, 0, 0),
               (10000, SEND, 2, 8, 7, 5), (20000, SEND, 1, 8, 7, 5), (30000, SEND, 1, 8, 7, 5),
               (35000, HE, MAIN), (35000, IB), (100000, IE)]
        pe1 = [(0, IB), (40000, IE), (40000, HB, 7, 0, 8, 5), (45000, HE, 7),
               (50000, HB, 7, 0, 8, 5), (55000, HE, 7), (55000, IB), (100000, IE)]
        pe2 = [(0, IB), (60000, IE), (60000, HB, 7, 0, 8, 5), (65000, HE, 7), (65000, IB), (100000, IE)]
        td.node(0, nodes=1, first_pe=0, pes=3, k=1.0, wall_ns=100000, real_ns_base=R0,
                names=NAMES0, tracks={"pe0": pe0, "pe1": pe1, "pe2": pe2})
        events = load_perfetto(self, td)["traceEvents"]
        self.assertEqual(self.flows(events), {((0, 0, 20.0), (0, 1, 40.0)), ((0, 0, 30.0), (0, 1, 50.0)),
                                              ((0, 0, 10.0), (0, 2, 60.0))})
        self.assertOk(run("check", td.root))

    def test_aborted_trace_closes_open_slices(self):
        # An aborted node: no end in the clock, a handler still open.
        td = TraceDir(os.path.join(self.tmp, "aborted"))
        pe0 = [(0, HB, MAIN, -1, 0, 0), (10000, EB, 3, 1, 0), (20000, EE, 3), (30000, RB, 0)]
        pe1 = [(0, IB), (40000, IE)]
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=50000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": pe0, "pe1": pe1}, complete=False, aborted=True, with_end=False)
        out = os.path.join(self.tmp, "aborted.json")
        rc, _, err = run("perfetto", td.root, "-o", out)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("Traceback", err)
        self.assertIn("warning", err)
        with open(out) as f:
            events = json.load(f)["traceEvents"]
        main = [e for e in events if e["name"] == "main"][0]
        phase = [e for e in events if e["name"] == "phase"][0]
        # ns_per_tick (0.505) is the clock without an end; closed at the last tick.
        self.assertAlmostEqual(main["dur"], round(60000 * 0.505 / 1000, 3), places=3)
        self.assertAlmostEqual(phase["ts"] + phase["dur"], main["ts"] + main["dur"], places=3)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("aborted", out)
        self.assertIn("has no end", out)
        self.assertOk(run("summary", td.root))


class SummaryTest(Base):
    def check_json(self, doc, pes, names):
        got = {p["pe"]: p for p in doc["pes"]}
        self.assertEqual(set(got), set(pes))
        for pe, (node, busy, idle, over, wall) in pes.items():
            p = got[pe]
            self.assertEqual(p["node"], node)
            for key, want in (("busy_ns", busy), ("idle_ns", idle), ("overhead_ns", over), ("wall_ns", wall)):
                self.assertAlmostEqual(p[key], want, delta=1.0, msg="PE %d %s" % (pe, key))
        got = {(n["space"], n["name"]): n for n in doc["names"]}
        self.assertEqual(set(got), set(names))
        for key, (count, total, self_, mx) in names.items():
            n = got[key]
            self.assertEqual(n["count"], count, key)
            self.assertAlmostEqual(n["total_ns"], total, delta=1.0, msg="%s total" % (key,))
            self.assertAlmostEqual(n["self_ns"], self_, delta=1.0, msg="%s self" % (key,))
            self.assertAlmostEqual(n["max_ns"], mx, delta=1.0, msg="%s max" % (key,))

    def test_full_mode_json(self):
        td = self.job()
        rc, out, err = run("summary", td.root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        self.check_json(doc, EXPECTED_PES, EXPECTED_NAMES)
        self.assertEqual(doc["mode"], "full")
        self.assertEqual(doc["total_pes"], 4)
        imb = doc["imbalance"]
        mean = sum(v[1] for v in EXPECTED_PES.values()) / 4
        self.assertAlmostEqual(imb["max_over_mean_busy"], 500000 / mean, places=6)
        self.assertEqual(imb["busiest"], [0, 1, 3])
        self.assertEqual(imb["least_busy"], [2, 3, 1])
        # The names are sorted by total time.
        totals = [n["total_ns"] for n in doc["names"]]
        self.assertEqual(totals, sorted(totals, reverse=True))

    def test_full_mode_text(self):
        td = self.job()
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        for text in ("Block::ghost", "objects.element", "entry#5", "Imbalance", "busiest", "least busy",
                     "PE", "wall"):
            self.assertIn(text, out)
        self.assertOk(run("summary", td.root, "--all"))

    def summary_job(self):
        td = TraceDir(os.path.join(self.tmp, "summary"))
        bin_ns = 262144
        summary = {"format": "weft-trace-summary", "version": 1, "node": 0, "bin_ns": bin_ns, "pes": [
            {"pe": 0, "wall_ns": 1000000, "busy_ns": 600000, "idle_ns": 300000,
             "bins": [[200000, 50000], [200000, 50000], [100000, 100000], [100000, 100000]],
             "names": [{"space": "entry", "id": 3, "count": 10, "total_ns": 500000, "self_ns": 450000,
                        "max_ns": 90000},
                       {"space": "handler", "id": 7, "count": 10, "total_ns": 550000, "self_ns": 50000,
                        "max_ns": 95000}],
             "counters": {"cycles": 123}},
            {"pe": 1, "wall_ns": 1000000, "busy_ns": 200000, "idle_ns": 700000,
             "bins": [[50000, 200000], [50000, 200000], [50000, 150000], [50000, 150000]],
             "names": [{"space": "entry", "id": 3, "count": 4, "total_ns": 150000, "self_ns": 150000,
                        "max_ns": 60000},
                       {"space": "user", "id": 4, "count": 1, "total_ns": 10000, "self_ns": 10000,
                        "max_ns": 10000}],
             "counters": {}},
        ]}
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={}, mode="summary", summary=summary)
        return td

    def test_summary_mode(self):
        td = self.summary_job()
        rc, out, err = run("summary", td.root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        self.assertEqual(doc["mode"], "summary")
        self.check_json(doc, {0: (0, 600000, 300000, 100000, 1000000), 1: (0, 200000, 700000, 100000, 1000000)},
                        {("entry", "Block::ghost"): (14, 650000, 600000, 90000),
                         ("handler", "objects.element"): (10, 550000, 50000, 95000),
                         ("user", "user#4"): (1, 10000, 10000, 10000)})
        self.assertOk(run("summary", td.root))
        self.assertOk(run("check", td.root))
        png = os.path.join(self.tmp, "summary-util.png")
        self.assertOk(run("profile", td.root, "-o", png, "--bins", "50"))
        self.assertPng(png)
        line = self.assertBadInput(run("timeline", td.root, "-o", os.path.join(self.tmp, "t.png")), td.root)
        self.assertIn("summary", line)
        self.assertBadInput(run("perfetto", td.root, "-o", os.path.join(self.tmp, "t.json")), td.root)


    def test_summary_mode_sampled_timing(self):
        # A summary whose handler rows were timed in part (summary.cpp): the
        # JSON keeps each row's timed count (an older row's is its count),
        # the text marks the estimated rows and says how they were sampled.
        td = self.summary_job()
        path = os.path.join(td.root, "node0.summary.json")
        with open(path) as f:
            doc = json.load(f)
        doc["version"] = 3
        for pe in doc["pes"]:
            pe["time_every"] = 64
        doc["pes"][0]["names"][1]["timed"] = 3
        doc["pes"][0]["names"][0]["timed"] = 10
        with open(path, "w") as f:
            json.dump(doc, f)
        rc, out, err = run("summary", td.root, "--json")
        self.assertOk((rc, out, err))
        timed = {(n["space"], n["name"]): (n["count"], n["timed"]) for n in json.loads(out)["names"]}
        self.assertEqual(timed[("handler", "objects.element")], (10, 3))
        self.assertEqual(timed[("entry", "Block::ghost")], (14, 14))
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("sampled 1 of 3 names", out)
        self.assertIn("1 in up to 64", out)
        rows = {l.split()[1]: l for l in out.splitlines() if l.startswith("  handler") or l.startswith("  entry")}
        self.assertIn("~", rows["objects.element"])
        self.assertNotIn("~", rows["Block::ghost"])

class PlotTest(Base):
    def test_profile_png(self):
        td = self.job()
        png = os.path.join(self.tmp, "plots", "util.png")
        self.assertOk(run("profile", td.root, "-o", png))
        self.assertPng(png)

    def test_timeline_png(self):
        td = self.job()
        png = os.path.join(self.tmp, "timeline.png")
        self.assertOk(run("timeline", td.root, "-o", png))
        self.assertPng(png)
        png2 = os.path.join(self.tmp, "timeline2.png")
        self.assertOk(run("timeline", td.root, "-o", png2, "--pes", "1-2", "--from-ms", "0.05", "--to-ms", "0.6"))
        self.assertPng(png2)
        self.assertBadInput(run("timeline", td.root, "-o", png2, "--pes", "7-9"), td.root)


class ManySlicesTest(Base):
    """More slices than the timeline has columns, and names that look like JSON."""

    def test_many_slices_and_odd_names(self):
        td = TraceDir(os.path.join(self.tmp, "many"))
        odd = 'odd},{"name":"x'
        names = dict(NAMES0, entry={"3": odd})
        pes = {}
        for rank in range(2):
            ev = []
            for i in range(3000):
                t = i * 100
                ev += [(t, HB, 7, 1 - rank, 8, i & 0xFF), (t + 5, EB, 3, 1, i),
                       (t + 20, SEND, 1 - rank, 8, 7, i & 0xFF), (t + 50, EE, 3), (t + 55, HE, 7),
                       (t + 60, IB), (t + 100, IE)]
            pes["pe%d" % rank] = ev
        td.node(0, nodes=1, first_pe=0, pes=2, k=1.0, wall_ns=300000, real_ns_base=R0, names=names,
                tracks=pes)
        png = os.path.join(self.tmp, "many.png")
        self.assertOk(run("timeline", td.root, "-o", png))
        self.assertPng(png)
        events = load_perfetto(self, td)["traceEvents"]
        self.assertEqual(len([e for e in events if e["ph"] == "X" and e["name"] == odd]), 6000)
        # Every receive finds the other PE's send with its seq (matching is by
        # source, seq and destination only; it does not look at the times).
        self.assertEqual(len([e for e in events if e["ph"] == "s"]), 6000)
        self.assertEqual(len([e for e in events if e["ph"] == "f"]), 6000)
        rc, out, err = run("summary", td.root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        ghost = [n for n in doc["names"] if n["name"] == odd][0]
        self.assertEqual(ghost["count"], 6000)
        self.assertAlmostEqual(ghost["total_ns"], 6000 * 45, delta=1)
        self.assertOk(run("check", td.root))


class CheckTest(Base):
    def test_good_trace(self):
        td = self.job()
        rc, out, err = run("check", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("result: OK", out)
        for f in ("node0.pe0.events", "node0.pe1.events", "node0.comm.events", "node1.pe0.events",
                  "node1.pe1.events", "node1.comm.events"):
            self.assertIn(f, out)
        for pe in range(4):
            self.assertIn("PE %d: busy" % pe, out)

    def test_missing_end(self):
        pe0 = [e for e in PE0 if e[1] != EE]                 # PE 0's entry never ends
        td = self.job(pe0=pe0)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertNotIn("Traceback", err)
        self.assertIn("node0.pe0.events", out)
        self.assertIn("entry_begin Block::ghost has no end", out)
        self.assertIn("result: FAILED", out)

    def test_end_without_begin(self):
        pe1 = [e for e in PE1 if not (e[1] == EB and e[2] == 5)]   # entry 5 ends, never began
        td = self.job(pe1=pe1)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("entry_end entry#5 has no begin", out)
        # The other commands refuse it: one line naming file, record and kind.
        line = self.assertBadInput(run("perfetto", td.root, "-o", os.path.join(self.tmp, "x.json")),
                                   "node0.pe1.events", "record", "entry_end")
        self.assertIn("no begin", line)
        self.assertBadInput(run("summary", td.root), "node0.pe1.events", "entry_end")

    def test_half_covered_pe(self):
        # PE 1's records stop at half the run (its thread was not traced after 0.5 ms).
        pe1 = [e for e in PE1 if e[0] <= 400000] + [(400000, IB), (500000, IE)]
        td = self.job(pe1=pe1)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("PE 1: busy + idle + overhead = 0.500 ms, 50.0%", out)
        self.assertIn("result: FAILED (1 problem)", out)

    def test_double_counting_pe(self):
        # Idle inside a handler: busy and idle both count it, overhead < 0.
        pe1 = [(0, HB, 7, 0, 64, 0), (100000, IB), (900000, IE), (1000000, HE, 7)]
        td = self.job(pe1=pe1)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("overhead -0.800 ms is negative", out)
        self.assertIn("counted both busy and idle", out)

    def test_ticks_go_back_and_header_mismatch(self):
        pe3 = list(PE3)
        pe3.insert(5, (10000, MARK, 0))                      # after ticks of 50000
        td = self.job(pe3=pe3)
        # The header of node 0's PE 1 file says PE 5.
        with open(td.path("node0.pe1.events"), "r+b") as f:
            f.seek(20)
            f.write(struct.pack("<i", 5))
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("node1.pe1.events: record 5: tick", out)
        self.assertIn("expected non-decreasing ticks", out)
        self.assertIn("node0.pe1.events: header PE 5 (expected 1", out)
        # The other commands warn about the header, and refuse ticks that go back.
        rc, out, err = run("summary", td.root)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("weft-trace: warning: " + td.path("node0.pe1.events") + ": header PE 5", err)
        td = self.job("job2", pe3=pe3)
        self.assertBadInput(run("summary", td.root), "node1.pe1.events", "record 5")


# A one-node job of 2 PEs that stopped early: PE 0 inside an entry method,
# PE 1 inside a region (times in ns; k = 0.5 ns per tick).
KPE0 = [(0, CTR, 0, 0, 0, 0), (0, HB, MAIN, -1, 0, 0), (100000, HE, MAIN), (100000, IB), (200000, IE),
        (200000, HB, 7, 1, 64, 0), (210000, EB, 3, 1, 42)]
KPE1 = [(0, IB), (150000, IE), (150000, RB, 0), (300000, MARK, 1)]


class EndedEarlyTest(Base):
    """Runs that ended early (issue 24): every command reads what was written,
    says how the run ended, and where each PE was then."""

    def one_node(self, pe0=KPE0, pe1=KPE1, name="early", **kw):
        td = TraceDir(os.path.join(self.tmp, name))
        kw.setdefault("version", 2)
        kw.setdefault("complete", False)
        kw.setdefault("with_end", False)
        kw.setdefault("ns_per_tick", 0.5)   # no clock end: times come from the calibration
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0,
                names=NAMES0, tracks={"pe0": pe0, "pe1": pe1}, **kw)
        return td

    def every_command(self, td, how):
        """Each command exits 0 (check: 0 or 1), says `how`, and marks where each PE stopped."""
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("The run ended early: " + how, out)
        self.assertIn("the run ended early: " + how, err)
        rc, cout, cerr = run("check", td.root)
        self.assertIn(rc, (0, 1), cout + cerr)
        self.assertNotIn("Traceback", cerr)
        self.assertIn("the run ended early: " + how, cout)
        doc = load_perfetto(self, td)
        ends = [e for e in doc["traceEvents"] if e.get("cat") == "end"]
        self.assertEqual(doc["otherData"]["ended_early"], how)
        for png in ("profile", "timeline"):
            path = os.path.join(self.tmp, png + ".png")
            self.assertOk(run(png, td.root, "-o", path))
            self.assertPng(path)
        rc, jout, jerr = run("summary", "--json", td.root)
        self.assertOk((rc, jout, jerr))
        js = json.loads(jout)
        self.assertEqual(js["ended_early"], how)
        return out, cout, ends, js

    def test_killed_without_end_records(self):
        # Metadata as a killed run leaves it: not complete, no "end", PE 1's
        # file not listed, and its last record cut off by the kill.
        td = self.one_node(unlisted=("pe1",))
        with open(td.path("node0.pe1.events"), "ab") as f:
            f.write(record(MARK, 700000)[:10])
        out, cout, ends, js = self.every_command(td, "killed (no end record)")
        self.assertIn("PE 0: last record at 0.210 ms (record 6), no end record; "
                      "inside handler objects.element > entry Block::ghost", out)
        self.assertIn("PE 1: last record at 0.300 ms (record 3), no end record; inside region phase", out)
        self.assertIn("PE 0: last record at 0.210 ms", cout)
        rc, _, err = run("summary", td.root)
        self.assertIn("truncated: 10 trailing bytes after record 3", err)
        self.assertIn("node0.pe1.events not listed", err)
        # Perfetto: an instant where each PE stopped, and one for the job.
        per_track = {e["tid"]: e for e in ends if e["s"] == "t"}
        self.assertEqual(set(per_track), {0, 1})
        self.assertAlmostEqual(per_track[0]["ts"], 210.0)
        self.assertAlmostEqual(per_track[1]["ts"], 300.0)
        self.assertEqual(per_track[0]["args"]["open"], ["handler objects.element", "entry Block::ghost"])
        self.assertEqual(len([e for e in ends if e["s"] == "g"]), 1)
        tracks = {t["pe"]: t for t in js["end"][0]["tracks"]}
        self.assertEqual(tracks[1]["records"], 4)
        self.assertEqual(tracks[1]["open"], ["region phase"])
        self.assertIsNone(tracks[0]["end_record"])

    def test_version_1_killed_run_lists_no_tracks(self):
        # What weft wrote before version 2: "tracks": [] until the end.
        td = self.one_node(version=1, unlisted=("pe0", "pe1"))
        out, _, _, _ = self.every_command(td, "killed (no end record)")
        self.assertIn("PE 1: last record at 0.300 ms", out)

    def test_timed_out(self):
        end = {"how": "timeout", "tick": 800000, "message": "--weft:timeout expired"}
        td = self.one_node(pe0=KPE0 + [(400000, END, TIMEOUT)], pe1=KPE1 + [(400000, END, TIMEOUT)],
                           aborted=True, end=end)
        out, cout, ends, js = self.every_command(td, "timed out (--weft:timeout expired)")
        self.assertIn("PE 0: last record at 0.400 ms (record 7), its end record (timeout); "
                      "inside handler objects.element > entry Block::ghost", out)
        self.assertEqual(js["end"][0]["how"], "timeout")
        self.assertEqual(js["end"][0]["tracks"][1]["end_record"], "timeout")

    def test_fatal_error(self):
        end = {"how": "fatal", "tick": 400000, "message": "message to handler 123456, never registered"}
        td = self.one_node(pe0=KPE0 + [(400000, END, FATAL)], pe1=KPE1 + [(400000, END, FATAL)],
                           aborted=True, end=end)
        self.every_command(td, "aborted by a fatal error: message to handler 123456, never registered")

    def test_signal_from_end_records(self):
        # The handler's metadata write failed: the end records still say it.
        td = self.one_node(pe0=KPE0 + [(400000, END, SIGNAL, 15)], pe1=KPE1 + [(400000, END, SIGNAL, 15)])
        out, _, _, _ = self.every_command(
            td, "killed by SIGTERM (signal 15; the PEs' buffers were written on it)")
        self.assertIn("its end record (signal)", out)

    def test_complete_version_2(self):
        pe0 = PE0 + [(1000000, END, EXIT)]
        pe1 = PE1 + [(1000000, END, EXIT)]
        td = TraceDir(os.path.join(self.tmp, "v2"))
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": pe0, "pe1": pe1}, version=2, end={"how": "exit", "tick": 2000000})
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("ended early", out + err)
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertEqual(err, "")
        self.assertNotIn("ended early", out)
        # An end record that is not the last one breaks the spec.
        td = TraceDir(os.path.join(self.tmp, "v2bad"))
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": [(0, END, EXIT)] + pe0, "pe1": pe1}, version=2)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("an end record before the last record", out)

    def test_end_record_in_a_version_1_file_is_unknown(self):
        td = self.one_node(version=1, pe0=KPE0 + [(400000, END, EXIT)])
        self.assertBadInput(run("summary", td.root), "node0.pe0.events", "unknown event kind 24")

    def test_outputs_are_utf8_whatever_the_strings(self):
        # JSON may carry a lone surrogate, which no UTF-8 file can hold.
        td = self.one_node(argv=["./app", "\udcff", "caf\u00e9"], complete=True, with_end=True,
                           end={"how": "exit", "tick": 2000000},
                           pe0=KPE0 + [(210000, EE, 3), (220000, HE, 7), (1000000, END, EXIT)],
                           pe1=KPE1 + [(400000, RE, 0), (1000000, END, EXIT)])
        out = os.path.join(self.tmp, "run.json")
        self.assertOk(run("perfetto", td.root, "-o", out))
        with open(out, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))       # strict UTF-8
        self.assertEqual(doc["otherData"]["argv"], ["./app", "\ufffd", "caf\u00e9"])
        rc, jout, _ = run("summary", "--json", td.root)
        self.assertEqual(rc, 0)
        self.assertEqual(json.loads(jout)["argv"][1], "\ufffd")


class ErrorTest(Base):
    """Bad input: exit 2, one line `weft-trace: error: <file or dir>: ...`."""

    COMMANDS = (("summary",), ("check",), ("perfetto", "-o", "OUT"), ("migrations",))

    def each_command(self, td_root, *names):
        lines = []
        for cmd in self.COMMANDS:
            args = [os.path.join(self.tmp, "out.json") if a == "OUT" else a for a in cmd]
            with self.subTest(command=cmd[0]):
                lines.append(self.assertBadInput(run(args[0], td_root, *args[1:]), *names))
        return lines[0]

    def test_truncated(self):
        td = self.job()
        path = td.path("node0.pe1.events")
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size - 5)
        nrec = (size - 32) // 24
        line = self.each_command(td.root, path)
        self.assertIn("truncated: 19 trailing bytes after record %d" % (nrec - 2), line)

    def test_shorter_than_header(self):
        td = self.job()
        with open(td.path("node1.pe0.events"), "r+b") as f:
            f.truncate(20)
        self.assertIn("header", self.each_command(td.root, td.path("node1.pe0.events")))

    def test_bad_magic(self):
        td = self.job()
        with open(td.path("node1.pe1.events"), "r+b") as f:
            f.write(b"XEFT")
        self.assertIn("magic", self.each_command(td.root, td.path("node1.pe1.events")))

    def test_bad_header_version_and_record_size(self):
        td = self.job()
        with open(td.path("node0.pe0.events"), "r+b") as f:
            f.seek(8)
            f.write(struct.pack("<I", 9))
        self.assertIn("version 9", self.each_command(td.root, td.path("node0.pe0.events")))
        td = self.job("job2")
        with open(td.path("node0.pe0.events"), "r+b") as f:
            f.seek(12)
            f.write(struct.pack("<I", 32))
        self.assertIn("record size 32", self.each_command(td.root, td.path("node0.pe0.events")))

    def test_unknown_kind(self):
        pe2 = list(PE2)
        pe2.insert(3, (40000, 99, 0, 0, 0, 0))
        td = self.job(pe2=pe2)
        line = self.each_command(td.root, td.path("node1.pe0.events"))
        self.assertIn("record 3: unknown event kind 99", line)

    def test_missing_dir(self):
        missing = os.path.join(self.tmp, "no-such-trace")
        self.assertIn("no such directory", self.each_command(missing, missing))

    def test_missing_metadata(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        with open(os.path.join(empty, "node0.pe0.events"), "wb") as f:
            f.write(header(0, 0, 0))
        self.assertIn("no nodeN.json", self.each_command(empty, empty))

    def test_missing_track_file(self):
        td = self.job()
        os.unlink(td.path("node1.pe1.events"))
        self.assertIn("missing", self.each_command(td.root, td.path("node1.pe1.events")))

    def test_bad_json(self):
        td = self.job()
        with open(td.path("node1.json"), "w") as f:
            f.write('{"format": "weft-trace", "version": 1,')
        self.assertIn("invalid JSON", self.each_command(td.root, td.path("node1.json")))

    def test_wrong_format_and_version(self):
        td = self.job()
        with open(td.path("node0.json")) as f:
            meta = json.load(f)
        meta["version"] = 7
        with open(td.path("node0.json"), "w") as f:
            json.dump(meta, f)
        self.assertIn("version is 7", self.each_command(td.root, td.path("node0.json")))
        meta["version"], meta["format"] = 1, "chrome"
        with open(td.path("node0.json"), "w") as f:
            json.dump(meta, f)
        self.assertIn("format", self.each_command(td.root, td.path("node0.json")))

    def test_missing_field(self):
        td = self.job()
        with open(td.path("node1.json")) as f:
            meta = json.load(f)
        del meta["clock"]["ns_per_tick"]
        with open(td.path("node1.json"), "w") as f:
            json.dump(meta, f)
        self.assertIn("clock.ns_per_tick", self.each_command(td.root, td.path("node1.json")))

    def test_unwritable_output(self):
        td = self.job()
        blocker = os.path.join(self.tmp, "a-file")
        with open(blocker, "w") as f:
            f.write("x")
        out = os.path.join(blocker, "run.json")
        self.assertBadInput(run("perfetto", td.root, "-o", out), out)
        self.assertBadInput(run("profile", td.root, "-o", os.path.join(blocker, "u.png")), blocker)

    def test_usage_errors(self):
        td = self.job()
        for args in (("perfetto", td.root), ("profile", td.root, "-o", "x.png", "--bins", "many"),
                     ("timeline", td.root, "-o", "x.png", "--pes", "3-1"), ("nosuchcommand",)):
            with self.subTest(args=args):
                self.assertBadInput(run(*args))

    def test_help(self):
        for cmd in ("perfetto", "summary", "profile", "timeline", "check", "migrations"):
            with self.subTest(command=cmd):
                rc, out, err = run(cmd, "--help")
                self.assertEqual(rc, 0, err)
                self.assertIn("usage: weft-trace " + cmd, out)


# A one-node job of 2 PEs with cpu records (version 3; k = 0.5 ns per tick).
# PE 0 may run on CPUs 0-3: on 2 until 250 us (it moves while idle), on 0
# until 300 us, on 3 until 600 us, then on 2: 3 migrations, time 650 us on
# CPU 2, 50 on 0, 300 on 3. PE 1 is bound to CPU 1 and stays there.
MPE0 = [(0, CPU, 2), (0, CTR, 0, 0, 0, 0), (0, HB, MAIN, -1, 0, 0), (100000, HE, MAIN),
        (100000, IB), (250000, CPU, 0), (300000, IE),
        (300000, CPU, 3), (300000, HB, 7, -1, 64, 0), (310000, EB, 3, 1, 42), (390000, EE, 3),
        (400000, HE, 7), (400000, IB), (600000, CPU, 2), (1000000, IE), (1000000, END, EXIT)]
MPE1 = [(0, CPU, 1), (0, IB), (1000000, IE), (1000000, END, EXIT)]
MCPUS = {"pe0": [0, 1, 2, 3], "pe1": [1]}


class MigrationsTest(Base):
    """weft-trace migrations on a synthetic trace: known cpu records give
    known migrations, time shares and steps; text, JSON and PNG."""

    def cpu_job(self, pe0=MPE0, pe1=MPE1, cpus=MCPUS, version=3, name="cpus"):
        td = TraceDir(os.path.join(self.tmp, name))
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": pe0, "pe1": pe1}, version=version, cpus=cpus,
                end={"how": "exit", "tick": 2000000})
        return td

    def test_text(self):
        rc, out, err = run("migrations", self.cpu_job().root)
        self.assertOk((rc, out, err))
        self.assertIn("2 threads, 3 migrations in 1.000 ms", out)
        rows = {l.split()[1]: l for l in out.splitlines() if l.startswith("  PE ")}
        self.assertEqual(rows["0"].split()[2:5], ["0-3", "4", "3"])
        self.assertIn("cpu 0 5.0%, cpu 2 65.0%, cpu 3 30.0%", rows["0"])
        self.assertEqual(rows["1"].split()[2:5], ["1", "1", "0"])
        self.assertIn("cpu 1 100.0%", rows["1"])
        total = [l for l in out.splitlines() if l.startswith("  all ")][0]
        self.assertEqual(total.split()[1:3], ["5", "3"])
        self.assertIn("cpu 0 2.5%, cpu 1 50.0%, cpu 2 32.5%, cpu 3 15.0%", total)
        self.assertNotIn("outside", out)

    def test_json_and_png(self):
        png = os.path.join(self.tmp, "out", "migrations.png")
        rc, out, err = run("migrations", self.cpu_job().root, "--json", "-o", png)
        self.assertOk((rc, out, err))
        self.assertPng(png)
        doc = json.loads(out)
        self.assertEqual(doc["migrations"], 3)
        th = {t["pe"]: t for t in doc["threads"]}
        self.assertEqual(th[0]["steps"], [[0.0, 2], [250000.0, 0], [300000.0, 3], [600000.0, 2]])
        self.assertEqual(th[0]["migrations"], 3)
        self.assertEqual(th[0]["cpus"], [0, 1, 2, 3])
        self.assertEqual(th[0]["time_ns"], {"0": 50000.0, "2": 650000.0, "3": 300000.0})
        self.assertAlmostEqual(th[0]["cpu_share"]["2"], 0.65)
        self.assertEqual((th[1]["migrations"], th[1]["samples"], th[1]["outside_cpus"]), (0, 1, 0))
        self.assertEqual(th[1]["cpu_share"], {"1": 1.0})

    def test_pes(self):
        rc, out, err = run("migrations", self.cpu_job().root, "--pes", "1")
        self.assertOk((rc, out, err))
        self.assertIn("1 thread, 0 migrations", out)
        self.assertNotIn("  PE 0 ", out)
        self.assertBadInput(run("migrations", self.cpu_job(name="b").root, "--pes", "5"), "--pes",
                            "PEs 0, 1")

    def test_the_kernels_count_beside(self):
        td = TraceDir(os.path.join(self.tmp, "kernel"))
        names = dict(NAMES0, counter={"0": "context-switches", "1": "cpu-migrations"})
        pe0 = MPE0[:-1] + [(1000000, CTR, 0, 0, 40, 0), (1000000, CTR, 1, 0, 4, 0), (1000000, END, EXIT)]
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=names,
                tracks={"pe0": pe0, "pe1": MPE1}, version=3, cpus=MCPUS,
                end={"how": "exit", "tick": 2000000})
        rc, out, err = run("migrations", td.root)
        self.assertOk((rc, out, err))
        rows = {l.split()[1]: l.split() for l in out.splitlines() if l.startswith("  PE ")}
        self.assertEqual(rows["0"][3:6], ["4", "3", "4"])     # samples, migrations, the kernel's count
        self.assertEqual(rows["1"][3:6], ["1", "0", "-"])     # PE 1 has no counter record
        doc = json.loads(run("migrations", td.root, "--json")[1])
        self.assertEqual([t["kernel_migrations"] for t in doc["threads"]], [4, None])
        rc, out, err = run("migrations", self.cpu_job().root)
        self.assertIn("cpu-migrations counter, not opened in this run", out)

    def test_a_sample_outside_the_cpu_set(self):
        td = self.cpu_job(pe1=[(0, CPU, 1), (0, IB), (500000, CPU, 0), (1000000, IE), (1000000, END, EXIT)])
        rc, out, err = run("migrations", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("PE 1: 1 sample outside its CPU set at its start (1)", out)
        self.assertIn("2 threads, 4 migrations", out)

    def test_the_other_commands_read_cpu_records(self):
        td = self.cpu_job()
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 0, out + err)
        self.assertOk(run("summary", td.root))
        doc = load_perfetto(self, td)
        cpu = [(e["ts"], e["args"]["cpu"]) for e in doc["traceEvents"] if e.get("name") == "PE 0 cpu"]
        self.assertEqual(cpu, [(0.0, 2), (250.0, 0), (300.0, 3), (600.0, 2)])

    def test_check_cpu_records(self):
        rc, out, err = run("check", self.cpu_job().root)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("cpu records of 2 tracks", out)
        # No record at the start, a record that names the CPU before it, a
        # CPU outside the set (a warning only).
        late = [e for e in MPE0 if e[1] != CPU or e[0] != 0]
        td = self.cpu_job(pe0=late, name="late")
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("the first cpu record is at tick 500000", out)
        same = [(0, CPU, 1), (0, IB), (500000, CPU, 1), (1000000, IE), (1000000, END, EXIT)]
        rc, out, err = run("check", self.cpu_job(pe1=same, name="same").root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("record 2: a cpu record naming CPU 1, as the one before it", out)
        none = [e for e in MPE1 if e[1] != CPU]
        rc, out, err = run("check", self.cpu_job(pe1=none, name="none").root)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("node0.pe1.events: no cpu record", out)
        moved = [(0, CPU, 1), (0, IB), (500000, CPU, 0), (1000000, IE), (1000000, END, EXIT)]
        rc, out, err = run("check", self.cpu_job(pe1=moved, name="moved").root)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ran on CPU 0, outside the CPU set it began with", out)

    def test_versions_without_cpu_records(self):
        pe0 = [e for e in MPE0 if e[1] != CPU]
        pe1 = [e for e in MPE1 if e[1] != CPU]
        td = self.cpu_job(pe0=pe0, pe1=pe1, version=2, cpus=None, name="v2")
        self.assertOk(run("summary", td.root))
        self.assertBadInput(run("migrations", td.root), "format version 2 has no CPU samples")
        # A cpu record in a version 2 file is a kind that version does not have.
        td = self.cpu_job(version=2, cpus=None, name="v2cpu")
        self.assertBadInput(run("summary", td.root), "node0.pe0.events", "unknown event kind 25")

    def test_summary_mode(self):
        td = SummaryTest.summary_job(self)
        self.assertBadInput(run("migrations", td.root), "summary-mode trace has no CPU samples")

    def test_bad_cpu_set(self):
        td = self.cpu_job(cpus={"pe0": [0, "1"], "pe1": [1]}, name="badcpus")
        self.assertBadInput(run("migrations", td.root), "node0.json", "tracks[0].cpus")


# A one-node job of 2 PEs with two MPI ranks on PE 0 (version 3; k = 0.5).
# Rank 0: MPI_Send to 1 (tag 5, 8 bytes) 10-20 us, then MPI_Recv from 1
# 30-100 us, waiting 40-90 us; rank 1 runs while rank 0 waits: MPI_Recv
# 45-60 us (waiting 46-55), MPI_Send 70-75 us. Names: 0 MPI_Send, 1 MPI_Recv.
MPI_B, MPI_E, MPI_WB, MPI_WE = 26, 27, 28, 29
RPE0 = [(0, CPU, 0), (0, HB, MAIN, -1, 0, 0),
        (10000, MPI_B, 0, 0, 1), (20000, MPI_E, 0, 1, 5, 8),
        (30000, MPI_B, 0, 1, 1), (40000, MPI_WB, 0),
        (45000, MPI_B, 1, 1, 1), (46000, MPI_WB, 1), (55000, MPI_WE, 1), (60000, MPI_E, 1, 0, 5, 8),
        (70000, MPI_B, 1, 0, 1), (75000, MPI_E, 1, 0, 6, 16),
        (90000, MPI_WE, 0), (100000, MPI_E, 0, 1, 6, 16),
        (200000, HE, MAIN), (200000, IB), (1000000, IE), (1000000, END, EXIT)]
RPE1 = [(0, CPU, 1), (0, IB), (1000000, IE), (1000000, END, EXIT)]
RNAMES = dict(NAMES0, mpi={"0": "MPI_Send", "1": "MPI_Recv"})


class MpiTest(Base):
    """weft-trace mpi (and summary's MPI section, perfetto's rank threads,
    check's rules) on a synthetic trace of two ranks sharing a PE."""

    def mpi_job(self, pe0=RPE0, name="mpi"):
        td = TraceDir(os.path.join(self.tmp, name))
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=RNAMES,
                tracks={"pe0": pe0, "pe1": RPE1}, version=3, cpus={"pe0": [0], "pe1": [1]},
                end={"how": "exit", "tick": 2000000})
        return td

    def test_json(self):
        rc, out, err = run("mpi", self.mpi_job().root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        ranks = {r["rank"]: r for r in doc["ranks"]}
        self.assertEqual(sorted(ranks), [0, 1])
        self.assertEqual((ranks[0]["pe"], ranks[0]["mpi_ns"], ranks[0]["waited_ns"]), (0, 80000.0, 50000.0))
        self.assertEqual((ranks[1]["mpi_ns"], ranks[1]["waited_ns"]), (20000.0, 9000.0))
        c0 = {c["call"]: c for c in ranks[0]["calls"]}
        self.assertEqual((c0["MPI_Recv"]["count"], c0["MPI_Recv"]["total_ns"], c0["MPI_Recv"]["waited_ns"],
                          c0["MPI_Recv"]["bytes"]), (1, 70000.0, 50000.0, 16))
        self.assertEqual((c0["MPI_Send"]["total_ns"], c0["MPI_Send"]["bytes"]), (10000.0, 8))
        calls = {c["call"]: c for c in doc["calls"]}
        self.assertEqual((calls["MPI_Recv"]["count"], calls["MPI_Recv"]["total_ns"],
                          calls["MPI_Recv"]["waited_ns"], calls["MPI_Recv"]["max_ns"]),
                         (2, 85000.0, 59000.0, 70000.0))
        self.assertEqual((calls["MPI_Send"]["count"], calls["MPI_Send"]["bytes"]), (2, 24))

    def test_text_summary_perfetto_check(self):
        td = self.mpi_job()
        rc, out, err = run("mpi", td.root, "--calls")
        self.assertOk((rc, out, err))
        self.assertIn("MPI: 2 ranks", out)
        self.assertIn("Rank 1 (PE 0)", out)
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("MPI calls of 2 ranks", out)
        rc, out, err = run("check", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("MPI calls of 2 ranks", out)
        doc = load_perfetto(self, td)
        threads = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
                   if e.get("ph") == "M" and e.get("name") == "thread_name"}
        self.assertIn("rank 0 (PE 0)", threads.values())
        slices = [e for e in doc["traceEvents"] if e.get("cat") == "mpi"]
        self.assertEqual(len(slices), 4 + 2)   # four calls, two waits
        recv0 = [e for e in slices if e["name"] == "MPI_Recv" and e["args"]["rank"] == 0][0]
        self.assertEqual((recv0["ts"], recv0["dur"], recv0["args"]["peer"], recv0["args"]["tag"]),
                         (30.0, 70.0, 1, 6))

    def test_dropped_events(self):
        # PE 0 drops events while rank 0 waits in MPI_Recv (its wait's and
        # call's ends are gone) and rank 1's next call begins: what is left
        # pairs up, nothing is reported broken, and the lost call is not
        # counted.
        DROP = 32
        pe0 = [(0, CPU, 0), (0, HB, MAIN, -1, 0, 0),
               (10000, MPI_B, 0, 0, 1), (20000, MPI_E, 0, 1, 5, 8),
               (30000, MPI_B, 0, 1, 1), (40000, MPI_WB, 0), (45000, MPI_B, 1, 1, 1),
               (80000, DROP, 500, 0, 50000, 0), (85000, MPI_WE, 1), (90000, MPI_E, 1, 0, 5, 8),
               (95000, MPI_B, 1, 0, 1), (99000, MPI_E, 1, 0, 6, 16),
               (200000, HE, MAIN), (200000, IB), (1000000, IE), (1000000, END, EXIT)]
        td = self.mpi_job(pe0=pe0, name="dropped")
        rc, out, err = run("check", td.root)
        self.assertNotIn("mpi_end of rank", out + err)
        self.assertNotIn("mpi_wait_end of rank", out + err)
        self.assertNotIn("without an end", out + err)
        rc, out, err = run("mpi", td.root, "--json")
        self.assertOk((rc, out, err))
        ranks = {r["rank"]: r for r in json.loads(out)["ranks"]}
        c0 = {c["call"]: c["count"] for c in ranks[0]["calls"]}
        c1 = {c["call"]: c["count"] for c in ranks[1]["calls"]}
        self.assertEqual(c0, {"MPI_Send": 1})
        self.assertEqual(c1, {"MPI_Send": 1})

    def test_broken_pairs(self):
        bad = [r for r in RPE0 if r[1:3] != (MPI_B, 1)]   # rank 1's calls lose their begins
        rc, out, err = run("check", self.mpi_job(pe0=bad, name="bad").root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("mpi_end of rank 1, which is in no call", out)
        self.assertIn("mpi_wait_begin of rank 1 outside any call", out)

    def test_none_and_old_versions(self):
        rc, out, err = run("mpi", self.cpu_free_job().root)
        self.assertOk((rc, out, err))
        self.assertIn("No MPI call in the trace", out)

    def cpu_free_job(self):
        td = TraceDir(os.path.join(self.tmp, "plain"))
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": MPE0, "pe1": MPE1}, version=3, cpus=MCPUS,
                end={"how": "exit", "tick": 2000000})
        return td


# A balancing step of collection 1 (Block[2d]) on two PEs (format version 3):
# PE 0 is its root (strategy: max/avg 1.5 -> predicted 1.0), one element
# (index 7, 64 bytes) moves from PE 0 to PE 1; one more moves by migrate_to
# after the step. Busy before the step: PE 0 150 us, PE 1 50 us (max/avg
# 1.5); after it: 301 us each (1.0).
PHB, PHE = 30, 31
BAL, PTR = 1 << 31, 1 << 30


def f32bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


LPE0 = [(0, CPU, 0), (0, HB, MAIN, -1, 0, 0), (150000, HE, MAIN), (150000, IB), (200000, IE),
        (200000, HB, 7, -1, 0, 0), (200000, LBB, 0, 1, 1), (200000, PHB, 0, 1 << 8 | 0),
        (202000, HE, 7), (202000, IB), (210000, IE),
        (210000, HB, 7, 1, 0, 0), (210000, PHE, 0, 1 << 8 | 0), (210000, PHB, 0, 1 << 8 | 1),
        (220000, PHE, 0, 1 << 8 | 1, f32bits(1.5), f32bits(1.0)), (220000, PHB, 0, 1 << 8 | 2),
        (225000, MOUT, 1, 1, 7, 64 | BAL), (226000, HE, 7), (226000, IB), (240000, IE),
        (240000, HB, 7, 1, 0, 0), (240000, PHE, 0, 1 << 8 | 2), (250000, LBE, 0, 1),
        (251000, HE, 7), (251000, IB), (300000, IE),
        (300000, HB, 7, 1, 0, 0), (600000, MOUT, 1, 1, 3, 40 | PTR), (600000, HE, 7),
        (600000, IB), (1000000, IE), (1000000, END, EXIT)]
LPE1 = [(0, CPU, 1), (0, HB, 7, 0, 0, 0), (50000, HE, 7), (50000, IB), (205000, IE),
        (205000, HB, 7, 0, 0, 0), (205000, LBB, 0, 1, 0), (205000, PHB, 0, 1 << 8 | 0),
        (206000, HE, 7), (206000, IB), (222000, IE),
        (222000, HB, 7, 0, 0, 0), (222000, PHE, 0, 1 << 8 | 0), (222000, PHB, 0, 1 << 8 | 2),
        (223000, HE, 7), (223000, IB), (230000, IE),
        (230000, HB, 7, 0, 0, 0), (230000, MIN, 1, 0, 7, 64 | BAL), (235000, PHE, 0, 1 << 8 | 2),
        (236000, HE, 7), (236000, IB), (252000, IE),
        (252000, HB, 7, 0, 0, 0), (252000, LBE, 0, 1), (253000, HE, 7), (253000, IB), (400000, IE),
        (400000, HB, 7, 0, 0, 0), (600000, MIN, 1, 0, 3, 40 | PTR), (700000, HE, 7),
        (700000, IB), (1000000, IE), (1000000, END, EXIT)]


class LbTest(Base):
    """weft-trace lb (and profile's step marks) on a synthetic trace of one
    balancing step on two PEs."""

    def lb_job(self, pe0=LPE0, pe1=LPE1, name="lb", mode="full"):
        td = TraceDir(os.path.join(self.tmp, name))
        kw = {}
        if mode == "summary":
            kw["summary"] = {"format": "weft-trace-summary", "version": 3, "node": 0, "bin_ns": 1048576,
                             "pes": [{"pe": 0, "wall_ns": 1000000, "busy_ns": 0, "idle_ns": 0,
                                      "bins": [], "names": [], "counters": {}}]}
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": pe0, "pe1": pe1}, version=3, cpus={"pe0": [0], "pe1": [1]},
                end={"how": "exit", "tick": 2000000}, mode=mode, **kw)
        return td

    def test_json(self):
        rc, out, err = run("lb", self.lb_job().root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        self.assertEqual(doc["pes"], 2)
        self.assertEqual(len(doc["steps"]), 1)
        s = doc["steps"][0]
        self.assertEqual((s["collection"], s["step"], s["root_pe"], s["pes"]), ("Block[2d]", 0, 0, 2))
        self.assertEqual((s["begin_ns"], s["end_ns"], s["duration_ns"]), (200000.0, 252000.0, 52000.0))
        self.assertEqual(s["phases_ns"], {"collection": 10000.0, "strategy": 10000.0, "migration": 20000.0})
        self.assertEqual((s["migrations"], s["bytes"], s["arrived"], s["by_pointer"]), (1, 64, 1, 0))
        self.assertEqual(s["moves"], [{"element": 7, "from": 0, "to": 1, "bytes": 64, "by_pointer": False}])
        # Each PE's window runs between its own steps' ends and begins.
        self.assertEqual((s["before"]["max_ns"], s["before"]["avg_ns"]), (150000.0, 100000.0))
        self.assertAlmostEqual(s["before"]["ratio"], 1.5)
        self.assertEqual((s["after"]["max_ns"], s["after"]["avg_ns"], s["after"]["ratio"]),
                         (301000.0, 301000.0, 1.0))   # the step's last handler, then 300 us
        self.assertEqual((s["strategy_before"], s["predicted"]), (1.5, 1.0))
        self.assertAlmostEqual(s["gain_measured"], 1.5)
        self.assertAlmostEqual(s["gain_predicted"], 1.5)
        self.assertEqual(doc["other_migrations"], 1)

    def test_text_profile_check(self):
        td = self.lb_job()
        rc, out, err = run("lb", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("Load balancing: 1 step on 2 PEs, 1 migration, 64 bytes", out)
        self.assertIn("Block[2d] step 0 at 0.200 ms: 0.052 ms (collection 0.010, strategy 0.010, "
                      "migration 0.020 on PE 0), 1 migration, 64 bytes", out)
        self.assertIn("busy max/avg before 1.500", out)
        self.assertIn("after  1.000", out)
        self.assertIn("gain measured 1.500x, predicted 1.500x (strategy: max/avg 1.500 -> predicted 1.000)",
                      out)
        self.assertIn("Migrations outside the steps (migrate_to): 1", out)
        self.assertOk(run("check", td.root))
        png = os.path.join(self.tmp, "profile.png")
        self.assertOk(run("profile", td.root, "-o", png))
        self.assertPng(png)

    def test_unpaired_and_none(self):
        # A step whose end PE 1 never wrote (a killed run): still reported, on
        # both PEs, its end the last one seen.
        cut = [r for r in LPE1 if r[1] != LBE]
        rc, out, err = run("lb", self.lb_job(pe1=cut, name="cut").root, "--json")
        self.assertOk((rc, out, err))
        s = json.loads(out)["steps"][0]
        self.assertEqual((s["pes"], s["end_ns"]), (2, 250000.0))
        # An end without its begin: a warning, not a traceback.
        stray = [r for r in LPE1 if r[1] != LBB]
        rc, out, err = run("lb", self.lb_job(pe1=stray, name="stray").root)
        self.assertOk((rc, out, err))
        self.assertIn("lb_end of Block[2d] step 0 on PE 1 has no lb_begin", err)
        # No step at all.
        plain = [r for r in LPE0 if r[1] not in (LBB, LBE, PHB, PHE, MOUT)]
        rc, out, err = run("lb", self.lb_job(pe0=plain, pe1=RPE1, name="plain").root)
        self.assertOk((rc, out, err))
        self.assertIn("No balancing step in this trace", out)

    def test_summary_mode_is_refused(self):
        self.assertBadInput(run("lb", self.lb_job(name="sum", mode="summary").root), "summary-mode")


DROPPED = 32                 # count low, high; the tick it began dropping, low, high
# PE 0 drops 70000 + 2**32 events in two stretches: the first inside a
# handler (its end, and an entry's end whose begin was dropped, come after
# the drop), the second between handlers. PE 1 drops none.
DPE0 = [(0, CPU, 2), (0, HB, 7, -1, 64, 0), (10000, EB, 3, 1, 42), (20000, FB), (20000, FE, 4096),
        (50000, DROPPED, 70000, 0, 40000, 0), (60000, EE, 3), (70000, HE, 7),
        (80000, HB, 7, -1, 64, 0), (90000, HE, 7), (100000, FB), (100000, FE, 4096),
        (300000, DROPPED, 0, 1, 200000, 0), (400000, HB, 7, -1, 64, 0), (500000, HE, 7),
        (500000, IB), (1000000, IE), (1000000, END, EXIT)]
DPE1 = [(0, CPU, 1), (0, IB), (1000000, IE), (1000000, END, EXIT)]


class DroppedTest(Base):
    """Events a track dropped while the writer fell behind: summary says how
    many, per track and in all; the walk closes what was open when the
    track began dropping and passes over ends whose begins were dropped."""

    def drop_job(self, pe0=DPE0, name="drops"):
        td = TraceDir(os.path.join(self.tmp, name))
        td.node(0, nodes=1, first_pe=0, pes=2, k=0.5, wall_ns=1000000, real_ns_base=R0, names=NAMES0,
                tracks={"pe0": pe0, "pe1": DPE1}, version=3, cpus={"pe0": [0, 1, 2], "pe1": [1]},
                end={"how": "exit", "tick": 2000000})
        return td

    def test_summary_text_and_json(self):
        td = self.drop_job()
        total = 70000 + (1 << 32)
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("%d events dropped: the writer fell behind" % total, out)
        self.assertIn("PE 0: %d dropped" % total, out)
        self.assertNotIn("PE 1: ", out.split("events dropped")[1].split("Time per name")[0])
        rc, out, err = run("summary", td.root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        self.assertEqual(doc["dropped"], total)
        tracks = {t["pe"]: t for t in doc["end"][0]["tracks"]}
        self.assertEqual((tracks[0]["dropped"], tracks[1]["dropped"]), (total, 0))
        # The handler open at the first drop ends where the drop began; the
        # ends after it are passed over; the later handlers count.
        names = {(n["space"], n["name"]): n for n in doc["names"]}
        self.assertEqual(names[("handler", "objects.element")]["count"], 3)
        self.assertEqual(names[("handler", "objects.element")]["total_ns"], 20000 + 10000 + 100000)

    def test_check_and_other_commands_accept_drops(self):
        td = self.drop_job()
        rc, out, err = run("check", td.root)
        self.assertOk((rc, out, err))
        self.assertOk(run("perfetto", td.root, "-o", os.path.join(self.tmp, "d.json")))
        self.assertOk(run("profile", td.root, "-o", os.path.join(self.tmp, "d.png")))

    def test_no_drops_no_line(self):
        rc, out, err = run("summary", self.drop_job(pe0=MPE0, name="none").root)
        self.assertOk((rc, out, err))
        self.assertNotIn("dropped", out)


class LauncherTest(Base):
    """The command is a launcher of the package weft_trace (tools/weft_trace/;
    installed in lib/weft/python/): it finds the package from its own real
    path, so a symbolic link to it elsewhere works, and where the package is
    not there it says so in one line."""

    def test_symbolic_link(self):
        td = self.job()
        link = os.path.join(self.tmp, "bin", "weft-trace")
        os.makedirs(os.path.dirname(link))
        os.symlink(os.path.abspath(TOOL), link)
        res = run_tool(link, "summary", td.root)
        self.assertOk(res)
        self.assertIn("Per PE", res[1])

    def test_package_missing(self):
        td = self.job()
        copy = os.path.join(self.tmp, "alone", "weft-trace")
        os.makedirs(os.path.dirname(copy))
        shutil.copy(TOOL, copy)
        self.assertBadInput(run_tool(copy, "summary", td.root), "the package weft_trace")


class SampledTest(Base):
    """A trace of --weft:trace-sample=N (issue 30): most entries run without
    a handler record; they are busy time, the check accepts them, and the
    summary says what its rows count."""

    # One PE, 1 ms: an entry with no handler (its message was left out), an
    # idle period, then a kept message (handler and entry) that sends one.
    EVENTS = [(0, HB, MAIN, -1, 0, 0), (50000, HE, MAIN),
              (100000, EB, 3, 1, 0), (200000, EE, 3),
              (200000, IB), (300000, IE),
              (300000, HB, 7, 0, 16, 0), (300000, EB, 3, 1, 1),
              (350000, SEND, 0, 16, 7, 0),
              (400000, EE, 3), (400000, HE, 7),
              (400000, IB), (1000000, IE)]

    def sampled_job(self, sample):
        td = TraceDir(os.path.join(self.tmp, "sampled"))
        td.node(0, nodes=1, first_pe=0, pes=1, k=0.5, wall_ns=1000000, real_ns_base=R0,
                names=NAMES0, tracks={"pe0": self.EVENTS})
        path = td.path("node0.json")
        with open(path) as f:
            meta = json.load(f)
        if sample is not None:
            meta["sample"] = sample
        with open(path, "w") as f:
            json.dump(meta, f)
        return td

    def test_entries_without_handlers_are_busy(self):
        td = self.sampled_job(16)
        self.assertOk(run("check", td.root))
        rc, out, err = run("summary", td.root, "--json")
        self.assertOk((rc, out, err))
        doc = json.loads(out)
        self.assertEqual(doc["sample"], 16)
        self.assertEqual(doc["sampled_messages"]["sends_recorded"], 1)
        self.assertEqual(doc["sampled_messages"]["sent_about"], 16)
        pe = doc["pes"][0]
        # main 50 us, the lone entry 100 us, the kept handler 100 us.
        self.assertAlmostEqual(pe["busy_ns"], 250000, delta=1.0)
        self.assertAlmostEqual(pe["idle_ns"], 700000, delta=1.0)
        names = {(n["space"], n["name"]): n for n in doc["names"]}
        self.assertEqual(names[("entry", "Block::ghost")]["count"], 2)
        self.assertEqual(names[("handler", "objects.element")]["count"], 1)
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertIn("Sampled trace (--weft:trace-sample=16)", out)
        self.assertIn("1 sends recorded, about 16 sent", out)
        self.assertIn("busy: outermost handler, entry, task or region", out)

    def test_unsampled_trace_wants_entries_in_handlers(self):
        td = self.sampled_job(None)
        rc, out, err = run("check", td.root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("outside any handler", out)
        rc, out, err = run("summary", td.root)
        self.assertOk((rc, out, err))
        self.assertNotIn("Sampled trace", out)

    def test_bad_factor(self):
        for bad in (0, -2, "4", True):
            td = self.sampled_job(bad)
            self.assertBadInput(run("summary", td.root), "node0.json", "sample")


if __name__ == "__main__":
    if not os.access(TOOL, os.X_OK):
        sys.exit("weft-trace not found or not executable: %s (set WEFT_TRACE_TOOL)" % TOOL)
    unittest.main()

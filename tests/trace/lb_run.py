#!/usr/bin/python3
"""A traced run of a balancing program, read back by `weft-trace lb`.

    lb_run.py --tool TOOL --case CASE -- COMMAND...

Runs COMMAND (tests/trace/lb_program: at_sync steps, then one on demand)
with --weft:trace=DIR --weft:lb-stats appended, then checks:

  balanced  (--weft:lb=NAME) `weft-trace check` passes; every step that
            --weft:lb-stats printed is in the trace, as a span on every PE
            with its collection, strategy and migration phases on the
            array's root PE, the strategy's max/avg before and its
            prediction; its migrate_out records (the balancer's) are as many
            as the step's line says it planned, each arrived (a migrate_in
            on its destination), with bytes; `weft-trace lb` prints each
            step, and `weft-trace profile` draws the picture.
  off       (--weft:lb=off) the at_sync steps are still steps on every PE,
            with no strategy phase and no migration.
Exit 0 when everything held; otherwise each failure on its own line, exit 1.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

from run_common import fail, failures, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--case", required=True, choices=("balanced", "off"))
    ap.add_argument("command", nargs="+")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="weft-lbtrace-")
    try:
        trace = os.path.join(tmp, "trace")
        p = run(args.command + ["--weft:trace=" + trace, "--weft:lb-stats"])
        # "weft lb: array X step K: ..., N migrations, ..." per step.
        planned = {}
        for m in re.finditer(r"^weft lb: .* step (\d+): (.*)$", p.stderr, re.M):
            moves = re.search(r", (\d+) migrations", m.group(2))
            planned[int(m.group(1))] = int(moves.group(1)) if moves else 0
        run([args.tool, "check", trace])
        doc = json.loads(run([args.tool, "lb", trace, "--json"]).stdout or "{}")
        steps = doc.get("steps", [])
        pes = doc.get("pes")
        if not steps:
            fail("no step in `weft-trace lb --json`")
        if sorted(s["step"] for s in steps) != sorted(planned):
            fail("steps in the trace %s, --weft:lb-stats printed %s"
                 % (sorted(s["step"] for s in steps), sorted(planned)))
        for s in steps:
            what = "%s step %d" % (s["collection"], s["step"])
            if s["pes"] != pes or s["end_ns"] is None:
                fail("%s: a span on %d PEs of %s (end %s)" % (what, s["pes"], pes, s["end_ns"]))
            if s["root_pe"] != 0:
                fail("%s: root PE %s (expected 0, the array's root)" % (what, s["root_pe"]))
            phases = sorted(s["phases_ns"])
            want = ["collection", "migration", "strategy"] if args.case == "balanced" else \
                ["collection", "migration"]
            if phases != want:
                fail("%s: phases %s (expected %s)" % (what, phases, want))
            if s["migrations"] != planned.get(s["step"], -1):
                fail("%s: %d migrations in the trace, %s planned"
                     % (what, s["migrations"], planned.get(s["step"])))
            if s["arrived"] != s["migrations"]:
                fail("%s: %d migrations, %d arrived" % (what, s["migrations"], s["arrived"]))
            if args.case == "balanced":
                if not s["predicted"] or not s["strategy_before"]:
                    fail("%s: no prediction (%s -> %s)" % (what, s["strategy_before"], s["predicted"]))
                if s["step"] == 0 and s["migrations"] == 0:
                    fail("%s: the first step moved nothing" % what)
                if s["migrations"] and s["bytes"] <= 0:
                    fail("%s: %d migrations of 0 bytes" % (what, s["migrations"]))
                if any(m["from"] == m["to"] for m in s["moves"]):
                    fail("%s: a move to its own PE" % what)
            elif s["migrations"] or s["predicted"] is not None:
                fail("%s: --weft:lb=off moved %d, predicted %s" % (what, s["migrations"], s["predicted"]))
        text = run([args.tool, "lb", trace]).stdout
        for s in steps:
            if not re.search(r"^  \S+ step %d at " % s["step"], text, re.M):
                fail("`weft-trace lb` has no line for step %d:\n%s" % (s["step"], text))
        png = os.path.join(tmp, "profile.png")
        run([args.tool, "profile", trace, "-o", png])
        if not os.path.exists(png) or os.path.getsize(png) == 0:
            fail("profile wrote no PNG")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        sys.exit(1)
    print("lb_run: %s: %d steps on %d PEs as --weft:lb-stats said" % (args.case, len(steps), pes or 0))


main()

#!/usr/bin/env python3
"""Tests of bench/report.py's verdicts, on JSON rows made up here.

A verdict is judged on the variant the program reported as its default (a
"default_config" row that run_all.sh writes from --weft:print-config),
names that variant, says "not measured" and why when it cannot be computed
(then report.py exits 3), and a ratio formed per round says how many rounds
it rests on. Standard library only; run as `python3 test_report.py
path/to/report.py`.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

REPORT = None  # set from argv


def kn_rows(queue, ratio16, core_us=0.40):
    """kneighbor rows of one variant: core and objects at 16 B and 64 KiB."""
    rows = []
    for b, f in ((16, 1.0), (65536, 1.2)):
        common = {"bench": "kneighbor", "mode": "smp", "pes": 2, "k": 3, "bytes": b,
                  "touch": False, "queue": queue, "bind": "compact", "alloc": "mimalloc"}
        rows.append(dict(common, level="core", payload="message", metric="iter_us",
                         value=core_us * f, min=core_us * f, max=core_us * f))
        rows.append(dict(common, level="objects", payload="span", metric="iter_us",
                         value=core_us * f * ratio16, min=core_us * f * ratio16,
                         max=core_us * f * ratio16))
        rows.append(dict(common, level="objects", payload="span",
                         metric="ratio_objects_over_core", value=ratio16, min=ratio16,
                         max=ratio16))
    return rows


def run(files):
    """Writes {name: rows} as OUT/<name>.jsonl, runs report.py; (rc, stdout, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        for name, rows in files.items():
            with open(os.path.join(d, name + ".jsonl"), "w") as f:
                for r in rows:
                    f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
        p = subprocess.run([sys.executable, REPORT, d], capture_output=True, text=True,
                           timeout=60)
        return p.returncode, p.stdout, p.stderr


def line_with(text, needle):
    hits = [l for l in text.splitlines() if needle in l]
    if not hits:
        raise AssertionError("no line with %r in:\n%s" % (needle, text))
    return hits[0]


DEFAULT_SPSC = {"bench": "kneighbor", "metric": "default_config", "queue": "spsc-pairs",
                "bind": "compact", "alloc": "mimalloc", "source": "--weft:print-config"}


class KneighborVerdicts(unittest.TestCase):
    def test_judged_on_the_recorded_default_not_another_variant(self):
        # mpsc meets the target, the default (spsc-pairs) does not: the
        # verdict must be the default's.
        rows = kn_rows("mpsc", 1.25) + kn_rows("spsc-pairs", 1.58) + [DEFAULT_SPSC]
        rc, out, err = run({"kneighbor": rows})
        self.assertEqual(rc, 0, err)
        target = line_with(out, "target: objects ÷ core under 1.5")
        self.assertIn("queue=spsc-pairs", target)
        self.assertIn("1.58", target)
        self.assertIn("**not met**", target)
        summary = line_with(out, "| kNeighbor: objects ÷ core under 1.5")
        self.assertIn("spsc-pairs/compact/mimalloc", summary)
        self.assertTrue(summary.rstrip().endswith("| not met |"), summary)

    def test_the_other_way_round(self):
        rows = kn_rows("mpsc", 1.58) + kn_rows("spsc-pairs", 1.25) + [DEFAULT_SPSC]
        rc, out, err = run({"kneighbor": rows})
        self.assertEqual(rc, 0, err)
        target = line_with(out, "target: objects ÷ core under 1.5")
        self.assertIn("1.25", target)
        self.assertIn("**met**", target)

    def test_no_recorded_default_is_not_measured_and_fails(self):
        rows = kn_rows("mpsc", 1.25) + kn_rows("spsc-pairs", 1.25)
        rc, out, err = run({"kneighbor": rows})
        self.assertEqual(rc, 3, out + err)
        target = line_with(out, "target: objects ÷ core under 1.5")
        self.assertIn("not measured: no default_config row", target)
        self.assertIn("not measured: kNeighbor: objects ÷ core", err)


class RoundsAndFailures(unittest.TestCase):
    @staticmethod
    def wavefront(rounds_gomp, rounds_weft, teams=(2, 4)):
        rows = []
        for team in teams:
            for rt, rounds in (("libgomp", rounds_gomp), ("libweft-omp", rounds_weft)):
                for r in rounds:
                    rows.append({"bench": "omp_wavefront", "runtime": rt, "team": team,
                                 "cores": 2, "metric": "sweep_ms", "value": 1.0, "round": r})
        return rows

    def test_a_ratio_says_how_many_rounds_it_rests_on(self):
        rc, out, err = run({"omp_wavefront": self.wavefront([1, 2, 3, 4, 5], [1, 2, 4, 5])})
        self.assertEqual(rc, 0, err)
        self.assertIn("4 of 5 rounds", line_with(out, "| 2 |"))
        rc, out, err = run({"omp_wavefront": self.wavefront([1, 2, 3], [1, 2, 3])})
        self.assertIn("3 rounds)", line_with(out, "| 2 |"))

    def test_a_team_without_a_ratio_leaves_the_verdict_unmeasured(self):
        rows = self.wavefront([1, 2], [1, 2], teams=(2,))
        rows += [r for r in self.wavefront([1, 2], [], teams=(8,))]  # weft never finished at 8
        rc, out, err = run({"omp_wavefront": rows})
        self.assertEqual(rc, 3, out + err)
        self.assertIn("not measured: no libweft-omp ÷ libgomp ratio for 8 threads",
                      line_with(out, "requirement: within 1.5x"))

    def test_a_section_that_fails_is_not_measured_and_fails_the_run(self):
        # A "k" that is a list (a malformed file) cannot key the section's
        # groups: its code raises.
        rows = kn_rows("spsc-pairs", 1.2) + [DEFAULT_SPSC]
        for r in rows:
            r["k"] = [3]
        rc, out, err = run({"kneighbor": rows})
        self.assertEqual(rc, 3, out + err)
        self.assertIn("verdicts are not measured: the section's code failed", out)
        self.assertIn("not measured: every verdict of the kneighbor section", err)

    def test_a_benchmark_not_run_is_not_a_failure(self):
        rc, out, err = run({"omp_wavefront": self.wavefront([1], [1])})
        self.assertEqual(rc, 0, err)
        self.assertIn("_Not run: no results in", out)


if __name__ == "__main__":
    REPORT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)

"""bench/affinity/study.py --quick: a tiny sweep whose every run verifies,
written as valid JSON lines with the fields the study promises, and two PNG
figures. Usage: test_affinity_study.py STUDY_PY BIN_DIR OUT_DIR"""

import json
import os
import shutil
import subprocess
import sys

study, bin_dir, out = sys.argv[1:4]
shutil.rmtree(out, ignore_errors=True)
env = dict(os.environ, OMP_WAIT_POLICY="passive")  # a loaded machine: no spinning
p = subprocess.run([sys.executable, study, "--quick", "--bin-dir", bin_dir, "--out", out],
                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
print(p.stdout + p.stderr)
if p.returncode != 0:
    sys.exit("FAIL: study.py --quick exited %d" % p.returncode)

need = {"kernel": str, "class": str, "runtime": str, "threads": int, "bind": str, "mem": str,
        "seconds": float, "verified": bool, "round": int}
rows = []
with open(os.path.join(out, "runs.jsonl")) as f:
    for n, line in enumerate(f, 1):
        row = json.loads(line)  # raises on a line that is not JSON
        for key, kind in need.items():
            if not isinstance(row.get(key), kind):
                sys.exit("FAIL: runs.jsonl line %d: %r is not a %s: %s" % (n, key, kind.__name__, line))
        for key in ("migrations", "counters", "placement"):
            if key not in row:
                sys.exit("FAIL: runs.jsonl line %d: no %r: %s" % (n, key, line))
        if not row["verified"] or row["seconds"] <= 0:
            sys.exit("FAIL: runs.jsonl line %d: not a verified run: %s" % (n, line))
        rows.append(row)
seen = {(r["kernel"], r["runtime"], r["bind"], r["mem"]) for r in rows}
for kernel in ("ep", "mg"):
    for runtime in ("gomp", "weft"):
        if (kernel, runtime, "none", "first-touch") not in seen:
            sys.exit("FAIL: no %s run under %s with the default placement" % (kernel, runtime))
# libweft-omp applies every policy itself: interleave is measured whatever the machine.
if ("mg", "weft", "compact", "interleave") not in seen:
    sys.exit("FAIL: no libweft-omp run with bind=compact mem=interleave")
for png in ("speedup.png", "policies.png"):
    with open(os.path.join(out, png), "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            sys.exit("FAIL: %s is not a PNG file" % png)
summary = open(os.path.join(out, "summary.txt")).read()
nodes = rows[0].get("numa_nodes")
if nodes == 1 and "memory policies are equivalent here" not in summary:
    sys.exit("FAIL: one NUMA node, and summary.txt does not say the policies are equivalent")
print("ok: %d runs" % len(rows))

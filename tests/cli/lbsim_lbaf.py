#!/usr/bin/env python3
"""weft-lbsim --lbaf writes LBAF JSON that parses and carries the instance.

Usage: lbsim_lbaf.py WEFT_LBSIM WORK_DIR. One file (all tasks) and one file
per PE (%r in the name): each parses, is an LBDatafile, and together they
hold every object once with its load. Exit 1 on any disagreement.
"""
import json
import os
import subprocess
import sys

sim, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
one = os.path.join(work, "all.json")
per = os.path.join(work, "data.%r.json")
for target in (one, per):
    subprocess.run([sim, "--objects=50", "--pes=4", "--graph=mesh2d", "--json", f"--lbaf={target}"],
                   check=True, stdout=subprocess.DEVNULL)
with open(one, encoding="utf-8") as f:
    whole = json.load(f)
assert whole["type"] == "LBDatafile", whole.get("type")
tasks = whole["phases"][0]["tasks"]
assert len(tasks) == 50, len(tasks)
assert all(t["entity"]["type"] == "object" and t["time"] > 0 for t in tasks)
assert len(whole["phases"][0]["communications"]) > 0
seen = {}
for r in range(4):
    with open(per.replace("%r", str(r)), encoding="utf-8") as f:
        d = json.load(f)
    assert d["metadata"]["rank"] == r
    for t in d["phases"][0]["tasks"]:
        assert t["entity"]["home"] == r, t
        seen[t["entity"]["id"]] = t["time"]
assert seen == {t["entity"]["id"]: t["time"] for t in tasks}, "per-rank files disagree with the single file"
print("lbsim_lbaf: 50 tasks in one file and in 4 per-rank files agree")

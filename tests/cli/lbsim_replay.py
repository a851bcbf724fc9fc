#!/usr/bin/env python3
"""A run's --weft:lb-dump replays in weft-lbsim --replay.

Usage: lbsim_replay.py WEFT_LBSIM LB_STEPPER WORK_DIR [MPIEXEC]. cli_lb_stepper
balances 24 elements for 3 steps on 4 PEs with greedy and dumps them; the
replay prints one block per step (step number, collection, the run's plan
as '(dumped)', the compared strategies), as a table and as JSON lines;
--steps and --lbaf with %s select and export steps; a truncated dump is
exit 3 naming the file and byte; --weft:lb-dump-steps limits what the run
writes; a run whose elements talk to their neighbours (--weft:lb-comm=auto:
element with a dump) dumps its ring as edges, which the replay counts;
with --weft:lb=hierarchical the dumped steps are placed in one place (the
others by the tree) and replay to the run's plan. With MPIEXEC, two
processes over shm: node 0's file (FILE) holds the array's steps with PEs
of both nodes and the ring's edges across them, node 1's (FILE.node1)
none, its array root being on node 0; and the hierarchical case across
them. Exit 1 on any disagreement.
"""
import json
import os
import re
import subprocess
import sys

sim, stepper, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
dump = os.path.join(work, "run.lbdump")


def run(cmd, code=0):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
    out = p.stdout + p.stderr
    assert p.returncode == code, f"{cmd}: exit {p.returncode}, expected {code}:\n{out}"
    return out


run([stepper, "24", "3", "--weft:threads=4", "--weft:lb=greedy", f"--weft:lb-dump={dump}"])

# Table: one block per step, in order, with the run's own plan.
out = run([sim, f"--replay={dump}", "--compare=greedy,greedy-refine"])
blocks = re.findall(r"^step (\d+) of (array \S+) \(the run used greedy, tolerance ([0-9.]+), seed (\d+)\)$",
                    out, re.M)
assert [b[0] for b in blocks] == ["0", "1", "2"], out
assert len({b[1] for b in blocks}) == 1, out
assert out.count("instance: 24 objects on 4 PEs (1 nodes)") == 3, out
for name in ("(before)", "(dumped)", "greedy", "greedy-refine"):
    assert len(re.findall(r"^" + re.escape(name) + r" ", out, re.M)) == 3, (name, out)

# JSON: one object per step; greedy replayed on the dumped instance with
# the dumped seed reproduces the run's plan exactly.
out = run([sim, f"--replay={dump}", "--lb=greedy", "--json"])
lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
assert [l["step"] for l in lines] == [0, 1, 2], out
for l in lines:
    assert l["dumped_strategy"] == "greedy" and l["collection"].startswith("array ")
    assert l["instance"]["objects"] == 24 and l["instance"]["pes"] == 4
    rows = {r["strategy"]: r for r in l["results"]}
    assert set(rows) == {"(before)", "(dumped)", "greedy"}, rows
    assert rows["(dumped)"]["max"] == rows["greedy"]["max"], rows
    assert rows["(dumped)"]["migrations"] == rows["greedy"]["migrations"], rows
    # 4 heavy (3) + 20 light (1) = 32 over 4 PEs, plus each PE's measured
    # background (its time outside the elements: milliseconds here).
    assert 8.0 <= rows["(before)"]["avg"] < 8.5, rows
# The first step starts in blocks: PE 0 holds the 4 heavy and 2 light.
first = {r["strategy"]: r for r in lines[0]["results"]}
assert 14.0 <= first["(before)"]["max"] < 14.5, first

# --steps and --lbaf with %s: steps 1 and 2, one LBAF file each.
lbaf = os.path.join(work, "step%s.json")
out = run([sim, f"--replay={dump}", "--steps=1:", "--lb=refine", "--json", f"--lbaf={lbaf}"])
assert [json.loads(l)["step"] for l in out.splitlines() if l.startswith("{")] == [1, 2], out
for s in (1, 2):
    with open(lbaf.replace("%s", str(s)), encoding="utf-8") as f:
        assert len(json.load(f)["phases"][0]["tasks"]) == 24
assert not os.path.exists(lbaf.replace("%s", "0"))
out = run([sim, f"--replay={dump}", "--steps=7"], 3)
assert "none of the 3 steps in" in out, out

# A truncated dump: exit 3, the file and the byte named.
with open(dump, "rb") as f:
    data = f.read()
cut = os.path.join(work, "cut.lbdump")
with open(cut, "wb") as f:
    f.write(data[:len(data) - 5])
out = run([sim, f"--replay={cut}"], 3)
assert re.search(r"weft: fatal: weft-lbsim: --replay: .*cut\.lbdump: byte \d+: truncated step", out), out

# --weft:lb-dump-steps: the run writes only the steps asked for.
run([stepper, "24", "4", "--weft:threads=2", "--weft:lb=greedy-refine", f"--weft:lb-dump={dump}",
     "--weft:lb-dump-steps=2"])
out = run([sim, f"--replay={dump}", "--json"])
assert [json.loads(l)["step"] for l in out.splitlines() if l.startswith("{")] == [2], out

# Communication records: 24 elements each send 2 messages a step to the
# next; the dump's instances have the ring's 24 edges, cut where the
# blocks meet before balancing.
run([stepper, "24", "2", "2", "--weft:threads=4", "--weft:lb=greedy", f"--weft:lb-dump={dump}"])
out = run([sim, f"--replay={dump}", "--lb=greedy", "--json"])
lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
assert [l["instance"]["edges"] for l in lines] == [24, 24], out
first = {r["strategy"]: r for r in lines[0]["results"]}
assert first["(before)"]["off_pe_messages"] == 4 * 2, first  # 4 block boundaries
out = run([sim, f"--replay={dump}"])
assert out.count("instance: 24 objects on 4 PEs (1 nodes), 24 edges") == 2, out


def check_hierarchical_replay(out, steps, pes, nodes):
    """The dumped steps of a hierarchical run replay to the run's own plan:
    the offline strategy with the run's options (group size, tolerance,
    node level) places the dumped instance alike."""
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    assert [l["step"] for l in lines] == steps, out
    for l in lines:
        assert l["dumped_strategy"] == "hierarchical", l
        assert l["instance"]["pes"] == pes and l["instance"]["nodes"] == nodes, l
        assert l["instance"]["edges"] == 24, l
        rows = {r["strategy"]: r for r in l["results"]}
        assert rows["(dumped)"]["max"] == rows["hierarchical"]["max"], rows
        assert rows["(dumped)"]["migrations"] == rows["hierarchical"]["migrations"], rows


# hierarchical: a dumped step (--weft:lb-dump-steps=1:2) gathers the whole
# snapshot at the array's root and places it there with the offline
# strategy (its stats line names the strategy alone); the others go through
# the tree ("a tree over ...").
out = run([stepper, "24", "4", "2", "--weft:threads=4", "--weft:lb=hierarchical",
           f"--weft:lb-dump={dump}", "--weft:lb-dump-steps=1:2", "--weft:lb-stats"])
assert re.findall(r"step (\d+): 24 elements, hierarchical \(a tree over 1 node", out) == ["0", "3"], out
assert re.findall(r"step (\d+): 24 elements, hierarchical: max/avg", out) == ["1", "2"], out
check_hierarchical_replay(run([sim, f"--replay={dump}", "--lb=hierarchical", "--json"]), [1, 2], 4, 1)
mp = ""
if len(sys.argv) > 4 and sys.argv[4]:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run([sys.argv[4], "--oversubscribe", "--bind-to", "none", "-n", "2", stepper, "24", "2", "2",
                        "--weft:transport=shm", "--weft:threads=2", "--weft:lb=greedy",
                        f"--weft:lb-dump={dump}"], capture_output=True, text=True, timeout=100, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    out = run([sim, f"--replay={dump}", "--json"])
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    assert [l["step"] for l in lines] == [0, 1], out
    assert all(l["instance"]["pes"] == 4 and l["instance"]["nodes"] == 2 for l in lines), out
    assert all(l["instance"]["edges"] == 24 for l in lines), out
    out = run([sim, f"--replay={dump}.node1"], 3)
    assert "holds no balancing step" in out, out
    # hierarchical across the two processes: step 1 gathered and dumped,
    # steps 0 and 2 a tree over both nodes.
    p = subprocess.run([sys.argv[4], "--oversubscribe", "--bind-to", "none", "-n", "2", stepper, "24", "3", "2",
                        "--weft:transport=shm", "--weft:threads=2", "--weft:lb=hierarchical",
                        f"--weft:lb-dump={dump}", "--weft:lb-dump-steps=1", "--weft:lb-stats"],
                       capture_output=True, text=True, timeout=100, env=env)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert sorted(re.findall(r"step (\d+): 24 elements, hierarchical \(a tree over 2 node", out)) == ["0", "2"], out
    assert re.findall(r"step (\d+): 24 elements, hierarchical: max/avg", out) == ["1"], out
    check_hierarchical_replay(run([sim, f"--replay={dump}", "--lb=hierarchical", "--json"]), [1], 4, 2)
    mp = ", 2 processes: FILE and FILE.node1, hierarchical"
print("lbsim_replay: 3 dumped steps replayed (table, JSON, --steps, --lbaf %s), "
      "truncated dump refused, --weft:lb-dump-steps honoured, edges dumped, hierarchical's dumped "
      "steps gathered and replayed" + mp)

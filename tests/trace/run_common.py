"""What the traced-run test scripts share (lb_run.py, sampled_run.py): the
list of failures, `fail` to add one (printed at once), and `run`, which runs
a command and fails on an unexpected exit status or a Python traceback."""
import subprocess

failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what, flush=True)


def run(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != expect:
        fail("%s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s"
             % (" ".join(cmd), p.returncode, expect, p.stdout[-4000:], p.stderr[-4000:]))
    if "Traceback" in p.stderr:
        fail("%s printed a Python traceback:\n%s" % (" ".join(cmd), p.stderr[-4000:]))
    return p

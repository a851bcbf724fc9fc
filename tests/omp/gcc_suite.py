#!/usr/bin/env python3
"""Runs GCC's own libgomp test programs as unmodified OpenMP programs, once
with GCC's libgomp and once with libweft-omp preloaded, and reports each
program whose exit status differs. Not part of `make test` (it needs the
gcc-N-source package, about 90 MB, and a few minutes per configuration); a
session that changes src/omp runs it by hand:

  apt-get install gcc-12-source
  tests/omp/gcc_suite.py --lib build/release/lib/libweft-omp.so [--threads N]
      [--env VAR=value ...] [--only REGEX] [--fortran] [--work DIR] [--jobs 2]

The tests are extracted from /usr/src/gcc-<ver>/gcc-<ver>*.tar.xz into
--work (default /tmp/gcc-libgomp-suite) and stay there; the project keeps no
copy of them. Each one is compiled with `-fopenmp -O2` and its dg-options /
dg-additional-options / dg-additional-sources (and run with its
dg-set-target-env-var variables; --fortran adds libgomp.fortran, built with
gfortran); programs that are only
compiled (dg-do compile/link), that need an offload device, or that this
machine's GCC does not compile are skipped and counted. Each run has a 60 s
limit. Prints a summary line and one line per mismatch; exits 1 if any.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tarfile
import time

DIRS = ["libgomp.c", "libgomp.c-c++-common", "libgomp.c++"]
FORTRAN = (".f90", ".f", ".F90", ".F", ".f95", ".f03", ".f08")


def extract(work):
    top = os.path.join(work, "testsuite")
    if os.path.isdir(top):
        return top
    tars = sorted(glob.glob("/usr/src/gcc-*/gcc-*.tar.xz"))
    if not tars:
        sys.exit("gcc_suite: no GCC source tarball under /usr/src (apt-get install gcc-12-source)")
    os.makedirs(work, exist_ok=True)
    with tarfile.open(tars[-1]) as t:
        members = [m for m in t.getmembers()
                   if "/libgomp/testsuite/" in m.name or m.name.endswith("/include/gomp-constants.h")]
        t.extractall(work, members=members)
    found = glob.glob(os.path.join(work, "*", "libgomp", "testsuite"))
    os.symlink(found[0], top)
    return top


def options(src):
    text = open(src, errors="replace").read()
    if re.search(r"dg-do\s+(compile|link|preprocess|assemble)", text):
        return None, "compile-only"
    if re.search(r"dg-require-effective-target\s+(offload_device|openacc|offload_target)", text) \
            or "dg-do run { target offload" in text:
        return None, "offload"
    opts = []
    for m in re.finditer(r"dg-(?:additional-)?options\s+\"([^\"]*)\"", text):
        opts += [o for o in m.group(1).split() if not o.startswith("-foffload")]
    for m in re.finditer(r"dg-(?:additional-)?options\s+\{\s*([^{}\"]*?)\s*\}", text):
        opts += [o for o in m.group(1).split() if not o.startswith("-foffload")]
    extra = []
    for m in re.finditer(r"dg-additional-sources\s+\"?([^\"}]*)\"?", text):
        extra += m.group(1).split()
    env = {}
    for m in re.finditer(r"dg-set-target-env-var\s+(\w+)\s+(\"[^\"]*\"|\S+)", text):
        env[m.group(1)] = m.group(2).strip('"')
    return (opts, extra, env), None


def run(exe, env, timeout=60):
    t0 = time.time()
    try:
        p = subprocess.run(["timeout", "-s", "KILL", str(timeout), exe], capture_output=True,
                           text=True, env=env, timeout=timeout + 10, cwd=os.path.dirname(exe))
        return p.returncode, (p.stdout + p.stderr)[-300:], time.time() - t0
    except subprocess.TimeoutExpired:
        return -9, "timeout", time.time() - t0


def one(top, src, args, base_env):
    name = os.path.relpath(src, top)
    res, why = options(src)
    if res is None:
        return {"name": name, "skip": why}
    opts, extra, test_env = res
    compiler = "gfortran" if src.endswith(FORTRAN) else "g++" if src.endswith(".C") else "gcc"
    # A folder per program: Fortran writes its modules beside it.
    exe = os.path.join(args.work, "bin", name.replace("/", "__"), "a.exe")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    if not os.path.exists(exe):
        cmd = [compiler, "-fopenmp", "-O2", "-w", "-I" + os.path.dirname(src),
               "-I" + os.path.join(top, "libgomp.c-c++-common"),
               "-I" + os.path.join(os.path.dirname(os.path.dirname(top)), "..", "include")] + \
              opts + [src] + [os.path.join(os.path.dirname(src), e) for e in extra] + \
              ["-lm", "-o", exe]
        if subprocess.run(cmd, capture_output=True, cwd=os.path.dirname(exe)).returncode != 0:
            return {"name": name, "skip": "does not compile here"}
    base_env = dict(base_env, **test_env)
    gomp = run(exe, base_env)
    weft_env = dict(base_env, LD_PRELOAD=" ".join(args.preload_first + [os.path.abspath(args.lib)]))
    weft = run(exe, weft_env)
    r = {"name": name, "gomp": gomp[0], "weft": weft[0], "t_gomp": round(gomp[2], 3),
         "t_weft": round(weft[2], 3)}
    if gomp[0] != weft[0]:
        r["weft_out"] = weft[1]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libweft-omp.so to preload")
    ap.add_argument("--threads", help="OMP_NUM_THREADS for both runs")
    ap.add_argument("--env", action="append", default=[], help="VAR=value for both runs")
    ap.add_argument("--only", help="run the tests whose file name matches this regex")
    ap.add_argument("--preload-first", action="append", default=[],
                    help="a library preloaded before --lib (a sanitizer build's runtime)")
    ap.add_argument("--fortran", action="store_true",
                    help="also libgomp.fortran (needs gfortran)")
    ap.add_argument("--work", default="/tmp/gcc-libgomp-suite")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write every result as a JSON line here")
    args = ap.parse_args()
    if not os.path.exists(args.lib):
        sys.exit("gcc_suite: --lib %s: no such file" % args.lib)
    top = extract(args.work)
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = args.threads
    for kv in args.env:
        if "=" not in kv:
            sys.exit("gcc_suite: --env %s: expected VAR=value" % kv)
        k, v = kv.split("=", 1)
        env[k] = v
    srcs = [os.path.join(top, d, f) for d in DIRS for f in sorted(os.listdir(os.path.join(top, d)))
            if f.endswith((".c", ".C")) and (not args.only or re.search(args.only, f))]
    if args.fortran:
        srcs += sorted(os.path.join(dp, f)
                       for dp, _, fs in os.walk(os.path.join(top, "libgomp.fortran")) for f in fs
                       if f.endswith(FORTRAN) and (not args.only or re.search(args.only, f)))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda s: one(top, s, args, env), srcs))
    if args.json:
        with open(args.json, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    ran = [r for r in results if "skip" not in r]
    bad = [r for r in ran if r["gomp"] != r["weft"]]
    skipped = {}
    for r in results:
        if "skip" in r:
            skipped[r["skip"]] = skipped.get(r["skip"], 0) + 1
    print("gcc_suite: %d programs run, %d with another exit status under libweft-omp; skipped: %s"
          % (len(ran), len(bad), ", ".join("%d %s" % (n, k) for k, n in sorted(skipped.items()))))
    for r in bad:
        print("  %s: libgomp %d, libweft-omp %d: %r" % (r["name"], r["gomp"], r["weft"],
                                                       r.get("weft_out", "")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

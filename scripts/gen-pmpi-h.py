#!/usr/bin/env python3
"""Writes include/weft/mpi/pmpi.h from mpi.h: the profiling interface's
PMPI_ name of every MPI_ function mpi.h declares, with the same prototype
(libweft-mpi.so defines each PMPI_ name as the MPI_ function itself:
src/mpi/CMakeLists.txt).

  gen-pmpi-h.py MPI_H OUT      write OUT
  gen-pmpi-h.py --check MPI_H OUT
                               exit 1, naming the first difference, if OUT
                               is not what MPI_H gives (a test runs this)
"""
import re
import sys

HEADER = """/* The profiling interface (MPI 3.1, 14.2): the PMPI_ name of every
 * function of mpi.h. Written by scripts/gen-pmpi-h.py from mpi.h, which
 * includes it; tests/mpi checks that the two agree. Do not edit. */
"""


def declarations(text):
    # Comments and preprocessor lines go; what remains is split into
    # statements at ';' (mpi.h has no function bodies).
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("#"))
    for stmt in text.split(";"):
        stmt = " ".join(stmt.split())
        stmt = re.sub(r'^(extern "C" \{|\})\s*', "", stmt)
        if stmt.startswith("typedef") or stmt.startswith("extern"):
            continue
        m = re.match(r"^([A-Za-z_][\w\s\*]*?)\bMPI_([A-Z]\w*)\s*\((.*)\)$", stmt)
        if m:
            yield m.group(1).strip(), m.group(2), m.group(3)


def render(mpi_h):
    # One declaration a line, as written: clang-format leaves it alone.
    out = [HEADER, "#ifndef WEFT_PMPI_H", "#define WEFT_PMPI_H", "", "/* clang-format off */"]
    for ret, name, args in declarations(mpi_h):
        sep = "" if ret.endswith("*") else " "
        out.append(f"{ret}{sep}PMPI_{name}({args});")
    out += ["/* clang-format on */", "", "#endif /* WEFT_PMPI_H */", ""]
    return "\n".join(out)


def main(argv):
    check = argv[1:2] == ["--check"]
    args = argv[2:] if check else argv[1:]
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(args[0]) as f:
        want = render(f.read())
    if check:
        try:
            with open(args[1]) as f:
                have = f.read()
        except OSError as e:
            print(f"gen-pmpi-h: cannot read {args[1]}: {e}")
            return 1
        if have != want:
            for i, (a, b) in enumerate(zip(have.split("\n"), want.split("\n"))):
                if a != b:
                    print(f"gen-pmpi-h: {args[1]} line {i + 1} is\n  {a}\nbut mpi.h gives\n  {b}")
                    break
            else:
                print(f"gen-pmpi-h: {args[1]} and mpi.h differ in length")
            print("run scripts/gen-pmpi-h.py include/weft/mpi/mpi.h include/weft/mpi/pmpi.h")
            return 1
        return 0
    with open(args[1], "w") as f:
        f.write(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

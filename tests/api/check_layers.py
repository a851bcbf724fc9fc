#!/usr/bin/env python3
"""docs/LAYERS.md agrees with the source tree.

 - Every folder under src/ is a row of the layer table, and every layer the
   table does not mark "not yet" has its folder.
 - "Where things are" names every file of each layer (src/<layer>/ and
   include/weft/<layer>/), and names no file that does not exist: a file
   added, moved or renamed without its line fails here.
 - No file under src/ is over 800 lines (one concept per file).

Usage: check_layers.py SOURCE_DIR. Prints each disagreement; exit 1 if any.
"""
import os
import re
import sys

MAX_LINES = 800
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".map", ".py")


def expand_braces(token):
    """`a.{hpp,cpp}` -> [`a.hpp`, `a.cpp`]; other tokens unchanged."""
    m = re.fullmatch(r"(.*)\{([^{}]*)\}(.*)", token)
    if not m:
        return [token]
    return [m.group(1) + alt + m.group(3) for alt in m.group(2).split(",")]


def layer_files(root, layer):
    """Paths of a layer's files, relative to its folder(s)."""
    files = set()
    for base in (os.path.join(root, "src", layer), os.path.join(root, "include", "weft", layer)):
        if not os.path.isdir(base):
            continue
        for dirpath, _, names in os.walk(base):
            for n in names:
                if n == "CMakeLists.txt" or not n.endswith(SOURCE_SUFFIXES):
                    continue
                files.add(os.path.relpath(os.path.join(dirpath, n), base))
    return files


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    doc_path = os.path.join(root, "docs", "LAYERS.md")
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    problems = []

    # The layer table: "| base | `weft_base` | ... |" rows, before "Where
    # things are" (later tables, such as the cost table, are not layers).
    table = {}
    for line in doc.split("## Where things are", 1)[0].splitlines():
        m = re.match(r"\|\s*([a-z, ]+?)\s*\|(.*)\|\s*$", line)
        if not m or m.group(1) in ("layer",):
            continue
        for name in m.group(1).split(","):
            table[name.strip()] = "not yet" in m.group(2)
    src_layers = sorted(d for d in os.listdir(os.path.join(root, "src"))
                        if os.path.isdir(os.path.join(root, "src", d)))
    for d in src_layers:
        if d not in table:
            problems.append(f"src/{d}/ is not a row of the layer table")
        elif table[d]:
            problems.append(f"src/{d}/ exists but the layer table says 'not yet'")
    for name, not_yet in table.items():
        if not not_yet and name not in src_layers:
            problems.append(f"the layer table lists {name}, but src/{name}/ does not exist")

    # "Where things are": one paragraph per layer, starting "**layer** —".
    where = doc.split("## Where things are", 1)
    if len(where) != 2:
        problems.append("docs/LAYERS.md has no '## Where things are' section")
        where_text = ""
    else:
        where_text = where[1].split("\n## ", 1)[0]
    paragraphs = {}
    for m in re.finditer(r"\*\*([a-z]+)\*\*(.*?)(?=\n\*\*[a-z]+\*\*|\Z)", where_text, re.S):
        paragraphs[m.group(1)] = m.group(2)
    for layer in src_layers:
        if layer not in paragraphs:
            problems.append(f"'Where things are' has no paragraph for {layer}")
            continue
        named = set()
        for token in re.findall(r"`([^`]+)`", paragraphs[layer]):
            for t in expand_braces(token):
                if re.fullmatch(r"[\w./-]+", t) and ("." in t or t.endswith("/")):
                    named.add(t)
        files = layer_files(root, layer)
        basenames = {}
        for p in files:
            basenames.setdefault(os.path.basename(p), []).append(p)
        covered = set()
        for n in named:
            if n.endswith("/"):  # a folder: all its files
                hit = {p for p in files if p.startswith(n)}
            elif "/" in n:
                hit = {p for p in files if p == n}
            else:
                hit = set(basenames.get(n, []))
            if not hit and re.search(r"\.(cpp|hpp|h|c|py|map)$|/$", n):
                problems.append(f"{layer}: 'Where things are' names `{n}`, which is not a file "
                                f"of src/{layer}/ or include/weft/{layer}/")
            covered |= hit
        for p in sorted(files - covered):
            problems.append(f"{layer}: {p} is not named in 'Where things are'")

    # One concept per file: no file under src/ over MAX_LINES.
    for dirpath, _, names in os.walk(os.path.join(root, "src")):
        for n in names:
            if not n.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(dirpath, n)
            with open(path, encoding="utf-8", errors="replace") as f:
                count = sum(1 for _ in f)
            if count > MAX_LINES:
                problems.append(f"{os.path.relpath(path, root)} has {count} lines "
                                f"(at most {MAX_LINES}: split it by concept)")

    for p in problems:
        print("check_layers:", p)
    if problems:
        return 1
    print(f"check_layers: docs/LAYERS.md agrees with src/ ({len(src_layers)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

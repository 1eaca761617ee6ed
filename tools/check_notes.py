#!/usr/bin/env python3
"""tools/check_notes.py — `make lint`'s check that every cited Note exists (issue 30 item 4).

A Note is a comment that starts with `Note [Title]` (STYLE.md: explain a decision once, cite it
where it matters). Every `Note [Title]` anywhere else — code comments, README.md, docs/ —
must name a Note defined somewhere in the tree; citations wrapped over comment lines are
joined first. A citation of a renamed or deleted Note fails with the file and the title.

    tools/check_notes.py [--root DIR]      check the tree (make lint)
    tools/check_notes.py --self-test       a stale citation must fail, a good one pass
"""
import argparse
import os
import re
import sys
import tempfile

ROOTS = ("src", "include", "tests", "tools", "bench", "examples", "docs", "fuzz", "README.md")
EXTENSIONS = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".inc", ".def", ".md", ".py", ".sh", ".txt")
DEFINITION = re.compile(r"^[ \t]*(?:///?|#|\*)[ \t]*Note \[([^\]]+)\]", re.M)
CITATION = re.compile(r"Note \[([^\]]+)\]")


def files(root, top):
    path = os.path.join(root, top)
    if os.path.isfile(path):
        yield path
        return
    for folder, _, names in os.walk(path):
        for name in sorted(names):
            if name.endswith(EXTENSIONS) and name != os.path.basename(__file__):  # not this
                yield os.path.join(folder, name)


def joined(text, markdown):
    """The text with wrapped lines joined: comment markers dropped in code, and literals."""
    text = re.sub(r"\s+", " ", text) if markdown else re.sub(r"\n[ \t]*(?:///?|#|\*)?[ \t]*", " ", text)
    return re.sub(r'"\s*"', "", text)


def title(raw):
    return re.sub(r"\s+", " ", raw).strip()


def check(root):
    defined, cited = set(), []
    for top in ROOTS:
        for path in files(root, top):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            defined.update(title(m.group(1)) for m in DEFINITION.finditer(text))
            for m in CITATION.finditer(joined(text, path.endswith(".md"))):
                cited.append((title(m.group(1)), os.path.relpath(path, root)))
    problems = sorted({f"notes: {path} cites Note [{name}], which no file defines (a comment "
                       f"starting 'Note [{name}]'): fix the title or restore the Note"
                       for name, path in cited if name not in defined})
    return defined, cited, problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src"))
        with open(os.path.join(root, "src", "a.cpp"), "w") as f:
            f.write("// Note [Kept once]\n// Why.\nint x;  // (Note [Kept\n// once])\n")
        if check(root)[2]:
            print("notes self-test: FAILED: a good citation was refused", file=sys.stderr)
            return 1
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("See Note\n[Gone away].\n")
        if not any("README.md cites Note [Gone away]" in p for p in check(root)[2]):
            print("notes self-test: FAILED: a stale citation passed", file=sys.stderr)
            return 1
    print("notes self-test: a wrapped good citation passes, a stale one fails")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    defined, cited, problems = check(os.path.abspath(a.root))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"notes: {len(cited)} citations, each of one of the {len(defined)} Notes defined")
    return 0


if __name__ == "__main__":
    sys.exit(main())

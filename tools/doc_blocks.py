#!/usr/bin/env python3
"""tools/doc_blocks.py — every C++ block of README.md and docs/*.md as a test (ARCHITECTURE §9).

Takes each ```cpp block of the markdown pages it is given and writes, into --out:

  doc_<page>.cpp       one translation unit per page (README.md -> doc_README.cpp): each block in
                       its own namespace (doc_<page>_L<fence line>), so names never clash, with
                       #line directives so that a compiler error names the markdown file and line;
  doc_blocks.hpp       the registry the pages' blocks add themselves to (no includes);
  doc_blocks_all.hpp   every public header of ember and <iostream>: the context of a block that
                       shows no #include of its own;
  doc_blocks_main.cpp  main(): runs the runnable blocks in page order, each in a try/catch, from a
                       scratch directory, and prints one line per block (file:line, what happened).

tests/CMakeLists.txt builds them into ember_doc_blocks (CTest `docs.blocks`). How a block is
treated (docs/contributing.md, "Documentation blocks"):

  - a block with `int main()` is a program: compiled at namespace scope (main renamed), run;
  - any other block is statements: the body of a function, run;
  - a block that shows #include lines sees those (and the includes of earlier such blocks on its
    page) and nothing else; a block that shows none sees every public header and
    `using namespace ember;` (a fragment's usual context);
  - an HTML comment on the line right before the fence changes that:
        <!-- doc-test: fragment
        Tensor x = randn({8, 3});      (setup: code placed before the block, in its function;
        -->                             #include lines in it go above, and add to its context)
        <!-- doc-test: declarations -->        namespace-scope code (classes, functions):
                                               compiled, seen by later blocks of its page
        <!-- doc-test: compile-only REASON --> compiled, not run (a GPU, a file, minutes)
        <!-- doc-test: skip REASON -->         not compiled (a synopsis, not code)
    Words combine on the first line (`fragment compile-only needs a GPU`); a reason ends it.

Usage:
  tools/doc_blocks.py --root SRC --include-dir SRC/include --out DIR README.md docs/a.md ...
  tools/doc_blocks.py --root SRC --list README.md docs/a.md ...   (each block and its mark)
Files are rewritten only when their text changes, so editing one page recompiles one unit.
"""

import argparse
import os
import re
import sys

FENCE_OPEN = re.compile(r"^(\s*)```cpp\s*$")
FENCE_ANY = re.compile(r"^\s*```")
FENCE_CLOSE = re.compile(r"^\s*```\s*$")
# Indented four spaces or more, a line is markdown code (an example of a marker), not a marker.
MARKER_OPEN = re.compile(r"^ {0,3}<!--\s*doc-test:(.*)$")
INCLUDE = re.compile(r"^\s*#\s*include\b")
MAIN = re.compile(r"\bint\s+main\s*\(\s*\)")
WORDS = ("fragment", "declarations", "compile-only", "skip")


class DocError(Exception):
    """A malformed block or marker, reported as file:line: message."""


class Block:
    def __init__(self, path, fence_line, code_line, code):
        self.path = path  # relative to --root, e.g. docs/data.md
        self.fence_line = fence_line  # 1-based line of ```cpp
        self.code_line = code_line  # 1-based line of the first code line
        self.code = code  # list of lines (the fence's indentation removed)
        self.words = []
        self.reason = ""
        self.setup = []  # list of (line number, text)

    @property
    def where(self):
        return f"{self.path}:{self.fence_line}"

    @property
    def skipped(self):
        return "skip" in self.words

    @property
    def program(self):
        return any(MAIN.search(line) for line in self.code)

    @property
    def kind(self):
        if self.program:
            return "program"
        return "declarations" if "declarations" in self.words else "statements"

    @property
    def runs(self):
        return not self.skipped and "compile-only" not in self.words and self.kind != "declarations"

    @property
    def mode(self):
        if self.skipped:
            return "skip"
        if self.kind == "declarations":
            return "declarations"
        return "run" if self.runs else "compile_only"

    @property
    def shows_includes(self):
        return any(INCLUDE.match(t) for t in self.code)


def parse_marker(path, lines, end):
    """The doc-test comment ending on line index `end` (0-based), or None: (start, words, reason,
    setup lines)."""
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return None
    start = end
    while start >= 0 and not MARKER_OPEN.match(lines[start]):
        if "<!--" in lines[start] or start < end - 200:
            return None
        start -= 1
    if start < 0:
        return None
    first = MARKER_OPEN.match(lines[start]).group(1)
    if start == end:
        first = first.rstrip()[: -len("-->")]
    tokens = first.split()
    words, reason = [], ""
    for i, token in enumerate(tokens):
        if token not in WORDS:
            raise DocError(f"{path}:{start + 1}: unknown doc-test word '{token}' "
                           f"(expected one of {', '.join(WORDS)})")
        words.append(token)
        if token in ("compile-only", "skip"):
            reason = " ".join(tokens[i + 1:])
            if not reason:
                raise DocError(f"{path}:{start + 1}: doc-test: {token} needs a reason")
            break
    setup = []
    for n in range(start + 1, end + 1):
        text = lines[n]
        if n == end:
            text = text.rstrip()[: -len("-->")]
        if text.strip():
            setup.append((n + 1, text.rstrip()))
    if setup and "fragment" not in words:
        raise DocError(f"{path}:{start + 1}: doc-test setup code needs the word 'fragment'")
    if "--" in "".join(t for _, t in setup):
        raise DocError(f"{path}:{start + 1}: '--' cannot appear inside an HTML comment")
    return start, words, reason, setup


def read_blocks(root, md_path):
    rel = os.path.relpath(md_path, root)
    with open(md_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, used_markers = [], set()
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        j = i + 1
        while j < len(lines) and not FENCE_CLOSE.match(lines[j]):
            j += 1
        if j == len(lines):
            raise DocError(f"{rel}:{i + 1}: ```cpp block without its closing fence")
        code = [line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1:j]]
        block = Block(rel, i + 1, i + 2, code)
        marker = parse_marker(rel, lines, i - 1)
        if marker:
            start, block.words, block.reason, block.setup = marker
            used_markers.add(start)
        blocks.append(block)
        i = j + 1
    in_fence = False
    for n, line in enumerate(lines):
        if FENCE_ANY.match(line):
            in_fence = not in_fence
        elif not in_fence and MARKER_OPEN.match(line) and n not in used_markers:
            raise DocError(f"{rel}:{n + 1}: a doc-test comment must end on the line right "
                           "before a ```cpp fence")
    return rel, blocks


def unit_name(rel):
    stem = os.path.splitext(os.path.basename(rel))[0]
    return re.sub(r"[^A-Za-z0-9_]", "_", stem)


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Unit:
    """Collects a translation unit's lines, tracking its own line numbers for #line."""

    def __init__(self, filename):
        self.filename = filename
        self.lines = []

    def add(self, text=""):
        self.lines.append(text)

    def at(self, path, line):
        self.lines.append(f'#line {line} {c_string(path)}')

    def back(self):
        # The next line's own number: the #line directive is line len+1, so it names len+2.
        self.lines.append(f'#line {len(self.lines) + 2} {c_string(self.filename)}')

    def text(self):
        return "\n".join(self.lines) + "\n"


def emit_block(unit, page, block, earlier_scopes):
    ns = f"doc_{page}_L{block.fence_line}"
    mode = f"::doc_blocks::Mode::{block.mode}"
    if block.skipped:
        unit.add(f"namespace {ns} {{")
        unit.add(f"[[maybe_unused]] const int registered = ::doc_blocks::add("
                 f"{c_string(block.path)}, {block.fence_line}, nullptr, {mode}, "
                 f"{c_string(block.reason)});")
        unit.add(f"}}  // namespace {ns}")
        unit.add()
        return None
    for line_no, text in block.setup:
        if INCLUDE.match(text):
            unit.at(block.path, line_no)
            unit.add(text)
    for k, text in enumerate(block.code):
        if INCLUDE.match(text):
            unit.at(block.path, block.code_line + k)
            unit.add(text)
    unit.back()
    unit.add(f"namespace {ns} {{")
    if not block.shows_includes:
        unit.add("using namespace ember;")
    for scope in earlier_scopes:
        unit.add(f"using namespace {scope};")
    setup = [(n, t) for n, t in block.setup if not INCLUDE.match(t)]
    # Code lines with the includes blanked (they were hoisted above): numbering stays true.
    code = ["" if INCLUDE.match(t) else t for t in block.code]
    if block.kind == "program":
        code = [MAIN.sub("auto doc_main()", t) for t in code]
    if block.kind == "statements":
        unit.add("int run() {")
    for line_no, text in setup:
        unit.at(block.path, line_no)
        unit.add(text)
    if block.kind == "statements":
        unit.back()
        unit.add("{")
    unit.at(block.path, block.code_line)
    unit.lines.extend(code)
    unit.back()
    if block.kind == "statements":
        unit.add("}")
        unit.add("return 0;")
        unit.add("}")
    elif block.kind == "program":
        unit.add("int run() { return ::doc_blocks::call(doc_main); }")
    run = "nullptr" if block.kind == "declarations" else "&run"
    unit.add(f"[[maybe_unused]] const int registered = ::doc_blocks::add("
             f"{c_string(block.path)}, {block.fence_line}, {run}, {mode}, "
             f"{c_string(block.reason)});")
    unit.add(f"}}  // namespace {ns}")
    unit.add()
    return ns if block.kind != "statements" else None


def page_unit(rel, blocks):
    page = unit_name(rel)
    unit = Unit(f"doc_{page}.cpp")
    unit.add(f"// Generated by tools/doc_blocks.py from {rel}: do not edit.")
    unit.add('#include "doc_blocks.hpp"')
    unit.add()
    # Blocks that show their includes first (each sees only those of its page so far), then
    # every header for the rest; namespace-scope blocks are visible to the blocks after them.
    scopes = []
    own = [b for b in blocks if not b.skipped and b.shows_includes]
    rest = [b for b in blocks if b.skipped or not b.shows_includes]
    for block in own:
        ns = emit_block(unit, page, block, list(scopes))
        if ns:
            scopes.append(ns)
    if any(not b.skipped for b in rest):
        unit.add('#include "doc_blocks_all.hpp"')
        unit.add()
    for block in rest:
        ns = emit_block(unit, page, block, list(scopes))
        if ns:
            scopes.append(ns)
    return unit.text()


REGISTRY_HEADER = """\
// Generated by tools/doc_blocks.py: the registry every documentation block adds itself to.
// It includes nothing, so a block that shows its includes is compiled with those alone.
#pragma once

namespace doc_blocks {

enum class Mode { run, compile_only, declarations, skip };
/// Records one block (called from a namespace-scope initialiser); returns 0.
int add(const char* file, int line, int (*run)(), Mode mode, const char* reason);

/// Calls a renamed main(): its result, or 0 when it returns nothing.
template <typename F>
int call(F f) {
  if constexpr (requires { static_cast<int>(f()); }) {
    return static_cast<int>(f());
  } else {
    f();
    return 0;
  }
}

}  // namespace doc_blocks
"""

MAIN_UNIT = """\
// Generated by tools/doc_blocks.py: runs the documentation blocks (CTest docs.blocks).
//   ember_doc_blocks [FILTER]   only the blocks whose "file:line" contains FILTER
// Each runnable block runs once, in page order, from ember's defaults (seed 0, the CPU, f32,
// grad mode on) and a scratch directory (blocks may write files), with its exceptions caught
// and reported by file:line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>
#include <unistd.h>

#include "doc_blocks.hpp"
#include "ember/ember.hpp"

namespace doc_blocks {
namespace {

struct Entry {
  std::string file;
  int line;
  int (*run)();
  Mode mode;
  std::string reason;
};

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

int add(const char* file, int line, int (*run)(), Mode mode, const char* reason) {
  registry().push_back({file, line, run, mode, reason});
  return 0;
}

}  // namespace doc_blocks

int main(int argc, char** argv) {
  using doc_blocks::Mode;
  namespace fs = std::filesystem;
  const std::string filter = argc > 1 ? argv[1] : "";
  std::vector<doc_blocks::Entry> entries = doc_blocks::registry();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.file != b.file ? a.file < b.file : a.line < b.line;
  });
  const fs::path scratch =
      fs::temp_directory_path() / ("ember_doc_blocks_" + std::to_string(getpid()));
  fs::create_directories(scratch);
  const fs::path previous = fs::current_path();
  fs::current_path(scratch);
  int ran = 0, compiled = 0, declarations = 0, skipped = 0, failed = 0;
  std::vector<std::string> failures;
  for (const auto& e : entries) {
    const std::string where = e.file + ":" + std::to_string(e.line);
    if (!filter.empty() && where.find(filter) == std::string::npos) continue;
    switch (e.mode) {
      case Mode::skip:
        ++skipped;
        std::printf("skipped       %s: %s\\n", where.c_str(), e.reason.c_str());
        continue;
      case Mode::declarations:
        ++declarations;
        std::printf("declarations  %s (compiled)\\n", where.c_str());
        continue;
      case Mode::compile_only:
        ++compiled;
        std::printf("compile-only  %s: %s\\n", where.c_str(), e.reason.c_str());
        continue;
      case Mode::run:
        break;
    }
    ++ran;
    std::fflush(stdout);
    std::string error;
    const auto start = std::chrono::steady_clock::now();
    try {
      ember::manual_seed(0);
      ember::set_default_device(ember::Device::cpu());
      ember::set_default_dtype(ember::DType::f32);
      ember::set_grad_mode(true);
      const int rc = e.run();
      if (rc != 0) error = "main returned " + std::to_string(rc);
    } catch (const std::exception& ex) {
      error = ex.what();
    } catch (...) {
      error = "an exception not derived from std::exception";
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!error.empty()) {
      ++failed;
      failures.push_back(where + ": " + error);
      std::printf("FAILED        %s (%.2f s): %s\\n", where.c_str(), seconds, error.c_str());
    } else {
      std::printf("ok            %s (%.2f s)%s\\n", where.c_str(), seconds,
                  seconds > 1.0 ? " (slow: a block should run in under a second; make it "
                                  "smaller, or compile-only)"
                                : "");
    }
    std::fflush(stdout);
  }
  fs::current_path(previous);
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  std::printf("\\ndocs.blocks: %d ran, %d compile-only, %d declarations, %d skipped; %d failed\\n",
              ran, compiled, declarations, skipped, failed);
  for (const auto& f : failures) std::printf("  FAILED %s\\n", f.c_str());
  return failed == 0 ? 0 : 1;
}
"""


def all_header(include_dir):
    headers = []
    for dirpath, _, files in os.walk(os.path.join(include_dir, "ember")):
        for name in files:
            if name.endswith(".hpp"):
                headers.append(os.path.relpath(os.path.join(dirpath, name), include_dir))
    lines = ["// Generated by tools/doc_blocks.py: the context of a block that shows no includes.",
             "#pragma once", "", "#include <iostream>", ""]
    lines += [f'#include "{h}"' for h in sorted(h.replace(os.sep, "/") for h in headers)]
    return "\n".join(lines) + "\n"


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the source tree the pages are in")
    parser.add_argument("--out", help="where to write the translation units")
    parser.add_argument("--include-dir", help="ember's public include directory")
    parser.add_argument("--list", action="store_true", help="print each block and its mark")
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    try:
        pages = [read_blocks(args.root, p) for p in args.pages]
    except DocError as e:
        print(f"{e}", file=sys.stderr)
        return 1
    if args.list:
        counts = {}
        for _, blocks in pages:
            for b in blocks:
                counts[b.mode] = counts.get(b.mode, 0) + 1
                words = "fragment" if "fragment" in b.words else ""
                note = f"  ({b.reason})" if b.reason else ""
                print(f"{b.where:28} {b.kind:13} {b.mode.replace('_', '-'):13} {words:9}{note}")
        print(", ".join(f"{n} {m.replace('_', '-')}" for m, n in sorted(counts.items())))
        return 0
    if not args.out or not args.include_dir:
        parser.error("--out and --include-dir are needed to generate")
    os.makedirs(args.out, exist_ok=True)
    write_if_changed(os.path.join(args.out, "doc_blocks.hpp"), REGISTRY_HEADER)
    write_if_changed(os.path.join(args.out, "doc_blocks_all.hpp"), all_header(args.include_dir))
    write_if_changed(os.path.join(args.out, "doc_blocks_main.cpp"), MAIN_UNIT)
    for rel, blocks in pages:
        write_if_changed(os.path.join(args.out, f"doc_{unit_name(rel)}.cpp"),
                         page_unit(rel, blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())

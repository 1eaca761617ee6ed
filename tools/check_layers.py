#!/usr/bin/env python3
"""tools/check_layers.py — `make lint`'s layering rule (issue 30 item 5; ARCHITECTURE's layers).

The op and kernel layers sit below the rest of the library: src/ops (the ops and their
internals), src/kernels (math both backends share), src/backend (the kernel table) and the
backends src/cpu and src/cuda. Nothing above them may include their headers: src/core,
src/autograd, src/nn, src/optim, src/io, src/data, src/train, src/distributed, src/models and
src/text reach devices through the public API (include/ember/) and the lower layers' two
interfaces (INTERFACES below): the device runtime (src/backend/device_runtime.hpp: memory,
copies, pinned staging, streams, timing, graph capture) and the fused optimizer steps
(src/ops/optim.hpp with its arguments, src/backend/optim_args.hpp) — never through the kernel
table, ops internals, shared kernels or a backend's own files. An interface itself may include
nothing of the op and kernel layers but what INTERFACES lists for it: no catalogue, no kernel
table.

Includes that break the rule today are listed in tools/layering_allowlist.txt, each with the
reason it still exists ("FILE INCLUDED  # why"). The check fails on a break that is not listed
(a new one) and on a listed one that no longer exists (so the list only shrinks). Exit 1 with
one line per problem; exit 0 with a summary.

    tools/check_layers.py [--root DIR]     check the tree (make lint)
    tools/check_layers.py --self-test      plant a break in a scratch tree and expect a failure
"""
import argparse
import os
import re
import sys
import tempfile

UPPER = ("core", "autograd", "nn", "optim", "io", "data", "train", "distributed", "models",
         "text")
LOWER = ("ops", "kernels", "backend", "cpu", "cuda")
SOURCE = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# The interfaces of the lower layers that the upper ones may include, each with the only lower
# headers it may include itself.
INTERFACES = {
    # the device runtime: memory, copies, pinned staging, streams, timing, graph capture
    "backend/device_runtime.hpp": ("backend/runtime_slots.def",),
    # the fused optimizer steps' entry points and their arguments (src/optim's use of ops)
    "ops/optim.hpp": ("backend/optim_args.hpp",),
    "backend/optim_args.hpp": (),
}


def breaks(root):
    """(file, included) for every include of a lower layer from an upper one, sorted."""
    found = []
    for layer in UPPER:
        top = os.path.join(root, "src", layer)
        for folder, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(SOURCE):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    if inc.split("/", 1)[0] in LOWER and inc not in INTERFACES:
                        found.append((os.path.relpath(path, root), inc))
    return sorted(set(found))


def interface_problems(root):
    """An interface of INTERFACES that includes more of the lower layers than its own list."""
    problems = []
    for interface, own in sorted(INTERFACES.items()):
        path = os.path.join(root, "src", interface)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if inc.split("/", 1)[0] in LOWER and inc not in own:
                problems.append(f"layers: src/{interface} includes \"{inc}\": the interface the "
                                f"layers above ops use may include only {', '.join(own)} of the "
                                f"op and kernel layers")
            if inc == "ember/catalogue.hpp":
                problems.append(f"layers: src/{interface} includes the op catalogue")
    return problems


def allowlist(path):
    """{(file, included): reason} from the allowlist; a line without a reason is an error."""
    allowed, problems = {}, []
    if not os.path.exists(path):
        return allowed, problems
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            entry, _, reason = line.partition("#")
            parts = entry.split()
            if len(parts) != 2 or not reason.strip():
                problems.append(f"{path}:{number}: expected 'FILE INCLUDED  # reason' (got '{line}')")
                continue
            allowed[(parts[0], parts[1])] = reason.strip()
    return allowed, problems


def check(root, allow_path):
    allowed, problems = allowlist(allow_path)
    problems += interface_problems(root)
    found = breaks(root)
    for file, inc in found:
        if (file, inc) not in allowed:
            problems.append(f"layers: {file} includes \"{inc}\": a layer above ops may not include "
                            f"ops internals, shared kernels, the kernel table or a backend's files "
                            f"(use the public API in include/ember/, or move the code down)")
    for file, inc in sorted(set(allowed) - set(found)):
        problems.append(f"layers: {allow_path} lists {file} -> {inc}, which is gone: remove the line")
    return found, allowed, problems


def self_test():
    """A planted break must fail the check; the same tree without it must pass."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src", "io"))
        os.makedirs(os.path.join(root, "src", "ops"))
        with open(os.path.join(root, "src", "ops", "common.hpp"), "w") as f:
            f.write("#pragma once\n")
        clean = os.path.join(root, "src", "io", "reader.cpp")
        with open(clean, "w") as f:
            f.write('#include "ember/tensor.hpp"\n#include "io/reader.hpp"\n')
        allow = os.path.join(root, "allow.txt")
        if check(root, allow)[2]:
            print("layers self-test: FAILED: a clean tree was refused", file=sys.stderr)
            return 1
        with open(clean, "a") as f:
            f.write('#include "ops/common.hpp"\n')
        problems = check(root, allow)[2]
        if not any("src/io/reader.cpp includes \"ops/common.hpp\"" in p for p in problems):
            print("layers self-test: FAILED: a planted break passed", file=sys.stderr)
            return 1
        with open(allow, "w") as f:
            f.write("src/io/reader.cpp ops/common.hpp  # planted\n")
        if check(root, allow)[2]:
            print("layers self-test: FAILED: a listed break was refused", file=sys.stderr)
            return 1
        os.remove(clean)
        if not any("which is gone" in p for p in check(root, allow)[2]):
            print("layers self-test: FAILED: a stale allowlist line passed", file=sys.stderr)
            return 1
        os.remove(allow)
        os.makedirs(os.path.join(root, "src", "backend"))
        runtime = os.path.join(root, "src", "backend", "device_runtime.hpp")
        with open(runtime, "w") as f:
            f.write('#pragma once\n#include "ember/device.hpp"\n')
        with open(os.path.join(root, "src", "io", "stage.cpp"), "w") as f:
            f.write('#include "backend/device_runtime.hpp"\n')
        if check(root, allow)[2]:
            print("layers self-test: FAILED: the runtime interface was refused", file=sys.stderr)
            return 1
        with open(runtime, "a") as f:
            f.write('#include "backend/backend.hpp"\n')
        if not any("src/backend/device_runtime.hpp includes" in p for p in check(root, allow)[2]):
            print("layers self-test: FAILED: a runtime interface including the kernel table "
                  "passed", file=sys.stderr)
            return 1
    print("layers self-test: a planted break fails, a listed one passes, a stale line fails, the "
          "runtime interface passes and fails when it includes the kernel table")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    root = os.path.abspath(a.root)
    found, allowed, problems = check(root, os.path.join(root, "tools", "layering_allowlist.txt"))
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"layers: no include of ops, kernels, the kernel table or a backend from above ops "
          f"(the {len(INTERFACES)} interfaces aside) but the {len(allowed)} listed in "
          f"tools/layering_allowlist.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/gpt2_data.py — writes the token file bench_gpt2 (and llm.c) reads, from any text file,
with byte-level tokens: each byte of the file is one token id (0..255).

    python3 bench/gpt2_data.py TEXT OUT.bin [--repeat N]

OUT.bin is llm.c's format: a header of 256 little-endian int32 (20240520, 1, token count, then
zeros), then the tokens as little-endian uint16. --repeat N writes the text N times over (a
short file still fills a B·(T+1) window). Needs only Python 3 (no torch).

Run without arguments (bench/run_all.sh runs every bench/*.py that way) it prints this help and
exits 0: it is a tool, not a benchmark.
"""
import argparse
import array
import struct
import sys

MAGIC, VERSION = 20240520, 1


def main():
    if len(sys.argv) == 1:
        print(__doc__.strip(), file=sys.stderr)
        return 0
    ap = argparse.ArgumentParser(description="byte-level llm.c token file from a text file")
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    with open(a.text, "rb") as f:
        data = f.read() * max(a.repeat, 1)
    if not data:
        sys.exit(f"gpt2_data: {a.text} is empty")
    if len(data) >= 2**31:
        sys.exit(f"gpt2_data: {len(data)} tokens do not fit the header's int32 count")
    tokens = array.array("H", list(data))  # one uint16 per byte (array("H", bytes) would pair them)
    if sys.byteorder != "little":
        tokens.byteswap()
    header = [MAGIC, VERSION, len(tokens)] + [0] * 253
    with open(a.out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(tokens.tobytes())
    print(f"gpt2_data: {len(tokens)} byte-level tokens from {a.text} -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

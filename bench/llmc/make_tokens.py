#!/usr/bin/env python3
"""Writes a token file in llm.c's format from text files, one token per byte.

llm.c's data loader (llmc/dataloader.h) reads a header of 256 int32 -- the magic
20240520, the version 1, the number of tokens, then zeros -- followed by the tokens as
uint16. Byte-level tokens (0..255) are enough to time training: the cost of a step does
not depend on which token ids come in. Standard library only, so it runs on the GPU
machine as well.

    python3 bench/llmc/make_tokens.py -o tokens.bin --repeat 8 /usr/share/common-licenses/GPL-3
"""
import argparse
import array
import sys

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="text files, concatenated in order")
    ap.add_argument("-o", "--out", required=True, help="token file to write")
    ap.add_argument("--repeat", type=int, default=1, help="concatenate the inputs this many times")
    ap.add_argument("--min-tokens", type=int, default=0,
                    help="repeat further until at least this many tokens")
    args = ap.parse_args()

    data = b"".join(open(p, "rb").read() for p in args.inputs)
    if not data:
        sys.exit("make_tokens.py: the inputs are empty")
    reps = max(args.repeat, -(-args.min_tokens // len(data)))
    tokens = array.array("H", list(data)) * reps  # each byte 0..255 one uint16 token
    if sys.byteorder != "little":
        tokens.byteswap()
    header = array.array("i", [0] * HEADER_INTS)
    header[0], header[1], header[2] = MAGIC, VERSION, len(tokens)
    if sys.byteorder != "little":
        header.byteswap()
    with open(args.out, "wb") as f:
        header.tofile(f)
        tokens.tofile(f)
    print(f"{args.out}: {len(tokens)} tokens ({len(data)} bytes x {reps})", file=sys.stderr)


if __name__ == "__main__":
    main()

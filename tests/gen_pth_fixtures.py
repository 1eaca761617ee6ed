"""tests/gen_pth_fixtures.py — the torch.save files of tests/test_pth.cpp (tests/data/pth/).

Run with Debian's torch 1.13 (/usr/bin/python3 tests/gen_pth_fixtures.py). Writes small .pth
files as torch.save writes them, expected.json (each good file's tensors: torch dtype, shape,
strides, storage offset and values as exact numbers; its other values), and bad files made by
hand: a pickle naming os.system (pickled, never called or unpickled here), an unknown opcode, a
set opcode, a view past its storage, a storage entry of the wrong size, a big-endian byteorder.
"""
import collections
import io
import json
import os
import pickle
import struct
import zipfile
import zlib

import torch

# tests/data/pth/ from Debian's torch 1.13; EMBER_PTH_OUT=tests/data/pth_torch2 with torch 2.x
# (the GPU machine's 2.11) writes the same files as that version's torch.save does.
OUT = os.environ.get("EMBER_PTH_OUT") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "pth")
expected = {}


def describe(obj, prefix=""):
    """Flattens obj as ember does (Note [Names of a .pth file's tensors] in src/io/pth.cpp)."""
    tensors, values = {}, {}

    def walk(o, name):
        join = (lambda k: k if not name else name + "." + k)
        if isinstance(o, torch.Tensor):
            t = o.detach()
            tensors[name] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                             "stride": list(t.stride()), "offset": t.storage_offset(),
                             "data": t.double().flatten().tolist() if t.dtype != torch.bool
                             else t.int().flatten().tolist()}
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(v, join(str(k)))
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o):
                walk(v, join(str(i)))
        else:
            values[name] = o

    walk(obj, prefix)
    return {"tensors": tensors, "values": values}


def save(name, obj, **kwargs):
    path = os.path.join(OUT, name)
    torch.save(obj, path, **kwargs)
    expected[name] = describe(obj)
    expected[name]["order"] = list(describe(obj)["tensors"].keys())


def linear_bn():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    m.train()
    m(torch.randn(4, 3))  # running stats and num_batches_tracked move
    return m


def entry(name, method=zipfile.ZIP_STORED):
    """A zip entry with a fixed date, so that the files come out the same on every run."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = method
    return info


def write_zip(name, pkl, storages, archive="archive", byteorder=None):
    """A zip laid out as torch.save's (stored entries), from a hand-made pickle."""
    with zipfile.ZipFile(os.path.join(OUT, name), "w", zipfile.ZIP_STORED) as z:
        z.writestr(entry(archive + "/data.pkl"), pkl)
        if byteorder is not None:
            z.writestr(entry(archive + "/byteorder"), byteorder)
        for key, data in storages.items():
            z.writestr(entry(archive + "/data/" + key), data)
        z.writestr(entry(archive + "/version"), "3\n")


def write_zip64(name, entries):
    """A stored zip whose directory gives every size and offset in zip64 extra fields, with
    saturated end record fields (as a writer of files over 4 GiB must), built by hand."""
    out, central = bytearray(), bytearray()
    for entry, data in entries.items():
        n, crc, offset = entry.encode(), zlib.crc32(data), len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0, crc, len(data), len(data),
                           len(n), 0) + n + data
        extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(n), len(extra), 0, 0, 0, 0,
                               0xFFFFFFFF) + n + extra
    cd_offset, count = len(out), len(entries)
    out += central
    end64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central),
                       cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(out)


class Storage:
    def __init__(self, key, numel, cls="FloatStorage"):
        self.key, self.numel, self.cls = key, numel, cls


class View:
    """Pickles as torch's _rebuild_tensor_v2 call on a Storage (a persistent id)."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))  # pickled by name only


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", getattr(torch, obj.cls), obj.key, "cpu", obj.numel)
        return None


def hand_pickle(obj, protocol=2):
    buf = io.BytesIO()
    Pickler(buf, protocol=protocol).dump(obj)
    return buf.getvalue()


def main():
    os.makedirs(OUT, exist_ok=True)
    m = linear_bn()
    save("linear_bn.pth", m.state_dict())

    base = torch.tensor([[1.5, -2.25, 3.0, 0.5], [4.0, -0.125, 6.0, 7.0], [8.0, 9.5, -10.0, 11.0]])
    save("dtypes.pth", {
        "f32": base, "f64": base.double() / 3, "f16": base.half(), "bf16": base.bfloat16(),
        "i64": torch.tensor([-(2 ** 40), 0, 7]), "i32": torch.tensor([-5, 2 ** 30], dtype=torch.int32),
        "i16": torch.tensor([-300, 300], dtype=torch.int16), "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 200, 255], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
    })

    x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    save("views.pth", {
        "transposed": x.t(),             # strides (1, 6)
        "narrow": x[1:3, 2:5],           # storage offset 8, strides (6, 1)
        "row": x[3],                     # shares x's storage, offset 18
        "whole": x,                      # the storage itself
        "tied_a": base, "tied_b": base,  # one tensor under two names
        "step": x[::2, ::3],             # strides (12, 3)
        "expanded": torch.tensor([0.5, -1.0]).expand(100, 2),  # stride (0, 1), 2 elements stored
    })

    adam = torch.optim.Adam(m.parameters(), lr=0.01)
    m(torch.randn(4, 3)).sum().backward()
    adam.step()
    save("nested.pth", {"model": m.state_dict(), "optimizer": adam.state_dict(), "epoch": 3,
                        "best": 0.25, "name": "run-1", "done": False, "note": None})
    save("protocol4.pth", {"w": base, "n": torch.tensor([1, 2, 3])}, pickle_protocol=4)
    save("parameter.pth", {"p": torch.nn.Parameter(base.clone()), "dev": torch.device("cpu")})
    save("bare_tensor.pth", base.double())
    expected["parameter.pth"]["values"] = {"dev": "cpu"}

    # Bad files, by hand. Nothing here unpickles them.
    floats = torch.arange(12, dtype=torch.float32).numpy().tobytes()
    write_zip("evil_global.pth", hand_pickle({"w": View(Storage("0", 12), 0, (12,), (1,)),
                                               "x": Evil()}), {"0": floats})
    write_zip("unknown_opcode.pth", b"\x80\x02}q\x00\xff.", {})
    write_zip("set_opcode.pth", hand_pickle({"s": {1, 2}}, protocol=4), {})
    write_zip("offset_out_of_range.pth",
              hand_pickle({"w": View(Storage("0", 12), 10, (3,), (1,))}), {"0": floats})
    write_zip("stride_out_of_range.pth",
              hand_pickle({"w": View(Storage("0", 12), 0, (3, 4), (5, 1))}), {"0": floats})
    write_zip("storage_size.pth", hand_pickle({"w": View(Storage("0", 16), 0, (12,), (1,))}),
              {"0": floats})
    write_zip("missing_storage.pth", hand_pickle({"w": View(Storage("7", 12), 0, (12,), (1,))}),
              {"0": floats})
    write_zip("big_endian.pth", hand_pickle({"w": View(Storage("0", 12), 0, (12,), (1,))}),
              {"0": floats}, byteorder="big")
    write_zip("complex_storage.pth",
              hand_pickle({"w": View(Storage("0", 6, "ComplexFloatStorage"), 0, (6,), (1,))}),
              {"0": floats})
    # A good hand-made file with another top folder, a deflated entry and a shared storage.
    pkl = hand_pickle({"a": View(Storage("s", 12), 0, (2, 3), (3, 1)),
                       "b": View(Storage("s", 12), 6, (3, 2), (1, 3))})
    with zipfile.ZipFile(os.path.join(OUT, "deflated.pth"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(entry("my_model/data.pkl", zipfile.ZIP_DEFLATED), pkl)
        z.writestr(entry("my_model/data/s", zipfile.ZIP_DEFLATED), floats)
        z.writestr(entry("my_model/byteorder", zipfile.ZIP_DEFLATED), "little")
    write_zip64("zip64.pth", {"zip64/data.pkl": pkl, "zip64/data/s": floats,
                              "zip64/version": b"3\n"})
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), os.path.join(OUT, "torchscript.pth"))
    ar = torch.arange(12, dtype=torch.float32)
    expected["deflated.pth"] = describe({"a": ar[0:6].view(2, 3), "b": ar[6:].view(2, 3).t()})
    expected["deflated.pth"]["order"] = ["a", "b"]
    expected["zip64.pth"] = expected["deflated.pth"]

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print("torch", torch.__version__, "wrote", OUT)


if __name__ == "__main__":
    main()

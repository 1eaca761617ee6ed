"""tests/gen_image_fixtures.py — the reference data of tests/test_image_folder.cpp and
tests/test_transforms.cpp, made with Debian's python3-pil 9.4 and python3-torchvision 0.14.1
(torch 1.13.1):

  tests/data/images/*.jpg, *.png     tiny images in every layout the decoder converts
  tests/data/image_fixtures.json     "decode": each file's np.array(Image.open(f).convert("RGB"))
                                     "transforms": torchvision's outputs on one u8 image

Run: /usr/bin/python3 tests/gen_image_fixtures.py (from the repository root).
"""
import io
import json
import os
import struct
import zlib

import numpy as np
import torch
import torchvision.transforms.functional as F
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(HERE, "data", "images")
OUT = os.path.join(HERE, "data", "image_fixtures.json")

rng = np.random.default_rng(29)


def smooth_rgb(h, w):
    """A gradient plus noise: JPEG-friendly but not flat."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), (x + y) * 127 / (h + w)], -1)
    return np.clip(base + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]  # (x0, y0, dx, dy) of the seven passes


def raw_png(pixels, color_type, depth, interlaced=False):
    """A PNG written by hand: the layouts PIL cannot write (16-bit RGB, Adam7 interlacing)."""
    h, w = pixels.shape[:2]
    dt = ">u2" if depth == 16 else "u1"
    passes = [pixels[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7] if interlaced else [pixels]
    rows = b"".join(b"\0" + p[y].astype(dt).tobytes() for p in passes if p.shape[1] > 0
                    for y in range(p.shape[0]))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlaced else 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(rows))
            + png_chunk(b"IEND", b""))


def write_images():
    os.makedirs(IMAGES, exist_ok=True)
    files = {}
    rgb = smooth_rgb(11, 13)  # odd sizes: the chroma planes have partial blocks
    Image.fromarray(rgb).save(os.path.join(IMAGES, "rgb420.jpg"), quality=90)
    Image.fromarray(rgb).save(os.path.join(IMAGES, "rgb444.jpg"), quality=95, subsampling=0)
    Image.fromarray(rgb).save(os.path.join(IMAGES, "progressive.jpg"), quality=85, progressive=True)
    Image.fromarray(rgb[:, :, 0]).save(os.path.join(IMAGES, "gray.jpg"), quality=90)
    Image.fromarray(rgb).convert("CMYK").save(os.path.join(IMAGES, "cmyk.jpg"), quality=95)
    Image.fromarray(rgb).save(os.path.join(IMAGES, "rgb.png"))
    alpha = rng.integers(0, 256, (11, 13), dtype=np.uint8)
    Image.fromarray(np.dstack([rgb, alpha])).save(os.path.join(IMAGES, "rgba.png"))
    Image.fromarray(np.dstack([rgb[:, :, 1], alpha]), "LA").save(os.path.join(IMAGES, "la.png"))
    Image.fromarray(rgb[:, :, 2]).save(os.path.join(IMAGES, "gray.png"))
    Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16).save(
        os.path.join(IMAGES, "palette.png"))
    p = Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=8)
    p.info["transparency"] = 3
    p.save(os.path.join(IMAGES, "palette_trns.png"), transparency=3)
    Image.fromarray(rgb[:, :, 0] > 128).save(os.path.join(IMAGES, "bits1.png"))
    rgb16 = rng.integers(0, 65536, (5, 7, 3), dtype=np.uint16)
    with open(os.path.join(IMAGES, "rgb16.png"), "wb") as f:
        f.write(raw_png(rgb16, 2, 16))
    with open(os.path.join(IMAGES, "interlaced.png"), "wb") as f:
        f.write(raw_png(rgb, 2, 8, interlaced=True))  # PIL reads it: the reference is PIL's
    gray16 = rng.integers(0, 65536, (5, 7), dtype=np.uint16)
    with open(os.path.join(IMAGES, "gray16.png"), "wb") as f:
        f.write(raw_png(gray16, 0, 16))
    # PIL clips 16-bit grayscale to 255 in convert("RGB") (mode I); ember keeps the high byte,
    # as libpng's strip_16 and PIL's own 16-bit RGB reading do: the expected pixels say so.
    files["gray16.png"] = np.repeat((gray16 >> 8).astype(np.uint8)[:, :, None], 3, axis=2)
    return files


def decode_cases(overrides):
    cases = []
    for name in sorted(os.listdir(IMAGES)):
        if name in overrides:
            px = overrides[name]
        else:
            px = np.array(Image.open(os.path.join(IMAGES, name)).convert("RGB"))
        cases.append({"file": name, "shape": list(px.shape), "pixels": px.reshape(-1).tolist()})
    return cases


def f32_list(t):
    return [float(np.float32(v)) for v in t.reshape(-1).tolist()]


def transform_cases():
    """torchvision's tensor transforms on one u8 image, CHW; the test feeds ember the HWC
    image (u8) and the CHW f32 image."""
    hwc = smooth_rgb(23, 29)
    chw = torch.from_numpy(hwc).permute(2, 0, 1).contiguous()
    chw_f = chw.float() / 255
    cases = {"image": {"shape": list(hwc.shape), "data": hwc.reshape(-1).tolist()}}

    def resized(name, t, size):
        out = F.resize(t, size, interpolation=F.InterpolationMode.BILINEAR, antialias=True)
        if t.dtype == torch.uint8:
            cases[name] = {"size": size, "data": out.permute(1, 2, 0).reshape(-1).tolist()}
        else:
            cases[name] = {"size": size, "data": f32_list(out)}

    resized("resize_down_u8", chw, [12, 17])
    resized("resize_up_u8", chw, [40, 45])
    resized("resize_mixed_u8", chw, [12, 45])
    resized("resize_width_only_u8", chw, [23, 13])
    resized("resize_down_f32", chw_f, [12, 17])
    resized("resize_up_f32", chw_f, [31, 40])
    resized("resize_shorter_u8", chw, [16])  # shorter side 24, aspect kept
    out = F.resized_crop(chw, 2, 3, 15, 20, [9, 9], antialias=True)
    cases["resized_crop_u8"] = {"box": [2, 3, 15, 20], "size": [9, 9],
                                "data": out.permute(1, 2, 0).reshape(-1).tolist()}
    for name, size in [("center_crop_u8", [12, 15]), ("center_crop_pad_u8", [30, 40]),
                       ("center_crop_odd_u8", [20, 26])]:
        out = F.center_crop(chw, size)
        cases[name] = {"size": size, "shape": list(out.permute(1, 2, 0).shape),
                       "data": out.permute(1, 2, 0).reshape(-1).tolist()}
    cases["hflip_f32"] = {"data": f32_list(F.hflip(chw_f))}
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    pil_tensor = F.to_tensor(Image.fromarray(hwc))
    cases["to_tensor"] = {"data": f32_list(pil_tensor)}
    cases["normalize"] = {"mean": mean, "std": std,
                          "data": f32_list(F.normalize(pil_tensor, mean, std))}
    return cases


def main():
    overrides = write_images()
    fixture = {"generator": "tests/gen_image_fixtures.py", "torch": torch.__version__,
               "pil": Image.__version__, "decode": decode_cases(overrides),
               "transforms": transform_cases()}
    with open(OUT, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT, "and", len(fixture["decode"]), "images in", IMAGES)


if __name__ == "__main__":
    main()

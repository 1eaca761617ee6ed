#!/usr/bin/env python3
"""tests/interop/interop.py — ember checkpoints and PyTorch, both directions.

  python3 interop.py --ember BUILD/tests/ember_interop [--work DIR]

(a) ember -> torch: `ember_interop write DIR` saves three models with save_model plus an
    input and ember's output; here the equivalent torch modules load those files with
    safetensors.torch.load_file + load_state_dict(strict=True) and must give the same
    outputs on the same inputs (1e-5, relative to 1 + |value|).
(b) torch -> ember: torch modules with random weights (and BatchNorm statistics) are saved
    with safetensors.torch.save_file, with an input and torch's output;
    `ember_interop check DIR` loads them into the ember modules (strict) and compares.

The models: mlp_bn (Linear-BatchNorm1d-ReLU-Linear), cnn (ember's train::fashion_cnn),
transformer (2 TransformerEncoderLayers, d_model 16, 4 heads, a final LayerNorm),
activations_norms (the activation, Unflatten, GroupNorm, InstanceNorm1d and RMSNorm modules in
a Sequential), recurrent (LSTM, GRU, RNN, the cells and Bilinear in a ModuleList) and seq2seq
(nn.Transformer with a causal target mask), conv1d_family / conv2d_family / conv3d_family
(the Conv1d/3d, ConvTranspose, padding_mode, 1-D, adaptive pool, Upsample and PixelUnshuffle
modules in Sequentials), all in eval mode. torch 1.13 has no nn.RMSNorm:
a twin with the same parameter name stands in. Without the `safetensors` package (Debian has python3-torch but no safetensors)
a minimal reader/writer of the format below stands in, and the output says so. Exits 77
(CTest's skip code) when torch is not importable; 1 on any mismatch.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

SKIP = 77
TOL = 1e-5

try:
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"interop: SKIP: torch is not importable by {sys.executable} ({e})")
    sys.exit(SKIP)

try:
    from safetensors.torch import load_file, save_file

    BACKEND = "safetensors " + __import__("safetensors").__version__
except ImportError:
    BACKEND = None

    # Minimal safetensors reader/writer (8-byte little-endian header length, JSON header
    # padded with spaces to 8, raw little-endian C-contiguous data, offsets relative to the
    # data section), used only when the safetensors package is missing.
    _DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
               "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}
    _NAMES = {v: k for k, v in _DTYPES.items()}

    def load_file(path):
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n].decode("utf-8"))
        data = raw[8 + n:]
        out = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            t = torch.frombuffer(bytearray(data[b:end]), dtype=torch.uint8) if end > b else torch.empty(0, dtype=torch.uint8)
            out[name] = t.view(_DTYPES[e["dtype"]]).reshape(e["shape"]).clone()
        return out

    def save_file(tensors, path, metadata=None):
        header, chunks, offset = {}, [], 0
        # Falling element size keeps every tensor aligned, as ember and safetensors do.
        for name in sorted(tensors, key=lambda k: (-tensors[k].element_size(), k)):
            t = tensors[name].detach().contiguous().cpu()
            b = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
            chunks.append(b)
            offset += len(b)
        if metadata:
            header["__metadata__"] = metadata
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * ((8 - len(text) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4) for torch versions without it; same parameter name."""

    def __init__(self, normalized_shape, eps=None):
        super().__init__()
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))

    def forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps) * self.weight


def flat(parts):
    return torch.cat([p.reshape(-1) for p in parts])


def recurrent_forward(net, x):
    """As ember_interop.cpp's recurrent_forward."""
    lstm_out, (lstm_h, lstm_c) = net[0](x)
    gru_out, gru_h = net[1](x)
    rnn_out, rnn_h = net[2](x)
    lc_h, lc_c = net[3](x[0])
    gc_h = net[4](x[1])
    rc_h = net[5](x[2])
    bil = net[6](x[3], x[4])
    return flat([lstm_out, lstm_h, lstm_c, gru_out, gru_h, rnn_out, rnn_h, lc_h, lc_c, gc_h, rc_h, bil])


def seq2seq_forward(net, x):
    return net(x, x[:4], tgt_mask=nn.Transformer.generate_square_subsequent_mask(4))


def make_models():
    """The torch twins of ember_interop.cpp's models, by name: (module, input shape[, forward])."""
    mlp_bn = nn.Sequential(nn.Linear(20, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.1)
    kwargs = {"enable_nested_tensor": False} if "enable_nested_tensor" in nn.TransformerEncoder.__init__.__code__.co_varnames else {}
    transformer = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), **kwargs)
    activations_norms = nn.Sequential(
        nn.Linear(6, 12), nn.PReLU(12), nn.GLU(-1), nn.Unflatten(1, (2, 3)), nn.GroupNorm(2, 2),
        nn.InstanceNorm1d(2, affine=True, track_running_stats=True), RMSNorm((2, 3)), nn.Flatten(),
        nn.Softplus(), nn.Linear(6, 6), nn.ELU(), nn.Mish(), nn.Hardswish(), nn.LeakyReLU(0.1), nn.SELU(),
        nn.Hardtanh(), nn.ReLU6(), nn.Identity(), nn.Hardsigmoid(), nn.Linear(6, 4), nn.LogSigmoid())
    recurrent = nn.ModuleList([
        nn.LSTM(4, 5, num_layers=2, bidirectional=True, proj_size=3), nn.GRU(4, 5),
        nn.RNN(4, 5, num_layers=2, nonlinearity="relu"), nn.LSTMCell(4, 5), nn.GRUCell(4, 5), nn.RNNCell(4, 5),
        nn.Bilinear(4, 4, 3)])
    seq2seq = nn.Transformer(16, 4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32)
    conv1d_family = nn.Sequential(
        nn.Conv1d(2, 4, 3, padding=1, padding_mode="circular"), nn.MaxPool1d(2),
        nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1), nn.AvgPool1d(2), nn.AdaptiveMaxPool1d(5),
        nn.Conv1d(3, 2, 2, dilation=2, groups=1), nn.AdaptiveAvgPool1d(4), nn.Flatten())
    conv2d_family = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect"),
        nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1, groups=1), nn.ReLU(),
        nn.Upsample(scale_factor=2.0, mode="bilinear"), nn.AdaptiveAvgPool2d((6, 6)),
        nn.AdaptiveMaxPool2d(3), nn.PixelUnshuffle(3), nn.Flatten(), nn.Linear(27, 4))
    conv3d_family = nn.Sequential(
        nn.Conv3d(1, 2, 3, padding=1, padding_mode="replicate"), nn.Conv3d(2, 2, (1, 2, 2), stride=(1, 2, 2)),
        nn.Flatten())
    return {"mlp_bn": (mlp_bn, (8, 20)), "cnn": (cnn, (4, 1, 28, 28)), "transformer": (transformer, (5, 3, 16)),
            "activations_norms": (activations_norms, (8, 6)),
            "recurrent": (recurrent, (6, 2, 4), recurrent_forward),
            "seq2seq": (seq2seq, (5, 3, 16), seq2seq_forward),
            "conv1d_family": (conv1d_family, (2, 2, 16)), "conv2d_family": (conv2d_family, (2, 2, 6, 6)),
            "conv3d_family": (conv3d_family, (2, 1, 4, 6, 6))}


def forward_of(entry):
    return entry[2] if len(entry) > 2 else (lambda net, x: net(x))


def max_rel_err(got, want):
    if got.shape != want.shape:
        return float("inf")
    return ((got.double() - want.double()).abs() / (1 + want.double().abs())).max().item()


def ember_to_torch(ember, work):
    subprocess.run([ember, "write", work], check=True)
    ok = True
    for name, entry in make_models().items():
        module, fwd = entry[0], forward_of(entry)
        state = load_file(os.path.join(work, f"{name}.ember.safetensors"))
        module.load_state_dict(state, strict=True)
        module.eval()
        io = load_file(os.path.join(work, f"{name}.ember_io.safetensors"))
        with torch.no_grad():
            err = max_rel_err(fwd(module, io["input"]), io["output"])
        good = err <= TOL
        ok = ok and good
        print(json.dumps({"direction": "ember->torch", "model": name, "tensors": len(state),
                          "max_rel_err": float(f"{err:.3g}"), "ok": good}))
    return ok


def torch_to_ember(ember, work):
    torch.manual_seed(7)
    for name, entry in make_models().items():
        module, input_shape, fwd = entry[0], entry[1], forward_of(entry)
        with torch.no_grad():
            for key, t in module.state_dict().items():
                if not t.is_floating_point():
                    t.fill_(5)
                elif "running_var" in key:
                    t.copy_(torch.randn(t.shape).abs() + 0.5)
                else:
                    t.copy_(torch.randn(t.shape) * 0.2)
        module.eval()
        x = torch.randn(input_shape)
        with torch.no_grad():
            y = fwd(module, x)
        save_file({k: v.contiguous() for k, v in module.state_dict().items()},
                  os.path.join(work, f"{name}.torch.safetensors"), metadata={"format": "pt"})
        save_file({"input": x, "output": y.contiguous()}, os.path.join(work, f"{name}.torch_io.safetensors"))
    return subprocess.run([ember, "check", work]).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", required=True, help="path of the ember_interop program")
    ap.add_argument("--work", help="folder for the exchanged files (default: a temporary one)")
    args = ap.parse_args()
    print(f"interop: torch {torch.__version__}; "
          + (f"reading and writing with {BACKEND}" if BACKEND else
             "the safetensors package is missing: using this script's minimal reader/writer of the format"))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        a = ember_to_torch(args.ember, work)
        b = torch_to_ember(args.ember, work)
    print(f"interop: ember->torch {'ok' if a else 'FAILED'}, torch->ember {'ok' if b else 'FAILED'}")
    return 0 if a and b else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""tools/ops_coverage.py — which of PyTorch's functions ember lacks, each with the reason.

Lists every public function of torch, torch.nn.functional, torch.linalg and torch.special (as
the installed torch has them: Debian's python3-torch, 1.13, here and in CI), finds the ones
ember's public headers (include/ember/) do not declare under the same name, and gives each a
reason: an alias of an ember function, an in-place or copy form, Python machinery, a
backend's internal entry point, quantized/sparse/complex tensors (out of scope), planned in
issue 32's list, or a reason written for that name below. Writes docs/ops_coverage.md.

    tools/ops_coverage.py            write docs/ops_coverage.md
    tools/ops_coverage.py --check    exit 1 if a lacking function has no reason or the page is
                                     stale; exit 77 (skip) without torch

Run it with Debian's torch: /usr/bin/python3 tools/ops_coverage.py.
"""
import argparse
import glob
import inspect
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PAGE = os.path.join(ROOT, "docs", "ops_coverage.md")

# ---- names ember has under another name (PyTorch alias -> what to write in ember) ----
ALIASES = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
    "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
    "clip": "clamp", "concatenate": "cat", "divide": "div", "true_divide": "div",
    "multiply": "mul", "subtract": "sub", "negative": "neg", "greater": "gt",
    "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
    "fix": "trunc", "swapaxes": "transpose", "swapdims": "transpose", "moveaxis": "movedim",
    "ger": "outer", "inverse": "inv", "pinverse": "pinv", "row_stack": "vstack",
    "trapz": "trapezoid", "expit": "sigmoid", "psi": "digamma", "gammaln": "lgamma",
    "multigammaln": "mvlgamma", "range": "arange (torch.range is deprecated)",
    "upsample": "interpolate (F.upsample is deprecated)",
    "upsample_bilinear": "interpolate(..., bilinear, align_corners) (deprecated in PyTorch)",
    "upsample_nearest": "interpolate(..., nearest) (deprecated in PyTorch)",
    "frobenius_norm": "matrix_norm(x, \"fro\") / norm", "nuclear_norm": "matrix_norm(x, \"nuc\")",
    "binary_cross_entropy_with_logits": "bce_with_logits", "symeig": "eigh (torch.symeig is "
    "deprecated)", "msort": "sort(x, 0)", "positive": "the tensor itself (a no-op)",
    "asarray": "from_vector", "as_tensor": "from_vector",
    "is_grad_enabled": "grad_mode_enabled()", "use_deterministic_algorithms": "set_deterministic",
    "are_deterministic_algorithms_enabled": "deterministic()", "get_default_dtype":
    "default_dtype()", "initial_seed": "the seed given to manual_seed", "seed": "manual_seed",
    "set_anomaly_enabled": "AnomalyGuard", "is_anomaly_enabled": "AnomalyGuard's scope",
    "is_anomaly_check_nan_enabled": "AnomalyGuard's scope", "save": "io::save_model / io::save_state "
    "(safetensors; a state dict, not a pickle)", "set_autocast_enabled": "AutocastGuard",
    "is_autocast_enabled": "AutocastGuard's scope", "set_autocast_gpu_dtype": "AutocastGuard",
    "get_autocast_gpu_dtype": "AutocastGuard", "set_autocast_cpu_enabled": "AutocastGuard",
    "is_autocast_cpu_enabled": "AutocastGuard's scope", "set_autocast_cpu_dtype":
    "AutocastGuard", "get_autocast_cpu_dtype": "AutocastGuard", "clear_autocast_cache":
    "leaving the AutocastGuard scope", "set_autocast_cache_enabled": "AutocastGuard",
    "is_autocast_cache_enabled": "AutocastGuard", "autocast_increment_nesting": "AutocastGuard",
    "autocast_decrement_nesting": "AutocastGuard", "is_inference_mode_enabled": "NoGradGuard "
    "(ember has no separate inference mode)", "is_inference": "requires_grad() / NoGradGuard",
    "softmin": "softmax(neg(x), dim)", "relu6": "hardtanh(x, 0, 6)", "bilinear":
    "nn::Bilinear", "lstm": "nn::LSTM", "gru": "nn::GRU", "lstm_cell": "nn::LSTMCell",
    "gru_cell": "nn::GRUCell", "rnn_tanh": "nn::RNN", "rnn_relu": "nn::RNN (relu)",
    "rnn_tanh_cell": "nn::RNNCell", "rnn_relu_cell": "nn::RNNCell (relu)",
    "multi_head_attention_forward": "nn::MultiheadAttention", "group_norm": "nn::GroupNorm",
    "instance_norm": "nn::InstanceNorm1d/2d", "dropout_": "dropout (out of place)",
    
    "cosine_similarity": "sum(x1 * x2, dim) / (norm(x1) * norm(x2))",
    "pairwise_distance": "norm(x1 - x2 + eps, p, dim)", "unsafe_chunk": "chunk",
    "unsafe_split": "split", "unsafe_split_with_sizes": "split",
    "split_with_sizes": "split(x, sizes, dim)", "ravel": "flatten", "ldexp": "x * exp2(e)",
    "rsub": "sub(other, x)", "inner": "matmul/dot over the last dim", "mv": "matmul",
    "addmv": "addmm / matmul + add", "addbmm": "baddbmm(...).sum(0)", "addr": "outer + add",
    "fill": "Tensor::fill_", "randint_like": "randint with x's shape", "rand_like":
    "rand(x.shape())", "randn_like": "randn(x.shape())", "linalg.diagonal": "diagonal(x, offset, -2, -1)",
    "floor_divide": "floor(div(a, b))", "sinc": "sin(pi x)/(pi x)",
    "special.log1p": "log1p", "special.expm1": "expm1", "special.exp2": "exp2",
    "normalize": "div(x, clamp_min(norm(x, p, dim, keepdim), eps))",
    "deg2rad": "x * (pi / 180)", "rad2deg": "x * (180 / pi)",
    "fold": "col2im (F.fold; nn::Fold)", "native_channel_shuffle": "channel_shuffle",
    "fractional_max_pool2d_with_indices": "fractional_max_pool2d (it returns values and indices)",
    "fractional_max_pool3d_with_indices": "fractional_max_pool3d (it returns values and indices)",
    "as_strided_": "as_strided (a view; in place on the handle: x = as_strided(x, ...))",
}

# ---- issue 32's list, not built yet: planned (all of it is built now; a name added here is
# listed as planned while ember lacks it) ----
PLANNED = set()

# ---- reasons written for one name ----
REASONS = {
    # process and Python-level state
    "set_default_tensor_type": "deprecated in PyTorch; ember: set_default_dtype and "
    "set_default_device",
    "set_printoptions": "printing is operator<< with fixed options; not configurable yet",
    "set_flush_denormal": "not offered: ember leaves the FPU's denormal mode alone",
    "set_num_interop_threads": "ember has one thread pool (set_num_threads); no inter-op pool",
    "get_num_interop_threads": "ember has one thread pool (get_num_threads); no inter-op pool",
    "init_num_threads": "the pool sizes itself on first use (set_num_threads)",
    "set_warn_always": "ember throws errors and does not warn",
    "is_warn_always_enabled": "ember throws errors and does not warn",
    "set_deterministic_debug_mode": "set_deterministic (ember refuses instead of warning)",
    "get_deterministic_debug_mode": "deterministic()",
    "is_deterministic_algorithms_warn_only_enabled": "ember has no warn-only mode: it refuses",
    "read_vitals": "PyTorch telemetry, not an op", "set_vital": "PyTorch telemetry, not an op",
    "vitals_enabled": "PyTorch telemetry, not an op",
    "is_tensor": "C++ types say it", "is_storage": "C++ types say it",
    "is_floating_point": "is_floating(t.dtype())", "is_signed": "a DType property",
    "is_nonzero": "t.item<bool>() on a one-element tensor", "is_same_size": "a.shape() == b.shape()",
    "get_device": "t.device().index", "can_cast": "type promotion is ops::promote, internal",
    "is_distributed": "distributed::initialized()", "is_vulkan_available": "ember has no Vulkan "
    "backend yet (planned as a third backend)",
    "equal": "not yet: all(eq(a, b)) and a shape check do it",
    "from_numpy": "no NumPy in C++: from_vector", "from_dlpack": "not yet: DLPack "
    "interop is not implemented", "to_dlpack": "not yet: DLPack interop is not implemented",
    "frombuffer": "from_vector over the bytes (a copy)", "empty_strided": "as_strided(empty(n), ...)",
    # windows and signal processing
    "bartlett_window": "signal windows are not implemented yet (no user request)",
    "blackman_window": "signal windows are not implemented yet (no user request)",
    "hamming_window": "signal windows are not implemented yet (no user request)",
    "hann_window": "signal windows are not implemented yet (no user request)",
    "kaiser_window": "signal windows are not implemented yet (no user request)",
    # math and reductions without a plan yet
    "argwhere": "nonzero(x) gives the same indices", "cdist": "not yet: composite of norms "
    "(torch.cdist); candidate for the next vocabulary round",
    "pdist": "not yet: composite of norms; candidate for the next vocabulary round",
    "cholesky_inverse": "not yet: cholesky_solve(eye(n), L) computes it",
    "corrcoef": "not yet: a composite of cov; candidate for the next vocabulary round",
    "cov": "not yet: composite (mean, matmul); candidate for the next vocabulary round",
    "dist": "norm(a - b, p)", "fmax": "not yet: maximum that ignores NaN; next vocabulary round",
    "fmin": "not yet: minimum that ignores NaN; next vocabulary round",
    "fliplr": "flip(x, {1})", "flipud": "flip(x, {0})", "gradient": "not yet: torch.gradient "
    "(finite differences); candidate for the next vocabulary round",
    "histogram": "histc covers the uniform-bin case (bin edges: linspace(min, max, bins + 1))", "histogramdd": "not planned: "
    "multi-dimensional histograms", "igamma": "not yet: regularized incomplete gamma (special)",
    "igammac": "not yet: regularized incomplete gamma (special)", "isin": "not yet: "
    "candidate for the next vocabulary round", "isneginf": "logical_and(isinf(x), lt(x, 0))",
    "isposinf": "logical_and(isinf(x), gt(x, 0))", "logdet": "slogdet gives sign and log|det|",
    "lobpcg": "not planned: iterative sparse eigensolver", "pca_lowrank": "not planned: "
    "randomized low-rank methods (svd covers dense use)", "svd_lowrank": "not planned: "
    "randomized low-rank methods (svd covers dense use)", "logspace": "exp(linspace * log(base))",
    "lu_unpack": "lu returns P, L, U unpacked already", "geqrf": "qr covers it (Householder "
    "form not exposed)", "orgqr": "householder_product", "ormqr": "not "
    "planned: Householder-form products (use householder_product then matmul)",
    "renorm": "not yet: candidate for the next vocabulary round", "sgn": "sign (real tensors)",
    "std_mean": "std and mean", "trace": "sum(diagonal(x))", "vander": "not yet: candidate for the next vocabulary round",
    "vdot": "dot (real tensors; vdot's conjugation needs complex numbers)", "poisson": "not yet: Poisson "
    "sampling (sampling.hpp has categorical, multinomial, Bernoulli, normal)",
    "binomial": "not yet: binomial sampling (sampling.hpp has Bernoulli)",
    "randperm": "not yet: argsort(rand(n)) does it", "segment_reduce": "not planned: "
    "prototype in PyTorch", "index_put": "index_put_ / index_copy", "index_put_": "not yet: "
    "advanced-index assignment; index_copy and scatter cover the common cases",
    "clamp_max_": "clamp_max (out of place)", "clamp_min_": "clamp_min (out of place)",
    "embedding_renorm_": "not yet: nn::Embedding's max_norm",
    "feature_dropout": "not yet: channel dropout; candidate for the next vocabulary round", "feature_dropout_": "not yet (see feature_dropout)",
    "dropout1d": "not yet: channel dropout; candidate for the next vocabulary round",
    "dropout2d": "not yet: channel dropout; candidate for the next vocabulary round",
    "dropout3d": "not yet: channel dropout; candidate for the next vocabulary round",
    "adjoint": "transpose(x, -2, -1) (adjoint conjugates too: complex numbers are out of scope)", "alpha_dropout": "not yet: "
    "candidate for the next vocabulary round (SELU networks)", "alpha_dropout_": "not yet",
    "feature_alpha_dropout": "not yet: candidate for the next vocabulary round",
    "feature_alpha_dropout_": "not yet", "gumbel_softmax": "not yet: candidate for the next "
    "vocabulary round", "soft_margin_loss": "not yet: candidate for the next vocabulary round",
    "detach_": "detach() (out of place)", "resize_as_": "not offered: ember tensors do not "
    "resize in place", "as_strided_": "as_strided (planned)", "stft": "needs complex numbers",
    "istft": "needs complex numbers", "align_tensors": "named tensors: not supported",
    "tensorinv": "not yet: inv of a reshaped tensor", "tensorsolve": "not yet: solve of a "
    "reshaped tensor", "vecdot": "sum(x * y, dim) (PyTorch 2.x's linalg.vecdot)",
    "svdvals": "svd(x).S", "cholesky_ex": "cholesky (ember throws naming the matrix instead "
    "of returning info)", "inv_ex": "inv (ember throws naming the matrix)", "solve_ex": "solve "
    "(ember throws naming the matrix)", "lu_factor_ex": "lu_factor (ember throws naming the "
    "matrix)", "ldl_factor": "not planned: LDLᵀ (cholesky and lu cover solving)",
    "ldl_factor_ex": "not planned: LDLᵀ", "ldl_solve": "not planned: LDLᵀ",
    "entr": "not yet: -x log x (special)", "log_ndtr": "not yet (special)", "ndtr": "not yet: "
    "0.5 erfc(-x/√2) (special)", "ndtri": "not yet (special)", "xlog1py": "not yet (special)",
    "zeta": "not yet (special)", "gammainc": "not yet: regularized incomplete gamma",
    "gammaincc": "not yet: regularized incomplete gamma", "airy_ai": "not planned (special "
    "functions of physics)", }
SPECIAL_PHYSICS = re.compile(r"^(bessel_|modified_bessel_|scaled_modified_bessel_|"
                             r"spherical_bessel_|chebyshev_|shifted_chebyshev_|hermite_|"
                             r"laguerre_|legendre_)")


def alias_reason(target, ember):
    """'as X', saying so when X itself is still planned."""
    head = re.match(r"[A-Za-z_]\w*", target)
    if head and head.group(0) in PLANNED and head.group(0) not in ember:
        return f"as {target}, which is planned (issue 32's list)"
    return f"as {target}"


def rule_reason(ns, name, ember):
    """The reason for a lacking name, or None."""
    key = f"{ns.split('.')[-1]}.{name}"
    if key in ALIASES:
        return alias_reason(ALIASES[key], ember)
    if key in REASONS:
        return REASONS[key]
    if name in PLANNED:
        return "planned: issue 32's list"
    if name in ALIASES:
        return alias_reason(ALIASES[name], ember)
    if name in REASONS:
        return REASONS[name]
    if name in {"Callable", "Set", "Union", "List", "Optional", "Tuple", "classproperty",
                "candidate", "obj", "typename", "merge_type_from_type_comment",
                "parse_ir", "parse_schema", "parse_type_comment", "import_ir_module",
                "import_ir_module_from_buffer", "unify_type_list", "get_file_path",
                "compiled_with_cxx11_abi", "prepare_multiprocessing_environment", "fork",
                "handle_torch_function", "has_torch_function", "has_torch_function_unary",
                "has_torch_function_variadic", "boolean_dispatch", "assert_int_or_pair"}:
        return "Python machinery (typing, TorchScript, __torch_function__), not an op"
    if re.match(r"^(q_|quantize|quantized_|dequantize|int_repr|fake_quantize|choose_qparams|"
                r"fused_moving_avg_obs_fake_quant|fbgemm_|empty_quantized)", name):
        return "quantized tensors: out of scope"
    if re.match(r"^(sparse_|ccol_indices|crow_indices|col_indices|row_indices|indices_copy|"
                r"values_copy|resize_as_sparse_)", name) or name in {
                    "smm", "spmm", "sspaddmm", "hspmm", "dsmm", "hsmm", "saddmm"}:
        return "sparse tensors: out of scope"
    if re.match(r"^(cudnn_|miopen_|mkldnn_|native_|batch_norm_(stats|elemt|backward|gather|"
                r"update))", name) or name in {"convolution", "conv_tbc", "constant_pad_nd",
                                               "norm_except_dim", "grid_sampler",
                                               "grid_sampler_2d", "grid_sampler_3d",
                                               "affine_grid_generator"}:
        return "a backend's internal entry point behind a public op"
    if name in {"angle", "complex", "conj", "conj_physical", "conj_physical_", "imag", "real",
                "is_conj", "is_neg", "resolve_conj", "resolve_neg", "polar", "view_as_complex",
                "view_as_real", "view_as_complex_copy", "view_as_real_copy", "isreal",
                "is_complex"}:
        return "complex numbers: out of scope (docs/ops.md, \"Complex numbers\")"
    if SPECIAL_PHYSICS.match(name) or name in {"airy_ai"}:
        return "not planned: special functions of physics (Bessel, orthogonal polynomials)"
    if name.endswith("_copy") and (name[:-5] in ember or name[:-5] in {
            "alias", "detach", "diagonal", "expand", "permute", "select", "slice", "split",
            "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unfold", "unsqueeze",
            "view", "as_strided"}):
        return f"a view's copy form (functionalization): {name[:-5]}(...).clone()"
    if name.endswith("_scatter"):
        return "a view's inverse (functionalization): write through the view with copy_"
    if name.endswith("_") and not name.endswith("__"):
        base = name[:-1]
        if base in ember:
            return f"in-place form of {base}: x = {base}(x), or the Tensor method where listed"
        if base in ALIASES or base in PLANNED or base in REASONS:
            return f"in-place form of {base} (see {base})"
    return None


def ember_names():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "include", "ember", "**", "*.hpp"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"//.*", "", f.read())
        names |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))
    return names


def torch_functions():
    import torch  # noqa: F401 (imported here so --help works without torch)
    import torch.linalg
    import torch.nn.functional
    import torch.special
    out = {}
    for ns, module in (("torch", torch), ("torch.nn.functional", torch.nn.functional),
                       ("torch.linalg", torch.linalg), ("torch.special", torch.special)):
        names = []
        for n in dir(module):
            if n.startswith("_"):
                continue
            v = getattr(module, n)
            if callable(v) and not inspect.isclass(v) and not inspect.ismodule(v):
                names.append(n)
        out[ns] = sorted(names)
    return out, torch.__version__


def page(found, version, ember):
    lines = ["# PyTorch functions ember does not have, and why",
             "",
             "Generated by `tools/ops_coverage.py` (do not edit; run `/usr/bin/python3 "
             "tools/ops_coverage.py`) from the public functions of `torch`, "
             "`torch.nn.functional`, `torch.linalg` and `torch.special` in PyTorch "
             f"{version.split('+')[0]} (Debian's python3-torch), against the names ember's "
             "public headers declare. A function counts as present when ember declares a "
             "function of the same name (a free function, a Tensor method or a module's); "
             "`torch.special.xxx` also counts as `xxx`. CTest `docs.ops_coverage` fails when a "
             "lacking function has no reason here or this page is stale.",
             "",
             "Reasons: *as X* — ember has it under another name or spelling; *planned* — in "
             "issue 32's list, not built yet; *out of scope* — quantized, sparse and complex "
             "tensors; *internal* — an entry point PyTorch keeps for its own backends; *not "
             "yet* — no plan yet, with the composite that does it where there is one.",
             ""]
    total = 0
    for ns, rows in found.items():
        lines += [f"## `{ns}` ({len(rows)} lacking)", "", "| function | reason |", "|---|---|"]
        for name, reason in rows:
            lines.append(f"| `{name}` | {reason} |")
        lines.append("")
        total += len(rows)
    lines.insert(2, f"{total} functions in all.")
    lines.insert(3, "")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    try:
        functions, version = torch_functions()
    except ImportError:
        print("ops_coverage: no torch in this Python: skipped (use /usr/bin/python3)")
        return 77
    ember = ember_names()
    found, unexplained = {}, []
    for ns, names in functions.items():
        rows = []
        for name in names:
            if name in ember or (ns == "torch.special" and name.startswith("special_")):
                continue
            reason = rule_reason(ns, name, ember)
            if reason is None:
                unexplained.append(f"{ns}.{name}")
                reason = "(no reason yet)"
            rows.append((name, reason))
        found[ns] = rows
    text = page(found, version, ember)
    if unexplained:
        print("ops_coverage: lacking with no reason: " + ", ".join(unexplained), file=sys.stderr)
    if a.check:
        with open(PAGE, encoding="utf-8") as f:
            stale = f.read() != text
        if stale:
            print("ops_coverage: docs/ops_coverage.md is stale: run /usr/bin/python3 "
                  "tools/ops_coverage.py", file=sys.stderr)
        if unexplained or stale:
            return 1
        print(f"ops_coverage: {sum(len(r) for r in found.values())} lacking functions, each "
              f"with its reason")
        return 0
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"ops_coverage: wrote {PAGE}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 32's nn functional ops and losses: the PyTorch references of the cases in
tests/test_op_cases_nn.cpp. Written to tests/data/op_fixtures_nn.json by
`/usr/bin/python3 tests/gen_fixtures.py nn` (see gen_fixtures.py for case(), the makers and
the tolerances)."""
from gen_fixtures import binary, case, unary  # noqa: F401
import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def T(*v):
    return torch.tensor(v, dtype=torch.float64)


def IDX(*v):
    return torch.tensor(v, dtype=torch.int64)


def signs(m, *shape):
    return torch.where(m.mask(*shape), T(1.0), T(-1.0))


# ---- losses
case("multilabel_margin_loss",
     lambda m: {"input": m.randn(3, 5),
                "target": IDX(3, 0, -1, 1, 2, 4, -1, 0, 0, 0, 1, 2, 2, -1, 3).reshape(3, 5)},
     lambda t: F.multilabel_margin_loss(t["input"], t["target"]), diff=("input",),
     attrs={"reduction": "mean"})
case("multilabel_margin_loss_1d_none",
     lambda m: {"input": m.randn(4), "target": IDX(2, 0, -1, 3)},
     lambda t: F.multilabel_margin_loss(t["input"], t["target"], reduction="none"),
     diff=("input",), attrs={"reduction": "none"})
case("multilabel_soft_margin_loss",
     lambda m: {"input": m.randn(3, 4), "target": m.mask(3, 4).double()},
     lambda t: F.multilabel_soft_margin_loss(t["input"], t["target"]), diff=("input", "target"),
     attrs={"reduction": "mean"})
case("multilabel_soft_margin_loss_weight",
     lambda m: {"input": m.randn(3, 4), "target": m.mask(3, 4).double(), "weight": m.positive(4)},
     lambda t: F.multilabel_soft_margin_loss(t["input"], t["target"], weight=t["weight"],
                                             reduction="none"),
     diff=("input", "target", "weight"), attrs={"reduction": "none"})
case("multi_margin_loss",
     lambda m: {"input": m.randn(4, 5), "target": IDX(0, 3, 4, 1)},
     lambda t: F.multi_margin_loss(t["input"], t["target"]), diff=("input",),
     attrs={"p": 1, "margin": 1.0, "reduction": "mean"})
case("multi_margin_loss_p2_weight",
     lambda m: {"input": m.randn(4, 5), "target": IDX(2, 2, 0, 4), "weight": m.positive(5)},
     lambda t: F.multi_margin_loss(t["input"], t["target"], p=2, margin=0.7, weight=t["weight"],
                                   reduction="none"),
     diff=("input",), attrs={"p": 2, "margin": 0.7, "reduction": "none"})
case("hinge_embedding_loss",
     lambda m: {"input": m.randn(3, 4), "target": signs(m, 3, 4)},
     lambda t: F.hinge_embedding_loss(t["input"], t["target"], margin=1.2), diff=("input",),
     attrs={"margin": 1.2, "reduction": "mean"})
case("hinge_embedding_loss_none",
     lambda m: {"input": m.randn(2, 5), "target": signs(m, 2, 5)},
     lambda t: F.hinge_embedding_loss(t["input"], t["target"], reduction="none"),
     diff=("input",), attrs={"margin": 1.0, "reduction": "none"})
case("soft_margin_loss",
     lambda m: {"input": m.randn(3, 4), "target": signs(m, 3, 4)},
     lambda t: F.soft_margin_loss(t["input"], t["target"]), diff=("input",),
     attrs={"reduction": "mean"})
case("soft_margin_loss_sum",
     lambda m: {"input": m.randn(6) * 8.0, "target": signs(m, 6)},
     lambda t: F.soft_margin_loss(t["input"], t["target"], reduction="sum"), diff=("input",),
     attrs={"reduction": "sum"})
case("gaussian_nll_loss",
     lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4), "var": m.positive(3, 4)},
     lambda t: F.gaussian_nll_loss(t["input"], t["target"], t["var"]),
     diff=("input", "target", "var"), attrs={"full": False, "reduction": "mean"})
case("gaussian_nll_loss_full_row_var",
     lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4), "var": m.positive(3)},
     lambda t: F.gaussian_nll_loss(t["input"], t["target"], t["var"], full=True, reduction="sum"),
     diff=("input", "target", "var"), attrs={"full": True, "reduction": "sum"})
case("gaussian_nll_loss_last_dim_one",
     lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4), "var": m.positive(3, 1)},
     lambda t: F.gaussian_nll_loss(t["input"], t["target"], t["var"], reduction="none"),
     diff=("input", "target", "var"), attrs={"full": False, "reduction": "none"})
case("triplet_margin_with_distance_loss",
     lambda m: {"anchor": m.randn(4, 3), "positive": m.randn(4, 3), "negative": m.randn(4, 3)},
     lambda t: F.triplet_margin_with_distance_loss(t["anchor"], t["positive"], t["negative"],
                                                   margin=1.5),
     diff=("anchor", "positive", "negative"),
     attrs={"margin": 1.5, "swap": False, "cosine": False, "reduction": "mean"})
case("triplet_margin_with_distance_loss_cosine_swap",
     lambda m: {"anchor": m.randn(5, 3), "positive": m.randn(5, 3), "negative": m.randn(5, 3)},
     lambda t: F.triplet_margin_with_distance_loss(
         t["anchor"], t["positive"], t["negative"],
         distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b), margin=0.8, swap=True,
         reduction="none"),
     diff=("anchor", "positive", "negative"),
     attrs={"margin": 0.8, "swap": True, "cosine": True, "reduction": "none"})

# ---- distances
binary("cosine_similarity", lambda m: m.randn(4, 5), lambda m: m.randn(4, 5),
       lambda a, b: F.cosine_similarity(a, b), attrs={"dim": 1})
binary("cosine_similarity_bcast_last", lambda m: m.randn(2, 3, 4), lambda m: m.randn(3, 4),
       lambda a, b: F.cosine_similarity(a, b, dim=-1), attrs={"dim": -1})
binary("pairwise_distance", lambda m: m.randn(4, 5), lambda m: m.randn(4, 5),
       lambda a, b: F.pairwise_distance(a, b), attrs={"p": 2.0, "keepdim": False})
binary("pairwise_distance_p1_keepdim", lambda m: m.randn(3, 4), lambda m: m.randn(4),
       lambda a, b: F.pairwise_distance(a, b, p=1.0, keepdim=True),
       attrs={"p": 1.0, "keepdim": True})
binary("pairwise_distance_p3", lambda m: m.randn(3, 4), lambda m: m.randn(3, 4),
       lambda a, b: F.pairwise_distance(a, b, p=3.0), attrs={"p": 3.0, "keepdim": False})
unary("pdist", lambda m: m.randn(5, 3), lambda x: F.pdist(x), attrs={"p": 2.0})
unary("pdist_p1", lambda m: m.randn(4, 3), lambda x: F.pdist(x, p=1.0), attrs={"p": 1.0})


# ---- pools
def _lp_pool3d(x, p, k, s, ceil_mode):
    # torch 1.13 has no lp_pool3d; this is torch 2.x's definition.
    out = F.avg_pool3d(x.pow(p), k, s, 0, ceil_mode)
    vol = k[0] * k[1] * k[2]
    return (torch.sign(out) * F.relu(torch.abs(out))).mul(vol).pow(1.0 / p)


unary("max_pool3d", lambda m: m.distinct(1, 2, 4, 5, 5),
      lambda x: F.max_pool3d(x, 3, stride=2, padding=1))
unary("max_pool3d_dilation_ceil", lambda m: m.distinct(1, 1, 5, 6, 6),
      lambda x: F.max_pool3d(x, 2, stride=2, dilation=(1, 2, 1), ceil_mode=True))
unary("max_pool3d_unbatched", lambda m: m.distinct(2, 4, 4, 3),
      lambda x: F.max_pool3d(x, (2, 2, 1)))
case("max_pool3d_indices", lambda m: {"x": m.distinct(1, 2, 4, 5, 5)},
     lambda t: F.max_pool3d(t["x"], 3, stride=2, padding=1, return_indices=True)[1])
unary("avg_pool3d", lambda m: m.randn(1, 2, 4, 5, 5),
      lambda x: F.avg_pool3d(x, 3, stride=2, padding=1))
unary("avg_pool3d_exclude_pad_ceil", lambda m: m.randn(1, 1, 5, 6, 5),
      lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False))
unary("avg_pool3d_divisor", lambda m: m.randn(2, 4, 4, 4),
      lambda x: F.avg_pool3d(x, 2, divisor_override=5))
unary("adaptive_avg_pool3d", lambda m: m.randn(1, 2, 5, 4, 4),
      lambda x: F.adaptive_avg_pool3d(x, (3, 2, 3)))
unary("adaptive_avg_pool3d_global", lambda m: m.randn(2, 2, 3, 4, 3),
      lambda x: F.adaptive_avg_pool3d(x, 1))
unary("adaptive_max_pool3d", lambda m: m.distinct(1, 2, 5, 4, 4),
      lambda x: F.adaptive_max_pool3d(x, (3, 2, 3)))
case("adaptive_max_pool3d_indices", lambda m: {"x": m.distinct(1, 2, 5, 4, 4)},
     lambda t: F.adaptive_max_pool3d(t["x"], (3, 2, 3), return_indices=True)[1])


def _pool_indices(m, pool, *shape):
    return pool(m.distinct(*shape))[1]


def _unpool(fn, *args, **kw):
    # max_unpool has no "deterministic" kernel in torch; a pool's indices never collide, so
    # its result is deterministic here.
    torch.use_deterministic_algorithms(False)
    try:
        return fn(*args, **kw)
    finally:
        torch.use_deterministic_algorithms(True)


case("max_unpool1d",
     lambda m: {"x": m.randn(2, 3, 4),
                "indices": _pool_indices(m, lambda v: F.max_pool1d(v, 2, return_indices=True),
                                         2, 3, 8)},
     lambda t: _unpool(F.max_unpool1d, t["x"], t["indices"], 2), diff=("x",))
case("max_unpool2d_output_size",
     lambda m: {"x": m.randn(1, 2, 2, 3),
                "indices": _pool_indices(m, lambda v: F.max_pool2d(v, 2, return_indices=True),
                                         1, 2, 5, 7)},
     lambda t: _unpool(F.max_unpool2d, t["x"], t["indices"], 2, output_size=(5, 7)), diff=("x",))
# Non-overlapping windows: an index two windows share would make the scatter (and PyTorch's
# gather backward) count one value twice.
case("max_unpool3d",
     lambda m: {"x": m.randn(1, 2, 2, 2, 2),
                "indices": _pool_indices(
                    m, lambda v: F.max_pool3d(v, 3, stride=3, padding=1, return_indices=True),
                    1, 2, 4, 4, 5)},
     lambda t: _unpool(F.max_unpool3d, t["x"], t["indices"], 3, stride=3, padding=1,
                       output_size=(4, 4, 5)), diff=("x",))
unary("lp_pool1d", lambda m: m.positive(2, 3, 9), lambda x: F.lp_pool1d(x, 2.0, 3, stride=2))
unary("lp_pool2d_ceil", lambda m: m.positive(1, 2, 5, 6),
      lambda x: F.lp_pool2d(x, 3.0, (2, 3), stride=2, ceil_mode=True))
unary("lp_pool3d", lambda m: m.positive(1, 2, 4, 5, 4),
      lambda x: _lp_pool3d(x, 1.5, (2, 2, 2), (2, 2, 2), True))

# ---- channels and grids
def _channel_shuffle(x, g):
    # torch 1.13's channel_shuffle has no derivative (2.x's has); its values, with gradients.
    n, c = x.shape[:2]
    out = x.reshape(n, g, c // g, *x.shape[2:]).transpose(1, 2).reshape(x.shape)
    assert torch.equal(out, torch.channel_shuffle(x.detach(), g))
    return out


unary("channel_shuffle", lambda m: m.randn(2, 6, 3),
      lambda x: _channel_shuffle(x, 3), attrs={"groups": 3})
unary("channel_shuffle_4d", lambda m: m.randn(1, 8, 2, 3),
      lambda x: _channel_shuffle(x, 2), attrs={"groups": 2})
unary("local_response_norm", lambda m: m.randn(2, 5, 4),
      lambda x: F.local_response_norm(x, 3), attrs={"size": 3, "alpha": 1e-4, "beta": 0.75,
                                                     "k": 1.0})
unary("local_response_norm_4d", lambda m: m.randn(1, 6, 3, 3),
      lambda x: F.local_response_norm(x, 4, alpha=0.5, beta=0.6, k=2.0),
      attrs={"size": 4, "alpha": 0.5, "beta": 0.6, "k": 2.0})
case("affine_grid", lambda m: {"theta": m.randn(2, 2, 3)},
     lambda t: F.affine_grid(t["theta"], [2, 1, 3, 4], align_corners=False), diff=("theta",),
     attrs={"size": [2, 1, 3, 4], "align_corners": False})
case("affine_grid_3d_align", lambda m: {"theta": m.randn(1, 3, 4)},
     lambda t: F.affine_grid(t["theta"], [1, 1, 2, 3, 2], align_corners=True), diff=("theta",),
     attrs={"size": [1, 1, 2, 3, 2], "align_corners": True})

# ---- fractional max pooling (the samples given, as PyTorch's _random_samples)
case("fractional_max_pool2d",
     lambda m: {"x": m.distinct(2, 2, 7, 7), "samples": m.uniform(2, 2, 2)},
     lambda t: F.fractional_max_pool2d(t["x"], (2, 3), output_size=(4, 3),
                                       _random_samples=t["samples"]),
     diff=("x",))
case("fractional_max_pool2d_ratio_indices",
     lambda m: {"x": m.distinct(1, 3, 8, 7), "samples": m.uniform(1, 3, 2)},
     lambda t: F.fractional_max_pool2d(t["x"], 2, output_ratio=(0.5, 0.6), return_indices=True,
                                       _random_samples=t["samples"])[1])
case("fractional_max_pool3d",
     lambda m: {"x": m.distinct(1, 2, 5, 5, 4), "samples": m.uniform(1, 2, 3)},
     lambda t: F.fractional_max_pool3d(t["x"], (2, 3, 2), output_size=(3, 2, 2),
                                       _random_samples=t["samples"]),
     diff=("x",))

# ---- grid_sample (grid points off the pixel lattice, so every weight is differentiable)
for nm, mode, padding, align, shape in [
        ("grid_sample", "bilinear", "zeros", False, (2, 3, 4, 5)),
        ("grid_sample_border_align", "bilinear", "border", True, (1, 2, 5, 4)),
        ("grid_sample_reflection", "bilinear", "reflection", False, (1, 2, 4, 4)),
        ("grid_sample_reflection_align", "bilinear", "reflection", True, (1, 1, 3, 5)),
        ("grid_sample_3d", "bilinear", "zeros", False, (1, 2, 3, 4, 3)),
        ("grid_sample_bicubic", "bicubic", "zeros", False, (1, 2, 4, 5)),
        ("grid_sample_bicubic_border_align", "bicubic", "border", True, (1, 1, 5, 4)),
        ("grid_sample_bicubic_reflection", "bicubic", "reflection", False, (1, 2, 4, 4))]:
    spatial = len(shape) - 2
    # bicubic's f32 weights (cubic polynomials of the fraction) round more than bilinear's
    tol = {"atol": 1e-5} if mode == "bicubic" else {}
    case(nm, lambda m, shape=shape, spatial=spatial: {
            "input": m.randn(*shape),
            "grid": m.uniform(shape[0], *([3] * spatial), spatial, lo=-1.3, hi=1.3)},
         lambda t, mode=mode, padding=padding, align=align: F.grid_sample(
             t["input"], t["grid"], mode=mode, padding_mode=padding, align_corners=align),
         diff=("input", "grid"), attrs={"mode": mode, "padding_mode": padding,
                                        "align_corners": align}, **tol)
case("grid_sample_nearest", lambda m: {"input": m.randn(1, 2, 4, 5),
                                       "grid": m.uniform(1, 3, 4, 2, lo=-1.2, hi=1.2)},
     lambda t: F.grid_sample(t["input"], t["grid"], mode="nearest", padding_mode="zeros",
                             align_corners=False),
     diff=("input",), attrs={"mode": "nearest", "padding_mode": "zeros", "align_corners": False})

# ---- conv_transpose3d
case("conv_transpose3d",
     lambda m: {"x": m.randn(1, 2, 2, 3, 2), "weight": m.randn(2, 3, 2, 2, 2),
                "bias": m.randn(3)},
     lambda t: F.conv_transpose3d(t["x"], t["weight"], t["bias"], stride=2, padding=1,
                                  output_padding=1),
     diff=("x", "weight", "bias"))
case("conv_transpose3d_groups_dilation",
     lambda m: {"x": m.randn(1, 4, 2, 2, 2), "weight": m.randn(4, 1, 2, 2, 1)},
     lambda t: F.conv_transpose3d(t["x"], t["weight"], None, stride=(1, 2, 1), padding=(0, 1, 0),
                                  groups=2, dilation=(2, 1, 1)),
     diff=("x", "weight"))
case("conv_transpose3d_unbatched",
     lambda m: {"x": m.randn(2, 2, 2, 2), "weight": m.randn(2, 2, 3, 1, 2)},
     lambda t: F.conv_transpose3d(t["x"], t["weight"], stride=(2, 1, 1)),
     diff=("x", "weight"))

# ---- bicubic interpolation (Keys' cubic convolution, A = -0.75)
unary("interpolate_bicubic", lambda m: m.randn(1, 2, 4, 5),
      lambda x: F.interpolate(x, size=(7, 3), mode="bicubic", align_corners=False), atol=1e-5)
unary("interpolate_bicubic_align", lambda m: m.randn(2, 1, 3, 4),
      lambda x: F.interpolate(x, size=(5, 6), mode="bicubic", align_corners=True), atol=1e-5)
unary("interpolate_bicubic_scale", lambda m: m.randn(1, 1, 4, 3),
      lambda x: F.interpolate(x, scale_factor=(1.5, 2.25), mode="bicubic"), atol=1e-5)

"""Issue 32's shape, indexing, reductions and scans: the PyTorch references of the cases in
tests/test_op_cases_shape.cpp. Written to tests/data/op_fixtures_shape.json by
`/usr/bin/python3 tests/gen_fixtures.py shape` (see gen_fixtures.py for case(), the makers and
the tolerances).

Ops that return several tensors (tensor_split, broadcast_tensors, var_mean) are checked through
one: the pieces joined in reverse order (so a wrong boundary shows) or stacked."""
from gen_fixtures import binary, case, unary  # noqa: F401
import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def joined_reversed(parts, dim):
    return torch.cat(list(reversed(parts)), dim)


def small_ints(m, *shape, hi=3):
    """Small integers held as floats: plenty of ties (mode, unique)."""
    return m.randint(0, hi, *shape).to(torch.float64)


def sorted_randn(m, *shape):
    return torch.sort(m.randn(*shape), -1).values
#-- -- shape : rotations, at - least views, stacks and splits
unary("rot90_k1", lambda m: m.randn(2, 3, 4), lambda x: torch.rot90(x, 1, [0, 1]),
      attrs={"k": 1, "dims": [0, 1]})
unary("rot90_k2", lambda m: m.randn(3, 4), lambda x: torch.rot90(x, 2, [0, 1]),
      attrs={"k": 2, "dims": [0, 1]})
unary("rot90_neg_dims12", lambda m: m.randn(2, 3, 4), lambda x: torch.rot90(x, -1, [1, 2]),
      attrs={"k": -1, "dims": [1, 2]})
unary("atleast_1d_0d", lambda m: m.randn(), torch.atleast_1d)
unary("atleast_2d_1d", lambda m: m.randn(3), torch.atleast_2d)
unary("atleast_3d_1d", lambda m: m.randn(4), torch.atleast_3d)
unary("atleast_3d_2d", lambda m: m.randn(2, 3), torch.atleast_3d)
binary("hstack_1d", lambda m: m.randn(2), lambda m: m.randn(3), lambda a, b: torch.hstack([a, b]))
binary("hstack_2d", lambda m: m.randn(2, 1), lambda m: m.randn(2, 3),
       lambda a, b: torch.hstack([a, b]))
binary("vstack_1d", lambda m: m.randn(3), lambda m: m.randn(3), lambda a, b: torch.vstack([a, b]))
binary("vstack_mixed", lambda m: m.randn(2, 3), lambda m: m.randn(3),
       lambda a, b: torch.vstack([a, b]))
binary("dstack", lambda m: m.randn(2, 3), lambda m: m.randn(2, 3, 2),
       lambda a, b: torch.dstack([a, b]))
binary("column_stack", lambda m: m.randn(3), lambda m: m.randn(3, 2),
       lambda a, b: torch.column_stack([a, b]))
unary("tensor_split_sections", lambda m: m.randn(7, 2),
      lambda x: joined_reversed(torch.tensor_split(x, 3, 0), 0), attrs={"sections": 3, "dim": 0})
unary("tensor_split_indices", lambda m: m.randn(2, 7),
      lambda x: joined_reversed(torch.tensor_split(x, [5, 2, 9, -3], 1), 1),
      attrs={"indices": [5, 2, 9, -3], "dim": 1})
unary("hsplit_sections", lambda m: m.randn(2, 6), lambda x: joined_reversed(torch.hsplit(x, 3), 1),
      attrs={"sections": 3})
unary("hsplit_1d_indices", lambda m: m.randn(5),
      lambda x: joined_reversed(torch.hsplit(x, [1, 3]), 0), attrs={"indices": [1, 3]})
unary("vsplit_indices", lambda m: m.randn(5, 2),
      lambda x: joined_reversed(torch.vsplit(x, [1, 3]), 0), attrs={"indices": [1, 3]})
unary("dsplit_sections", lambda m: m.randn(2, 2, 4),
      lambda x: joined_reversed(torch.dsplit(x, 2), 2), attrs={"sections": 2})
unary("unflatten", lambda m: m.randn(2, 12), lambda x: x.unflatten(1, (3, -1)),
      attrs={"dim": 1, "sizes": [3, -1]})
#torch 1.13 has no derivative for narrow_copy(2.x has : the gradient lands in the narrowed
#part); the reference is the same copy through narrow().clone()
unary("narrow_copy", lambda m: m.randn(4, 5), lambda x: x.narrow(1, 1, 3).clone(),
      attrs={"dim": 1, "start": 1, "length": 3})
unary("broadcast_to", lambda m: m.randn(3, 1), lambda x: torch.broadcast_to(x, (2, 3, 4)),
      attrs={"shape": [2, 3, 4]})
binary("broadcast_tensors", lambda m: m.randn(3, 1), lambda m: m.randn(4),
       lambda a, b: torch.stack(torch.broadcast_tensors(a, b)))

#-- -- strided views and diagonals
unary("as_strided", lambda m: m.randn(12), lambda x: torch.as_strided(x, (3, 3), (3, 1), 1),
      attrs={"size": [3, 3], "stride": [3, 1], "offset": 1})
unary("as_strided_overlap", lambda m: m.randn(9), lambda x: torch.as_strided(x, (4, 3), (2, 1)),
      attrs={"size": [4, 3], "stride": [2, 1]})
unary("diagonal_offset1", lambda m: m.randn(3, 4), lambda x: torch.diagonal(x, 1),
      attrs={"offset": 1, "dim1": 0, "dim2": 1})
unary("diagonal_3d_neg", lambda m: m.randn(2, 3, 4), lambda x: torch.diagonal(x, -1, 2, 0),
      attrs={"offset": -1, "dim1": 2, "dim2": 0})
unary("diag_embed", lambda m: m.randn(2, 3), torch.diag_embed,
      attrs={"offset": 0, "dim1": -2, "dim2": -1})
unary("diag_embed_offset_dims", lambda m: m.randn(2, 3), lambda x: torch.diag_embed(x, -1, 0, 2),
      attrs={"offset": -1, "dim1": 0, "dim2": 2})
unary("diagflat", lambda m: m.randn(2, 2), lambda x: torch.diagflat(x, 1), attrs={"offset": 1})
unary("trace", lambda m: m.randn(3, 4), torch.trace)
case("block_diag", lambda m: {"a": m.randn(2, 2), "b": m.randn(3), "c": m.randn()},
     lambda t: torch.block_diag(t["a"], t["b"], t["c"]), diff=("a", "b", "c"))
binary("cartesian_prod", lambda m: m.randn(2), lambda m: m.randn(3),
       lambda a, b: torch.cartesian_prod(a, b))
unary("combinations_r2", lambda m: m.randn(4), lambda x: torch.combinations(x, 2),
      attrs={"r": 2, "with_replacement": False})
unary("combinations_r3_replacement", lambda m: m.randn(3),
      lambda x: torch.combinations(x, 3, with_replacement=True),
      attrs={"r": 3, "with_replacement": True})

#-- -- reductions, statistics and scans
unary("logcumsumexp_dim1", lambda m: m.randn(3, 5, scale=3.0), lambda x: torch.logcumsumexp(x, 1),
      attrs={"dim": 1})
#around 100 : exp() of the input overflows f32, the scan must not
unary("logcumsumexp_large", lambda m: m._f32(m.randn(4, 2, scale=2.0) + 100.0),
      lambda x: torch.logcumsumexp(x, 0), attrs={"dim": 0}, rtol=4e-5, atol=4e-6)
#With ties a mode's value does not follow its input smoothly (a nudged element leaves its
#group), so the gradient is checked on distinct values(the mode is then the minimum) and the
#tie rule on values without a gradient.
unary("mode_dim1", lambda m: m.distinct(3, 7), lambda x: torch.mode(x, 1).values,
      attrs={"dim": 1, "keepdim": False})
case("mode_ties_values", lambda m: {"x": small_ints(m, 3, 7)}, lambda t: torch.mode(t["x"], 1).values,
     attrs={"dim": 1, "keepdim": False})
case("mode_indices_keepdim", lambda m: {"x": small_ints(m, 4, 6)},
     lambda t: torch.mode(t["x"], 0, keepdim=True).indices, attrs={"dim": 0, "keepdim": True})
#torch 1.13's aminmax has no derivative(2.x has amin 's and amax' s) : the references are those
unary("aminmax_min", lambda m: m.distinct(3, 5), lambda x: torch.amin(x))
unary("aminmax_dim1_max", lambda m: m.distinct(3, 5), lambda x: torch.amax(x, 1, keepdim=True),
      attrs={"dim": 1, "keepdim": True})
unary("var_mean_dim1", lambda m: m.randn(3, 5),
      lambda x: torch.stack(torch.var_mean(x, [1], unbiased=True)),
      attrs={"dims": [1], "correction": 1, "keepdim": False})
unary("std_mean_all_c0", lambda m: m.randn(3, 4),
      lambda x: torch.stack(torch.std_mean(x, unbiased=False)), attrs={"correction": 0})
for mode in ["linear", "lower", "higher", "nearest", "midpoint"]:
    unary("quantile_" + mode, lambda m: m.distinct(3, 6),
          lambda x, mode=mode: torch.quantile(x, 0.3, dim=1, interpolation=mode),
          attrs={"q": 0.3, "dim": 1, "keepdim": False, "interpolation": mode})
unary("quantile_all_keepdim", lambda m: m.distinct(2, 5),
      lambda x: torch.quantile(x, 0.75, keepdim=True), attrs={"q": 0.75, "keepdim": True})
unary("quantile_qvec_dim0", lambda m: m.distinct(5, 3),
      lambda x: torch.quantile(x, torch.tensor([0.1, 0.5, 1.0], dtype=x.dtype), dim=0),
      attrs={"qs": [0.1, 0.5, 1.0], "dim": 0, "keepdim": False})

#Fixture inputs cannot hold NaN(their f32 rounding check) : the NaN lines of nanquantile are
#checked in tests / test_shape_vocabulary.cpp; here it must agree with quantile's counting.
unary("nanquantile_dim1", lambda m: m.distinct(3, 6), lambda x: torch.nanquantile(x, 0.4, dim=1),
      attrs={"q": 0.4, "dim": 1, "keepdim": False, "interpolation": "linear"})
unary("nanquantile_nearest", lambda m: m.distinct(3, 6),
      lambda x: torch.nanquantile(x, 0.6, dim=1, keepdim=True, interpolation="nearest"),
      attrs={"q": 0.6, "dim": 1, "keepdim": True, "interpolation": "nearest"})
case("histc", lambda m: {"x": m.randn(30)}, lambda t: torch.histc(t["x"], 6, -1.5, 1.5),
     attrs={"bins": 6, "min": -1.5, "max": 1.5})
case("histc_own_range", lambda m: {"x": m.randn(20)}, lambda t: torch.histc(t["x"], 4),
     attrs={"bins": 4, "min": 0.0, "max": 0.0})
case("bincount", lambda m: {"x": m.randint(0, 6, 10)}, lambda t: torch.bincount(t["x"]),
     attrs={"minlength": 0})
case("bincount_minlength", lambda m: {"x": m.randint(0, 3, 5)},
     lambda t: torch.bincount(t["x"], minlength=6), attrs={"minlength": 6})
case("unique_values", lambda m: {"x": small_ints(m, 3, 4, hi=5)}, lambda t: torch.unique(t["x"]))
case("unique_inverse", lambda m: {"x": small_ints(m, 3, 4, hi=5)},
     lambda t: torch.unique(t["x"], return_inverse=True)[1])
case("unique_counts", lambda m: {"x": small_ints(m, 10, hi=4)},
     lambda t: torch.unique(t["x"], return_counts=True)[1])
case("unique_dim0_values", lambda m: {"x": small_ints(m, 6, 2, hi=2)},
     lambda t: torch.unique(t["x"], dim=0), attrs={"dim": 0})
case("unique_dim1_inverse", lambda m: {"x": small_ints(m, 2, 6, hi=2)},
     lambda t: torch.unique(t["x"], dim=1, return_inverse=True)[1], attrs={"dim": 1})
case("unique_consecutive_values", lambda m: {"x": small_ints(m, 12, hi=2)},
     lambda t: torch.unique_consecutive(t["x"]))
case("unique_consecutive_counts", lambda m: {"x": small_ints(m, 12, hi=2)},
     lambda t: torch.unique_consecutive(t["x"], return_counts=True)[1])
case("unique_consecutive_dim0_inverse", lambda m: {"x": small_ints(m, 6, 2, hi=2)},
     lambda t: torch.unique_consecutive(t["x"], return_inverse=True, dim=0)[1], attrs={"dim": 0})
case("searchsorted_left", lambda m: {"sorted": sorted_randn(m, 6), "values": m.randn(2, 3)},
     lambda t: torch.searchsorted(t["sorted"], t["values"]), attrs={"right": False})
case("searchsorted_right_2d",
     lambda m: {"sorted": small_ints(m, 2, 5).sort(-1).values, "values": small_ints(m, 2, 3)},
     lambda t: torch.searchsorted(t["sorted"], t["values"], right=True), attrs={"right": True})


def unsorted_with_sorter(m):
    s = m.randn(7)
    return {
  "sorted" : s, "values" : m.randn(4), "sorter" : torch.argsort(s)
}

case("searchsorted_sorter", unsorted_with_sorter,
     lambda t: torch.searchsorted(t["sorted"], t["values"], sorter=t["sorter"]),
     attrs={"right": False})
case("bucketize", lambda m: {"x": m.randn(3, 4), "boundaries": sorted_randn(m, 5)},
     lambda t: torch.bucketize(t["x"], t["boundaries"]), attrs={"right": False})
case("bucketize_right", lambda m: {"x": small_ints(m, 8, hi=5), "boundaries": small_ints(m, 4, hi=5).sort().values},
     lambda t: torch.bucketize(t["x"], t["boundaries"], right=True), attrs={"right": True})
unary("trapezoid_dx", lambda m: m.randn(3, 5), lambda y: torch.trapezoid(y, dx=0.5, dim=1),
      attrs={"dx": 0.5, "dim": 1})
case("trapezoid_x", lambda m: {"y": m.randn(4, 3), "x": sorted_randn(m, 4)},
     lambda t: torch.trapezoid(t["y"], t["x"], dim=0), diff=("y", "x"), attrs={"dim": 0})
unary("cumulative_trapezoid_dx", lambda m: m.randn(2, 5),
      lambda y: torch.cumulative_trapezoid(y, dx=2.0), attrs={"dx": 2.0, "dim": -1})
case("cumulative_trapezoid_x", lambda m: {"y": m.randn(3, 4), "x": m.randn(3, 4)},
     lambda t: torch.cumulative_trapezoid(t["y"], t["x"], dim=1), diff=("y", "x"),
     attrs={"dim": 1})

#-- -- indexing


def put_reference(x, index, source, accumulate):
    """torch.put written with scatter/scatter_add: 1.13's put_ has no deterministic backward."""
    idx = index.reshape(-1) % x.numel()
    flat, src = x.reshape(-1), source.reshape(-1)
    out = flat.scatter_add(0, idx, src) if accumulate else flat.scatter(0, idx, src)
    return out.reshape(x.shape)


case("take", lambda m: {"x": m.randn(3, 4), "index": torch.tensor([[0, 11, -1], [5, 5, 2]])},
     lambda t: torch.take(t["x"], t["index"]), diff=("x",))
case("take_along_dim_dim1", lambda m: {"x": m.randn(3, 4), "indices": m.randint(0, 4, 3, 2)},
     lambda t: torch.take_along_dim(t["x"], t["indices"], 1), diff=("x",), attrs={"dim": 1})
case("take_along_dim_bcast", lambda m: {"x": m.randn(3, 4), "indices": m.randint(0, 3, 2, 1)},
     lambda t: torch.take_along_dim(t["x"], t["indices"], 0), diff=("x",), attrs={"dim": 0})
case("take_along_dim_flat", lambda m: {"x": m.randn(3, 4), "indices": m.randint(0, 12, 5)},
     lambda t: torch.take_along_dim(t["x"], t["indices"]), diff=("x",))
case("put", lambda m: {"x": m.randn(3, 4), "index": torch.tensor([1, 7, -2]), "source": m.randn(3)},
     lambda t: put_reference(t["x"], t["index"], t["source"], False), diff=("x", "source"),
     attrs={"accumulate": False})
case("put_accumulate",
     lambda m: {"x": m.randn(3, 4), "index": torch.tensor([[1, 1], [5, -1]]), "source": m.randn(2, 2)},
     lambda t: put_reference(t["x"], t["index"], t["source"], True), diff=("x", "source"),
     attrs={"accumulate": True})


def scatter_mask(m, *shape):
    mask = m.mask(*shape)
    mask.view(-1)[0] = True
    return mask


case("masked_scatter", lambda m: {"x": m.randn(3, 4), "mask": scatter_mask(m, 3, 4),
                                  "source": m.randn(14)},
     lambda t: t["x"].masked_scatter(t["mask"], t["source"]), diff=("x", "source"))
case("masked_scatter_bcast", lambda m: {"x": m.randn(2, 3, 4), "mask": scatter_mask(m, 4),
                                        "source": m.randn(3, 9)},
     lambda t: t["x"].masked_scatter(t["mask"], t["source"]), diff=("x", "source"))
for red, self_ in [("prod", True), ("mean", False), ("mean", True), ("amax", True),
                   ("amin", False)]:
#amax / amin : distinct values(no ties to split the gradient); prod / mean : positive ones
#(an integer run 's mean rounds down, the driver' s f64 reference truncates)
    pick = (lambda m, *s: m.distinct(*s)) if red in ("amax", "amin") else \
        (lambda m, *s: m.uniform(*s, lo=0.5, hi=2.5))
    case("index_reduce_%s_%s" % (red, "self" if self_ else "noself"),
         lambda m, pick=pick: {"x": pick(m, 4, 3), "index": torch.tensor([0, 2, 0, 3, 2]),
                               "source": pick(m, 5, 3)},
         lambda t, red=red, self_=self_: t["x"].index_reduce(0, t["index"], t["source"], red,
                                                             include_self=self_),
         diff=("x", "source"), attrs={"dim": 0, "reduce": red, "include_self": self_})

"""Issue 32's elementwise math and activations: the PyTorch references of the cases in
tests/test_op_cases_special.cpp. Written to tests/data/op_fixtures_special.json by
`/usr/bin/python3 tests/gen_fixtures.py special` (see gen_fixtures.py for case(), the makers and
the tolerances)."""
from gen_fixtures import binary, case, unary  # noqa: F401
import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def away_from(m, x, points, gap=0.05):
    """x with every value within `gap` of one of `points` pushed `2·gap` away (no kinks hit)."""
    for p in points:
        near = (x - p).abs() < gap
        x = torch.where(near, x + 2 * gap * torch.sign(x - p + 1e-12), x)
    return m._f32(x)


def ints(m, lo, hi, *shape):
    return m.randint(lo, hi, *shape)


# ---- unary math (kernels computed in f64, rounded once)
unary("asinh", lambda m: m.randn(3, 4, scale=2.0), torch.asinh)
unary("acosh", lambda m: m.uniform(3, 4, lo=1.2, hi=4.0), torch.acosh)
unary("atanh", lambda m: m.uniform(3, 4, lo=-0.9, hi=0.9), torch.atanh)
unary("lgamma", lambda m: m.uniform(3, 4, lo=0.1, hi=8.0), torch.lgamma)
unary("lgamma_negative", lambda m: m.uniform(3, 4, lo=-2.9, hi=-2.1), torch.lgamma)
unary("digamma", lambda m: m.uniform(3, 4, lo=0.1, hi=12.0), torch.digamma)
unary("digamma_negative", lambda m: m.uniform(3, 4, lo=-2.8, hi=-2.2), torch.digamma)
for n in (1, 2, 3):
    unary(f"polygamma_n{n}", lambda m: m.uniform(3, 4, lo=0.3, hi=5.0),
          lambda x, n=n: torch.polygamma(n, x), attrs={"n": n}, rtol=1e-4)
unary("polygamma_n0", lambda m: m.uniform(3, 4, lo=0.3, hi=5.0),
      lambda x: torch.polygamma(0, x), attrs={"n": 0})
unary("mvlgamma_p3", lambda m: m.uniform(3, 4, lo=1.2, hi=5.0),
      lambda x: torch.mvlgamma(x, 3), attrs={"p": 3})
unary("i0", lambda m: m.randn(3, 4, scale=3.0), torch.i0)
unary("i0_large", lambda m: m.uniform(3, 4, lo=31.0, hi=36.0), torch.i0)
unary("special_i0e", lambda m: m.randn(3, 4, scale=5.0), torch.special.i0e)
unary("special_i0e_large", lambda m: m.uniform(3, 4, lo=-80.0, hi=80.0), torch.special.i0e)
unary("special_i1", lambda m: m.randn(3, 4, scale=3.0), torch.special.i1)
unary("special_i1_large", lambda m: m.uniform(3, 4, lo=-36.0, hi=-31.0), torch.special.i1)
unary("special_i1e", lambda m: m.randn(3, 4, scale=5.0), torch.special.i1e)
unary("special_i1e_large", lambda m: m.uniform(3, 4, lo=-80.0, hi=80.0), torch.special.i1e)
unary("erfcx", lambda m: m.randn(3, 4, scale=3.0), torch.special.erfcx)
unary("erfcx_large", lambda m: m.uniform(3, 4, lo=20.0, hi=40.0), torch.special.erfcx)
unary("sinc", lambda m: m.randn(3, 4, scale=2.0), torch.sinc)
unary("logit", lambda m: m.uniform(3, 4, lo=0.05, hi=0.95), torch.logit)
unary("logit_eps", lambda m: away_from(m, m.uniform(3, 4, lo=0.0, hi=1.0), (0.2, 0.8)),
      lambda x: torch.logit(x, eps=0.2), attrs={"eps": 0.2})
case("signbit", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.signbit(t["x"]))
unary("fix", lambda m: m.randn(3, 4, scale=3.0), torch.fix)
unary("frexp_mantissa", lambda m: m.randn(3, 4, scale=10.0), lambda x: torch.frexp(x)[0])
case("frexp_exponent", lambda m: {"x": m.randn(3, 4, scale=10.0).float()},
     lambda t: torch.frexp(t["x"])[1], exact=True)  # the exponent stays i32

# ---- binary math
binary("xlogy", lambda m: m.randn(3, 4), lambda m: m.positive(3, 4), torch.xlogy)
binary("xlogy_bcast", lambda m: m.randn(3, 1), lambda m: m.positive(4), torch.xlogy)
binary("special_xlog1py", lambda m: m.randn(3, 4), lambda m: m.uniform(3, 4, lo=-0.5, hi=3.0),
       torch.special.xlog1py)
binary("hypot", lambda m: m.away_from_zero(3, 4), lambda m: m.randn(3, 4), torch.hypot)
binary("hypot_bcast", lambda m: m.away_from_zero(2, 3, 4), lambda m: m.randn(4), torch.hypot)
binary("copysign", lambda m: m.away_from_zero(3, 4), lambda m: m.away_from_zero(3, 4), torch.copysign)
case("nextafter", lambda m: {"a": m.randn(3, 4), "b": m.randn(3, 4)},
     lambda t: torch.nextafter(t["a"], t["b"]))
binary("logaddexp", lambda m: m.randn(3, 4, scale=3.0), lambda m: m.randn(3, 4, scale=3.0),
       torch.logaddexp)
binary("logaddexp_bcast", lambda m: m.randn(3, 1), lambda m: m.randn(1, 4), torch.logaddexp)
binary("logaddexp2", lambda m: m.randn(3, 4, scale=3.0), lambda m: m.randn(3, 4, scale=3.0),
       torch.logaddexp2)
case("special_zeta", lambda m: {"a": m.uniform(3, 4, lo=1.5, hi=5.0), "b": m.positive(3, 4)},
     lambda t: torch.special.zeta(t["a"], t["b"]), diff=("b",), rtol=1e-4)
binary("ldexp", lambda m: m.randn(3, 4), lambda m: ints(m, -3, 4, 3, 4).double(), torch.ldexp)
# float_power computes and returns f64: exact=True keeps the f32 inputs f32 and the output f64
case("float_power", lambda m: {"a": m.positive(3, 4).float(), "b": m.randn(3, 4).float()},
     lambda t: torch.float_power(t["a"], t["b"]), diff=("a", "b"), exact=True)
case("float_power_scalar", lambda m: {"x": m.positive(3, 4).float()},
     lambda t: torch.float_power(t["x"], 2.5), diff=("x",), attrs={"p": 2.5}, exact=True)
case("heaviside", lambda m: {"x": ints(m, -2, 3, 3, 4).double(), "values": m.randn(4)},
     lambda t: torch.heaviside(t["x"], t["values"]))
def near_pair(m):
    """b = a, or a nudged by 2e-5 (well within the tolerance) or 1e-3 (well outside), relative."""
    a = m.away_from_zero(3, 4, gap=0.2)
    pick = m.randint(0, 3, 3, 4).double()
    nudge = torch.where(pick == 0, 0.0, torch.where(pick == 1, 2e-5, 1e-3)) * torch.sign(m.randn(3, 4))
    return {"a": a, "b": m._f32(a * (1 + nudge))}


case("isclose", near_pair, lambda t: torch.isclose(t["a"], t["b"], rtol=1e-4, atol=1e-5),
     attrs={"close_rtol": 1e-4, "close_atol": 1e-5})  # not "rtol": the tolerances own it

# ---- integer and bitwise ops (inputs keep their dtypes)
II = lambda lo, hi: (lambda m: {"a": ints(m, lo, hi, 3, 4), "b": ints(m, lo, hi, 3, 4)})
case("gcd", II(-30, 31), lambda t: torch.gcd(t["a"], t["b"]), exact=True)
case("lcm", II(-12, 13), lambda t: torch.lcm(t["a"], t["b"]), exact=True)
for nm, fn in [("bitwise_and", torch.bitwise_and), ("bitwise_or", torch.bitwise_or),
               ("bitwise_xor", torch.bitwise_xor)]:
    case(nm, II(-40, 41), lambda t, fn=fn: fn(t["a"], t["b"]), exact=True)
    case(nm + "_bool", lambda m: {"a": m.mask(3, 4), "b": m.mask(3, 4)},
         lambda t, fn=fn: fn(t["a"], t["b"]), exact=True)
case("bitwise_not", lambda m: {"x": ints(m, -40, 41, 3, 4)}, lambda t: torch.bitwise_not(t["x"]),
     exact=True)
case("bitwise_not_bool", lambda m: {"x": m.mask(3, 4)}, lambda t: torch.bitwise_not(t["x"]),
     exact=True)
case("bitwise_left_shift", lambda m: {"a": ints(m, -50, 51, 3, 4), "b": ints(m, 0, 8, 3, 4)},
     lambda t: torch.bitwise_left_shift(t["a"], t["b"]), exact=True)
case("bitwise_right_shift", lambda m: {"a": ints(m, -50, 51, 3, 4), "b": ints(m, 0, 8, 3, 4)},
     lambda t: torch.bitwise_right_shift(t["a"], t["b"]), exact=True)

# ---- activations
unary("celu", lambda m: m.randn(3, 4, scale=2.0), lambda x: F.celu(x, 1.5), attrs={"alpha": 1.5})
unary("softsign", lambda m: m.randn(3, 4, scale=2.0), F.softsign)
unary("hardshrink", lambda m: away_from(m, m.uniform(3, 4, lo=-2.0, hi=2.0), (-0.5, 0.5)),
      F.hardshrink, attrs={"lambd": 0.5})
unary("softshrink", lambda m: away_from(m, m.uniform(3, 4, lo=-2.0, hi=2.0), (-0.5, 0.5)),
      F.softshrink, attrs={"lambd": 0.5})
unary("tanhshrink", lambda m: m.randn(3, 4, scale=2.0), F.tanhshrink)
unary("threshold", lambda m: away_from(m, m.randn(3, 4), (0.1,)), lambda x: F.threshold(x, 0.1, 20.0),
      attrs={"threshold": 0.1, "value": 20.0})
unary("rrelu_eval", lambda m: m.away_from_zero(3, 4), lambda x: F.rrelu(x, 0.1, 0.3, training=False),
      attrs={"lower": 0.1, "upper": 0.3})

# ---- torch.special's distribution functions
unary("special_entr", lambda m: m.uniform(3, 4, lo=0.05, hi=3.0), torch.special.entr)
case("special_entr_edges", lambda m: {"x": torch.tensor([0.0, 0.5, 1.0, 2.0], dtype=torch.float64)},
     lambda t: torch.special.entr(t["x"]))
unary("special_ndtr", lambda m: m.randn(3, 4, scale=3.0), torch.special.ndtr)
unary("special_ndtri", lambda m: m.uniform(3, 4, lo=0.02, hi=0.98), torch.special.ndtri, rtol=1e-4)
unary("special_log_ndtr", lambda m: m.randn(3, 4, scale=3.0), torch.special.log_ndtr)
unary("special_log_ndtr_tail", lambda m: m.uniform(3, 4, lo=-30.0, hi=-5.0), torch.special.log_ndtr,
      rtol=2e-4)

"""Conformance levels (issue 32): the diagnosis of a strict FAIL names the least relaxation set.

Meta-tests (Deliver 4): for each relaxation a planted candidate that uses exactly it — computed
here with numpy, independently of the oracle's models — FAILs strictly, is admitted under that
relaxation and under no set without it; planted wrong answers (zeros, ×1.01, a wrong sign, a
dropped term, an off-by-one row) downstream of each inexact op class are admitted under none.
Each relaxation's statement is in docs/contracts.md, "Conformance levels".
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.oracle.compare import FAIL, check
from tilefoundry.oracle.diagnose import diagnose, judge_under
from tilefoundry.oracle.relax import NAMES, SCOPE, Admit, parse_admit
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Reduce, Unary, UnaryKind
from tilefoundry.semantics.ops.nn import LayerNorm, MatMul, RMSNorm, SoftMax
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.semantics.types import TensorType

F32, BF16 = DType.F32, DType.BF16


def _v(name: str, shape: tuple, dt: DType = F32) -> Var:
    return Var(name, TensorType(shape, dt))


def _mod(params: tuple, body) -> Module:
    return Module((Function("f", params, body, None),))


def _bin(kind, a, b):
    return Call(Binary(kind), (a, b))


def _diag(m: Module, xs: list, obs):
    v = check(m, "f", xs, obs)
    assert v.status == FAIL, v.summary()
    return diagnose(m, "f", xs, obs, v), v


def _only(m: Module, xs: list, obs, name: str) -> None:
    """Strict FAIL; the least set is exactly {name}; admitted under it, not without it."""
    d, v = _diag(m, xs, obs)
    assert d.diagnosis.least == ((name,),), d.diagnosis
    assert d.diagnosis.none == 0
    assert judge_under(m, "f", xs, obs, v, Admit.of(name))
    others = [n for n in NAMES if n != name]
    assert not judge_under(m, "f", xs, obs, v, Admit.of(*others)), name


RNG = np.random.default_rng(20261204)


def _normal(shape, scale=1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# one planted backend per relaxation
# ---------------------------------------------------------------------------------------------
def test_nsz_max_of_signed_zeros_either_zero():
    a, b = _v("a", (8,)), _v("b", (8,))
    m = _mod((a, b), _bin(BinaryKind.MAX, a, b))
    xa = np.array([-0.0, 0.0, -0.0, 0.0, 1, 2, -3, 4], np.float32)
    xb = np.array([0.0, -0.0, -0.0, 0.0, 5, -2, 3, 4], np.float32)
    obs = np.maximum(xa, xb)  # numpy returns the first operand's zero: max(-0, +0) = -0
    obs[:2] = np.float32(-0.0)
    _only(m, [xa, xb], obs, "nsz")


def test_nnan_zero_over_zero_returns_a_number():
    a, b = _v("a", (8,)), _v("b", (8,))
    m = _mod((a, b), _bin(BinaryKind.DIV, a, b))
    xa = np.array([0.0, 1, 2, 3, 4, 5, 6, 7], np.float32)
    xb = np.array([0.0, 2, 4, 8, 16, 32, 64, 128], np.float32)
    obs = (xa / np.where(xb == 0, 1, xb)).astype(np.float32)  # 0/0 -> 0, a "no NaNs" divider
    _only(m, [xa, xb], obs, "nnan")


def test_ninf_an_infinite_operand_is_read_as_anything():
    """A "no infinities" kernel: x · 2 with x = ±inf returns 0 (exp's saturation to max
    finite would be within its ulp budget already: inf is one step past max finite)."""
    a, b = _v("a", (6,)), _v("b", (6,))
    m = _mod((a, b), _bin(BinaryKind.MUL, a, b))
    xa = np.array([np.inf, -np.inf, 1.0, 2.0, -1.0, 0.5], np.float32)
    xb = np.full(6, 2.0, np.float32)
    obs = np.where(np.isinf(xa), np.float32(0), xa * xb).astype(np.float32)
    _only(m, [xa, xb], obs, "ninf")


def test_ftz_flushes_a_subnormal_product():
    a, b = _v("a", (6,)), _v("b", (6,))
    m = _mod((a, b), _bin(BinaryKind.MUL, a, b))
    xa = np.array([1e-20, -1e-20, 3e-21, 1.0, 2.0, 3.0], np.float32)
    xb = np.array([1e-20, 2e-20, 1e-19, 1.5, 2.5, 3.5], np.float32)
    prod = (xa.astype(np.float64) * xb).astype(np.float32)
    obs = np.where(np.abs(prod) < 2.0 ** -126, np.copysign(np.float32(0), prod), prod)
    _only(m, [xa, xb], obs.astype(np.float32), "ftz")


def test_afn_exp_through_exp2_of_a_rounded_argument():
    """The classic fast exp: exp2(fl32(x · log2 e)); its error grows with |x| (the argument's
    rounding), inside Vulkan's 3 + 2|x| ulp and outside OpenCL's 3."""
    x = _v("x", (64,))
    m = _mod((x,), Call(Unary(UnaryKind.EXP), (x,)))
    xs = np.linspace(20.0, 80.0, 64).astype(np.float32)
    t = (xs * np.float32(1.4426950408889634)).astype(np.float32)
    obs = np.exp2(t.astype(np.float64)).astype(np.float32)
    _only(m, [xs], obs, "afn")


def test_afn_sqrt_as_the_reciprocal_of_rsqrt():
    """Vulkan's sqrt is inherited from 1 / inversesqrt: two roundings, inside 9 ulp."""
    x = _v("x", (256,))
    m = _mod((x,), Call(Unary(UnaryKind.SQRT), (x,)))
    xs = (RNG.random(256) * 1000).astype(np.float32)
    r = (np.float32(1) / np.sqrt(xs.astype(np.float64)).astype(np.float32)).astype(np.float32)
    obs = (np.float32(1) / r).astype(np.float32)
    _only(m, [xs], obs, "afn")


def test_arcp_division_through_the_reciprocal():
    a, b = _v("a", (64,)), _v("b", (64,))
    m = _mod((a, b), _bin(BinaryKind.DIV, a, b))
    xa, xb = _normal(64), _normal(64)
    obs = (xa * (np.float32(1.0) / xb)).astype(np.float32)
    d, v = _diag(m, [xa, xb], obs)
    # afn's 2.5-ulp division admits it too: two least sets
    assert set(d.diagnosis.least) == {("afn",), ("arcp",)}, d.diagnosis
    assert judge_under(m, "f", [xa, xb], obs, v, Admit.of("arcp"))
    assert not judge_under(m, "f", [xa, xb], obs, v,
                           Admit.of(*(n for n in NAMES if n not in ("arcp", "afn"))))


def test_contract_fuses_a_multiply_add():
    a, b, c = _v("a", (64,)), _v("b", (64,)), _v("c", (64,))
    m = _mod((a, b, c), _bin(BinaryKind.ADD, _bin(BinaryKind.MUL, a, b), c))
    # in [1, 2) the f64 a·b + c is exact (49 bits), so one rounding to f32 is the fma
    xa = (1 + RNG.random(64)).astype(np.float32)
    xb = (1 + RNG.random(64)).astype(np.float32)
    xc = (1 + RNG.random(64)).astype(np.float32)
    obs = (xa.astype(np.float64) * xb + xc).astype(np.float32)
    _only(m, [xa, xb, xc], obs, "contract")


def test_excess_keeps_a_bf16_intermediate_in_f32():
    """(a + b) · c in bf16 with a + b kept in f32 and one rounding at the end — the fused-kernel
    choice: excess; the same chain returned unrounded as a program output is never excess."""
    a, b, c = _v("a", (64,), BF16), _v("b", (64,), BF16), _v("c", (64,), BF16)
    m = _mod((a, b, c), _bin(BinaryKind.MUL, _bin(BinaryKind.ADD, a, b), c))
    xa, xb, xc = (_normal(64).astype(ml_dtypes.bfloat16) for _ in range(3))
    f = [x.astype(np.float32) for x in (xa, xb, xc)]
    obs = ((f[0] + f[1]) * f[2]).astype(ml_dtypes.bfloat16)
    _only(m, [xa, xb, xc], obs, "excess")
    # the sum as the program's own output: its rounding is never skipped
    m2 = _mod((a, b), _bin(BinaryKind.ADD, a, b))
    s = (f[0] + f[1]).astype(np.float32)
    unrounded = s.astype(ml_dtypes.bfloat16)  # the correct value: passes
    assert check(m2, "f", [xa, xb], unrounded).status == "PASS"


def test_excess_adds_nothing_where_the_unrounded_value_is_on_the_grid():
    """-a of a bf16 a is exact in f32: keeping it unrounded changes nothing, so a product
    one ulp off is admitted under no set (a uniform 1-ulp excess box admitted it)."""
    a, b = _v("a", (64,), BF16), _v("b", (64,), BF16)
    m = _mod((a, b), _bin(BinaryKind.MUL, Call(Unary(UnaryKind.NEG), (a,)), b))
    xa, xb = (_normal(64).astype(ml_dtypes.bfloat16) for _ in range(2))
    ref = evaluate(m, "f", [xa, xb])
    bits = ref.view(np.uint16).copy()
    bits[::3] += 1  # one ulp away from zero on every third element
    obs = bits.view(ml_dtypes.bfloat16)
    d, _ = _diag(m, [xa, xb], obs)
    assert d.diagnosis.label == "none", d.diagnosis
    assert d.diagnosis.none == d.diagnosis.rejected > 0, d.diagnosis  # not one of them


def test_wp_textbook_layernorm_on_an_ill_conditioned_row():
    """Two-pass f32 LayerNorm on rows whose mean dwarfs their spread: the near-mean outputs
    carry an absolute error of the row's scale (Higham), outside the 52-ulp budget."""
    n = 256
    x, w, b = _v("x", (4, n)), _v("w", (n,)), _v("b", (n,))
    m = _mod((x, w, b), Call(LayerNorm(eps=1e-5), (x, w, b)))
    xs = (1000.0 + _normal((4, n)) * 0.01).astype(np.float32)
    ws, bs = np.ones(n, np.float32), np.zeros(n, np.float32)
    mu = (xs.sum(-1, keepdims=True, dtype=np.float32) / np.float32(n)).astype(np.float32)
    d = (xs - mu).astype(np.float32)
    var = ((d * d).sum(-1, keepdims=True, dtype=np.float32) / np.float32(n)).astype(np.float32)
    r = (np.float32(1) / np.sqrt(var + np.float32(1e-5))).astype(np.float32)
    obs = (d * r * ws + bs).astype(np.float32)
    _only(m, [xs, ws, bs], obs, "wp")


def test_wp_textbook_rmsnorm_whose_sum_of_squares_overflows():
    n = 64
    x, w = _v("x", (2, n)), _v("w", (n,))
    m = _mod((x, w), Call(RMSNorm(eps=1e-6), (x, w)))
    xs = np.stack([_normal(n) * 1e19, _normal(n)]).astype(np.float32)
    ws = np.ones(n, np.float32)
    with np.errstate(over="ignore"):
        s = (xs * xs).sum(-1, keepdims=True, dtype=np.float32)
    r = (np.float32(1) / np.sqrt(s / np.float32(n) + np.float32(1e-6))).astype(np.float32)
    obs = (xs * r * ws).astype(np.float32)  # row 0: rsqrt(inf) = 0
    assert np.all(obs[0] == 0)
    _only(m, [xs, ws], obs, "wp")


# ---------------------------------------------------------------------------------------------
# wrong answers: admitted under no set, downstream of every inexact op class
# ---------------------------------------------------------------------------------------------
def _programs():
    """(name, module, inputs, dropped-term candidate): an inexact op feeding an exact one."""
    n = 16
    x, y = _v("x", (4, n)), _v("y", (4, n))
    xs, ys = _normal((4, n)), _normal((4, n))
    out = []
    e = Call(Unary(UnaryKind.EXP), (x,))
    out.append(("ulp op (exp)", _mod((x, y), _bin(BinaryKind.ADD, e, y)), [xs, ys],
                np.exp(xs.astype(np.float64)).astype(np.float32)))
    r = Call(Reduce(axes=(1,), keepdim=False, kind=ReduceKind.SUM), (x,))
    s = Var("s", TensorType((4,), F32))
    ss = _normal(4)
    out.append(("tree reduction", _mod((x, s), _bin(BinaryKind.MUL, r, s)), [xs, ss],
                (xs[:, 1:].sum(-1, dtype=np.float64) * ss).astype(np.float32)))
    a, b = _v("a", (4, n)), _v("b", (n, 4))
    mm = Call(MatMul(), (a, b))
    c = _v("c", (4, 4))
    xa, xb, xc = _normal((4, n)), _normal((n, 4)), _normal((4, 4))
    out.append(("matmul", _mod((a, b, c), _bin(BinaryKind.ADD, mm, c)), [xa, xb, xc],
                (xa[:, 1:].astype(np.float64) @ xb[1:] + xc).astype(np.float32)))
    sm = Call(SoftMax(axis=-1), (x,))
    out.append(("softmax", _mod((x, y), _bin(BinaryKind.MUL, sm, y)), [xs, ys],
                (np.exp(xs) / np.exp(xs).sum(-1, keepdims=True) * 1.0).astype(np.float32)))
    w = _v("w", (n,))
    rn = Call(RMSNorm(eps=1e-6), (x, w))
    ws = (1 + RNG.random(n)).astype(np.float32)
    out.append(("rmsnorm", _mod((x, w, y), _bin(BinaryKind.ADD, rn, y)), [xs, ws, ys],
                (xs / np.sqrt((xs.astype(np.float64) ** 2).mean(-1, keepdims=True)) * ws)
                .astype(np.float32)))
    return out


@pytest.mark.parametrize("prog", _programs(), ids=lambda p: p[0])
@pytest.mark.parametrize("wrong", ["zeros", "x1.01", "sign", "dropped term", "row off by one"])
def test_a_wrong_answer_is_admitted_under_no_set(prog, wrong):
    _, m, xs, dropped = prog
    ref = evaluate(m, "f", xs)
    obs = {"zeros": np.zeros_like(ref), "x1.01": (ref * np.float32(1.01)).astype(np.float32),
           "sign": -ref, "dropped term": dropped,
           "row off by one": np.roll(ref, 1, axis=0)}[wrong]
    d, v = _diag(m, xs, obs)
    assert d.diagnosis.least == () and d.diagnosis.none > 0, d.diagnosis
    assert d.diagnosis.label == "none"
    assert not judge_under(m, "f", xs, obs, v, Admit.of(*NAMES))


# ---------------------------------------------------------------------------------------------
# the vocabulary
# ---------------------------------------------------------------------------------------------
def test_every_op_class_has_a_scope_entry():
    from tilefoundry.oracle.enclosure import ENCLOSURES
    from tilefoundry.oracle.enclosure_eval import EnclosingEvaluator  # noqa: F401 (registers)

    assert set(ENCLOSURES) <= set(SCOPE), sorted(c.__name__ for c in set(ENCLOSURES) - set(SCOPE))


def test_an_unknown_relaxation_names_the_valid_ones():
    with pytest.raises(InvalidArgumentError) as ei:
        parse_admit("nsz,fastmath")
    msg = str(ei.value)
    assert "'fastmath'" in msg and all(n in msg for n in NAMES) and "\n" not in msg


def test_a_relaxation_for_an_op_it_cannot_apply_to_names_both():
    with pytest.raises(InvalidArgumentError) as ei:
        parse_admit("afn@Reduce")
    assert "'afn'" in str(ei.value) and "Reduce" in str(ei.value)
    with pytest.raises(InvalidArgumentError, match="Binary"):
        parse_admit("contract@Binary(mul)")
    assert parse_admit("afn@Unary(exp),nsz").names == ("nsz", "afn")
    with pytest.raises(InvalidArgumentError, match="no op class"):
        parse_admit("nsz@Bogus")


def test_a_scoped_relaxation_applies_to_its_op_only():
    a, b = _v("a", (64,)), _v("b", (64,))
    m = _mod((a, b), _bin(BinaryKind.DIV, a, b))
    xa, xb = _normal(64), _normal(64)
    obs = (xa * (np.float32(1.0) / xb)).astype(np.float32)
    v = check(m, "f", [xa, xb], obs)
    assert judge_under(m, "f", [xa, xb], obs, v, parse_admit("arcp@Binary(div)"))
    assert not judge_under(m, "f", [xa, xb], obs, v, parse_admit("nsz@Binary(div)"))


# ---------------------------------------------------------------------------------------------
# through the runner and the command line
# ---------------------------------------------------------------------------------------------
def _max_cases():
    from tilefoundry.conformance.catalog import build_catalog

    cases = [c for c in build_catalog(0).tier("quick")
             if c.id.startswith("spec/binary/max-orders-signed-zeros/")]
    assert cases
    return cases


def test_the_runner_records_the_least_set_and_admits_only_what_is_declared(tmp_path):
    from tilefoundry.conformance.manifest import Manifest
    from tilefoundry.conformance.runner import run

    spec = "tests.conformance.planted_backends:max_min_zero_sign_free"
    strict = run(spec, _max_cases(), jobs=1, timeout_s=120, seed=0,
                 out_jsonl=tmp_path / "strict.jsonl")
    assert {r["verdict"] for r in strict.records} == {"FAIL"}
    for r in strict.records:
        assert r["diagnosis"]["least"] == [["nsz"]] and r["diagnosis"]["none"] == 0
        assert "admitted under {nsz}" in r["message"]
        assert r["outputs"][0]["diagnosis"]["op"] == "Binary(max)"
    from tilefoundry.conformance.html_report import render_html
    from tilefoundry.conformance.report import relaxation_table

    page = render_html(strict.records, title="t", meta="m", result="FAIL")
    assert "least relaxation set(s): <b>nsz</b>" in page
    table = relaxation_table(strict.records).splitlines()
    assert table[1].split() == ["op", "outputs", "nsz", "none"]
    assert table[3].split() == ["Binary(max)", str(len(strict.records)), str(len(
        strict.records)), "-"]
    m = Manifest(source="test")
    m.admit_all = parse_admit("nsz")
    adm = run(spec, _max_cases(), jobs=1, timeout_s=120, seed=0,
              out_jsonl=tmp_path / "admit.jsonl", manifest=m)
    assert {r["verdict"] for r in adm.records} == {"ADMITTED"}
    assert all(r["admitted"] == "nsz" for r in adm.records)
    m.admit_all = parse_admit("ftz,afn")  # a set that does not admit it: still FAIL
    other = run(spec, _max_cases(), jobs=1, timeout_s=120, seed=0,
                out_jsonl=tmp_path / "other.jsonl", manifest=m)
    assert {r["verdict"] for r in other.records} == {"FAIL"}


def test_manifest_admit_entries_are_validated():
    from tilefoundry.conformance.manifest import Manifest, ManifestError

    m = Manifest.parse('[[admit]]\ncase = "spec/*"\nreason = "fast-math build"\n'
                       'relaxations = ["nsz", "afn@Silu"]\n')
    assert m.admit_for("spec/x").names == ("nsz", "afn")
    assert m.admit_for("other/x") is None
    with pytest.raises(ManifestError, match="unknown relaxation 'nan'"):
        Manifest.parse('[[admit]]\ncase = "*"\nreason = "r"\nrelaxations = ["nan"]\n')
    with pytest.raises(ManifestError, match="cannot apply to Reduce"):
        Manifest.parse('[[admit]]\ncase = "*"\nreason = "r"\nrelaxations = ["wp@Reduce"]\n')


def test_cli_unknown_relaxation_is_one_line_exit_2(tmp_path, capsys):
    from tilefoundry.cli import main

    rc = main(["conformance", "run", "--backend", "reference", "--admit", "nsz,bogus", "--cases", "spec/x*",
               "--jsonl", str(tmp_path / "r.jsonl")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "'bogus'" in err and "nsz, nnan, ninf, ftz, afn, arcp, contract, excess, wp" in err


# ---------------------------------------------------------------------------------------------
# Deliver 5: finite sets behind an inexact op — a skipped rounding is a FAIL, read as excess
# ---------------------------------------------------------------------------------------------
def _bf(a) -> np.ndarray:
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16)


def _chains():
    x, y = _v("x", (64, 64), BF16), _v("y", (64, 64), BF16)
    w = _v("w", (64,), BF16)
    xs, ys = _bf(_normal((64, 64))), _bf(_normal((64, 64)) * 4)
    ws = _bf(1 + RNG.random(64))
    xf, yf, wf = (a.astype(np.float32) for a in (xs, ys, ws))
    e = np.exp(xf - xf.max(-1, keepdims=True))
    sm = Call(SoftMax(axis=-1), (x,))
    rn = Call(RMSNorm(eps=1e-6), (x, w))
    ex = Call(Unary(UnaryKind.EXP), (x,))
    return [
        ("mul(softmax(x), y)", _mod((x, y), _bin(BinaryKind.MUL, sm, y)), [xs, ys],
         e / e.sum(-1, keepdims=True), lambda t: t * yf),
        ("add(rmsnorm(x, w), r)", _mod((x, w, y), _bin(BinaryKind.ADD, rn, y)), [xs, ws, ys],
         xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + np.float32(1e-6)) * wf,
         lambda t: t + yf),
        ("mul(exp(x), y)", _mod((x, y), _bin(BinaryKind.MUL, ex, y)), [xs, ys], np.exp(xf),
         lambda t: t * yf),
    ]


@pytest.mark.parametrize("chain", _chains(), ids=lambda c: c[0])
def test_a_skipped_rounding_behind_an_inexact_op_fails_and_reads_excess(chain):
    """Inductor's fused kernel: the inexact op's f32 value is never rounded to bf16 before the
    exact op that follows. The interval hull admitted all of it (0 rejected); the finite set
    of the op's 3 admitted bf16 results, carried through the exact op, rejects hundreds."""
    from tilefoundry.oracle.enclosures import core as rules

    _, m, xs, inexact, then = chain
    obs = _bf(then(inexact.astype(np.float32)))
    d, v = _diag(m, xs, obs)
    assert v.outputs[0].mismatches >= 200, v.summary()
    assert d.diagnosis.least == (("excess",),), d.diagnosis
    saved = rules.CANDIDATES_MAX
    try:
        rules.CANDIDATES_MAX = 0  # the hull alone: blind to it
        assert check(m, "f", xs, obs).status == "PASS"
    finally:
        rules.CANDIDATES_MAX = saved


@pytest.mark.parametrize("chain", _chains(), ids=lambda c: c[0])
def test_every_admitted_result_of_the_inexact_op_still_passes(chain):
    """Soundness of the finite set: the inexact op's correctly rounded bf16 result moved by
    -1, 0 or +1 ulp per element (each within its 1-ulp budget), then the exact op computed
    and rounded once (bf16 products and sums are exact in f32): PASS, every element."""
    _, m, xs, _, then = chain
    fn = m.functions[0]
    inner = _mod(fn.params, fn.body.args[0])  # the inexact op alone
    t = evaluate(inner, "f", xs)
    bits = t.view(np.uint16).astype(np.int32)
    step = RNG.integers(-1, 2, bits.shape)
    sign = np.where(bits & 0x8000, -1, 1)
    moved = (bits + sign * step).astype(np.uint16).view(ml_dtypes.bfloat16)
    obs = _bf(then(moved.astype(np.float32)))
    v = check(m, "f", xs, obs)
    assert v.status == "PASS", v.summary()


def test_cli_admitted_run_says_so_and_exits_0(tmp_path, capsys):
    from tilefoundry.cli import main

    args = ["conformance", "run", "--backend",
            "tests.conformance.planted_backends:max_min_zero_sign_free", "--cases",
            "spec/binary/max-orders-signed-zeros/*", "--no-progress"]
    rc = main([*args, "--jsonl", str(tmp_path / "a.jsonl"), "--admit", "nsz"])
    out = capsys.readouterr().out
    assert rc == 0 and "result: ADMITTED (" in out and "result: PASS" not in out
    rc = main([*args, "--jsonl", str(tmp_path / "b.jsonl")])
    out = capsys.readouterr().out
    assert rc == 1 and "admitted under {nsz}" in out and "Binary(max)" in out

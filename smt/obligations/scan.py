"""Scan obligations: the prefix law a parallel scan rests on, and what a scan may not do.

Proved (``expect="proved"``):

* ``scan.prefix_law`` — for each builtin integer combine of the tile family's Scan (wraparound
  add and mul, signed max and min on 8-bit bit-vectors) and for a **non-commutative** associative
  combine (composition of affine maps ``(a, b)∘(c, d) = (a·c, a·d + b)`` on 8-bit pairs), with a
  symbolic seed and four symbolic elements, for every input: (1) a blocked scan — two chunks of
  two, each scanned locally, the second receiving the first chunk's total on its *left* — and
  (2) the Hillis–Steele doubling chain (``prefix = op(shift(prefix, d), prefix)`` for d = 1, 2,
  the shifted-in lanes taking the seed / identity) both give every inclusive prefix of the left
  recurrence ``prefix[i + 1] = op(prefix[i], x[i])``, and exclusive[i] = inclusive[i - 1]
  (exclusive[0] = the seed). Associativity suffices; commutativity is never used (Tile design:
  "Associativity permits parallel prefix evaluation; commutativity is not required. A
  noncommutative combine must receive the earlier subsequence on its left."). The encoding's
  recurrence is cross-checked against ``reductions.scan`` on concrete values.

Refuted (``expect="counterexample"``):

* ``scan.permutation`` — "scan(rotate(x)) = scan(x)" for integer add: Z3 finds a witness, and
  the design's example is re-checked on the reference: ``[1, 2, 3]`` → ``[1, 3, 6]``, ``[3, 1,
  2]`` → ``[3, 4, 6]`` (the sum, 6, agrees; the prefixes do not) — a scan must not inherit the
  reduction's permutation freedom.
* ``scan.f32_regrouping`` — an ordered-tree regrouping of one f32 prefix, ``x0 + (x1 + x2)``
  against the left fold ``(x0 + x1) + x2``: the reference's witness ``[1, 2^-24, 2^-24]``
  confirmed in Z3's FP theory (RNE) — why the ordered-tree Scan's contract is an admitted set
  per prefix, not the fold.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import z3

from tilefoundry.semantics.combine_laws import COMBINE_LAWS, SCAN_COMBINES
from tilefoundry.semantics.reductions import scan
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation

__all__ = ["COMBINES", "blocked_prefixes", "hillis_steele", "left_prefixes"]

W = 8  # bit width of the integer encodings
N = 4  # elements per fiber


def _smax(a, b):
    return z3.If(a >= b, a, b)


def _smin(a, b):
    return z3.If(a <= b, a, b)


#: combine -> (op on values, identity); values are 8-bit vectors or pairs of them (affine maps)
COMBINES: dict[str, tuple[Callable, Callable]] = {
    "add": (lambda a, b: a + b, lambda: z3.BitVecVal(0, W)),
    "mul": (lambda a, b: a * b, lambda: z3.BitVecVal(1, W)),
    "max": (_smax, lambda: z3.BitVecVal(-(1 << (W - 1)), W)),
    "min": (_smin, lambda: z3.BitVecVal((1 << (W - 1)) - 1, W)),
    "affine": (lambda p, q: (p[0] * q[0], p[0] * q[1] + p[1]),
               lambda: (z3.BitVecVal(1, W), z3.BitVecVal(0, W))),
}


def _var(name: str, kind: str):
    if kind == "affine":
        return (z3.BitVec(f"{name}_a", W), z3.BitVec(f"{name}_b", W))
    return z3.BitVec(name, W)


def _eq(p, q) -> z3.BoolRef:
    if isinstance(p, tuple):
        return z3.And(*(a == b for a, b in zip(p, q, strict=True)))
    return p == q


def left_prefixes(op: Callable, seed, xs: list) -> list:
    """The design's recurrence: prefix[0] = seed, prefix[i + 1] = op(prefix[i], x[i])."""
    out = [seed]
    for x in xs:
        out.append(op(out[-1], x))
    return out


def blocked_prefixes(op: Callable, ident: Callable, seed, xs: list, chunk: int = 2) -> list:
    """Chunks scanned locally from the identity, each chunk's local prefixes combined with the
    carry of everything before it on the left; the seed is the first carry."""
    out, carry = [seed], seed
    for c0 in range(0, len(xs), chunk):
        local = left_prefixes(op, ident(), xs[c0:c0 + chunk])[1:]
        out += [op(carry, p) for p in local]
        carry = out[-1]
    return out


def hillis_steele(op: Callable, ident: Callable, seed, xs: list) -> list:
    """The doubling chain over [seed, x0, ..., x(n-1)]: at distance d every lane combines the
    lane d to its left (the identity beyond the start) on its left."""
    lanes = [seed, *xs]
    d = 1
    while d < len(lanes):
        lanes = [op(lanes[i - d], lanes[i]) if i >= d else op(ident(), lanes[i])
                 for i in range(len(lanes))]
        d *= 2
    return lanes


def _crosscheck() -> str | None:
    """The encoding's recurrence against reductions.scan on concrete 8-bit values."""
    rng = np.random.default_rng(23)
    # every Scan combine (semantics/combine_laws.py): arithmetic ones first, then the lattice
    # ones (the order the obligation always used: Z3's later witnesses depend on it)
    for comb in sorted(SCAN_COMBINES, key=lambda c: (COMBINE_LAWS[c].order, c)):
        op = COMBINES[comb][0]
        for _ in range(20):
            xs = rng.integers(-128, 128, N).astype(np.int8)
            seed = int(rng.integers(-128, 128))
            enc = left_prefixes(op, z3.BitVecVal(seed, W), [z3.BitVecVal(int(v), W) for v in xs])
            got = [z3.simplify(e).as_signed_long() for e in enc]
            inc = scan(xs, comb, inclusive=True, seed=np.int8(seed)).astype(int).tolist()
            exc = scan(xs, comb, inclusive=False, seed=np.int8(seed)).astype(int).tolist()
            if got[1:] != inc or got[:-1] != exc:
                return f"{comb} on {xs.tolist()} seed {seed}: encoding {got}, reference {inc}"
    return None


@obligation("scan.prefix_law")
def prefix_law(ctx: ProveCtx) -> Outcome:
    """Blocked and Hillis-Steele scans equal the left recurrence (inclusive and exclusive) for
    add / mul / max / min and a non-commutative combine; commutativity is never used."""
    bad = _crosscheck()
    if bad:
        return Outcome("failed", f"the encoding disagrees with reductions.scan: {bad}")
    sub: list[tuple[str, str]] = []
    failed = []
    for comb, (op, ident) in COMBINES.items():
        seed = _var("z", comb)
        xs = [_var(f"x{i}", comb) for i in range(N)]
        ref = left_prefixes(op, seed, xs)
        for name, got in (("blocked", blocked_prefixes(op, ident, seed, xs)),
                          ("hillis_steele", hillis_steele(op, ident, seed, xs))):
            # inclusive[i] = prefix[i + 1], exclusive[i] = prefix[i]: both are entries of
            # the prefix list, so equal lists prove both forms
            claim = z3.And(*(_eq(a, b) for a, b in zip(got, ref, strict=True)))
            st, vals = ctx.prove(claim, f"scan_{comb}_{name}")
            sub.append((f"{comb}: {name} = left recurrence ({N} elements + seed)", st))
            if st != "proved":
                failed.append((comb, name, st, vals))
    if failed:
        comb, name, st, vals = failed[0]
        return Outcome("counterexample" if st == "counterexample" else "failed",
                       f"{comb} {name}: {st}", vals, sub=sub)
    return Outcome("proved", f"{len(sub)} equalities over 8-bit values for every input "
                   f"(wraparound add / mul, signed max / min, affine-map composition — "
                   f"non-commutative); the recurrence agrees with reductions.scan", sub=sub)


@obligation("scan.permutation", expect="counterexample")
def permutation(ctx: ProveCtx) -> Outcome:
    """A scan over permuted contributions is a different scan: refuted, with the design's
    [1, 2, 3] -> [3, 1, 2] example re-checked on the reference."""
    xs = [z3.BitVec(f"x{i}", W) for i in range(3)]
    op = COMBINES["add"][0]
    zero = z3.BitVecVal(0, W)
    a = left_prefixes(op, zero, xs)[1:]
    b = left_prefixes(op, zero, [xs[2], xs[0], xs[1]])[1:]
    claim = z3.And(*(p == q for p, q in zip(a, b, strict=True)))
    st, vals = ctx.prove(claim, "scan_rotation", show={f"x{i}": x for i, x in enumerate(xs)})
    ex = np.array([1, 2, 3], np.int32)
    r1 = scan(ex, "add").tolist()
    r2 = scan(np.roll(ex, 1), "add").tolist()
    design = r1 == [1, 3, 6] and r2 == [3, 4, 6] and r1[-1] == r2[-1] == 6
    detail = (f"scan(x) vs scan(rotate(x)) for i8 add: {st}; the design's example on the "
              f"reference: [1, 2, 3] -> {r1}, [3, 1, 2] -> {r2} (sum 6 both)")
    if not design:
        return Outcome("failed", detail + ": the reference does not reproduce the example")
    vals = dict(vals or {})
    vals.update({"design [1, 2, 3]": str(r1), "design [3, 1, 2]": str(r2)})
    return Outcome(st if st in ("proved", "counterexample") else "failed", detail, vals)


@obligation("scan.f32_regrouping", expect="counterexample")
def f32_regrouping(ctx: ProveCtx) -> Outcome:
    """An ordered-tree regrouping of one f32 prefix is not its left fold: refuted (a witness),
    which is why the ordered-tree Scan(add) contract is an admitted set per prefix."""
    s = z3.Float32()
    rne = z3.RNE()
    x = [z3.FP(f"x{i}", s) for i in range(3)]
    fold = z3.fpAdd(rne, z3.fpAdd(rne, x[0], x[1]), x[2])
    tree = z3.fpAdd(rne, x[0], z3.fpAdd(rne, x[1], x[2]))
    t = np.float32(2.0 ** -24)
    # the witness comes from the reference (a bit-blasted search over all f32 triples does not
    # finish in the budget); Z3 confirms it in the FP theory, independently of numpy
    at = (x[0] == z3.FPVal(1.0, s), x[1] == z3.FPVal(float(t), s), x[2] == z3.FPVal(float(t), s))
    st, vals = ctx.prove(z3.fpEQ(fold, tree), "f32_prefix_regroup", assumptions=at,
                         show={"x0": x[0], "x1": x[1], "x2": x[2], "fold": fold, "tree": tree})
    w = np.array([1.0, t, t], np.float32)
    ref_fold = scan(w, "add", policy="fold_left")[-1]
    ref_tree = np.float32(w[0] + np.float32(w[1] + w[2]))
    detail = (f"(x0 + x1) + x2 vs x0 + (x1 + x2) in f32 at [1, 2^-24, 2^-24]: {st}; reference: "
              f"[1, 2^-24, 2^-24] folds to {float(ref_fold)!r}, regroups to "
              f"{float(ref_tree)!r}")
    if ref_fold == ref_tree:
        return Outcome("failed", detail + ": the concrete witness does not differ")
    return Outcome(st if st in ("proved", "counterexample") else "failed", detail, vals)

"""What a set of conformance cases exercises, and what a tier leaves out (issue 16).

``coverage(cases)`` evaluates every case with a recording evaluator and collects two kinds of
feature, from what actually runs (a dispatch variant not taken covers nothing):

* **op features** — per executed Call: the op (``Class`` or ``Class.kind``), its first operand's
  dtype (the result's for nullary ops), its enumerated attribute values (bools, strings, enum
  members: a policy, ``sorted``, ``allow_reassociation``, a cast's overflow / rounding, ...), and
  its operands' sharding pattern (``plain``, or per mesh axis ``S`` / ``B`` / ``P(sum)`` ...,
  ``+refined`` when the layout refines an axis);
* **cast boundary classes** — per executed Cast, the classes its input elements fall in relative
  to the destination grid: ``exact``, ``tie`` (an exact midpoint between two destination
  values), ``near-tie`` (within one source ulp of a midpoint), ``subnormal``, ``underflow``
  (rounds to zero), ``above-max`` (beyond the largest finite value, rounding back to it),
  ``overflow`` (rounding past it), ``nan``, ``inf``, ``zero``; float → int: ``fraction``,
  ``out-of-range``; int → int: ``wraps``, ``in-range``.

``holes(tier_cases, universe_cases)`` is what the universe (the full tier plus generated programs)
exercises and the tier does not. ``tilefoundry conformance coverage`` prints both.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Iterable
from typing import Any

import numpy as np

from tilefoundry.semantics.formats import DType, dtype_of

__all__ = ["Coverage", "cast_classes", "coverage", "holes", "program_cases"]


@dataclasses.dataclass
class Coverage:
    ops: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    casts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    cases: int = 0
    errors: list = dataclasses.field(default_factory=list)

    def keys(self) -> set:
        return set(self.ops) | set(self.casts)


def _attrs(op: Any) -> tuple:
    out = []
    for f in dataclasses.fields(op):
        v = getattr(op, f.name)
        if f.name == "kind":
            continue
        if isinstance(v, bool | str | enum.Enum):
            out.append((f.name, v.value if isinstance(v, enum.Enum) else v))
    return tuple(out)


def _sharding(args: tuple) -> str:
    from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded
    from tilefoundry.semantics.types import Broadcast, Partial, Split

    pats = []
    for a in args:
        if isinstance(a, PerDevice):
            pats.append("local")
        elif isinstance(a, Sharded):
            lay = a.layout
            s = "".join("S" if isinstance(t, Split) else "B" if isinstance(t, Broadcast) else
                        f"P({t.reduction})" if isinstance(t, Partial) else "?"
                        for t in lay.attrs)
            if any(isinstance(e, tuple) and len(e) > 1 for e in lay.layout.shape):
                s += "+refined"
            pats.append(s)
    return ",".join(sorted(set(pats))) if pats else "plain"


def _dtype(v: Any) -> str:
    from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded

    if isinstance(v, tuple):
        return _dtype(v[0]) if v else "-"
    if isinstance(v, Sharded | PerDevice):
        v = v.data
    try:
        return str(dtype_of(np.asarray(v)))
    except Exception:
        return "-"


def cast_classes(x: np.ndarray, dst: DType, overflow: str = "nonfinite",
                 rounding: str = "nearest") -> set[str]:
    """The boundary classes of ``x``'s elements for a cast to ``dst`` (see the module
    docstring); vectorized, exact in f64 for sources of at most 32 bits."""
    with np.errstate(all="ignore"):  # ordered() of unsigned formats wraps on purpose
        return _cast_classes(np.asarray(x), dst, overflow, rounding)


def _cast_classes(x: np.ndarray, dst: DType, overflow: str, rounding: str) -> set[str]:
    from tilefoundry.oracle.enclosure import as_f64, from_ordered
    from tilefoundry.semantics.dtypes import cast
    from tilefoundry.semantics.formats import FORMATS

    src = dtype_of(x)
    if x.size == 0:
        return set()
    out: set[str] = set()
    if src is DType.BOOL or dst is DType.BOOL:
        return {"bool"}
    xw = as_f64(x)
    if dst.is_int:
        info = np.iinfo(FORMATS[dst].storage)
        if src.is_float:
            nan, inf = np.isnan(xw), np.isinf(xw)
            fin = ~nan & ~inf
            for name, m in (("nan", nan), ("inf", inf),
                            ("out-of-range", fin & ((xw <= info.min - 1.0) |
                                                    (xw >= info.max + 1.0))),
                            ("fraction", fin & (xw != np.trunc(xw))),
                            ("zero", xw == 0), ("in-range", fin & (xw == np.trunc(xw)) &
                                                (xw >= info.min) & (xw <= info.max))):
                if m.any():
                    out.add(name)
            return out
        xi = x.astype(np.int64)
        wraps = (xi < info.min) | (xi > info.max)
        return {"wraps"} if wraps.all() else {"in-range", "wraps"} if wraps.any() else \
            {"in-range"}
    nan, inf = np.isnan(xw), np.isinf(xw)
    fin = ~nan & ~inf
    for name, m in (("nan", nan), ("inf", inf), ("zero", fin & (xw == 0))):
        if m.any():
            out.add(name)
    with np.errstate(all="ignore"):
        y = cast(x, dst, overflow=overflow, rounding=rounding)
    yw = as_f64(y)
    nz = fin & (xw != 0)
    info = FORMATS[dst]
    maxf = float(info.code_value(info.max_code))
    # beyond the grid: rounding (with an unbounded exponent) lands past the largest finite
    # value (a nonfinite cast says so in every format) — "overflow"; above it but rounding
    # back to it — "above-max"
    y_nf = y if overflow == "nonfinite" else cast(x, dst, rounding=rounding)
    beyond = nz & ~np.isfinite(as_f64(y_nf))
    over = nz & (np.abs(xw) > maxf)
    for name, m in (("overflow", beyond), ("above-max", over & ~beyond)):
        if m.any():
            out.add(name)
    inside = nz & ~over & np.isfinite(yw)
    if inside.any():
        from tilefoundry.oracle.compare import ordered

        o = ordered(y)
        lo_n = as_f64(from_ordered(o - 1, dst))
        hi_n = as_f64(from_ordered(o + 1, dst))
        mids = ((yw + lo_n) / 2, (yw + hi_n) / 2)
        exact = inside & (xw == yw)
        tie = inside & ((xw == mids[0]) | (xw == mids[1]))
        ox = ordered(x)
        xl, xh = as_f64(from_ordered(ox - 1, src)), as_f64(from_ordered(ox + 1, src)) \
            if src.is_float else (xw - 1, xw + 1)
        near = inside & ~tie & ~exact & (((xl <= mids[0]) & (mids[0] <= xh)) |
                                          ((xl <= mids[1]) & (mids[1] <= xh)))
        tiny = 2.0 ** info.emin if info.implicit_bit else 0.0
        for name, m in (("exact", exact), ("tie", tie), ("near-tie", near),
                        ("subnormal", inside & (yw != 0) & (np.abs(yw) < tiny)),
                        ("underflow", inside & (yw == 0))):
            if m.any():
                out.add(name)
    return out


def _recorder():
    from tilefoundry.semantics.evaluator.core import Evaluator
    from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded
    from tilefoundry.semantics.ops import Cast

    class Recording(Evaluator):
        seen: collections.Counter
        casts: collections.Counter

        def eval_call(self, node, values, env):
            v = super().eval_call(node, values, env)
            args = tuple(values[id(a)] for a in node.args)
            op = node.op
            name = type(op).__name__
            kind = getattr(op, "kind", None)
            if isinstance(kind, enum.Enum):
                name += f".{kind.value}"
            dt = _dtype(args[0]) if args else _dtype(v)
            self.seen[("op", name, dt, _attrs(op), _sharding(args))] += 1
            if isinstance(op, Cast) and args:
                x = args[0].data if isinstance(args[0], Sharded | PerDevice) else args[0]
                key = ("cast", _dtype(x), str(op.dtype), op.overflow, op.rounding)
                for c in cast_classes(np.asarray(x), op.dtype, op.overflow, op.rounding):
                    self.casts[(*key, c)] += 1
            return v

    return Recording


def case_features(case: Any) -> tuple[collections.Counter, collections.Counter, str | None]:
    """(op features, cast classes, error) of one case (a ``Case`` or ``(id, module, entry,
    inputs)``). A case whose reference raises covers what ran before the error; the error is
    returned unless the case expects it."""
    from tilefoundry.semantics.evaluator.core import run

    if isinstance(case, tuple):
        cid, m, e, ins = case
    else:
        cid = case.id
        m, e, ins = case.build()

    class One(_recorder()):  # fresh counters per case
        pass

    One.seen, One.casts = collections.Counter(), collections.Counter()
    err = None
    try:
        run(m, e, ins, One)
    except Exception as ex:  # recorded, never skipped silently
        if not getattr(case, "expect_error", None):
            err = f"{cid}: {type(ex).__name__}: {ex}"[:200]
    return One.seen, One.casts, err


def coverage(cases: Iterable[Any]) -> Coverage:
    """The op features and cast boundary classes ``cases`` exercise (``Case`` objects, or
    ``(id, module, entry, inputs)`` tuples); errors are listed."""
    cov = Coverage()
    for case in cases:
        ops, casts, err = case_features(case)
        cov.cases += 1
        cov.ops.update(ops)
        cov.casts.update(casts)
        if err:
            cov.errors.append(err)
    return cov


def program_cases(n: int, seed: int = 0, sharded_every: int = 5):
    """``n`` generated programs (one in ``sharded_every`` sharded) as coverage cases."""
    from tilefoundry.oracle.programs import generate_program

    for s in range(seed, seed + n):
        p = generate_program(s, max_ops=8, sharded=(sharded_every and
                                                    s % sharded_every == sharded_every - 1))
        yield (f"generated/{s}", p.module, p.entry, list(p.inputs))


def holes(tier: Coverage, universe: Coverage) -> tuple[set, set]:
    """(op features, cast classes) the universe exercises and the tier does not."""
    return set(universe.ops) - set(tier.ops), set(universe.casts) - set(tier.casts)


def _fmt_op(k: tuple) -> str:
    _, name, dt, attrs, shard = k
    a = ", ".join(f"{n}={v}" for n, v in attrs)
    return f"{name} [{dt}]" + (f" ({a})" if a else "") + ("" if shard == "plain" else
                                                           f" on {shard}")


def report(tier: Coverage, universe: Coverage, tier_name: str, limit: int = 40) -> str:
    op_h, cast_h = holes(tier, universe)
    opn = {k[1].split(".")[0] for k in tier.ops}
    lines = [f"{tier_name}: {tier.cases} cases, {len(tier.ops)} op features "
             f"({len(opn)} op classes), {len(tier.casts)} cast boundary classes"
             f"; errors {len(tier.errors)}",
             f"universe: {universe.cases} cases, {len(universe.ops)} op features, "
             f"{len(universe.casts)} cast boundary classes; errors {len(universe.errors)}",
             f"holes in {tier_name}: {len(op_h)} op features, {len(cast_h)} cast boundary "
             f"classes"]
    for k in sorted(op_h, key=str)[:limit]:
        lines.append(f"  op   {_fmt_op(k)}")
    for k in sorted(cast_h, key=str)[:limit]:
        lines.append(f"  cast {k[1]} -> {k[2]} ({k[3]}, {k[4]}): {k[5]}")
    more = max(0, len(op_h) - limit) + max(0, len(cast_h) - limit)
    if more:
        lines.append(f"  ... and {more} more")
    for e in (tier.errors + universe.errors)[:10]:
        lines.append(f"  error {e}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# filling the quick tier's holes
# ---------------------------------------------------------------------------------------------
#: the quick tier's fill: full-tier case ids promoted to quick and program-pool indices added
FILL_PATH = "quick_fill.json"
#: generated programs the fill may choose from: ``program/cover/<i>`` is
#: ``generate_program(POOL_SEED + i, sharded=(i % 5 == 4))``
POOL_SEED, POOL_SIZE = 1_000_000, 1000


def fill_file() -> Any:
    from pathlib import Path

    return Path(__file__).with_name(FILL_PATH)


def load_fill() -> dict:
    import json

    p = fill_file()
    if not p.exists():
        return {"promote": [], "programs": []}
    return json.loads(p.read_text())


def universe_cases(catalog: Any) -> list:
    """The universe a quick tier is measured against: the full tier plus the program pool."""
    from tilefoundry.conformance.catalog import pool_case

    return [*catalog.tier("full"), *(pool_case(i) for i in range(POOL_SIZE))]


def select_fill(catalog: Any) -> dict:
    """A greedy set cover of the universe's features by the quick tier plus the fewest extra
    cases: each step takes the candidate (a full-only case, or a pool program not yet quick)
    covering the most features still missing (ties: the earlier candidate). Deterministic."""
    old = load_fill()
    base = [c for c in catalog.tier("quick") if c.id not in set(old.get("promote", ())) and
            not c.id.startswith("program/cover/")]  # the quick tier without any fill
    quick = {c.id for c in base}
    have: set = set()
    for c in base:
        o, k, _ = case_features(c)
        have |= set(o) | set(k)
    cands = []
    for c in universe_cases(catalog):
        if c.id in quick:
            continue
        o, k, _ = case_features(c)
        cands.append((c.id, (set(o) | set(k)) - have, _fully_judged(c)))
    chosen: list[str] = []
    # first from the candidates the oracle judges whole (the reference's own outputs PASS with
    # no unjudged element), then the rest for what only they reach
    for judged_only in (True, False):
        while True:
            pool = [j for j in range(len(cands)) if cands[j][2] or not judged_only]
            best = max(pool, key=lambda j: (len(cands[j][1]), -j), default=None)
            if best is None or not cands[best][1]:
                break
            cid, new, _ = cands.pop(best)
            chosen.append(cid)
            have |= new
            cands = [(i, f - new, ok) for i, f, ok in cands]
    pool = sorted(int(c.rsplit("/", 1)[1]) for c in chosen if c.startswith("program/cover/"))
    return {"promote": sorted(c for c in chosen if not c.startswith("program/cover/")),
            "programs": pool,
            "about": "tilefoundry conformance coverage --write-fill (conformance/coverage.py)"}


def _fully_judged(case: Any) -> bool:
    from tilefoundry.oracle.compare import PASS, check
    from tilefoundry.semantics.evaluator.core import evaluate

    if getattr(case, "expect_error", None):
        return True
    try:
        m, e, ins = case.build()
        return check(m, e, ins, evaluate(m, e, ins)).status == PASS
    except Exception:
        return False


def write_fill(catalog: Any) -> dict:
    import json

    fill = select_fill(catalog)
    fill_file().write_text(json.dumps(fill, indent=1) + "\n")
    return fill

"""Capability-directed programs: the part of each tier built from what the judged backend claims.

A backend that claims a few ops runs few catalog cases — each hand-written case needs some op
outside the claim — so a fused-kernel bug in the ops it does claim (a bf16 chain kept in f32,
issue 33) passed both tiers. For the capability set being judged (``Capabilities``: ops, kinds,
dtypes, op x dtype pairs, policies, overflow / rounding modes, features) the catalog therefore
adds ``CAPABILITY_PER_TIER`` deterministic programs built **only** from the claim:

* **chains** of 3-6 claimed ops, each consuming the previous result, in a narrow float dtype
  (bf16 / f16 / fp8) when one is claimed — every intermediate is a rounding point;
* **DAGs**: the same with values used twice (a diamond), the branches joined again;
* **reductions feeding elementwise ops** (``x - max(x)``, ``x * sum(x)``, a norm written out),
  and chains of reductions where nothing else is claimed;
* **casts between claimed dtypes** in the middle of a chain (``f32 -> bf16 -> ops -> f32``).

Program ``n`` centres on the claimed op (or kind) ``n`` modulo their number, in an order drawn
from the capability set, so every claimed op takes part in compositions in each tier; ops the
composer does not write itself (Gather, Slice, RoPE, Sort, ...) are placed by the oracle's
program generator drawing inside the claim. The ids are ``capability/<key>/<n>``: ``key`` the
first 8 hex digits of a SHA-256 of the capability set (``Capabilities.to_json``) and the catalog
seed, so the same claim and seed give the same ids, programs and input bits on every machine.
The first ``CAPABILITY_PER_TIER["quick"]`` are quick, all are full. Every program is checked
against the claim (``unsupported_reason``) before it is used: none is NOT_SUPPORTED.

Inputs: mostly ordinary values (N(0, 1) in the dtype — where a skipped rounding shows), with a
row of special values (NaN, ±inf, ±0, subnormals, max finite), a large-magnitude row or a
near-underflow row in some programs; integer operands small, float -> int casts only of values
drawn inside the target's range (no unspecified results).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilefoundry.conformance.backend import (
    Capabilities,
    Requirements,
    requirements,
    unsupported_reason,
)
from tilefoundry.conformance.cases import Case
from tilefoundry.semantics.dtypes import FORMATS, DType, cast
from tilefoundry.semantics.ir import Call, Function, Module, Tuple, Var
from tilefoundry.semantics.ops import (
    Binary,
    BinaryKind,
    Cast,
    Gelu,
    LayerNorm,
    MatMul,
    Reduce,
    ReduceKind,
    ReLU,
    Reshape,
    RMSNorm,
    Scan,
    Select,
    Sigmoid,
    Silu,
    SoftMax,
    Tanh,
    Transpose,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.types import TensorType

__all__ = ["CAPABILITY_PER_TIER", "capability_cases", "capability_key", "claimed_units",
           "compose"]

#: capability-directed programs per tier (quick: the first of the full list)
CAPABILITY_PER_TIER = {"quick": 64, "full": 256}
#: bump when the composer changes what a (claim, seed, n) builds: the ids change with it
COMPOSER_VERSION = 1
ENTRY = "f"

F32, BF16, BOOL = DType.F32, DType.BF16, DType.BOOL
_NARROW = (DType.BF16, DType.F16, DType.FP8E4M3, DType.FP8E5M2)
_ACTS: dict[str, Callable[[random.Random], Any]] = {
    "ReLU": lambda r: ReLU(), "Sigmoid": lambda r: Sigmoid(), "Tanh": lambda r: Tanh(),
    "Silu": lambda r: Silu(), "Gelu": lambda r: Gelu(r.choice(("tanh", "none")))}
#: op classes the composer writes itself (the rest are placed by the program generator)
_COMPOSED = ("Binary", "Unary", "Reduce", "Cast", "SoftMax", "RMSNorm", "LayerNorm", "MatMul",
             "Select", "Transpose", "Reshape", "Scan", *_ACTS)
_ARITH = ("Binary.add", "Binary.sub", "Binary.mul", "Binary.div")
_KINDED = {"Binary": BinaryKind, "Unary": UnaryKind, "Reduce": ReduceKind}


def capability_key(caps: Capabilities, seed: int) -> str:
    """The 8-hex-digit key of a capability set and catalog seed (the ids' second segment)."""
    text = json.dumps({"caps": caps.to_json(), "seed": seed, "v": COMPOSER_VERSION},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# =============================================================================================
# what the claim admits
# =============================================================================================
def _names(op: Any) -> list[str]:
    name = type(op).__name__
    kind = getattr(op, "kind", None)
    return [name, f"{name}.{kind.value}"] if hasattr(kind, "value") else [name]


def _admits(caps: Capabilities, op: Any, types: list) -> bool:
    """One call of ``op`` touching ``types`` (operands, result) is inside the claim."""
    names = _names(op)
    dts = {t.dtype for t in types if isinstance(t, TensorType)}
    if isinstance(getattr(op, "dtype", None), DType):
        dts.add(op.dtype)
    attrs = {a: getattr(op, a) for a in ("policy", "overflow", "rounding")
             if isinstance(getattr(op, a, None), str) and getattr(op, a)}
    req = Requirements(
        ops=frozenset(names), dtypes=frozenset(dts),
        policies=frozenset({attrs["policy"]} if "policy" in attrs else ()),
        overflow_modes=frozenset({attrs["overflow"]} if "overflow" in attrs else ()),
        mesh=False,
        rounding_modes=frozenset({attrs["rounding"]} if "rounding" in attrs else ()),
        op_dtypes=frozenset((o, d) for o in names for d in dts),
        op_attrs=frozenset((o, a, v) for o in names for a, v in attrs.items()),
        cast_pairs=frozenset({(types[0].dtype, op.dtype)}) if isinstance(op, Cast) and
        isinstance(types[0], TensorType) else frozenset())
    return unsupported_reason(caps, req) is None


def _claimed(caps: Capabilities, name: str) -> bool:
    if caps.ops is None or name in caps.ops:
        return True
    cls = name.split(".")[0]
    return "." in name and cls in caps.ops


def _dtypes(caps: Capabilities) -> list[DType]:
    return sorted((d for d in caps.dtypes if isinstance(d, DType) and FORMATS[d].evaluable),
                  key=lambda d: d.value)


def claimed_units(caps: Capabilities) -> list[str]:
    """The claimed ops a program can centre on, sorted: ``"Binary.add"``-style kinds of the
    kinded classes (feasible on some claimed dtype), every other claimed op class."""
    from tilefoundry.oracle.programs import BUILDERS

    out: list[str] = []
    for cls in sorted(BUILDERS, key=lambda c: c.__name__):
        name = cls.__name__
        if name in _KINDED:
            out += [f"{name}.{k.value}" for k in _KINDED[name]
                    if _claimed(caps, f"{name}.{k.value}")]
        elif _claimed(caps, name):
            out.append(name)
    return out


# =============================================================================================
# the composer
# =============================================================================================
@dataclass(eq=False)
class _Val:
    expr: Any
    type: TensorType
    in_range: bool = False  # a float parameter drawn inside every int target's range


@dataclass
class _Prog:
    caps: Capabilities
    r: random.Random
    params: list[Var] = field(default_factory=list)
    makers: list[Callable[[np.random.Generator], np.ndarray]] = field(default_factory=list)
    vals: list[_Val] = field(default_factory=list)
    used: set[int] = field(default_factory=set)
    units: set[str] = field(default_factory=set)
    row_class: str = "ordinary"

    # ---- leaves ------------------------------------------------------------------------------
    def param(self, shape: tuple, dt: DType, kind: str = "data") -> _Val:
        v = Var(f"x{len(self.params)}", TensorType(tuple(shape), dt))
        self.params.append(v)
        row = self.row_class if kind == "data" else "ordinary"
        self.makers.append(lambda g, s=tuple(shape), d=dt, k=kind, rc=row: _values(g, s, d, k,
                                                                                   rc))
        val = _Val(v, v.type, in_range=kind == "in-range")
        self.vals.append(val)
        return val

    # ---- one call ----------------------------------------------------------------------------
    def call(self, op: Any, args: list[_Val], unit: str | None = None) -> _Val | None:
        from tilefoundry.semantics.typeinfer import RULES, Ctx, Session, TypeInferError
        from tilefoundry.semantics.types import IRError

        c = Call(op, tuple(a.expr for a in args))
        try:
            t = RULES[type(op)](Ctx(op, c, Session()), tuple(a.type for a in args))
        except (TypeInferError, IRError):
            return None
        if not isinstance(t, TensorType) or not _admits(self.caps, op, [*[a.type for a in args],
                                                                         t]):
            return None
        for a in args:
            self.used.add(id(a))
        out = _Val(c, t)
        self.vals.append(out)
        self.units.update(_names(op) if unit is None else [unit, *_names(op)])
        return out

    # ---- operands ------------------------------------------------------------------------------
    def partner(self, x: _Val, dt: DType | None = None) -> _Val:
        """A second operand for ``x``: an earlier value of its dtype and a shape broadcasting
        to x's (shared), or a fresh parameter of x's shape or a broadcastable suffix."""
        dt = dt or x.type.dtype
        olds = [v for v in self.vals if v is not x and v.type.dtype is dt and
                _bcast_to(v.type.shape, x.type.shape)]
        if olds and self.r.random() < 0.4:
            return self.r.choice(olds)
        shape = tuple(x.type.shape)
        k = self.r.random()
        if k < 0.15 and shape:
            shape = shape[-1:]
        elif k < 0.25 and len(shape) >= 2:
            shape = (*shape[:-1], 1)
        return self.param(shape, dt)

    def floats(self) -> list[DType]:
        return [d for d in _dtypes(self.caps) if d.is_float and d is not DType.F8E8M0]

    # ---- units: apply ``unit`` with ``x`` as its main operand ---------------------------------
    def apply(self, unit: str, x: _Val) -> _Val | None:
        from tilefoundry.semantics.types import IRError

        try:
            return self._apply(unit, x)
        except IRError:  # an attribute the op's constructor refuses
            return None

    def _apply(self, unit: str, x: _Val) -> _Val | None:
        r, dt, shape = self.r, x.type.dtype, x.type.shape
        cls, _, kind = unit.partition(".")
        if cls == "Binary":
            k = BinaryKind(kind)
            other = self.partner(x, dt)
            args = [x, other] if r.random() < 0.7 else [other, x]
            return self.call(Binary(k), args)
        if cls == "Unary":
            return self.call(Unary(UnaryKind(kind)), [x])
        if cls == "Reduce":
            rank = len(shape)
            if rank == 0:
                return None
            axes = (rank - 1,) if r.random() < 0.6 or rank == 1 else \
                tuple(sorted(r.sample(range(rank), r.randint(1, rank))))
            pols = _choices(self.caps, unit, "policy", self.caps.policies)
            if not pols:
                return None
            return self.call(Reduce(axes, keepdim=r.random() < 0.7, kind=ReduceKind(kind),
                                    policy=r.choice(pols)), [x])
        if cls == "Cast":
            return self.cast(x)
        if cls in _ACTS:
            return self.call(_ACTS[cls](r), [x])
        if cls == "SoftMax":
            return self.call(SoftMax(axis=-1 if r.random() < 0.8 else 0), [x])
        if cls in ("RMSNorm", "LayerNorm") and shape:
            w = self.param(shape[-1:], dt, "weight")
            if cls == "RMSNorm":
                return self.call(RMSNorm(eps=r.choice((1e-6, 1e-5))), [x, w])
            return self.call(LayerNorm(eps=1e-5), [x, w, self.param(shape[-1:], dt, "bias")])
        if cls == "MatMul" and len(shape) >= 2:
            n = shape[-1] if r.random() < 0.5 else r.randint(2, 12)
            w = self.param((shape[-1], n), dt, "matrix")
            return self.call(MatMul(allow_reassociation=r.random() < 0.5), [x, w])
        if cls == "Select":
            return self.select(x)
        if cls == "Transpose" and len(shape) >= 2:
            perm = list(range(len(shape)))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            return self.call(Transpose(tuple(perm)), [x])
        if cls == "Reshape" and len(shape) >= 2:
            new = (*shape[:-2], shape[-2] * shape[-1]) if r.random() < 0.6 else \
                (*shape[:-2], shape[-1], shape[-2])
            return self.call(Reshape(tuple(new)), [x])
        if cls == "Scan" and shape:
            pols = [q for q in _choices(self.caps, "Scan", "policy", self.caps.policies)
                    if q in ("fold_left", "ordered_tree")] or ["ordered_tree"]
            return self.call(Scan(axis=-1, combine=r.choice(("add", "max", "min")),
                                  inclusive=r.random() < 0.7, policy=r.choice(pols)), [x])
        return None

    def cast(self, x: _Val) -> _Val | None:
        r, src = self.r, x.type.dtype
        targets = [d for d in _dtypes(self.caps) if d is not src and
                   (not (src.is_float and not d.is_float and d is not BOOL) or x.in_range)
                   and (self.caps.cast_pairs is None or (src, d) in self.caps.cast_pairs)]
        if not targets:
            return None
        # a narrow float first: its rounding in the middle of the chain is the point
        narrow = [d for d in targets if d in _NARROW or (src in _NARROW and d is F32)]
        dst = r.choice(narrow if narrow and r.random() < 0.7 else targets)
        if dst.is_float:
            ovf = _choices(self.caps, "Cast", "overflow", self.caps.overflow_modes) or \
                ["nonfinite"]
            rnd = _choices(self.caps, "Cast", "rounding", self.caps.rounding_modes) \
                if dst is DType.F8E8M0 else ["nearest"]
            return self.call(Cast(dst, r.choice(ovf), r.choice(rnd or ["nearest"])), [x])
        return self.call(Cast(dst), [x])

    def select(self, x: _Val) -> _Val | None:
        r = self.r
        cmp = [k for k in BinaryKind if k.is_comparison and
               _claimed(self.caps, f"Binary.{k.value}")]
        cond = None
        if cmp and x.type.dtype is not BOOL:
            other = self.partner(x)
            cond = self.call(Binary(r.choice(cmp)), [x, other])  # a float comparison
        if cond is None:
            cond = self.param(tuple(x.type.shape), BOOL)
        f = self.partner(x)
        return self.call(Select(), [cond, x, f] if r.random() < 0.6 else [cond, f, x])


def _choices(caps: Capabilities, unit: str, attr: str, base: frozenset) -> list[str]:
    """The values of ``attr`` claimed for ``unit`` (``op_attrs`` of the kind, then of the class,
    narrow the global set)."""
    out = set(base)
    for name in (unit.split(".")[0], unit):
        narrowed = caps.op_attrs.get(name, {}).get(attr)
        if narrowed is not None:
            out &= set(narrowed)
    return sorted(out)


def _bcast_to(a: tuple, b: tuple) -> bool:
    if len(a) > len(b):
        return False
    return all(x == 1 or x == y for x, y in zip(reversed(a), reversed(b), strict=False))


# =============================================================================================
# input values
# =============================================================================================
def _c(a: Any) -> np.ndarray:
    return np.array(a, order="C")  # not np.ascontiguousarray: it makes a rank-0 array (1,)


def _values(g: np.random.Generator, shape: tuple, dt: DType, kind: str,
            row_class: str) -> np.ndarray:
    info = FORMATS[dt]
    if dt is BOOL:
        return _c(g.random(shape) < 0.5)
    if not dt.is_float:
        ii = np.iinfo(info.storage)
        v = g.integers(max(ii.min, -8), min(ii.max, 8) + 1, shape)
        return _c(v.astype(info.storage))
    if kind == "in-range":
        v = g.integers(0, 100 * 8, shape) / 8.0 if dt is not DType.F8E8M0 else \
            2.0 ** g.integers(-4, 7, shape)
        return _c(cast(np.asarray(v, np.float32), dt))
    if dt is DType.F8E8M0:
        return _c(cast((2.0 ** g.integers(-8, 9, shape)).astype(np.float32),
                                         dt))
    v = g.standard_normal(shape)
    if kind == "weight":
        v = 1.0 + 0.25 * v
    elif kind == "bias":
        v = 0.5 * v
    elif kind == "matrix" and len(shape) == 2:
        v = v / np.sqrt(shape[0])
    v = v.astype(np.float32)
    flat = v.reshape(-1)
    if row_class != "ordinary" and flat.size:
        n = max(1, flat.size // 4)
        big = float(info.max_finite)
        tiny = float(info.min_normal)
        if row_class == "large":
            flat[:n] *= np.float32(big / 8.0)
        elif row_class == "tiny":
            flat[:n] *= np.float32(tiny * 4.0)
        else:  # special
            sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, float(info.min_subnormal),
                           big, -big], np.float32)
            if info.inf_code is None:
                sp = sp[np.isfinite(sp) | np.isnan(sp)]
            flat[:n] = sp[g.integers(0, sp.size, n)]
    return _c(cast(v, dt))


# =============================================================================================
# patterns
# =============================================================================================
_PATTERNS = ("chain", "dag", "reduce_feeds", "cast_sandwich")


def _pick_dtype(p: _Prog, focus: str) -> DType | None:
    r = p.r
    floats = p.floats()
    narrow = [d for d in floats if d in _NARROW]
    ints = [d for d in _dtypes(p.caps) if not d.is_float and d is not BOOL]
    pool = narrow if narrow and r.random() < 0.7 else floats or ints or narrow
    if focus.startswith("Binary.") and BinaryKind(focus.split(".")[1]).is_boolean:
        pool = [BOOL] if BOOL in p.caps.dtypes else []
    elif focus == "Unary.logical_not":
        pool = [BOOL] if BOOL in p.caps.dtypes else []
    return r.choice(pool) if pool else None


def _shape(r: random.Random, rank: int) -> tuple:
    return tuple(r.randint(2, 6) if i < rank - 1 else r.choice((3, 8, 16, 24, 33))
                 for i in range(rank))


def _step(p: _Prog, units: list[str], cur: _Val, want: str | None) -> _Val | None:
    """Apply ``want`` (or, when None, some claimed unit) with ``cur`` as the main operand. On a
    narrow float value an elementwise op comes first more often than not (add, sub, mul, div
    weighted up): a chain of them is where a skipped rounding shows."""
    if want:
        return p.apply(want, cur)
    order = p.r.sample(units, len(units))
    if cur.type.dtype in _NARROW and p.r.random() < 0.7:
        arith = [u for u in order if u in _ARITH]
        elem = [u for u in order if u.startswith(("Binary.", "Unary.")) or u in _ACTS]
        order = arith[:1] + elem + order if arith and p.r.random() < 0.6 else elem + order
    for u in list(dict.fromkeys(order))[:12]:
        out = p.apply(u, cur)
        if out is not None:
            return out
    return None


def _chain(p: _Prog, units: list[str], focus: str, x: _Val, dag: bool) -> _Val | None:
    r = p.r
    n = r.randint(3, 6)
    at = r.randrange(n)
    cur, made = x, []
    for i in range(n):
        src = cur
        if dag and made and r.random() < 0.35:
            src = r.choice(made)  # a value used a second time: a diamond
        nxt = _step(p, units, src, focus if i == at else None)
        if nxt is None:
            if i == at:
                return None
            continue
        made.append(nxt)
        cur = nxt
    return cur


def _reduce_feeds(p: _Prog, units: list[str], focus: str, x: _Val) -> _Val | None:
    r = p.r
    reds = [u for u in units if u.startswith("Reduce.")]
    if not reds:
        return None
    elem = [u for u in units if u.startswith(("Binary.", "Unary.")) or u in _ACTS]
    red = focus if focus in reds else r.choice(reds)
    if not elem:  # reductions alone: a chain of them over a rank-4 value
        cur = x
        for i in range(r.randint(3, 4)):
            nxt = p.apply(red if i == 0 else r.choice(reds), cur)
            if nxt is None:
                return None
            cur = nxt
        return cur
    pre = _step(p, units, x, focus if focus not in reds and r.random() < 0.5 else None) \
        if r.random() < 0.5 else x
    if pre is None:
        return None
    rk = len(pre.type.shape)
    if rk == 0:
        return None
    pols = _choices(p.caps, red, "policy", p.caps.policies)
    if not pols:
        return None
    red_v = p.call(Reduce((rk - 1,), keepdim=True, kind=ReduceKind(red.split(".")[1]),
                          policy=r.choice(pols)), [pre])
    if red_v is None:
        return None
    bins = [u for u in elem if u.startswith("Binary.")]
    if bins:  # the reduction feeds an elementwise op together with its own input
        b = focus if focus in bins else r.choice(bins)
        joined = p.call(Binary(BinaryKind(b.split(".")[1])), [pre, red_v])
    else:
        joined = _step(p, elem, red_v, None)
    if joined is None:
        return None
    tail = _step(p, units, joined, focus if focus not in p.units else None)
    return tail or joined


def _cast_sandwich(p: _Prog, units: list[str], focus: str, x: _Val) -> _Val | None:
    """cast to another claimed dtype (a narrow one first), ops there, cast back."""
    if "Cast" not in units:
        return None
    a = p.cast(x)
    if a is None:
        return None
    b = _step(p, units, a, None) or a
    c = _step(p, units, b, focus if focus != "Cast" else None)
    if c is None:
        return None
    return p.cast(c) or c


def _finish(p: _Prog, out: _Val) -> Any:
    """The body: ``out`` and, when the backend claims tuples, every other unconsumed value
    computed along the way (dead branches are otherwise left out of the program)."""
    if "tuples" in p.caps.features:
        rest = [v for v in p.vals if id(v) not in p.used and v is not out and
                isinstance(v.expr, Call)]
        if rest:
            return Tuple((out.expr, *(v.expr for v in rest[:3])))
    return out.expr


def compose(caps: Capabilities, key: str, n: int) -> tuple[Module, str, list]:
    """Program ``n`` of the capability set ``caps`` (``key`` = ``capability_key``): centred on
    the claimed op ``n`` modulo their number (or, where no program inside the claim can hold
    that one, on the next)."""
    units = claimed_units(caps)
    if not units:
        raise ValueError("the capability set claims no op")
    order = _order(units, key)
    for j in range(len(order)):
        focus = order[(n + j) % len(order)]
        for attempt in range(16 if j == 0 else 4):
            tag = f"{key}:{n}:{focus}:{attempt}"
            r = random.Random(f"tilefoundry-capability:{tag}")
            built = _compose_once(caps, units, focus, r, tag) \
                if focus.split(".")[0] in _COMPOSED else None
            if built is None and attempt % 4 == 3:
                built = _generated(caps, focus, r)
            if built is not None and _judged(*built):
                return built
    raise ValueError("no program of >= 3 ops lies inside the capability set")


def _order(units: list[str], key: str) -> list[str]:
    return random.Random(f"tilefoundry-capability-order:{key}").sample(units, len(units))


def _compose_once(caps: Capabilities, units: list[str], focus: str, r: random.Random,
                  tag: str) -> tuple[Module, str, list] | None:
    mine = [u for u in units if u.split(".")[0] in _COMPOSED]
    p = _Prog(caps, r, row_class=r.choice(("ordinary",) * 5 + ("special", "large", "tiny")))
    dt = _pick_dtype(p, focus)
    if dt is None:
        return None
    reduce_only = all(u.startswith("Reduce.") for u in mine)
    rank = 4 if reduce_only else r.choice((2, 2, 2, 3, 1))
    x = p.param(_shape(r, rank), dt, "in-range" if r.random() < 0.15 else "data")
    pats = list(_PATTERNS) if not reduce_only else ["reduce_feeds"]
    pat = r.choice(pats)
    if pat in ("chain", "dag"):
        out = _chain(p, mine, focus, x, pat == "dag")
    elif pat == "reduce_feeds":
        out = _reduce_feeds(p, mine, focus, x)
    else:
        out = _cast_sandwich(p, mine, focus, x)
    if out is None or focus not in p.units:
        return None
    body = _finish(p, out)
    params = [v for v in p.params]
    module = Module((Function(ENTRY, tuple(params), body, None),))
    try:
        req = requirements(module)
    except Exception:
        return None
    if unsupported_reason(caps, req) is not None or _op_count(module) < 3:
        return None
    used = _reachable_params(module)
    keep = [i for i, v in enumerate(params) if id(v) in used]
    module = Module((Function(ENTRY, tuple(params[i] for i in keep), body, None),))
    g = np.random.default_rng(int.from_bytes(hashlib.sha256(
        f"tilefoundry-capability-inputs:{tag}".encode()).digest()[:8], "little"))
    inputs = [p.makers[i](g) for i in range(len(params))]
    return module, ENTRY, [inputs[i] for i in keep]


def _generated(caps: Capabilities, focus: str, r: random.Random
               ) -> tuple[Module, str, list] | None:
    """An op the composer does not write: the program generator, drawing inside the claim,
    around ``focus`` (the first of a few derived seeds whose program holds it among >= 3
    ops)."""
    from tilefoundry.oracle import programs as gen
    from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
    from tilefoundry.semantics.ops import ALL_OPS, Local

    cls = next((c for c in ALL_OPS if c.__name__ == focus.split(".")[0]), None)
    if cls is None or cls not in gen.BUILDERS:
        return None
    try:
        limit = gen.capability_limit(caps)
    except Exception:
        return None
    if cls not in limit.classes:
        return None
    # by name: a frozenset of classes iterates in an order set by their addresses (id-based
    # hashes), which differs between processes and with allocation history
    others = tuple(sorted((c for c in limit.classes if c.__name__ in _COMPOSED),
                          key=lambda c: c.__name__))
    sharded = cls.__name__ in ("Reshard", "Local") and limit.sharded
    ops = tuple(c for c in (cls, *others) if c is not Local or cls is Local)
    for _ in range(16):
        s = r.randrange(1 << 30)
        try:
            prog = gen.generate_program(
                s, ops=ops, max_ops=8, caps=limit, sharded=sharded,
                allow_loops="loops" in caps.features, allow_calls="calls" in caps.features,
                allow_dispatch="dispatch" in caps.features)
        except Exception:
            continue
        if cls not in prog.op_counts or sum(prog.op_counts.values()) < 3:
            continue
        if unsupported_reason(caps, requirements(prog.module)) is not None:
            continue
        ins = [np.ascontiguousarray(unshard(x)) if isinstance(x, Sharded) else x
               for x in prog.inputs]
        return prog.module, prog.entry, ins
    return None


def _judged(module: Module, entry: str, inputs: list) -> bool:
    """The reference's own output is judged whole (a program some element of which no
    enclosure bounds would be UNJUDGED for every backend: another draw is taken)."""
    from tilefoundry.oracle.compare import PASS, check
    from tilefoundry.semantics.evaluator.core import evaluate

    try:
        return check(module, entry, inputs, evaluate(module, entry, inputs)).status == PASS
    except Exception:
        return False


def _op_count(module: Module) -> int:
    from tilefoundry.oracle.generator.config import count_ops

    return sum(count_ops(module)[0].values())


def _reachable_params(module: Module) -> set[int]:
    from tilefoundry.oracle.reduce import nodes

    return {id(n) for n in nodes(module.functions[0].body) if isinstance(n, Var)}


# =============================================================================================
# the cases
# =============================================================================================
def capability_cases(caps: Capabilities, seed: int) -> list[Case]:
    """The capability-directed cases of ``caps`` and the catalog ``seed`` (none when the set
    claims no op the composer or the generator can place)."""
    units = claimed_units(caps)
    if not units:
        return []
    key = capability_key(caps, seed)
    try:
        compose(caps, key, 0)
    except ValueError:
        return []  # nothing of >= 3 ops can be built inside the claim
    order = _order(units, key)
    out: list[Case] = []
    for n in range(CAPABILITY_PER_TIER["full"]):
        focus = order[n % len(order)]

        def build(n: int = n) -> tuple[Module, str, list]:
            return compose(caps, key, n)

        out.append(Case(
            f"capability/{key}/{n}", "capability", build, (), (),
            f"Composition of the backend's claimed ops around {focus} (or the next claimed op "
            f"where no program inside the claim holds it; capability set {key}, "
            f"catalog seed {seed}, program {n}; conformance/catalog/capability.py): every op "
            f"rounds to its own dtype (docs/contracts.md, Elementwise arithmetic: \"widen, "
            f"operate, round once\"), so a chain kept in a wider format differs",
            "quick" if n < CAPABILITY_PER_TIER["quick"] else "full"))
    return out

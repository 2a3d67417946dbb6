"""The enclosing evaluation: the reference evaluator, with every value's enclosure computed
beside it (``oracle/enclosure.py``). Values no contract's freedom reaches carry none (exact)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.oracle import enclosure_rules as _registers  # noqa: F401  (registers every rule)
from tilefoundry.oracle import enclosure_tile_mma as _tile_mma  # noqa: F401  (registers)
from tilefoundry.oracle import enclosure_tile_sort as _tile_sort  # noqa: F401  (registers)
from tilefoundry.oracle.enclosure import ENCLOSURES, Enc, nan_bits_of
from tilefoundry.oracle.enclosures import core as _rules
from tilefoundry.semantics.evaluator.core import Evaluation, Evaluator, run
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded
from tilefoundry.semantics.evaluator.sharding import AllDevices, align, gather_positions
from tilefoundry.semantics.ir import Call, Function, Module
from tilefoundry.semantics.ops.tile_select import Bitcast
from tilefoundry.semantics.typeinfer.core import Session

#: the enclosure of a mesh value downstream of freedom: not enclosed (unjudged)
SHARDED = "sharded"


#: op classes whose enclosure rule runs on exact operands too (Bitcast: a computed NaN's bits
#: are free, D266)
RULES_ON_EXACT: frozenset = frozenset({Bitcast})


class EnclosingEvaluator(Evaluator):
    def __init__(self, session: Session):
        super().__init__(session)
        self._encs: dict[int, tuple[Any, Any]] = {}  # id(value) -> (value, enclosure)
        self._untouched: dict[int, Any] | None = None  # id -> the entry's input values

    def call_function(self, fn, args):
        if self._untouched is None:  # the first call is the entry's: data no op has touched
            self._untouched = {id(a): a for a in args}
        return super().call_function(fn, args)

    def untouched(self, v: Any) -> bool:
        """Is ``v`` an entry input itself (passed through calls and loop carries unchanged)?"""
        hit = (self._untouched or {}).get(id(v))
        return hit is not None and hit is v

    def enc_of(self, v: Any) -> Any:
        hit = self._encs.get(id(v))
        return hit[1] if hit is not None and hit[0] is v else None

    def _set(self, v: Any, e: Any) -> None:
        if isinstance(v, tuple):
            es = e if isinstance(e, tuple) else (e,) * len(v)
            for vi, ei in zip(v, es, strict=True):
                self._set(vi, ei)
            return
        shape = tuple(v.data.shape) if isinstance(v, Sharded | PerDevice) else np.shape(v)
        if isinstance(e, Enc) and e.shape != tuple(shape):
            raise AssertionError(f"enclosure of shape {e.shape} for a value of shape "
                                 f"{shape} (an enclosure rule's bug)")
        if e is not None:
            self._encs[id(v)] = (v, e)

    def eval_call(self, node, values, env):
        n0 = len(self.contracts)
        v = super().eval_call(node, values, env)
        new = [c for _, c in self.contracts[n0:]]
        args = tuple(values[id(a)] for a in node.args)
        encs = [e.for_operand() if isinstance(e, Enc) else e for e in map(self.enc_of, args)]
        if not new and all(e is None for e in encs) and (
                type(node.op) not in RULES_ON_EXACT or all(map(self.untouched, args))):
            return v
        if any(isinstance(e, str) for e in encs):
            self._set(v, SHARDED)
            return v
        mesh = any(isinstance(a, Sharded | PerDevice) for a in args) or \
            isinstance(v, Sharded | PerDevice) or any(c.per_device for c in new)
        if mesh:
            self._set(v, _mesh_enclosure(node, env, args, encs, v, new))
            return v
        rule = ENCLOSURES.get(type(node.op))
        if rule is None:
            raise KeyError(f"no enclosure rule for {type(node.op).__name__}")
        site = _rules.Site(node.op, node, node.checked_type, env, encs, args, v, new)
        self._set(v, with_candidates(site, rule(site)))
        return v


# ---------------------------------------------------------------------------------------------
# finite candidate sets through exact ops
# ---------------------------------------------------------------------------------------------
def _carries(op: Any) -> bool:
    """Exact ops a finite set passes through: elementwise arithmetic, casts, movements."""
    from tilefoundry.semantics.ops.math import Binary, Unary
    from tilefoundry.semantics.ops.nn import ReLU
    from tilefoundry.semantics.ops.tensor import (
        Cast,
        Concat,
        Reshape,
        Slice,
        Stack,
        Transpose,
    )

    return isinstance(op, Binary | Unary | ReLU | Cast | Reshape | Transpose | Slice | Concat
                      | Stack)


def _enumerated(x: Enc) -> list | None:
    """A float interval of at most ``CANDIDATES_MAX`` values of its dtype per element, as
    that list of values (every value of the interval is admitted there)."""
    from tilefoundry.oracle.enclosure import from_ordered, ordered

    if not x.dtype.is_float or x.lo.size == 0:
        return None
    lo_o, hi_o = ordered(x.lo), ordered(x.hi)
    w = np.where(x.real, hi_o - lo_o, 0)
    top = int(w.max())
    if top + 1 > _rules.CANDIDATES_MAX or top < 0:
        return None
    return [from_ordered(np.minimum(lo_o + j, hi_o), x.dtype) for j in range(top + 1)]


def _with_nan_candidates(x: Enc, arrays: list) -> list:
    """An operand's candidate arrays standing for its NaNs too: NaN where the enclosure admits
    no real value, and one array more, NaN where a NaN is admitted beside real values. (The
    arrays were built from the interval alone, whose bounds mean nothing where ``real`` is
    False: a NaN operand became some finite candidate, and e.g. ``NaN > y`` read True.)"""
    from tilefoundry.semantics.dtypes import cast

    if not x.dtype.is_float or not (x.nan | ~x.real).any():
        return arrays
    qnan = np.asarray(cast(np.asarray([np.nan], np.float32), x.dtype))[0]
    out = [np.where(x.real, a, qnan).astype(a.dtype) for a in arrays]
    if (x.nan & x.real).any():
        out.append(np.where(x.nan, qnan, out[0]).astype(out[0].dtype))
    return out


def with_candidates(site: Any, e: Any) -> Any:
    """``e`` with its finite set (``Enc.cands``) where the op is exact and every operand is
    exact or a finite set whose combinations stay within ``CANDIDATES_MAX``: the op's own
    kernel over every combination. Anything else keeps the interval."""
    if not isinstance(e, Enc) or e.cands is not None or not _carries(site.op) or \
            any(c.kind != "exact" for c in site.contracts):
        return e
    lists = []
    n = 1
    for x, a in zip(site.encs, site.args, strict=True):
        if x is None:
            lists.append([np.asarray(a)])
        elif isinstance(x, Enc) and x.cands is not None and x.nan_bits is None:
            lists.append(_with_nan_candidates(x, list(x.cands)))
        elif isinstance(x, Enc) and x.nan_bits is None and not x.dense and \
                (few := _enumerated(x)) is not None:
            lists.append(_with_nan_candidates(x, few))
        else:
            return e
        n *= len(lists[-1])
    if n > _rules.CANDIDATES_MAX or n <= 1:
        return e
    import itertools

    from tilefoundry.oracle.enclosure import _isnan

    v = np.asarray(site.value)
    out = []
    with np.errstate(all="ignore"):
        for combo in itertools.product(*lists):
            try:
                r = np.asarray(site.impl(*combo))
            except Exception:  # a kernel refusing a candidate (an index out of range): interval
                return e
            if r.shape != v.shape or r.dtype != v.dtype:
                return e
            if np.any(_isnan(r) & ~e.nan):  # a NaN the interval does not admit: keep it
                return e
            out.append(r)
    e.cands = np.stack(out)
    return e


# ---------------------------------------------------------------------------------------------
# mesh values: the enclosure of a Sharded / PerDevice value is an Enc over its per-device data
# ---------------------------------------------------------------------------------------------


def _data(v: Any) -> np.ndarray:
    return v.data if isinstance(v, Sharded | PerDevice) else np.asarray(v)


def _rewrap(like: Any, data: np.ndarray) -> Any:
    if isinstance(like, Sharded):
        return Sharded(like.layout, np.asarray(data, order="C"))
    if isinstance(like, PerDevice):
        return PerDevice(like.mesh, np.asarray(data, order="C"))
    return data


class _MeshSite(_rules.Site):
    """A Site over per-device data: the kernel runs through the mesh simulation, on operand
    components re-wrapped like the operands."""

    likes: tuple = ()

    def impl(self, *comps) -> Any:
        from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
        from tilefoundry.semantics.evaluator.sharding import eval_on_mesh

        wrapped = tuple(_rewrap(a, c) for a, c in zip(self.likes, comps, strict=True))
        ctx = EvalCtx(self.op, self.call, self.out_type, [], wrapped, self.dims)
        return _data(eval_on_mesh(ctx, EVALUATORS[type(self.op)], wrapped))


def _mesh_enclosure(node, env, args, encs, v, new) -> Any:
    """The enclosure of a Call on mesh values, following the mesh simulation: a Reshard or
    Local moves the enclosure (a Partial(sum) completion encloses every device order), a call
    the simulation runs once per device gets the op's plain rule per device, and the movements
    with mesh paths of their own (a Gather along a split axis, a Reshape into a sharded type, a
    write into a split destination) move each enclosure component through that path. What none
    of these covers (a completion of a max / min / integer Partial, a call with tuple operands)
    is not enclosed: SHARDED."""
    from tilefoundry.oracle.enclosures.tensor import _flag, _unflag
    from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
    from tilefoundry.semantics.ops.sharding import Local, Reshard
    from tilefoundry.semantics.types import Partial

    name = type(node.op).__name__
    if isinstance(node.op, Reshard | Local):
        (a,), (e,) = args, encs
        if isinstance(a, Sharded) and any(isinstance(t, Partial) for t in a.layout.attrs):
            return _completion(node, a, e, v, new)
        if e is None:
            return None
        parts = {}
        for attr in ("lo", "hi", "nan", "real"):
            comp = getattr(e, attr)
            comp = comp if attr in ("lo", "hi") else _flag(comp, _data(a))
            ctx = EvalCtx(node.op, node, node.checked_type, [], (_rewrap(a, comp),), env)
            r = _data(EVALUATORS[type(node.op)](ctx, (_rewrap(a, comp),)))
            parts[attr] = r if attr in ("lo", "hi") else _unflag(r)
        if isinstance(v, Sharded):
            # into a Partial(sum): coordinate 0 of that mesh axis holds the value, every other
            # one the exact neutral element (mesh.shard), not a moved enclosure
            for i, t in enumerate(v.layout.attrs):
                if isinstance(t, Partial) and t.reduction == "sum":
                    idx = [slice(None)] * v.data.ndim
                    idx[i] = slice(1, None)
                    idx = tuple(idx)
                    for attr in ("lo", "hi"):
                        parts[attr][idx] = v.data[idx]
                    parts["nan"][idx] = False
                    parts["real"][idx] = True
        return Enc(parts["lo"], parts["hi"], parts["nan"], parts["real"], e.cause)
    if name in _SHAPES:
        return None
    r = _per_device_enclosure(node, env, args, encs, v, new)
    if r is not _OWN_PATH:
        return r
    if name not in _MOVES:
        return SHARDED
    # the evaluator's own mesh paths for these movements (a Gather along a split axis, a
    # Reshape into a sharded type, a write into a split destination): the movement rule runs
    # the kernel on each enclosure component through the mesh simulation
    mesh_args = [a for a in args if isinstance(a, Sharded | PerDevice)]
    ext = tuple(mesh_args[0].data.shape[:len(_mesh_of(mesh_args[0]).axis_extents)])
    replicated = not isinstance(v, Sharded | PerDevice)
    vdata = np.broadcast_to(np.asarray(v), (*ext, *np.shape(v))) if replicated else _data(v)
    site = _MeshSite(node.op, node, node.checked_type, env, list(encs),
                     tuple(_data(a) for a in args), vdata, list(new))
    site.likes = tuple(args)
    r = ENCLOSURES[type(node.op)](site)
    if name == "Gather" and isinstance(r, Enc):
        r = _identity_rows_exact(site, r, vdata)
    if replicated and isinstance(r, Enc):
        r = _device_hull(r, len(ext))
    return r


def _identity_rows_exact(site: _MeshSite, r: Enc, vdata: np.ndarray) -> Enc:
    """A Gather along a split axis (a Partial(sum), ``mesh_driver._gather_split``): each device
    writes the sum's identity (``-0``, 0) at the rows it does not own. Those elements are exact
    (no freedom reaches them), so their enclosure is the point of the value there. The movement
    rule cannot tell them apart: it moves the ``nan`` / ``real`` masks as 1 / 0 flags, and the
    identity written over a flag reads as False in both: an empty enclosure, whose Partial(sum)
    completion is empty and rejects every result."""
    from tilefoundry.oracle.enclosures.tensor import _flag, _unflag

    x = np.asarray(site.args[0])
    ones = np.asarray(_flag(np.ones(x.shape, bool), x), order="C")
    own = _unflag(np.asarray(site.impl(ones, *site.args[1:])))  # identity rows read False
    if own.all():
        return r
    from dataclasses import replace

    p = Enc.point(vdata)
    return replace(r, lo=np.where(own, r.lo, p.lo), hi=np.where(own, r.hi, p.hi),
                   nan=np.where(own, r.nan, p.nan), real=np.where(own, r.real, p.real),
                   nan_bits=None if r.nan_bits is None else np.where(own, r.nan_bits, False),
                   cands=None if r.cands is None else np.where(own, r.cands, p.lo[None]))


def _device_hull(e: Enc, mesh_rank: int) -> Enc:
    """The hull over the devices (the leading ``mesh_rank`` axes) of a per-device enclosure:
    the enclosure of a replicated (plain) result, which every device computes."""
    from tilefoundry.oracle.enclosure import hull

    flat = [Enc(*(np.reshape(t, (-1, *t.shape[mesh_rank:]))[d] for t in
                  (e.lo, e.hi, e.nan, e.real)), e.cause,
                None if e.nan_bits is None else
                np.reshape(e.nan_bits, (-1, *e.nan_bits.shape[mesh_rank:]))[d])
            for d in range(int(np.prod(e.lo.shape[:mesh_rank], dtype=np.int64)))]
    out = flat[0]
    for f in flat[1:]:
        out = hull(out, f)
    out.cause = e.cause
    return out


class _OwnPath(Exception):
    """The per-device driver takes a path of its own for this call."""


class _Unenclosed(Exception):
    """A device's enclosure rule does not enclose its local call."""


#: ``_per_device_enclosure``'s answer where the driver takes a path of its own
_OWN_PATH = "own path"


@dataclass(frozen=True)
class _EV:
    """A value of the enclosing driver: the evaluator's value and its enclosure (None:
    exact)."""

    value: Any
    enc: Any


def _local(x: Any, coord: tuple[int, ...]) -> Any:
    return np.array(x.data[coord], order="C") if isinstance(x, Sharded | PerDevice) else x


def _moved(fn, x: _EV) -> _EV:
    """A pure data movement, applied to the value and to each enclosure component."""
    if x.enc is None:
        return _EV(fn(x.value), None)
    e = x.enc
    comps = [fn(_rewrap(x.value, np.asarray(getattr(e, k)))) for k in ("lo", "hi", "nan",
                                                                        "real")]
    return _EV(fn(x.value), Enc(*(np.asarray(_data(c)) for c in comps), e.cause))


class _EnclosureDevices(AllDevices):
    """The enclosing evaluator's collectives implementation of the per-device driver (D491):
    every device in this process, as the reference's (``AllDevices``), each value an ``_EV``
    (value, enclosure); a movement moves the value and each enclosure component alike; a
    device's block is its local value and local enclosure. The steps of the driver's own paths
    (a gather along a split axis, slicing a replicated update, a shape query) stop it
    (``_OwnPath``): the movement rules follow those paths."""

    def is_sharded(self, v: object) -> bool:
        return isinstance(v, _EV) and isinstance(v.value, Sharded)

    def is_varying(self, v: object) -> bool:
        return isinstance(v, _EV) and isinstance(v.value, PerDevice)

    def layout(self, v: _EV):
        return v.value.layout

    def mesh_of(self, v: _EV):
        return v.value.mesh

    def block(self, v: _EV, coord: tuple[int, ...]) -> _EV:
        e = v.enc
        if e is not None:
            e = Enc(*(np.array(t[coord], order="C") for t in (e.lo, e.hi, e.nan, e.real)),
                    e.cause)
        return _EV(_local(v.value, coord), e)

    def assemble(self, t: object, mesh, results: list, varying: bool) -> list:
        return results  # the caller stacks the devices' enclosures

    def all_gather(self, v: _EV, axes: list[int]) -> _EV:
        return _moved(lambda s: gather_positions(s, axes), v)

    def align(self, v: _EV, out) -> _EV:
        return _moved(lambda s: Sharded(out, align(s, out)), v)

    def to_global(self, v: _EV):
        raise _OwnPath

    def shape_stand_in(self, v: Any, coord: tuple[int, ...]) -> Any:
        raise _OwnPath

    def slices_per_device(self, ctx: Any, why: str) -> None:
        raise _OwnPath

    def gather_index(self, ctx, idx, mesh, i, n_glob, blk, axis):
        raise _OwnPath

    def gather_mask(self, ctx, results, idx, mesh, i, n_glob, blk, axis):
        raise _OwnPath


def _per_device_enclosure(node, env, args, encs, v, new) -> Any:
    """The enclosure of a call on mesh values as the per-device driver runs it
    (``mesh_driver.run_on_mesh`` with ``_EnclosureDevices``, D491): its movements (the
    all-gather of a reduced split axis, the alignment of elementwise operands to the result's
    layout) applied to every enclosure component, then the op's plain rule on each device's
    local operands, local enclosures and local result, stacked over the mesh (a plain result:
    the devices' hull). ``_OWN_PATH`` where the driver takes a path of its own (a gather along a
    split axis, a write that slices a replicated update, a reshape to the local extents): the
    movement rules follow that path (``_mesh_enclosure``)."""
    from tilefoundry.oracle.enclosure import as_enc
    from tilefoundry.semantics.evaluator.mesh_driver import run_on_mesh
    from tilefoundry.semantics.evaluator.registry import EvalCtx

    op = node.op
    if any(isinstance(a, tuple) for a in args):
        return SHARDED
    enclose = ENCLOSURES[type(op)]
    fields = len(v) if isinstance(v, tuple) else 0
    dev = _EnclosureDevices()
    ext = tuple(_mesh_of(next(a for a in args if isinstance(a, Sharded | PerDevice)))
                .axis_extents)
    coords = list(np.ndindex(*ext))  # the order of ``AllDevices.coords``
    per_dev: list = []

    def impl(lctx: EvalCtx, local: tuple) -> Any:  # once per device, in ``coords`` order
        if lctx.op is not op:
            raise _OwnPath  # the driver runs another op on each device (a local Reshape)
        coord = coords[len(per_dev)]
        lv = tuple(_local(f, coord) for f in v) if fields else _local(v, coord)
        la = tuple(x.value for x in local)
        le = [x.enc for x in local]
        r = enclose(_rules.Site(op, node, lctx.out_type, env, le, la, lv, list(new)))
        if isinstance(r, str) or (fields and isinstance(r, tuple) and
                                  any(isinstance(x, str) for x in r)):
            raise _Unenclosed
        per_dev.append((r, lv))
        return r

    pairs = tuple(_EV(a, e) for a, e in zip(args, encs, strict=True))
    try:
        run_on_mesh(EvalCtx(op, node, node.checked_type, [], pairs, env), impl, pairs, dev)
    except _OwnPath:
        return _OWN_PATH
    except _Unenclosed:
        return SHARDED

    def stack(k: int | None, like: Any) -> Any:
        rs = [(r if k is None or not isinstance(r, tuple) else r[k], lv if k is None else lv[k])
              for r, lv in per_dev]
        if all(r is None for r, _ in rs):
            return None
        es = [as_enc(r, np.asarray(lv)) for r, lv in rs]
        cause = next(r.cause for r, _ in rs if r is not None)
        st = Enc(*(np.stack([getattr(e, t) for e in es]).reshape((*ext, *es[0].shape))
                   for t in ("lo", "hi", "nan", "real")), cause)
        if any(e.nan_bits is not None for e in es):  # a Bitcast's computed NaNs (D266)
            st.nan_bits = np.stack([nan_bits_of(e) for e in es]).reshape(st.shape)
        return st if isinstance(like, Sharded | PerDevice) else _device_hull(st, len(ext))

    if fields:
        return tuple(stack(k, f) for k, f in enumerate(v))
    return stack(None, v)


def _completion(node, a: Sharded, e: Enc | None, v: Any, new: list) -> Any:
    """A Reshard completing Partial(sum) into Broadcast on the same axes and layout: every
    order of the devices' partials (the admitted set: the hull of every tree for at most
    ``ENUMERATE_MAX`` devices, the bound beyond), at the partials' lower and upper ends,
    replicated on the completed axes. Other completions are not enclosed (SHARDED)."""
    from tilefoundry.oracle.enclosure import as_enc, as_f64, with_nan
    from tilefoundry.oracle.enclosures.tensor import _enumerated_trees, _tree_bounds
    from tilefoundry.semantics.dtypes import dtype_of
    from tilefoundry.semantics.evaluator.core import same_sharding
    from tilefoundry.semantics.types import Broadcast, Partial, ShardLayout

    src = a.layout
    pax = sorted(src.partials)
    if set(src.partials.values()) != {"sum"} or not dtype_of(a.data).is_float:
        return SHARDED
    # complete in place (Partial -> Broadcast, same layout), then move to the destination
    mid = ShardLayout(src.mesh, tuple(Broadcast() if i in pax else t
                                      for i, t in enumerate(src.attrs)), src.layout)
    if isinstance(v, Sharded) and any(isinstance(t, Partial) for t in v.layout.attrs):
        return SHARDED
    x = as_enc(e, a.data)
    order = [i for i in range(a.data.ndim) if i not in pax] + pax

    def fibers(t):
        y = np.transpose(t, order)
        return y.reshape(*y.shape[:a.data.ndim - len(pax)], -1)

    lo = np.where(fibers(x.real), fibers(as_f64(x.lo)), np.nan)
    hi = np.where(fibers(x.real), fibers(as_f64(x.hi)), np.nan)
    n = lo.shape[-1]
    policy = next((c.policy for c in new if c.policy), None) or "unordered_tree"
    dt = dtype_of(a.data)
    r = _tree_bounds(lo, hi, n - 1, dt, None, 0.0, "Reshard(Partial(sum) completion)")
    r = _enumerated_trees(r, lo, hi, dt, False, policy == "unordered_tree")
    r = with_nan(r, fibers(x.nan | ~x.real).any(-1))
    # back to the data layout: the completed axes (size 1 in the fibers) replicated
    kept = [a.data.shape[i] for i in range(a.data.ndim) if i not in pax]

    def back(t):
        t = t.reshape(*kept, *([1] * len(pax)))
        inv = np.argsort(order)
        return np.ascontiguousarray(np.broadcast_to(np.transpose(t, inv), a.data.shape))

    done = Enc(back(r.lo), back(r.hi), back(r.nan), back(r.real), r.cause)
    if isinstance(v, Sharded) and same_sharding(mid, v.layout):
        return done
    # the rest is data movement (gather / scatter / all-to-all): the Reshard kernel moves each
    # part of the enclosure from the completed layout
    from tilefoundry.oracle.enclosures.tensor import _flag, _unflag
    from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx

    parts = {}
    for attr in ("lo", "hi", "nan", "real"):
        comp = getattr(done, attr)
        comp = comp if attr in ("lo", "hi") else _flag(comp, a.data)
        arg = Sharded(mid, np.asarray(comp, order="C"))
        ctx = EvalCtx(node.op, node, node.checked_type, [], (arg,), {})
        moved = _data(EVALUATORS[type(node.op)](ctx, (arg,)))
        parts[attr] = moved if attr in ("lo", "hi") else _unflag(moved)
    return Enc(parts["lo"], parts["hi"], parts["nan"], parts["real"], r.cause)


_SHAPES = ("ShapeOf", "Rank", "ShapeExtract", "ShapeCompose", "Zeros")
_MOVES = ("Reshape", "Transpose", "Slice", "Concat", "Stack", "Gather", "InsertSlice",
          "CacheUpdate")


def _mesh_of(v: Any):
    return v.layout.mesh if isinstance(v, Sharded) else v.mesh


def _gather_enc(v: Any, e: Any) -> Any:
    """An output's enclosure as the compared (gathered) value's."""
    from tilefoundry.oracle.enclosures.tensor import _flag, _unflag
    from tilefoundry.semantics.evaluator.mesh import unshard
    from tilefoundry.semantics.types import Partial

    if not isinstance(e, Enc) or not isinstance(v, Sharded | PerDevice):
        return e
    if isinstance(v, PerDevice) or any(isinstance(t, Partial) for t in v.layout.attrs):
        return SHARDED
    comps = [unshard(Sharded(v.layout, np.asarray(c, order="C"))) for c in
             (e.lo, e.hi, _flag(e.nan, v.data), _flag(e.real, v.data))]
    nb = None if e.nan_bits is None else \
        _unflag(unshard(Sharded(v.layout, np.asarray(_flag(e.nan_bits, v.data), order="C"))))
    return Enc(comps[0], comps[1], _unflag(comps[2]), _unflag(comps[3]), e.cause, nb)


class RelaxedEvaluator(EnclosingEvaluator):
    """The enclosing evaluation under a declared relaxation set (``admit``, an
    ``oracle.relax.Admit``): at every op where a relaxation applies, the operands and the
    result enclosure are widened by it (``relax.relax_operands`` / ``relax_result``). Beside
    each value it records whether a widening reached it (``touched``): an output no widening
    reached keeps its strict judgement."""

    admit: Any = None

    def __init__(self, session: Session):
        super().__init__(session)
        self._inter: dict[int, bool] = {}
        self._touched: dict[int, Any] = {}
        self.loops = False

    def call_function(self, fn, args):
        from tilefoundry.oracle.relax import intermediates

        self._inter.update(intermediates(fn))
        return super().call_function(fn, args)

    def touched(self, v: Any) -> Any:
        """Where a widening reached ``v``: False, True (everywhere) or a bool array."""
        hit = self._touched.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        if isinstance(v, tuple):
            return True if any(self.touched(f) is not False for f in v) else False
        return False

    def _mark(self, v: Any, mask: Any = True) -> None:
        if mask is False or (isinstance(mask, np.ndarray) and not mask.any()):
            return
        if isinstance(mask, np.ndarray) and mask.shape != np.shape(_data(v)):
            mask = True
        old = self.touched(v)
        if old is not False and mask is not True:
            mask = True if old is True else (old | mask)
        self._touched[id(v)] = (v, mask)
        if isinstance(v, tuple):
            for f in v:
                self._mark(f, True)

    def _reach(self, args: tuple, v: Any) -> Any:
        """The elements of ``v`` the operands' widened elements reach: elementwise through
        broadcasting, everywhere otherwise (a reduction, a movement, a contraction)."""
        out: Any = False
        shape = np.shape(_data(v)) if not isinstance(v, tuple) else None
        for a in args:
            t = self.touched(a)
            if t is False:
                continue
            if t is True or shape is None:
                return True
            try:
                m = np.broadcast_to(t, shape)
            except ValueError:
                return True
            out = m if out is False else (out | m)
        return out

    def after_node(self, node, values, v):
        from tilefoundry.semantics.ir import GridRegionExpr, TupleGetItem

        if isinstance(node, GridRegionExpr):
            self.loops = True
        if isinstance(node, TupleGetItem):
            if self.touched(v) is False and \
                    self.touched(values[id(node.tuple_value)]) is not False:
                self._mark(v, True)
        elif isinstance(node, Call) and isinstance(node.op, Function):
            if any(self.touched(values[id(a)]) is not False for a in node.args):
                self._mark(v, True)
        return v  # a Tuple's fields carry their own marks; an op Call is marked in eval_call

    def eval_call(self, node, values, env):
        from tilefoundry.oracle.relax import relax_operands, relax_result

        active = self.admit.at(node.op)
        if not active:
            v = super().eval_call(node, values, env)
            self._mark(v, self._reach(tuple(values[id(a)] for a in node.args), v))
            return v
        n0 = len(self.contracts)
        v = Evaluator.eval_call(self, node, values, env)
        new = [c for _, c in self.contracts[n0:]]
        args = tuple(values[id(a)] for a in node.args)
        encs = [e.for_operand() if isinstance(e, Enc) else e for e in map(self.enc_of, args)]
        upstream = self._reach(args, v)
        if any(isinstance(e, str) for e in encs):
            self._set(v, SHARDED)
            return v
        if any(isinstance(a, Sharded | PerDevice) for a in args) or \
                isinstance(v, Sharded | PerDevice) or any(c.per_device for c in new):
            if new or any(e is not None for e in encs):  # mesh values stay strict
                self._set(v, _mesh_enclosure(node, env, args, encs, v, new))
            self._mark(v, True if upstream is not False else False)
            return v
        widened = relax_operands(encs, args, active, node.op)
        site = _rules.Site(node.op, node, node.checked_type, env, widened, args, v, new)
        e0 = with_candidates(site, ENCLOSURES[type(node.op)](site)) if new or any(
            x is not None for x in widened) or type(node.op) in RULES_ON_EXACT else None
        strict = e0
        if e0 is not None and all(x is None for x in encs) and any(
                x is not None for x in widened):
            base = ENCLOSURES[type(node.op)](_rules.Site(
                node.op, node, node.checked_type, env, encs, args, v, new)) \
                if new or type(node.op) in RULES_ON_EXACT else None
            strict = base
            e0 = _only_where_widened(e0, base, v, widened, args)
        e = relax_result(site, e0, active, intermediate=self._inter.get(id(node), False),
                         operand_values=lambda n: (values[id(n)], self.enc_of(values[id(n)])))
        self._set(v, e)
        self._mark(v, upstream)
        if any(a is not b for a, b in zip(encs, widened, strict=True)) or e is not strict:
            self._mark(v, _changed(e, strict, v))
        if isinstance(getattr(e, "applied", None), np.ndarray):
            self._mark(v, e.__dict__.pop("applied"))
        return v


def _changed(e: Any, strict: Any, v: Any) -> Any:
    """Per element, where the relaxed enclosure ``e`` differs from the strict one (True for a
    tuple value or one whose shapes do not line up)."""
    from tilefoundry.oracle.enclosure import as_f64

    if isinstance(v, tuple) or not isinstance(v, np.ndarray):
        return True
    if e is strict:
        return False
    a = e if isinstance(e, Enc) else Enc.point(v)
    b = strict if isinstance(strict, Enc) else Enc.point(v)
    if a.shape != v.shape or b.shape != v.shape:
        return True
    if a.cands is None and b.cands is not None:
        return True  # a finite set became an interval: every element may admit more
    with np.errstate(all="ignore"):
        alo, ahi, blo, bhi = as_f64(a.lo), as_f64(a.hi), as_f64(b.lo), as_f64(b.hi)
        d = (a.nan != b.nan) | (a.real != b.real) | (
            a.real & ((alo != blo) | (ahi != bhi) | (np.signbit(alo) != np.signbit(blo)) |
                      (np.signbit(ahi) != np.signbit(bhi))))
    return d


def _unsharded_shape(o: Any) -> tuple:
    from tilefoundry.semantics.evaluator.mesh import unshard

    try:
        return np.shape(unshard(o))
    except Exception:
        return np.shape(o.data)


def _only_where_widened(e: Any, base: Any, v: Any, widened: list, args: tuple) -> Any:
    """An op on exact operands that a relaxation widened: its rule's enclosure where some
    operand element was widened, the strict one (``base``; None: the exact value) elsewhere
    (a rule evaluated on point boxes reads a NaN from overflow as a box crossing the
    domain). Elementwise results only."""
    from tilefoundry.oracle.enclosure import as_f64

    if not isinstance(e, Enc) or not isinstance(v, np.ndarray):
        return e
    moved = np.zeros(v.shape, bool)
    for w, a in zip(widened, args, strict=True):
        if not isinstance(w, Enc):
            continue
        with np.errstate(all="ignore"):
            a64 = as_f64(np.asarray(a))
            m = w.real & ((as_f64(w.lo) != a64) | (as_f64(w.hi) != a64) |
                          (np.signbit(as_f64(w.lo)) != np.signbit(a64)) |
                          (np.signbit(as_f64(w.hi)) != np.signbit(a64)))
        try:
            moved = moved | np.broadcast_to(m, v.shape)
        except ValueError:  # not elementwise: the rule's enclosure stands
            return e
    if moved.all():
        return e
    p = base if isinstance(base, Enc) else Enc.point(v)
    return Enc(np.where(moved, e.lo, p.lo), np.where(moved, e.hi, p.hi),
               np.where(moved, e.nan, p.nan), np.where(moved, e.real, p.real), e.cause)


def evaluate_relaxed(module: Module, entry: str, inputs: Sequence[np.ndarray], admit: Any
                     ) -> tuple[list[Any], list[np.ndarray]]:
    """Per output: its enclosure under ``admit`` and, per element, whether a relaxation's
    widening reached it (loop carries are the yielded values themselves, so their marks
    carry through iterations)."""
    from tilefoundry.oracle.compare import as_outputs

    cls = type("Relaxed", (RelaxedEvaluator,), {"admit": admit})
    value, ev = run(module, entry, inputs, cls)
    outs = as_outputs(value)
    encs = [_gather_enc(o, ev.enc_of(o)) for o in outs]
    reached = []
    for o in outs:
        shape = np.shape(_data(o)) if not isinstance(o, Sharded) else None
        t = ev.touched(o)
        if isinstance(t, np.ndarray) and shape is not None and t.shape == shape and \
                not isinstance(o, PerDevice):
            reached.append(t)
        else:
            gshape = _unsharded_shape(o) if isinstance(o, Sharded) else np.shape(_data(o))
            reached.append(np.full(gshape, t is not False))
    return encs, reached


def evaluate_enclosed(module: Module, entry: str, inputs: Sequence[np.ndarray]
                      ) -> tuple[Evaluation, list[Any]]:
    """``evaluate(..., report=True)`` plus, per output (as ``compare`` lists them), its
    enclosure: None (exact), an ``Enc``, or ``SHARDED``."""
    from tilefoundry.oracle.compare import as_outputs

    value, ev = run(module, entry, inputs, EnclosingEvaluator)
    outs = as_outputs(value)  # the leaves, a nested tuple flattened
    encs = [_gather_enc(o, ev.enc_of(o)) for o in outs]
    return Evaluation(value, tuple(ev.contracts), encs, ev.entry_fn), encs


__all__ = ["SHARDED", "Enc", "EnclosingEvaluator", "RelaxedEvaluator", "evaluate_enclosed",
           "evaluate_relaxed"]

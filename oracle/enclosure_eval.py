"""The enclosing evaluation: the reference evaluator, with every value's enclosure computed
beside it (``oracle/enclosure.py``). Values no contract's freedom reaches carry none (exact)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.oracle import enclosure_rules as _rules
from tilefoundry.oracle.enclosure import ENCLOSURES, Enc
from tilefoundry.semantics.evaluator.core import Evaluation, _Evaluator, run
from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded
from tilefoundry.semantics.ir import Call, Function, Module
from tilefoundry.semantics.typeinfer.core import Session

#: the enclosure of a mesh value downstream of freedom: not enclosed (unjudged)
SHARDED = "sharded"


class EnclosingEvaluator(_Evaluator):
    def __init__(self, session: Session):
        super().__init__(session)
        self._encs: dict[int, tuple[Any, Any]] = {}  # id(value) -> (value, enclosure)

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

    def eval_node(self, node, values, env):
        if not isinstance(node, Call) or isinstance(node.op, Function):
            return super().eval_node(node, values, env)
        n0 = len(self.contracts)
        v = super().eval_node(node, values, env)
        new = [c for _, c in self.contracts[n0:]]
        args = tuple(values[id(a)] for a in node.args)
        encs = [self.enc_of(a) for a in args]
        if not new and all(e is None for e in encs):
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
        self._set(v, rule(site))
        return v


# ---------------------------------------------------------------------------------------------
# mesh values: the enclosure of a Sharded / PerDevice value is an Enc over its per-device data
# ---------------------------------------------------------------------------------------------
#: ops whose rule only evaluates the kernel at corners of elementwise boxes (and moves flags)
_ELEMENTWISE = ("Unary", "Cast", "ReLU", "Sigmoid", "Tanh", "Silu", "Gelu")


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
    """The enclosure of a Call on mesh values: elementwise ops whose operands all have the
    result's per-device data shape run their rule on the data through the mesh simulation, a
    Reshard or Local without a Partial completion moves the enclosure; anything else (a
    completion of enclosed partials, a per-device reduction or matmul, mixed layouts) is not
    enclosed: SHARDED."""
    from tilefoundry.oracle.enclosure_rules import _flag, _unflag
    from tilefoundry.semantics.evaluator.core import _same_sharding
    from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
    from tilefoundry.semantics.ops.sharding import Local, Reshard
    from tilefoundry.semantics.types import Broadcast, Partial

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
        return Enc(parts["lo"], parts["hi"], parts["nan"], parts["real"], e.cause)
    if any(c.kind != "ulp" for c in new):
        return SHARDED
    if name in _SHAPES:
        return None
    if isinstance(node.op, Reshard):
        return SHARDED
    mesh_args = [a for a in args if isinstance(a, Sharded | PerDevice)]
    if not mesh_args:
        return SHARDED
    ref = mesh_args[0]
    ext = tuple(ref.data.shape[:len(_mesh_of(ref).axis_extents)])
    replicated = not isinstance(v, Sharded | PerDevice)  # a plain result: equal on every device
    vdata = np.broadcast_to(np.asarray(v), (*ext, *np.shape(v))) if replicated else _data(v)
    elementwise = name in _ELEMENTWISE or name in _ROWS or (
        name == "Binary" and node.op.kind.value in _BINARY)
    if name in _ROWS and name == "SoftMax" and node.op.axis % max(np.ndim(v) if replicated
                                                                  else len(v.shape), 1) != \
            max(np.ndim(v) if replicated else len(v.shape), 1) - 1:
        return SHARDED  # a rule over data rows needs the op's axis to be the last one
    if elementwise:
        # every mesh operand holds the result's per-device shape in the same layout; plain
        # operands are exact (broadcast per device like the evaluator does)
        if not all(a.data.shape == vdata.shape and (not isinstance(a, Sharded) or replicated or
                                                     not isinstance(v, Sharded) or
                                                     _same_sharding(a.layout, v.layout))
                   for a in mesh_args):
            return SHARDED
        if name in _ROWS and not all(
                isinstance(a, Sharded) and all(isinstance(t, Broadcast) for t in a.layout.attrs)
                and a.data.ndim == len(a.layout.mesh.axis_extents) + len(a.shape)
                for a in mesh_args):
            # the rule reads rows off the per-device data: only where every device holds the
            # whole value with one data axis per tensor axis (no split, no refined positions)
            return SHARDED
        local = vdata.shape[len(ext):]
        unsplit = all(isinstance(t, Broadcast) for a in mesh_args if isinstance(a, Sharded)
                      for t in a.layout.attrs) and not any(isinstance(a, PerDevice)
                                                           for a in mesh_args)
        for a, e in zip(args, encs, strict=True):
            if isinstance(a, Sharded | PerDevice):
                continue
            # a plain operand: exact, and seen whole by every device (all layouts Broadcast),
            # broadcasting against the local shape as against the data (mesh axes lead)
            if e is not None or (np.ndim(a) and not (
                    unsplit and np.broadcast_shapes(np.shape(a), local) == local)):
                return SHARDED
    elif name not in _MOVES:
        return SHARDED
    op = node.op
    if name == "SoftMax":  # its (last) axis, counted from the end: the same on the data
        op = type(op)(-1)
    site = _MeshSite(op, node, node.checked_type, env, list(encs),
                     tuple(_data(a) for a in args), vdata, list(new))
    site.likes = tuple(args)
    r = ENCLOSURES[type(node.op)](site)
    if replicated and isinstance(r, Enc):  # the first device's (all devices agree)
        first = (0,) * len(ext)
        r = Enc(r.lo[first], r.hi[first], r.nan[first], r.real[first], r.cause)
    return r


def _completion(node, a: Sharded, e: Enc | None, v: Any, new: list) -> Any:
    """A Reshard completing Partial(sum) into Broadcast on the same axes and layout: every
    order of the devices' partials (the admitted set: the hull of every tree for at most
    ``ENUMERATE_MAX`` devices, the bound beyond), at the partials' lower and upper ends,
    replicated on the completed axes. Other completions are not enclosed (SHARDED)."""
    from tilefoundry.oracle.enclosure import as_enc, with_nan
    from tilefoundry.oracle.enclosure_rules import _enumerated_trees, _f64, _tree_bounds
    from tilefoundry.semantics.dtypes import dtype_of
    from tilefoundry.semantics.evaluator.core import _same_sharding
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

    lo = np.where(fibers(x.real), fibers(_f64(x.lo)), np.nan)
    hi = np.where(fibers(x.real), fibers(_f64(x.hi)), np.nan)
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
    if isinstance(v, Sharded) and _same_sharding(mid, v.layout):
        return done
    # the rest is data movement (gather / scatter / all-to-all): the Reshard kernel moves each
    # part of the enclosure from the completed layout
    from tilefoundry.oracle.enclosure_rules import _flag, _unflag
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


_ROWS = ("SoftMax", "RMSNorm", "LayerNorm")
_BINARY = ("add", "sub", "mul", "div", "min", "max", "and", "or", "xor")
_SHAPES = ("ShapeOf", "Rank", "ShapeExtract", "ShapeCompose", "Zeros")
_MOVES = ("Reshape", "Transpose", "Slice", "Concat", "Stack", "Gather", "InsertSlice",
          "CacheUpdate")


def _mesh_of(v: Any):
    return v.layout.mesh if isinstance(v, Sharded) else v.mesh


def _gather_enc(v: Any, e: Any) -> Any:
    """An output's enclosure as the compared (gathered) value's."""
    from tilefoundry.oracle.enclosure_rules import _flag, _unflag
    from tilefoundry.semantics.evaluator.mesh import unshard
    from tilefoundry.semantics.types import Partial

    if not isinstance(e, Enc) or not isinstance(v, Sharded | PerDevice):
        return e
    if isinstance(v, PerDevice) or any(isinstance(t, Partial) for t in v.layout.attrs):
        return SHARDED
    comps = [unshard(Sharded(v.layout, np.asarray(c, order="C"))) for c in
             (e.lo, e.hi, _flag(e.nan, v.data), _flag(e.real, v.data))]
    return Enc(comps[0], comps[1], _unflag(comps[2]), _unflag(comps[3]), e.cause)


def evaluate_enclosed(module: Module, entry: str, inputs: Sequence[np.ndarray]
                      ) -> tuple[Evaluation, list[Any]]:
    """``evaluate(..., report=True)`` plus, per output (as ``compare`` lists them), its
    enclosure: None (exact), an ``Enc``, or ``SHARDED``."""
    value, ev = run(module, entry, inputs, EnclosingEvaluator)
    outs = list(value) if isinstance(value, tuple | list) else [value]
    encs = [_gather_enc(o, ev.enc_of(o)) for o in outs]
    return Evaluation(value, tuple(ev.contracts), encs, ev.entry_fn), encs


__all__ = ["SHARDED", "Enc", "EnclosingEvaluator", "evaluate_enclosed"]

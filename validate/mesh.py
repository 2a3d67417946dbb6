"""Translation validation of sharded programs: the HIR passes and the per-device lowering
``lower_mesh`` (D534).

**Sharded values as terms.** A ``SymSharded`` is a value with a ShardLayout whose per-device
data (mesh extents + local extents, as ``Sharded.data``) are terms. The source side is the
reference's mesh simulation: the shared per-device driver (``mesh_driver.run_on_mesh``, the
code the evaluator runs) with ``SymDevices`` as its ``MeshDevices`` and each device's local op
the HIR encoding (``hir_smt.call_op`` on a ``LocalCall``: the local op and result type the
driver gives). The target side is the ``MeshProgram``: each ``DeviceLaunch``'s kernel-IR
program run symbolically once per device (``symexec``), each ``Collective`` the host's
simulation (``mesh_collectives.run_collective``) on terms, and ``MeshLoop``s unrolled by the
host's own ``run_steps``.

**Data movement by index maps.** Every collective or driver step that only moves values
(all-gather, all-to-all, slice, align, the logical value of a Split / Broadcast value, Reshard's
redistribution) is the simulation's own numpy function run on an array of *positions* (int64,
offset by ``hir_smt._BASE``), as ``hir_smt`` encodes data movement: the positions it returns say
which term each device's element is. Position 0 is the neutral element a ``slice`` to
Partial(sum) writes on the devices that do not hold the value (``-0`` for floats).

**Completing Partials** (``all_reduce``, ``to_global``) is the reference's reduction over the
mesh axes (``mesh.complete``: ``reductions.reduce`` with ``keepdim`` under ``unordered_tree``),
encoded by ``hir_smt``'s Reduce: a float sum over at most ``choices.UNORDERED_MAX`` devices is a
choice among every tree, named by its leaves, so the same completion on both sides is the same
choice and a target that sums in another set is invalid.

**Replicas.** A Broadcast value's replicas are read from device 0 where a step reads one value
(the simulation checks they are bit-identical at run time); a plain result whose devices'
terms differ is "unsupported" (the reference would check it at run time). Inputs: one variable
per element of each device's piece, shared along Broadcast mesh axes (replicas of an input are
equal), so Partial and Split inputs range over every per-device value (``Sharded.from_devices``).

Unsupported, named: a use of a ``Local`` value other than its shape and rank (D540), writes of
a replicated update into a split destination (data-dependent ownership), a program whose output
is not a tensor.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import z3

from tilefoundry.semantics.evaluator.mesh import Sharded, neutral_sum, shard, unshard
from tilefoundry.semantics.evaluator.mesh_driver import MeshDevices, run_on_mesh
from tilefoundry.semantics.evaluator.registry import EvalCtx, EvaluationError
from tilefoundry.semantics.evaluator.sharding import align, gather_positions
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops import Reduce
from tilefoundry.semantics.ops.sharding import Local, Reshard
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.semantics.types import (
    Broadcast,
    ShardLayout,
    Split,
    TensorType,
    TupleType,
)
from tilefoundry.validate import encode as E
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.hir_smt import _BASE  # position offset of the index maps (D478)

__all__ = ["SymDevices", "SymSharded", "SymVarying", "mesh_hook", "run_mesh_program",
           "sharded_inputs", "to_global"]

Val = tuple[np.ndarray, str]


@dataclass(frozen=True, eq=False)
class SymSharded:
    """A ShardLayout-typed value whose devices' pieces are terms (``Sharded`` with terms)."""

    layout: ShardLayout
    data: np.ndarray  # object: mesh extents + local extents
    dt: str

    @property
    def mesh(self):
        return self.layout.mesh

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.layout.layout.axis_extents)


@dataclass(frozen=True, eq=False)
class SymVarying:
    """A plain-typed value that differs by device (a split Gather's local indices): terms,
    mesh axes first."""

    mesh: Any
    data: np.ndarray
    dt: str


# ---------------------------------------------------------------------------------------------
# a Gather along a split axis: each device's rows (D534)
# ---------------------------------------------------------------------------------------------
def _index_bounds(idx: np.ndarray, idt: str, lo: int, hi: int) -> np.ndarray:
    """``lo <= idx < hi`` per element, in the index dtype's signedness."""
    from tilefoundry.compiler import kir

    w = E.width(idt)
    signed = np.issubdtype(kir.numpy_dtype(idt), np.signedinteger)
    ge = (lambda a, b: a >= b) if signed else z3.UGE
    lt = (lambda a, b: a < b) if signed else z3.ULT
    out = np.empty(idx.shape, object)
    for p in np.ndindex(*idx.shape):
        t = idx[p]
        out[p] = z3.And(ge(t, z3.BitVecVal(lo, w)), lt(t, z3.BitVecVal(hi, w)))
    return out


def local_indices(idx: np.ndarray, idt: str, coord_i: int, blk: int) -> np.ndarray:
    """``GATHER_SPLIT``'s local indices on the device at coordinate ``coord_i`` of the split
    mesh axis: ``idx - lo`` where the device owns the row (``[lo, lo + blk)``), else 0."""
    w = E.width(idt)
    own = _index_bounds(idx, idt, coord_i * blk, (coord_i + 1) * blk)
    out = np.empty(idx.shape, object)
    for p in np.ndindex(*idx.shape):
        out[p] = z3.If(own[p], idx[p] - z3.BitVecVal(coord_i * blk, w), z3.BitVecVal(0, w))
    return out


def masked_rows(r: np.ndarray, dt: str, idx: np.ndarray, idt: str, coord_i: int, blk: int,
                n_glob: int, axis: int, abstr: set[str]) -> np.ndarray:
    """``GATHER_SPLIT``'s mask: a device's gathered rows, the sum's neutral element where it
    does not own the row; an index outside ``[0, n_glob)`` is the reference's evaluation
    error, an unconstrained element (``hir_dynamic.GATHER_OOB``)."""
    from tilefoundry.validate.choices import unspecified
    from tilefoundry.validate.hir_dynamic import GATHER_OOB

    own = _index_bounds(idx, idt, coord_i * blk, (coord_i + 1) * blk)
    ok = _index_bounds(idx, idt, 0, n_glob)
    shape = (1,) * axis + idx.shape + (1,) * (r.ndim - axis - idx.ndim)
    own_b = np.broadcast_to(own.reshape(shape), r.shape)
    ok_b = np.broadcast_to(ok.reshape(shape), r.shape)
    neutral = E.const(neutral_sum(DType(dt)), dt)
    out = np.empty(r.shape, object)
    for p in np.ndindex(*r.shape):
        v = unspecified(("split_gather_oob", dt, r[p], ok_b[p]), r[p].sort(), abstr)
        out[p] = z3.If(ok_b[p], z3.If(own_b[p], r[p], neutral), v)
    abstr.add(GATHER_OOB)
    return out


# ---------------------------------------------------------------------------------------------
# index maps
# ---------------------------------------------------------------------------------------------
def _positions(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(_BASE, _BASE + math.prod(shape), dtype=np.int64).reshape(shape)


def _pick(terms: np.ndarray, pos: np.ndarray, dt: str) -> np.ndarray:
    """The terms at ``pos`` (positions from ``_positions`` of ``terms``' shape); position 0 is
    the sum's neutral element of ``dt``."""
    pos = np.asarray(pos, np.int64)
    flat = terms.reshape(-1)
    zero = pos == 0
    if ((~zero) & ((pos < _BASE) | (pos >= _BASE + flat.size))).any():
        raise Unsupported("a mesh step that is not a movement of values")
    # flat index arrays (a 0-d index array would pick the element itself, not a 0-d array)
    out = flat[np.where(zero, 0, pos - _BASE).reshape(-1)].reshape(pos.shape) if flat.size \
        else np.empty(pos.shape, object)
    if zero.any():
        out = np.array(out)
        fill = np.empty(int(zero.sum()), object)
        fill[:] = [E.const(neutral_sum(DType(dt)), dt)] * fill.size
        out[zero] = fill
    return out


def _sharded_positions(v: SymSharded) -> Sharded:
    return Sharded(v.layout, _positions(v.data.shape))


def _replica(data: np.ndarray, mesh_rank: int, what: str) -> np.ndarray:
    """Device 0's copy of a value every device holds; the copies must be the same terms (the
    simulation checks them bit for bit at run time)."""
    flat = data.reshape((-1, math.prod(data.shape[mesh_rank:])))
    for d in range(1, flat.shape[0]):
        if not all(z3.eq(a, b) for a, b in zip(flat[0], flat[d], strict=True)):
            raise Unsupported(f"{what}: the devices' replicas are not the same terms (the "
                              f"run-time replica check is not modelled)")
    return flat[0].reshape(data.shape[mesh_rank:])


def _device0(data: np.ndarray, mesh_rank: int) -> np.ndarray:
    """Device 0's copy of a replicated slot: what the host's ``replica`` returns once its
    run-time check that every copy is bit-identical passes (a counterexample's replay runs the
    check: a target whose copies differ raises there, a wrong error)."""
    return data.reshape((-1, *data.shape[mesh_rank:]))[0:1].reshape(data.shape[mesh_rank:])


def _complete(v: SymSharded, abstr: set[str], axes: tuple[int, ...] | None = None
              ) -> np.ndarray:
    """``mesh.complete``: the Partial mesh axes (``axes`` of them, default all) reduced, kept
    as size-1 mesh dims: the reference's reduction under ``unordered_tree``."""
    from tilefoundry.validate.hir_smt import HIR_OPS

    parts = {i: r for i, r in v.layout.partials.items() if axes is None or i in axes}
    data = v.data
    if not parts:
        return data
    enc = HIR_OPS[Reduce]

    def red(x: np.ndarray, kind: str, ax: tuple[int, ...]) -> np.ndarray:
        op = SimpleNamespace(kind=ReduceKind(kind), axes=ax, keepdim=True,
                             policy="unordered_tree")
        return enc(op, [(x, v.dt)], abstr)[0]

    reds = set(parts.values())
    if len(reds) > 1:  # one axis at a time, in mesh-axis order
        for i in sorted(parts):
            data = red(data, parts[i], (i,))
        return data
    (r,) = reds
    return red(data, r, tuple(sorted(parts)))


def to_global(v: SymSharded | Val, abstr: set[str]) -> Val:
    """The logical value (``mesh.unshard``): Partials completed, Broadcast replicas read from
    device 0, Splits gathered by the reference's own index map."""
    if not isinstance(v, SymSharded):
        return v
    lay = v.layout
    nm = len(lay.mesh.axis_extents)
    data = _complete(v, abstr)
    for i, a in enumerate(lay.attrs):  # one device's copy along the axes that are not Split
        if not isinstance(a, Split):
            data = np.take(data, [0], axis=i)
    attrs = tuple(a if isinstance(a, Split) else Broadcast() for a in lay.attrs)
    plain = ShardLayout(lay.mesh, attrs, lay.layout)
    pos = np.broadcast_to(_positions(data.shape), (*lay.mesh.axis_extents, *data.shape[nm:]))
    return _pick(data, unshard(Sharded(plain, np.ascontiguousarray(pos))), v.dt), v.dt


def shard_sym(x: Val, layout: ShardLayout) -> SymSharded:
    """``mesh.shard`` of a logical value (a Partial(sum) keeps it on coordinate 0, the neutral
    element elsewhere)."""
    terms, dt = x
    return SymSharded(layout, _pick(terms, shard(_positions(terms.shape), layout).data, dt), dt)


def gather_sym(v: SymSharded, axes: list[int]) -> SymSharded:
    g = gather_positions(_sharded_positions(v), axes)
    return SymSharded(g.layout, _pick(v.data, g.data, v.dt), v.dt)


def align_sym(v: SymSharded | Val, out: ShardLayout) -> SymSharded:
    if isinstance(v, SymSharded):
        return SymSharded(out, _pick(v.data, align(_sharded_positions(v), out), v.dt), v.dt)
    terms, dt = v
    return SymSharded(out, _pick(terms, align(_positions(terms.shape), out), dt), dt)


# ---------------------------------------------------------------------------------------------
# the source: the per-device driver on terms
# ---------------------------------------------------------------------------------------------
class SymDevices(MeshDevices):
    """Every device of the mesh, values as terms (the symbolic ``AllDevices``)."""

    def __init__(self, abstr: set[str] | None = None) -> None:
        self.abstr: set[str] = abstr if abstr is not None else set()

    def is_sharded(self, v: object) -> bool:
        return isinstance(v, SymSharded)

    def is_varying(self, v: object) -> bool:
        return isinstance(v, SymVarying)  # a split Gather's local indices (Local is refused)

    def layout(self, v: SymSharded) -> ShardLayout:
        return v.layout

    def mesh_of(self, v: SymSharded):
        return v.mesh

    def coords(self, mesh) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(m) for m in mesh.axis_extents)))

    def block(self, v: SymSharded | SymVarying, coord: tuple[int, ...]) -> Val:
        return np.array(v.data[coord]), v.dt

    def assemble(self, t: object, mesh, results: list, varying: bool) -> object:
        if isinstance(t, TupleType):
            return tuple(self.assemble(ft, mesh, [r[i] for r in results], varying)
                         for i, ft in enumerate(t.fields))
        if not isinstance(t, TensorType):
            raise Unsupported(f"a per-device op with a {type(t).__name__} result on sharded "
                              f"operands")
        ext = tuple(mesh.axis_extents)
        dt = results[0][1]
        data = np.stack([r[0] for r in results]).reshape((*ext, *np.shape(results[0][0])))
        if t.shard is not None:
            return SymSharded(t.shard, data, dt)
        return _replica(data, len(ext), "a replicated result of sharded operands"), dt

    def all_gather(self, v: SymSharded, axes: list[int]) -> SymSharded:
        return gather_sym(v, axes)

    def to_global(self, v: SymSharded) -> np.ndarray:
        raise Unsupported("the logical value of an operand inside a per-device op (Gather "
                          "along a split axis)")

    def align(self, v: Any, out: ShardLayout) -> SymSharded:
        return align_sym(v, out)

    def shape_stand_in(self, v: Any, coord: tuple[int, ...]) -> Any:
        if isinstance(v, SymSharded):
            return np.empty(v.shape, object), v.dt
        return v

    def slices_per_device(self, ctx: EvalCtx, why: str) -> None:
        raise Unsupported(f"{type(ctx.op).__name__}: {why} (data-dependent ownership is not "
                          f"encoded)")

    def gather_index(self, ctx, idx, mesh, i, n_glob, blk, axis):
        terms, idt = idx
        ext = tuple(mesh.axis_extents)
        data = np.empty((*ext, *terms.shape), object)
        for c in self.coords(mesh):
            data[c] = local_indices(terms, idt, c[i], blk)
        return SymVarying(mesh, data, idt)

    def gather_mask(self, ctx, results, idx, mesh, i, n_glob, blk, axis):
        terms, idt = idx
        masked = [(masked_rows(r, dt, terms, idt, c[i], blk, n_glob, axis, self.abstr), dt)
                  for (r, dt), c in zip(results, self.coords(mesh), strict=True)]
        return self.assemble(ctx.out_type, mesh, masked, False)


def _is_mesh(v: Any) -> bool:
    if isinstance(v, SymSharded):
        return True
    return isinstance(v, tuple) and not (len(v) == 2 and isinstance(v[1], str)) and \
        any(_is_mesh(f) for f in v)


def mesh_hook(call: Any, args: list, env: dict, abstr: set[str]) -> Any:
    """``hir_smt.run_hir``'s hook: the value of ``call`` when an operand or its result is
    sharded (a Reshard to a ShardLayout, an op whose plain operands the driver aligns to a
    sharded result), else None (the single-device encoding)."""
    from tilefoundry.validate.hir_smt import CONSTANT_OPS, LocalCall, call_op

    op = call.op
    out_t = call.checked_type if call.has_type else None
    sharded_out = isinstance(out_t, TensorType) and out_t.shard is not None
    if any(isinstance(a, SymVarying) for a in args):
        # a device-varying value (from Local): its shape is every device's (D540); any other
        # use of it stays unsupported, named
        if not isinstance(op, CONSTANT_OPS):
            raise Unsupported(f"{type(op).__name__} of a device-varying value (from Local): "
                              f"only ShapeOf / Rank / Zeros of one are encoded")
        first = [(a.data[(0,) * len(a.mesh.axis_extents)], a.dt) if isinstance(a, SymVarying)
                 else a for a in args]
        return call_op(call, first, env, abstr)
    if not any(_is_mesh(a) for a in args) and not sharded_out:
        return None
    if isinstance(op, Local):  # the reference's eval_local on the devices' pieces (D540)
        (x,) = args
        if x.layout.is_fully_broadcast:  # every device's view is the whole value
            return to_global(x, abstr)
        return SymVarying(x.mesh, x.data, x.dt)
    if isinstance(op, Reshard):
        (x,) = args
        g = to_global(x, abstr)
        return shard_sym(g, out_t.shard) if sharded_out else g

    def impl(ctx: EvalCtx, local: tuple) -> Val:
        return call_op(LocalCall(call, ctx.op, ctx.out_type), list(local), env, abstr)

    ctx = EvalCtx(op, call, out_t, [], tuple(args), env)
    try:
        return run_on_mesh(ctx, impl, tuple(args), SymDevices(abstr))
    except EvaluationError as e:
        raise Unsupported(f"{type(op).__name__} on sharded operands: the mesh simulation "
                          f"raised: {e}") from None


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------
def sharded_inputs(fn: Any, tag: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """Per parameter: the value ``run_hir`` reads (a ``SymSharded`` for a ShardLayout-typed
    one, else terms) and its variables (name -> (bit-vector array over the distinct elements,
    dtype, layout or None)). A sharded parameter has a variable per element of each device's
    piece, one per replica group along Broadcast mesh axes."""
    vals: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    for p in fn.params:
        t = p.checked_type if p.has_type else p.type
        dt = t.dtype.value
        lay = t.shard if isinstance(t, TensorType) else None
        if lay is None:
            shape = tuple(int(n) for n in t.shape)
        else:
            shape = tuple(1 if isinstance(a, Broadcast) else m for a, m in
                          zip(lay.attrs, lay.mesh.axis_extents, strict=True)) + \
                tuple(lay.local_axis_extents())
        bits = np.empty(shape, object)
        for idx in np.ndindex(*shape):
            bits[idx] = E.input_var(f"{tag}{p.name}[{','.join(map(str, idx))}]", dt)
        raw[p.name] = (bits, dt, lay)
        from tilefoundry.validate.symexec import _vmap

        terms = _vmap(lambda x, d=dt: E.from_input_bits(x, d), bits) if bits.size else bits
        if lay is None:
            vals[p.name] = terms
        else:
            full = (*lay.mesh.axis_extents, *lay.local_axis_extents())
            vals[p.name] = SymSharded(lay, np.array(np.broadcast_to(terms, full)), dt)
    return vals, raw


def concrete_inputs(model: z3.ModelRef, raw: dict[str, Any], names: list[str]) -> list:
    """The model's inputs: a plain array, or ``Sharded.from_devices`` for a sharded parameter
    (replicas along Broadcast mesh axes equal)."""
    from tilefoundry.compiler import kir

    out = []
    for n in names:
        bits, dt, lay = raw[n]
        npdt = kir.numpy_dtype(dt)
        v = np.array([model.eval(b, model_completion=True).as_long() for b in bits.reshape(-1)],
                     dtype=np.uint64).astype(np.dtype(f"u{npdt.itemsize}")).view(npdt)
        v = v.reshape(bits.shape)
        if lay is not None:
            full = (*lay.mesh.axis_extents, *lay.local_axis_extents())
            v = Sharded.from_devices(lay, np.broadcast_to(v, full))
        out.append(v)
    return out


# ---------------------------------------------------------------------------------------------
# the target: the mesh program on terms
# ---------------------------------------------------------------------------------------------
def run_mesh_program(mp: Any, inputs: dict[str, Any], abstr: set[str],
                     programs: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Every slot's per-device terms after running ``mp`` (``inputs``: the entry parameters'
    values as ``sharded_inputs`` gives them, in ``mp.inputs`` order of the params);
    ``programs`` replaces launches' kernel-IR programs by name (the fused ones)."""
    from tilefoundry.compiler.lower_mesh import run_steps
    from tilefoundry.validate.symexec import _SymInterp, _vmap

    sm = mp.slot_map()
    ext = tuple(mp.mesh.axis_extents)
    nm = len(ext)
    coords = list(itertools.product(*(range(m) for m in ext)))
    values: dict[str, np.ndarray] = {}
    for name, v in zip(mp.inputs, inputs.values(), strict=True):
        if isinstance(v, SymSharded):
            values[name] = v.data
        else:
            values[name] = np.array(np.broadcast_to(v, (*ext, *np.shape(v))))

    def terms(a: np.ndarray, dt: str) -> np.ndarray:
        a = np.asarray(a)
        if a.dtype == object:
            return a
        return _vmap(lambda c: E.const(c, dt), a.astype(object)) if a.size else \
            np.empty(a.shape, object)

    def launch(st: Any, vals: dict[str, np.ndarray]) -> None:
        prog = (programs or {}).get(st.name, st.program)
        bm = prog.buffer_map()
        per: list[list[np.ndarray]] = [[] for _ in st.outputs]
        for coord in coords:
            ins = {b: terms(vals[n][coord], bm[b].dtype)
                   for b, n in zip(prog.inputs, st.inputs, strict=True)}
            it = _SymInterp(prog, ins, abstr)
            store = it.sym_storage()
            it.steps(prog.steps, store)
            outs = prog.output_names()
            if len(outs) > len(st.outputs):  # the launch's run-time check kernels' probe
                from tilefoundry.validate.refine import PROBES_NOT_COMPARED  # buffers follow

                abstr.add(PROBES_NOT_COMPARED)  # its results (lower.RunChecks.probed)
            for j, o in enumerate(outs[:len(st.outputs)]):
                per[j].append(it.read(store, o))
        for j, n in enumerate(st.outputs):
            vals[n] = np.stack(per[j]).reshape((*ext, *sm[n].shape))

    def collective(c: Any, vals: dict[str, np.ndarray]) -> np.ndarray:
        src, dst = sm[c.srcs[0]], sm[c.dst]
        dt = src.dtype.value
        data = terms(vals[c.srcs[0]], dt)
        full = (*ext, *dst.shape)
        if c.kind == "all_reduce":
            return np.array(np.broadcast_to(
                _complete(SymSharded(src.layout, data, dt), abstr, tuple(c.axes)), full))
        if c.kind == "all_gather":
            return gather_sym(SymSharded(src.layout, data, dt), list(c.axes)).data
        if c.kind == "all_to_all":
            from tilefoundry.compiler.mesh_collectives import all_to_all

            return _pick(data, all_to_all(src, dst, _positions(data.shape), c.axes[0]), dt)
        if c.kind == "slice":
            g = to_global(SymSharded(src.layout, data, dt), abstr) if src.layout is not None \
                else (_device0(data, nm), dt)
            return shard_sym(g, dst.layout).data
        if c.kind == "replicate":
            return np.array(np.broadcast_to(_device0(data, nm), full))
        if c.kind == "align":
            (out_attrs,) = c.attrs
            out = ShardLayout(dst.layout.mesh, out_attrs, dst.layout.layout)
            v = SymSharded(src.layout, data, dt) if src.layout is not None else \
                (_device0(data, nm), dt)
            return align_sym(v, out).data
        if c.kind in ("gather_index", "gather_mask"):
            (n_glob, blk, axis) = c.attrs
            (i,) = c.axes
            isrc = sm[c.srcs[-1]]
            iv = _device0(terms(vals[c.srcs[-1]], isrc.dtype.value), nm)
            out = np.empty(full, object)
            for coord in coords:
                out[coord] = local_indices(iv, isrc.dtype.value, coord[i], blk) \
                    if c.kind == "gather_index" else \
                    masked_rows(data[coord], dt, iv, isrc.dtype.value, coord[i], blk, n_glob,
                                axis, abstr)
            return out
        raise Unsupported(f"the collective {c.kind} is not encoded")

    run_steps(mp.steps, values, sm, ext, launch, collective)
    return values

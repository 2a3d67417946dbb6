"""``TorchBackend``: run HIR with PyTorch, op by op — an honest third-party stack under test.

The backend interprets the HIR DAG (Functions and calls, dispatch prototypes, GridRegionExpr
loops, tuples) and maps every op to **the torch call a user would write** for it; the conformance
runner then judges what torch returns. Nothing is corrected behind torch's back: where torch
differs from the contract, the runner reports it (docs/findings.md, F6 onwards).

Mapping (``_OPS`` below; ``device="cpu"`` by default, ``"cuda"`` when asked and available):

* Binary: ``torch.add / sub / mul / div / minimum / maximum``, ``torch.eq`` ... ``torch.ge``,
  ``torch.logical_and / or / xor``. Unary: ``torch.neg / abs / logical_not / rsqrt / exp / log /
  ceil / round / exp2 / log2 / relu / square / sqrt``.
* Cast: ``x.to(dtype)``. torch has no overflow flag, so ``overflow="saturate"`` is done the way a
  torch user does it: clamp to ±max finite of the destination in f32 (in the integer domain for
  integer sources), then ``.to``. torch has no rounding mode for ``float8_e8m0fnu`` either:
  ``"up"`` / ``"down"`` compute the power of two with ``torch.frexp`` (exact) and then ``.to``.
* fp8 / e8m0 arithmetic: torch's CPU kernels do not implement arithmetic on
  ``float8_e4m3fn / float8_e5m2 / float8_e8m0fnu`` ("add_stub not implemented"), so — as a user
  must — operands are widened with ``.float()``, the op runs in f32 and the result is converted
  back with ``.to(dtype)``. bf16 / f16 / f32 / integer ops run natively.
* Tensor ops: ``reshape``, ``permute``, slicing, ``torch.cat``, ``torch.stack``, ``x.shape``,
  ``x.dim()``, ``torch.index_select`` (advanced indexing for ``batch_dims > 0``), slice
  assignment on a clone (InsertSlice, CacheUpdate), ``torch.topk``, ``torch.zeros``.
* Reduce: ``torch.sum`` (integers with ``dtype=x.dtype``: HIR Reduce keeps the dtype) /
  ``torch.mean`` / ``torch.amax`` / ``torch.amin`` / ``x.abs().amax()``. The fold policies (and
  ``ordered_tree``, which a left fold realizes) are an explicit Python loop over the reduced
  elements in source order, accumulating low-precision floats in f32 and rounding once — what a
  user writes when the order matters; ``unordered_tree`` is plain ``torch.sum``.
* nn: ``torch.matmul`` (``allow_reassociation=False``: an explicit K-order loop of f32
  multiply-adds), ``F.conv2d``, ``F.relu``, ``torch.sigmoid``, ``torch.tanh``, ``F.softmax``,
  ``F.layer_norm``, ``F.gelu(approximate=...)``, ``F.silu``, ``F.rms_norm``, and RoPE exactly as
  Hugging Face writes it (``q * cos + rotate_half(q) * sin`` with ``cos = cos_cache[pos_ids]``, in
  the tensor's dtype).
* Shape ops on int64 tensors. ``torch.topk`` has no CPU kernel for bool: bool is ranked as
  uint8 (exact).
* No mesh: ``Capabilities.mesh`` is False, so every program with a ShardLayout is NOT_SUPPORTED,
  and ``Local`` is not claimed. A ``Reshard`` between unsharded types (a storage move) is the
  identity on values and runs as ``x.clone()``.

Run-time checks (``tilefoundry.errors.RUN_TIME_CHECKS``): torch's own failures on bad indices
(``IndexError`` from ``index_select``, a silently short or empty slice assignment) are not the
protocol, so the adapter checks each condition itself, vectorized with torch, right before the
torch call that would see it, and raises ``RunTimeCheckError`` naming the check: Gather indices
and RoPE ``pos_ids`` in ``[0, extent)`` (``index_range``), CacheUpdate's ``cur_pos >= 0``,
``1 <= s <= new.len``, ``cur_pos + s <= cache.len`` (``cache_bounds``), InsertSlice's window
inside ``dst`` (``slice_window``), an entry extent outside a DimVar's envelope or a dispatch
prototype called outside its envelope (``dispatch_envelope``). No torch exception is caught.

Arrays cross between numpy and torch as **bits** (``uint8/16/32`` views), so NaN payloads,
signed zeros and every fp8 / e8m0 code arrive unchanged in both directions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilefoundry.conformance.backend import (
    ALL_FEATURES,
    ALL_OVERFLOW,
    ALL_POLICIES,
    ALL_ROUNDING,
    Capabilities,
)
from tilefoundry.errors import InvalidArgumentError, RunTimeCheckError
from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, dtype_of, to_bits
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Expr,
    Function,
    GridRegionExpr,
    Module,
    Tuple,
    TupleGetItem,
    Var,
    loop_scope,
    run_dag,
)
from tilefoundry.semantics.ops import ALL_OPS
from tilefoundry.semantics.run_time_checks import cache_bounds_problem, slice_window_problem
from tilefoundry.semantics.types import DimVar, TensorType, TupleType, evaluate_dim, simplify

__all__ = ["TorchBackend", "from_torch", "to_torch"]

#: ops the adapter implements: everything but Local (a Reshard is run only where neither its
#: operand nor its target carries a ShardLayout — a storage move, the identity on values; with a
#: ShardLayout the program needs the mesh, which the capabilities do not claim)
#: the ``tile`` family's extensions of the HIR catalog have no torch adapter: NOT_SUPPORTED
SUPPORTED_OPS = frozenset(op.__name__ for op in ALL_OPS if op.FAMILY != "tile") - {"Local"}
#: dtypes the adapter takes (f4e2m1 is type-level only; torch has no usable CPU kernels for it)
SUPPORTED_DTYPES = frozenset(d for d in DType if d not in (DType.F4E2M1, DType.U32))
#: formats without torch CPU arithmetic: widened to f32, computed, converted back
_WIDENED = frozenset({DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0})


# ---------------------------------------------------------------------------------------------
# numpy <-> torch by bits
# ---------------------------------------------------------------------------------------------
def _torch():
    import torch

    return torch


def torch_dtype(dt: DType):
    torch = _torch()
    return {
        DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16,
        DType.FP8E4M3: torch.float8_e4m3fn, DType.FP8E5M2: torch.float8_e5m2,
        DType.F8E8M0: torch.float8_e8m0fnu, DType.I8: torch.int8, DType.U8: torch.uint8,
        DType.I32: torch.int32, DType.I64: torch.int64, DType.BOOL: torch.bool,
    }[dt]


def _uint(bits: int):
    torch = _torch()
    return {8: torch.uint8, 16: torch.uint16, 32: torch.uint32}[bits]


def _ir_dtype(t) -> DType:
    for d in SUPPORTED_DTYPES:
        if torch_dtype(d) == t:
            return d
    raise InvalidArgumentError(f"torch dtype {t} has no IR dtype")


def to_torch(x: np.ndarray, device: str = "cpu"):
    """A numpy array of an IR storage dtype as a torch tensor with the same bits."""
    torch = _torch()
    x = np.asarray(x)
    dt = dtype_of(x)
    if dt.is_float:
        bits = np.array(to_bits(x), copy=True, order="C")
        t = torch.from_numpy(bits.reshape(-1)).view(_uint(FORMATS[dt].bits)).view(
            torch_dtype(dt)).reshape(x.shape)
    else:
        t = torch.from_numpy(np.array(x, copy=True, order="C"))
    return t.to(device)


def from_torch(t) -> np.ndarray:
    """A torch tensor as a C-contiguous numpy array of the IR storage dtype, bit for bit."""
    dt = _ir_dtype(t.dtype)
    t = t.detach().to("cpu").contiguous()
    if dt.is_float:
        raw = t.reshape(-1).view(_uint(FORMATS[dt].bits)).numpy()
        arr = raw.view(bits_dtype(dt)).view(FORMATS[dt].storage).reshape(tuple(t.shape))
        return np.array(arr, copy=True, order="C")
    return np.array(t.numpy(), copy=True, order="C")


# ---------------------------------------------------------------------------------------------
# the backend
# ---------------------------------------------------------------------------------------------
@dataclass
class _Compiled:
    module: Module
    entry: Function
    session: Any


def cuda_available_fork_safe() -> bool:
    """``torch.cuda.is_available()`` asked through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK=1``),
    which does not initialise the CUDA runtime: the runner loads the backend in its own process
    and then forks its workers, and a CUDA runtime initialised before a fork is unusable in the
    children. CUDA itself is first touched by ``compile`` / ``run`` in a worker (D253)."""
    import os

    torch = _torch()
    old = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        return bool(torch.cuda.is_available())
    finally:
        if old is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = old


def cuda() -> TorchBackend:
    """The factory of the built-in ``torch-cuda``: ``TorchBackend("cuda")``."""
    return TorchBackend("cuda")


class TorchBackend:
    """PyTorch as a conformance backend (factory ``tilefoundry.conformance.torch_backend:
    TorchBackend``; built-in name ``torch``)."""

    def __init__(self, device: str = "cpu"):
        torch = _torch()
        if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
            raise InvalidArgumentError(f"TorchBackend: device must be 'cpu' or 'cuda[:N]', got "
                                       f"{device!r}")
        if device != "cpu" and not cuda_available_fork_safe():
            raise InvalidArgumentError(f"TorchBackend: device {device!r} asked for, but "
                                       f"torch.cuda.is_available() is False")
        self.device = device
        self.name = "torch" if device == "cpu" else f"torch-{device}"
        self.version = torch.__version__

    def capabilities(self) -> Capabilities:
        return Capabilities(ops=SUPPORTED_OPS, dtypes=SUPPORTED_DTYPES, policies=ALL_POLICIES,
                            overflow_modes=ALL_OVERFLOW, mesh=False,
                            rounding_modes=ALL_ROUNDING, features=ALL_FEATURES)

    def compile(self, module: Module, entry: str) -> _Compiled:
        from tilefoundry.semantics.typeinfer.core import Session
        from tilefoundry.semantics.typeinfer.functions import infer_module

        session = Session()
        m = infer_module(module, session)
        return _Compiled(m, m[entry], session)

    def run(self, compiled: _Compiled, inputs: list[np.ndarray]) -> Any:
        torch = _torch()
        _check_envelopes(compiled.entry, [tuple(np.shape(x)) for x in inputs])
        args = [to_torch(x, self.device) for x in inputs]
        with torch.no_grad():
            out = _Interpreter(compiled.session, self.device).call(compiled.entry, args)
        return _to_numpy(out)


def _check_envelopes(fn: Function, shapes: list[tuple]) -> None:
    """``dispatch_envelope`` at the entry: each input extent bound to a DimVar is in its
    envelope (the reference's check of its inputs)."""
    for p, shape in zip(fn.params, shapes, strict=False):
        t = p.checked_type if p.has_type else p.type
        if not isinstance(t, TensorType) or len(shape) != len(t.shape):
            continue
        for a, (n, d) in enumerate(zip(shape, t.shape, strict=True)):
            if isinstance(d, DimVar) and not d.lo <= n < d.hi:
                raise RunTimeCheckError(f"@{fn.name} parameter {p.name}: axis {a} has extent "
                                        f"{n}, outside the envelope of {d.name} "
                                        f"[{d.lo}, {d.hi})", "dispatch_envelope")


def _dispatch_value(fn: Function, shapes: list[tuple]) -> None:
    """``dispatch_envelope`` at a dispatch prototype: the dispatch DimVar's value (bound by an
    argument's extent) inside the prototype's envelope, checked before ``select_variant``."""
    dim = fn.variants[0].specializations[0].dim_var
    for p, shape in zip(fn.params, shapes, strict=False):
        t = p.checked_type if p.has_type else p.type
        if not isinstance(t, TensorType) or len(shape) != len(t.shape):
            continue
        for n, d in zip(shape, t.shape, strict=True):
            if isinstance(d, DimVar) and d.name == dim and not d.lo <= n < d.hi:
                raise RunTimeCheckError(f"Call @{fn.name}: {dim} = {n} is outside the dispatch "
                                        f"envelope [{d.lo}, {d.hi}); it matches no variant",
                                        "dispatch_envelope")


def _check_range(op: str, what: str, idx, n: int, axis: int | None = None) -> None:
    """``index_range``: every entry of the integer tensor ``idx`` in ``[0, n)``."""
    torch = _torch()
    ii = idx.long()
    bad = (ii < 0) | (ii >= n)
    if not bool(bad.any()):
        return
    pos = [int(j) for j in torch.nonzero(bad)[0]] if ii.dim() else []
    v = int(ii[tuple(pos)]) if pos else int(ii)
    if op == "RoPE":
        raise RunTimeCheckError(f"RoPE: {what}[{pos[0] if pos else 0}] = {v} is outside the "
                                f"cache positions [0, {n}) ({int(bad.sum())} of {ii.numel()} "
                                f"positions out of range)", "index_range")
    raise RunTimeCheckError(f"{op}: index {v} at {what}{pos} is outside [0, {n}) on axis "
                            f"{axis}", "index_range")


def _in_range(ctx: _Ctx, op: str, what: str, idx, n: int, axis: int | None = None):
    """``idx.long()``, checked for ``index_range`` (``_check_range``). With ``ctx.checks`` a
    list (a traced graph, where a raise that depends on values cannot be traced) the check is
    deferred: ``(op, what, index, n, axis, any_bad)`` is appended for the caller to check after
    the graph ran, and out-of-range entries read entry 0 instead, so the graph never indexes
    outside the operand (the run raises anyway, so those values are never returned)."""
    ii = idx.long()
    if ctx.checks is None:
        _check_range(op, what, idx, n, axis)
        return ii
    bad = (ii < 0) | (ii >= n)
    ctx.checks.append((op, what, ii, n, axis, bad.any()))
    return _torch().where(bad, _torch().zeros_like(ii), ii)


def _to_numpy(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return tuple(_to_numpy(f) for f in v)
    return from_torch(v)


# ---------------------------------------------------------------------------------------------
# the interpreter
# ---------------------------------------------------------------------------------------------
class _Interpreter:
    """``checks``: None runs the ``index_range`` checks in place (eager); a list defers them
    (``_in_range``), for a caller that traces the interpreter into one graph."""

    def __init__(self, session: Any, device: str, checks: list | None = None):
        self.session = session
        self.device = device
        self.checks = checks

    def call(self, fn: Function, args: list) -> Any:
        from tilefoundry.semantics.typeinfer.functions import dim_env, select_variant

        shapes = [_shape(a) for a in args]
        if fn.body is None:
            if fn.variants:
                _dispatch_value(fn, shapes)
            fn = select_variant(fn, shapes)
        env = dim_env(fn.params, shapes)
        values: dict[int, Any] = {id(p): a for p, a in zip(fn.params, args, strict=True)}
        return self.eval(fn.body, values, env)

    def eval(self, root: Expr, values: dict[int, Any], env: Mapping[str, int]) -> Any:
        return run_dag(root, values, lambda node: self.node(node, values, env))

    def node(self, node: Expr, values: dict[int, Any], env: Mapping[str, int]) -> Any:
        if isinstance(node, Var):
            raise InvalidArgumentError(f"free variable {node.name}")
        if isinstance(node, Constant):
            return to_torch(node.value, self.device)
        if isinstance(node, Tuple):
            return tuple(values[id(f)] for f in node.fields)
        if isinstance(node, TupleGetItem):
            return values[id(node.tuple_value)][node.index]
        if isinstance(node, GridRegionExpr):
            return self.loop(node, values, env)
        if isinstance(node, Call):
            args = [values[id(a)] for a in node.args]
            if isinstance(node.op, Function):
                from tilefoundry.semantics.typeinfer.functions import resolved_target

                return self.call(resolved_target(node, self.session), args)
            impl = _OPS.get(type(node.op).__name__)
            if impl is None:
                raise InvalidArgumentError(f"TorchBackend: {type(node.op).__name__} is not "
                                           f"implemented")
            return impl(_Ctx(node, self.device, self.checks), *args)
        raise InvalidArgumentError(f"TorchBackend: cannot run a {type(node).__name__}")

    def loop(self, node: GridRegionExpr, values: dict[int, Any], env: Mapping[str, int]):
        torch = _torch()
        from tilefoundry.semantics.typeinfer.functions import resolve_grid_domain

        dom = resolve_grid_domain(node, dict(env))
        carried = [values[id(a)] for a in node.init_args]
        it_t = node.induction_var.checked_type if node.induction_var.has_type else None
        it_dt = torch_dtype(it_t.dtype) if isinstance(it_t, TensorType) else torch.int32
        for i in dom:
            bind = {id(node.induction_var): torch.tensor(i, dtype=it_dt, device=self.device)}
            bind.update((id(v), c) for v, c in zip(node.carried_args, carried, strict=True))
            with loop_scope(values, bind) as it:
                carried = [self.eval(y, it, env) for y in node.yield_values]
        return carried[0] if len(carried) == 1 else tuple(carried)


def _shape(v: Any) -> tuple:
    return tuple(v.shape) if hasattr(v, "shape") else ()


@dataclass
class _Ctx:
    call: Call
    device: str
    checks: list | None = None  # deferred index_range checks (_in_range)

    @property
    def op(self):
        return self.call.op

    @property
    def out_type(self):
        return self.call.checked_type

    def env(self, args: tuple) -> dict[str, int]:
        """DimVar bindings read off the operands' checked types and actual shapes."""
        env: dict[str, int] = {}
        for a, v in zip(self.call.args, args, strict=False):
            if not getattr(a, "has_type", False) or not hasattr(v, "shape"):
                continue
            t = a.checked_type
            if isinstance(t, TensorType) and len(t.shape) == v.dim():
                for d, n in zip(t.shape, v.shape, strict=True):
                    if isinstance(d, DimVar):
                        env.setdefault(d.name, int(n))
        return env

    def dim(self, d, args: tuple, axis: int | None = None) -> int | None:
        d = simplify(d)
        if isinstance(d, int):
            return d
        try:
            return evaluate_dim(d, self.env(args))
        except Exception:
            pass
        t = self.out_type
        if isinstance(t, TupleType) and t.fields:
            t = t.fields[0]
        if axis is not None and isinstance(t, TensorType) and axis < len(t.shape):
            o = simplify(t.shape[axis])
            if isinstance(o, int):
                return o
        return None


# ---------------------------------------------------------------------------------------------
# op implementations
# ---------------------------------------------------------------------------------------------
def _dt(t) -> DType:
    return _ir_dtype(t.dtype)


def _widened(fn, *xs):
    """Run ``fn`` natively, or — for fp8 / e8m0, which torch CPU has no arithmetic for — on
    ``.float()`` operands, converting the f32 result back with ``.to(dtype)``."""
    dt = _dt(xs[0])
    if dt in _WIDENED:
        return fn(*(x.float() for x in xs)).to(xs[0].dtype)
    return fn(*xs)


def _binary(ctx: _Ctx, a, b):
    torch = _torch()
    k = ctx.op.kind.value
    logical = {"and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor}
    if k in logical:
        return logical[k](a, b)
    compare = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
               "ge": torch.ge}
    if k in compare:
        if _dt(a) in _WIDENED:
            a, b = a.float(), b.float()
        return compare[k](a, b)
    fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "min": torch.minimum, "max": torch.maximum}[k]
    return _widened(fn, a, b)


def _unary(ctx: _Ctx, x):
    torch = _torch()
    fn = {"neg": torch.neg, "abs": torch.abs, "logical_not": torch.logical_not,
          "rsqrt": torch.rsqrt, "exp": torch.exp, "log": torch.log, "ceil": torch.ceil,
          "round": torch.round, "exp2": torch.exp2, "log2": torch.log2, "relu": torch.relu,
          "square": torch.square, "sqrt": torch.sqrt}[ctx.op.kind.value]
    if _dt(x) is DType.BOOL:
        return fn(x)
    return _widened(fn, x)


def _max_finite(dt: DType) -> float:
    return float(FORMATS[dt].max_finite)


def _cast(ctx: _Ctx, x):
    torch = _torch()
    op = ctx.op
    dst = op.dtype
    tdst = torch_dtype(dst)
    src = _dt(x)
    if dst is DType.F8E8M0 and op.rounding != "nearest":
        # torch has no rounding mode: the power of two by frexp (x = m * 2^e, 0.5 <= |m| < 1),
        # in f32 (exact for every float source) or f64 for integers (exact below 2^53)
        v = x.double() if src.is_int or src is DType.BOOL else x.float()
        m, e = torch.frexp(v)
        if op.rounding == "up":
            e = torch.where(m.abs() == 0.5, e - 1, e)
        else:
            e = e - 1
        p = torch.ldexp(torch.ones_like(v), e).copysign(v)
        v = torch.where(torch.isfinite(v) & (v != 0), p, v)
        if op.overflow == "saturate":
            big = _max_finite(dst)
            v = v.clamp(-big, big)
        return v.float().to(tdst)
    if op.overflow == "saturate" and dst.is_float:
        big = _max_finite(dst)
        if src.is_int:
            info = np.iinfo(FORMATS[src].storage)
            if big < info.max:
                x = x.clamp(-int(big), int(big)) if info.min < 0 else x.clamp(max=int(big))
            return x.to(tdst)
        return x.float().clamp(-big, big).to(tdst)
    return x.to(tdst)


def _zeros(ctx: _Ctx):
    torch = _torch()
    op = ctx.op
    shape = [ctx.dim(d, (), a) for a, d in enumerate(op.shape)]
    return torch.zeros(shape, dtype=torch_dtype(op.dtype), device=ctx.device)


def _reshape(ctx: _Ctx, x):
    dims = [ctx.dim(d, (x,), a) for a, d in enumerate(ctx.op.new_shape)]
    return x.reshape([-1 if d is None else d for d in dims])


def _transpose(ctx: _Ctx, x):
    return x.permute(tuple(ctx.op.perm)).contiguous()


def _slice(ctx: _Ctx, x):
    op = ctx.op
    steps = op.strides if op.strides is not None else (1,) * x.dim()
    idx = tuple(slice(ctx.dim(b, (x,)), ctx.dim(e, (x,)), s)
                for b, e, s in zip(op.begin, op.end, steps, strict=True))
    return x[idx].contiguous()


def _concat(ctx: _Ctx, *xs):
    return _torch().cat(xs, dim=ctx.op.axis)


def _stack(ctx: _Ctx, *xs):
    return _torch().stack(xs, dim=ctx.op.axis)


def _shape_of(ctx: _Ctx, x):
    torch = _torch()
    return torch.tensor(list(x.shape), dtype=torch.int64, device=ctx.device).reshape(x.dim())


def _rank(ctx: _Ctx, x):
    torch = _torch()
    return torch.tensor(x.dim(), dtype=torch.int64, device=ctx.device)


def _gather(ctx: _Ctx, x, idx):
    torch = _torch()
    op = ctx.op
    axis = op.axis % x.dim()
    bd = op.batch_dims
    if op.fill is not None:  # D388: out-of-range indices read the fill
        return _gather_filled(ctx, x, idx, axis)
    ii = _in_range(ctx, "Gather", "indices", idx, x.shape[axis], axis)
    if bd == 0:
        out = torch.index_select(x, axis, ii.reshape(-1))
        return out.reshape(tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]))
    rank = axis + idx.dim() - bd
    lead = []
    for j in range(axis):
        shp = [1] * rank
        shp[j] = x.shape[j]
        lead.append(torch.arange(x.shape[j], device=x.device).reshape(shp))
    g = ii.reshape(tuple(idx.shape[:bd]) + (1,) * (axis - bd) + tuple(idx.shape[bd:]))
    return x[(*lead, g)]


def _gather_filled(ctx: _Ctx, x, idx, axis: int):
    """Gather with a fill: the in-range gather of clamped indices (of a stand-in row when the
    axis is empty), the fill where the index was outside [0, n)."""
    import dataclasses

    torch = _torch()
    op = ctx.op
    n = x.shape[axis]
    ii = idx.long()
    bad = (ii < 0) | (ii >= n)
    if n == 0:
        x = torch.zeros((*x.shape[:axis], 1, *x.shape[axis + 1:]), dtype=x.dtype,
                        device=x.device)
    safe = ii.clamp(0, max(n - 1, 0))
    plain = Call(dataclasses.replace(op, fill=None), ctx.call.args)
    got = _gather(dataclasses.replace(ctx, call=plain), x, safe)
    bd = op.batch_dims
    m = bad.reshape(tuple(bad.shape[:bd]) + (1,) * (axis - bd) + tuple(bad.shape[bd:]))
    m = m.reshape(tuple(m.shape) + (1,) * (got.dim() - m.dim()))
    fill = torch.full((), op.fill, dtype=got.dtype, device=got.device)
    return torch.where(m, fill, got)


def _fold(x, axes: tuple[int, ...], keepdim: bool, right: bool, mean: bool):
    """A sequential left / right fold of ``+`` over the reduced axes (lexicographic source
    order), in f32 for low-precision floats, rounded once at the end."""
    torch = _torch()
    dt = _dt(x)
    keep = [a for a in range(x.dim()) if a not in axes]
    y = x.permute(*keep, *axes)
    out_shape = tuple(x.shape[a] for a in keep)
    n = 1
    for a in axes:
        n *= x.shape[a]
    y = y.reshape(*out_shape, n)
    if dt.is_float and dt is not DType.F32:
        y = y.float()
    if n == 0:
        acc = torch.zeros(out_shape, dtype=y.dtype, device=y.device)
    elif right:
        acc = y[..., n - 1]
        for i in range(n - 2, -1, -1):
            acc = y[..., i] + acc
    else:
        acc = y[..., 0]
        for i in range(1, n):
            acc = acc + y[..., i]
    if mean:
        acc = acc / n
    acc = acc.to(x.dtype)
    if keepdim:
        acc = acc.reshape([1 if a in axes else x.shape[a] for a in range(x.dim())])
    return acc


def _reduce(ctx: _Ctx, x):
    op = ctx.op
    axes = tuple(sorted(a % x.dim() for a in op.axes))
    kind, dt = op.kind.value, _dt(x)
    kd = op.keepdim
    if kind in ("sum", "mean") and op.policy != "unordered_tree" and dt.is_float:
        return _fold(x, axes, kd, op.policy == "fold_right", kind == "mean")
    if dt in _WIDENED:
        return _reduce_on(kind, x.float(), axes, kd).to(x.dtype)
    return _reduce_on(kind, x, axes, kd)


def _reduce_on(kind: str, x, axes: tuple, kd: bool):
    torch = _torch()
    if kind == "sum":
        dt = _dt(x)
        if dt.is_int:
            return torch.sum(x, dim=axes, keepdim=kd, dtype=x.dtype)
        return torch.sum(x, dim=axes, keepdim=kd)
    if kind == "mean":
        return torch.mean(x, dim=axes, keepdim=kd)
    if kind == "max":
        return torch.amax(x, dim=axes, keepdim=kd)
    if kind == "min":
        return torch.amin(x, dim=axes, keepdim=kd)
    return torch.amax(torch.abs(x), dim=axes, keepdim=kd)  # abs_max


def _insert_slice(ctx: _Ctx, dst, upd, *offs):
    for a, (o, u, d) in enumerate(zip(offs, upd.shape, dst.shape, strict=True)):
        msg = slice_window_problem(a, int(o), u, d)
        if msg is not None:
            raise RunTimeCheckError(f"InsertSlice: {msg}", "slice_window")
    out = dst.clone()
    window = tuple(slice(int(o), int(o) + n) for o, n in zip(offs, upd.shape, strict=True))
    out[window] = upd
    return out


def _cache_update(ctx: _Ctx, cache, cur_pos, s, new):
    c, n = int(cur_pos), int(s)
    msg = cache_bounds_problem(c, n, new.shape[1], cache.shape[1])
    if msg is not None:
        raise RunTimeCheckError(f"CacheUpdate: {msg}", "cache_bounds")
    out = cache.clone()
    out[:, c:c + n] = new[:, :n]
    return out


def _topk(ctx: _Ctx, x):
    torch = _torch()
    op = ctx.op
    axis = op.axis % x.dim()
    k = ctx.dim(op.k, (x,), axis)
    # no CPU topk for fp8 / e8m0 ("not implemented") or bool ("does not support bool"): rank
    # an exact widening instead, as a user would
    src = x.float() if _dt(x) in _WIDENED else x.to(torch.uint8) if _dt(x) is DType.BOOL else x
    vals, idx = torch.topk(src, k, dim=axis, largest=op.largest, sorted=op.sorted)
    return vals.to(x.dtype), idx


def _matmul(ctx: _Ctx, a, b):
    torch = _torch()
    dt = _dt(a)
    if ctx.op.allow_reassociation or not dt.is_float:
        return _widened(torch.matmul, a, b)
    # K order: acc = a[.., 0] b[0, ..]; acc += a[.., k] b[k, ..] — f32 multiply-adds in order
    af, bf = a.float(), b.float()
    if af.dim() == 1:
        af = af.unsqueeze(0)
    if bf.dim() == 1:
        bf = bf.unsqueeze(-1)
    kk = af.shape[-1]
    if kk == 0:
        lead = torch.broadcast_shapes(af.shape[:-2], bf.shape[:-2])
        acc = torch.zeros((*lead, af.shape[-2], bf.shape[-1]), device=af.device)
    else:
        acc = af[..., :, 0:1] * bf[..., 0:1, :]
        for k in range(1, kk):
            acc = acc + af[..., :, k:k + 1] * bf[..., k:k + 1, :]
    if a.dim() == 1:
        acc = acc.squeeze(-2)
    if b.dim() == 1:
        acc = acc.squeeze(-1)
    return acc.to(a.dtype)


def _conv2d(ctx: _Ctx, x, w, b):
    import torch.nn.functional as F

    op = ctx.op
    return _widened(lambda x_, w_, b_: F.conv2d(x_, w_, b_, stride=op.stride,
                                                padding=op.padding, dilation=op.dilation,
                                                groups=op.groups), x, w, b)


def _nn_unary(name: str):
    def impl(ctx: _Ctx, x):
        torch = _torch()
        import torch.nn.functional as F

        fn = {"ReLU": F.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Silu": F.silu,
              "Gelu": lambda v: F.gelu(v, approximate=ctx.op.approximate)}[name]
        return _widened(fn, x)

    return impl


def _softmax(ctx: _Ctx, x):
    import torch.nn.functional as F

    return _widened(lambda v: F.softmax(v, dim=ctx.op.axis), x)


def _layer_norm(ctx: _Ctx, x, w, b):
    import torch.nn.functional as F

    return _widened(lambda v, w_, b_: F.layer_norm(v, (v.shape[-1],), w_, b_, ctx.op.eps),
                    x, w, b)


def _rms_norm(ctx: _Ctx, x, w):
    import torch.nn.functional as F

    return _widened(lambda v, w_: F.rms_norm(v, (v.shape[-1],), w_, ctx.op.eps), x, w)


def _rotate_half(x):
    torch = _torch()
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rope(ctx: _Ctx, q, k, cos_cache, sin_cache, pos_ids):
    pos = _in_range(ctx, "RoPE", "pos_ids", pos_ids, cos_cache.shape[0])

    def hf(q_, k_, c_, s_):
        cos, sin = c_[pos], s_[pos]
        return q_ * cos + _rotate_half(q_) * sin, k_ * cos + _rotate_half(k_) * sin

    dt = _dt(q)
    if dt in _WIDENED:
        qo, ko = hf(q.float(), k.float(), cos_cache.float(), sin_cache.float())
        return qo.to(q.dtype), ko.to(k.dtype)
    return hf(q, k, cos_cache, sin_cache)


def _reshard(ctx: _Ctx, x):
    t = ctx.call.args[0].checked_type
    if getattr(ctx.op.layout, "mesh", None) is not None or \
            (isinstance(t, TensorType) and t.shard is not None):
        raise InvalidArgumentError("TorchBackend: a Reshard with a ShardLayout needs the mesh, "
                                   "which this backend does not simulate")
    return x.clone()


def _shape_extract(ctx: _Ctx, s):
    return s[ctx.op.index].clone()


def _shape_compose(ctx: _Ctx, *dims):
    torch = _torch()
    if not dims:
        return torch.zeros((0,), dtype=torch.int64, device=ctx.device)
    return torch.stack([d.reshape(()).long() for d in dims])


_OPS = {
    "Binary": _binary, "Unary": _unary, "Cast": _cast, "Zeros": _zeros, "Reshape": _reshape,
    "Transpose": _transpose, "Slice": _slice, "Concat": _concat, "Stack": _stack,
    "ShapeOf": _shape_of, "Rank": _rank, "Gather": _gather, "Reduce": _reduce,
    "InsertSlice": _insert_slice, "CacheUpdate": _cache_update, "TopK": _topk,
    "MatMul": _matmul, "Conv2D": _conv2d, "ReLU": _nn_unary("ReLU"),
    "Sigmoid": _nn_unary("Sigmoid"), "Tanh": _nn_unary("Tanh"), "Silu": _nn_unary("Silu"),
    "Gelu": _nn_unary("Gelu"), "SoftMax": _softmax, "LayerNorm": _layer_norm,
    "RMSNorm": _rms_norm, "RoPE": _rope, "ShapeExtract": _shape_extract,
    "ShapeCompose": _shape_compose, "Reshard": _reshard,
}
assert set(_OPS) == SUPPORTED_OPS, sorted(SUPPORTED_OPS ^ set(_OPS))

"""Evaluator of the ``tile`` family's reductions (SeededReduce, MaskedReduce, CustomReduce):
``semantics/reducers.py`` holds the vectorized numerics (Python loops only over a reduced-axis
length or tree levels). A float sum under a tree policy, and a custom reducer under one, note an
``admitted_set`` contract: the reference value is one member (``merge(seed, pairwise tree)``).
The Top-K merge reducer (``semantics/topk_reducer.py``) is exact in every policy: no note."""

from __future__ import annotations

import numpy as np

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.dtypes import positive_nan
from tilefoundry.semantics.evaluator.registry import EvalCtx, OpContract, register_eval
from tilefoundry.semantics.evaluator.tensor import _out, _tensor
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.reducers import TREES, custom_reduce, seeded_reduce


@register_eval(SeededReduce)
@register_eval(MaskedReduce)
def eval_seeded_reduce(ctx: EvalCtx, args: tuple) -> np.ndarray:
    op: SeededReduce = ctx.op
    x, seed = _tensor(ctx, args[0], 0), _tensor(ctx, args[1], 1)
    mask = _tensor(ctx, args[2], 2) if isinstance(op, MaskedReduce) else None
    try:
        out = seeded_reduce(x, seed, op.kind, tuple(op.axes), mask=mask, policy=op.policy,
                            keepdim=op.keepdim)
    except InvalidArgumentError as e:
        ctx.error(str(e))
    dt = dtype_of(x)
    if dt.is_float and op.kind == "sum" and op.policy in TREES:
        ctx.note(OpContract(
            op=f"{ctx.name}(sum)", kind="admitted_set", dtype=dt, policy=op.policy,
            detail=f"axes {tuple(op.axes)}: every tree over the seed and the active "
                   f"contributions ({'any order' if op.policy == 'unordered_tree' else 'the seed leftmost, source order'}); the reference is merge(seed, pairwise tree)"))
    return _out(positive_nan(out))  # D21: not numpy's propagated payload


@register_eval(CustomReduce)
def eval_custom_reduce(ctx: EvalCtx, args: tuple) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    op: CustomReduce = ctx.op
    from tilefoundry.semantics.topk_reducer import TopKMerge, nan_problem, topk_reduce

    if isinstance(op.reducer, TopKMerge):  # exact in every policy: no admitted set (D488)
        x = _tensor(ctx, args[0], 0)
        seed = args[1]
        if not (isinstance(seed, tuple) and len(seed) == 2):
            ctx.error("operand 1: the Top-K merge's seed is the state pair (values, indices)")
        seed = tuple(_tensor(ctx, a, 1) for a in seed)
        problem = nan_problem(op.reducer, x, seed[0])
        if problem:  # the run-time check topk_nan
            ctx.error(problem)
        try:
            v, i = topk_reduce(x, seed, op.reducer, tuple(op.axes), keepdim=op.keepdim)
        except InvalidArgumentError as e:
            ctx.error(str(e))
        return _out(v), _out(i)
    x, seed = _tensor(ctx, args[0], 0), _tensor(ctx, args[1], 1)
    try:
        out = custom_reduce(x, seed, op.reducer, tuple(op.axes), policy=op.policy,
                            keepdim=op.keepdim)
    except InvalidArgumentError as e:
        ctx.error(str(e))
    if op.policy in TREES:
        ctx.note(OpContract(
            op=f"CustomReduce({op.reducer})", kind="admitted_set", dtype=dtype_of(out),
            policy=op.policy,
            detail=f"axes {tuple(op.axes)}: every f32 merge tree over the seed and the lifted "
                   f"contributions; the reference is merge(seed, pairwise tree)"
                   + _declared_laws(op.reducer)))
    return _out(positive_nan(out))  # D21: not numpy's propagated payload


def _declared_laws(r: object) -> str:
    """A declared reducer's law verdicts with their provenance (D449), for the case's note."""
    if not getattr(r, "declared", False):
        return ""
    from tilefoundry.semantics.reducer_laws import ReducerLawError, laws_summary

    try:
        return f"; declared reducer {r.name} laws: {laws_summary(r)}"
    except ReducerLawError as e:  # the type rule refuses such a program; say why here too
        return f"; declared reducer {r.name} laws: {e}"

"""Declared reduction orders and empty reductions (``Capabilities.reduction_order`` /
``Capabilities.empty_reductions``; docs/backend-authors.md, D312).

A reduction's ``policy`` attribute is its contract (docs/contracts.md, Reductions): ``fold_left``
and ``fold_right`` admit exactly one chain, ``ordered_tree`` any bracketing of the source order,
``unordered_tree`` any bracketing of any permutation. A backend that knows the one order it
computes can declare it, instead of failing every case whose contract needs another:

==================  ===========  ===========  ====================  ======================
declared order      fold_left    fold_right   ordered_tree          unordered_tree
==================  ===========  ===========  ====================  ======================
``None`` (default)  judged       judged       judged                judged
``"fold_left"``     judged       opted out    judged as fold_left   judged as fold_left
``"fold_right"``    opted out    judged       judged as fold_right  judged as fold_right
                                              (Reduce only)
``"pairwise"``      opted out    opted out    judged                judged
``"pairwise:W"``    opted out    opted out    judged                judged
``"any"``           opted out    opted out    opted out             judged
==================  ===========  ===========  ====================  ======================

*Opted out*: the case is **NOT_SUPPORTED**, naming the op, its policy and the declared order.
*Judged as fold_left*: the declared chain is one member of the policy's admitted set (a fold is
a bracketing of the source order, and a source order is one permutation), so the oracle judges
the output against that member alone — exactly, where the policy's set would admit any tree: a
backend that declares ``fold_left`` and sums in another order FAILs. This narrowing is done for
the HIR ``Reduce`` in a function body (the judged program is the same program with those
``Reduce`` policies replaced; the backend compiles the original); elsewhere (the tile family's
seeded / masked / custom reductions and scans, a Reduce inside a loop body) a tree policy is
judged under its own contract. ``"pairwise"`` (any tree over the source order, e.g. blocks of
``W`` folded then combined pairwise) and ``"any"`` (an order the backend does not know: atomics,
a split-K across threads) are not modelled exactly by the oracle, so their admitted cases are
judged under the policy's own set. No declaration ever widens what a case admits.

Only **order-sensitive** reductions are concerned: float ``sum`` / ``mean`` (``Reduce``),
float ``sum`` (``SeededReduce`` / ``MaskedReduce``), every ``CustomReduce`` but the Top-K merge
(exact in every order, D488) and float ``add`` /
``mul`` scans. ``max`` / ``min`` / ``abs_max`` and integer or bool reductions are exact
functions under every policy: no declared order opts them out. With a seed (the tile family),
``fold_right`` puts the seed last, which ``ordered_tree`` (seed leftmost) does not admit, so
``fold_right`` opts those cases out; a scan never admits ``unordered_tree`` or ``fold_right``.

``empty_reductions=False`` opts out every case with a reduction over an axis of extent 0
(``Reduce``, ``SeededReduce``, ``MaskedReduce``, ``CustomReduce``: the identity / the seed is
the result, docs/contracts.md). The default ``True`` keeps today's meaning: claiming an op
claims its empty case too.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

__all__ = ["ORDERS", "check_reduction_claims", "judged_module", "reduction_needs",
           "reduction_reason"]

#: the declarable orders (``"pairwise:W"`` with W a positive int is ``"pairwise"`` with a width)
ORDERS = ("fold_left", "fold_right", "pairwise", "any")
_PAIRWISE_W = re.compile(r"pairwise:([1-9]\d*)")
_FOLDS = ("fold_left", "fold_right")
_SENSITIVE_KINDS = frozenset({"sum", "mean", "add", "mul"})
_REDUCE_LIKE = ("Reduce", "SeededReduce", "MaskedReduce", "CustomReduce")


def _base(order: str) -> str:
    return "pairwise" if _PAIRWISE_W.fullmatch(order) else order


def check_reduction_claims(caps: Any, where: str, error: type) -> dict:
    """``reduction_order`` / ``empty_reductions`` of ``caps`` validated (``error`` naming the
    problem and the valid values), as keyword arguments of ``Capabilities``."""
    order = getattr(caps, "reduction_order", None)
    if order is not None and (not isinstance(order, str) or _base(order) not in ORDERS):
        raise error(f"{where}: reduction_order must be None or one of {', '.join(ORDERS)} "
                    f"(or 'pairwise:W', W a positive int), got {order!r}")
    empty = getattr(caps, "empty_reductions", True)
    if not isinstance(empty, bool):
        raise error(f"{where}: empty_reductions must be a bool, got {empty!r}")
    return {"reduction_order": order, "empty_reductions": empty}


def _kind(op: Any) -> str | None:
    k = getattr(op, "kind", None) or getattr(op, "combine", None)
    return getattr(k, "value", k) if k is not None else None


def _operand_type(node: Any) -> Any:
    from tilefoundry.semantics.types import TensorType

    a = node.args[0] if node.args else None
    t = a.checked_type if a is not None and a.has_type else None
    return t if isinstance(t, TensorType) else None


def reduction_needs(node: Any) -> tuple[set, set]:
    """What a ``Call`` node needs of the reduction claims: ``{(op name, policy, seeded)}`` of
    an order-sensitive reduction and ``{description}`` of an empty one."""
    op = node.op
    name = type(op).__name__
    policy = getattr(op, "policy", None)
    orders: set = set()
    empty: set = set()
    if not isinstance(policy, str):
        return orders, empty
    t = _operand_type(node)
    is_float = t is not None and t.dtype.is_float
    topk = type(getattr(op, "reducer", None)).__name__ == "TopKMerge"  # exact in any order
    if is_float and ((name == "CustomReduce" and not topk) or _kind(op) in _SENSITIVE_KINDS):
        orders.add((name, policy, name != "Reduce"))
    axes = getattr(op, "axes", None)
    if name in _REDUCE_LIKE and t is not None and isinstance(axes, tuple):
        shape = tuple(t.shape)
        hit = [a for a in axes if isinstance(a, int) and -len(shape) <= a < len(shape)
               and shape[a] == 0]
        if hit or (not axes and 0 in shape):
            kind = _kind(op)
            empty.add(f"{name}{'.' + str(kind) if kind else ''} over an axis of extent 0 "
                      f"(axes {list(axes)} of shape {list(shape)})")
    return orders, empty


def _admits(order: str, policy: str, seeded: bool, name: str) -> str:
    """'judged', 'narrowed' (judged as the declared fold) or 'out'."""
    base = _base(order)
    if policy in _FOLDS:
        return "judged" if base == policy else "out"
    if base == "any":
        return "judged" if policy == "unordered_tree" else "out"
    if base == "pairwise":
        return "judged"
    if base == "fold_right" and ((seeded and policy == "ordered_tree") or name == "Scan"):
        return "out"
    return "narrowed"


def reduction_reason(caps: Any, orders: frozenset, empty: frozenset) -> str | None:
    """Why a backend with ``caps`` does not run a program with these reduction needs (None:
    it does)."""
    if empty and not getattr(caps, "empty_reductions", True):
        first = sorted(empty)[0]
        return f"an empty reduction ({first}); the backend declares empty_reductions=False"
    order = getattr(caps, "reduction_order", None)
    if order is None:
        return None
    out = sorted((n, p) for n, p, s in orders if _admits(order, p, s, n) == "out")
    if out:
        n, p = out[0]
        more = f" (+{len(out) - 1} more)" if len(out) > 1 else ""
        return f"{n} with policy={p!r}{more} needs an order the backend does not declare " \
               f"(reduction_order={order!r}; docs/contracts.md, Reductions)"
    return None


def judged_module(caps: Any, module: Any) -> Any:
    """The program the oracle judges: ``module`` itself, or — the backend declares
    ``fold_left`` / ``fold_right`` — with each order-sensitive ``Reduce`` of a tree policy in a
    function body given that fold as its policy (a member of the tree policy's set: never
    wider)."""
    from tilefoundry.semantics.ir import Call, Module, Tuple, TupleGetItem
    from tilefoundry.semantics.ops.tensor import Reduce

    order = getattr(caps, "reduction_order", None)
    if order not in _FOLDS:
        return module
    from tilefoundry.oracle.reduce import nodes
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    typed = infer_module(module, Session())

    def rebuild(root: Any) -> Any:
        memo: dict[int, Any] = {}
        for n in nodes(root):
            if isinstance(n, Call):
                args = tuple(memo.get(id(a), a) for a in n.args)
                op = n.op
                if isinstance(op, Reduce) and op.policy not in _FOLDS and \
                        reduction_needs(n)[0]:
                    op = dataclasses.replace(op, policy=order)
                same = op is n.op and all(a is b for a, b in zip(args, n.args, strict=True))
                memo[id(n)] = n if same else Call(op, args)
            elif isinstance(n, Tuple):
                fs = tuple(memo.get(id(f), f) for f in n.fields)
                memo[id(n)] = n if all(a is b for a, b in zip(fs, n.fields, strict=True)) \
                    else Tuple(fs)
            elif isinstance(n, TupleGetItem):
                t = memo.get(id(n.tuple_value), n.tuple_value)
                memo[id(n)] = n if t is n.tuple_value else TupleGetItem(t, n.index)
        return memo.get(id(root), root)

    fns = []
    changed = False
    for f, tf in zip(module.functions, typed.functions, strict=True):
        if tf.body is None or f.variants:
            fns.append(f)
            continue
        body = rebuild(tf.body)
        if body is tf.body:
            fns.append(f)
            continue
        changed = True
        fns.append(dataclasses.replace(f, body=body))
    if not changed:
        return module
    return Module(tuple(fns), module.target, module.topology)

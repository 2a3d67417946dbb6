"""The commutation table's coverage of the type rules (split from ``commutation.py``, D381):
every (op, kind, Partial pattern, reduction) the type rules accept or refuse has a table row
saying so, and the ops with no row are named (``NON_TABLE_OPS``); the
``commutation.coverage`` obligation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilefoundry.semantics.ops import ALL_OPS
from tilefoundry.semantics.ops.math import BinaryKind, UnaryKind
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.semantics.typeinfer.commutation import REDS, TABLE
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.commutation_models import row_id

# =============================================================================================
# coverage: every (op, kind, Partial operands, reduction) the type rules can meet has a row
# =============================================================================================
#: Ops that never consult the table, and why (checked: every op of ALL_OPS is in the table or
#: here).
NON_TABLE_OPS: dict[str, str] = {
    "Zeros": "no inputs: it can never meet a Partial",
    "ShapeOf": "reads only x's static shape, never its values: a pending value reduction does "
               "not change the result",
    "Rank": "reads only x's rank, never its values",
    "ShapeExtract": "its operand is a shape value (ShapeType), which carries no ShardLayout",
    "ShapeCompose": "its operands are dims (DimType), which carry no ShardLayout",
    "Reshard": "the sharding op itself: it completes or moves a Partial by definition (an "
               "allreduce), there is nothing to commute",
    "Local": "exposes the device's partial piece as plain data by definition (D79)",
    "Reshape": "a view: a regroup of layout positions commutes with every elementwise "
               "reduction; its rule carries Partial unchanged (HIR Reshape entry)",
    "Transpose": "a permutation of elements commutes with every elementwise reduction; its rule "
                 "carries every Partial (D77)",
    "Slice": "a selection commutes with every elementwise reduction; its rule carries a "
             "Partial (D77)",
    "Concat": "a placement: its rule carries a Partial only when every input carries the "
              "identical state (D77)",
    "Stack": "a placement: its rule carries a Partial only when every input carries the "
             "identical state (D77)",
    "Bitcast": "its rule rejects every Partial operand before the table: a reinterpretation "
               "of bits commutes with no reduction (bits(-1.0) = 0xBF800000 > bits(2.0) = "
               "0x40000000 as u32; D218)",
    "Cast": "its rule carries a Partial (D72): exact for widening casts, up to rounding for "
            "narrowing ones (a Partial(sum) rounds each piece before the sum)",
}


def _rule_operands(op: str) -> tuple[str, ...]:
    """The operand names the type rule passes to the table (variadic operands share their base
    name: every InsertSlice offset is ``offsets``)."""
    cls = next(c for c in ALL_OPS if c.__name__ == op)
    return tuple(cls.INPUTS)


def _kinds(op: str) -> list[str]:
    if op == "Scan":
        from tilefoundry.semantics.ops.tile_scan import SCAN_COMBINES

        return list(SCAN_COMBINES)
    enum = {"Binary": BinaryKind, "Unary": UnaryKind, "Reduce": ReduceKind}.get(op)
    if enum:
        return [k.value for k in enum]
    if op in ("SeededReduce", "MaskedReduce"):  # the tile family: str kinds / reducer names
        from tilefoundry.semantics.ops.tile_reduce import SEEDED_KINDS

        return list(SEEDED_KINDS)
    if op == "CustomReduce":
        from tilefoundry.semantics.reducers import REDUCERS

        return list(REDUCERS)
    return ["-"]


def _subsets(names: Sequence[str]) -> list[str]:
    return ["+".join(n for i, n in enumerate(names) if mask >> i & 1)
            for mask in range(1, 1 << len(names))]


def _combos(op: str) -> list[tuple[str, str, str, str]]:
    out = []
    for kind in _kinds(op):
        for pat in _subsets(_rule_operands(op)):
            for red in (*REDS, "mixed") if "+" in pat else REDS:
                out.append((op, kind, pat, red))
    return out


def _rule_call(op: str, kind: str, pattern: str, red: str):
    """A Call of the real op whose operands carry Partial exactly on ``pattern`` (mixed: the
    first sum, the others max) over a 2-device mesh axis."""
    from tilefoundry.semantics import ops as O
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Var
    from tilefoundry.semantics.types import Layout, Mesh, Partial, ShardLayout, TensorType

    F32, I32, BOOL = DType.F32, DType.I32, DType.BOOL
    v2 = ((4, 8), F32)
    cases: dict[str, tuple[Any, list]] = {
        "Reduce": (lambda: O.Reduce((1,), True, ReduceKind(kind)), [((4, 6), F32)]),
        "TopK": (lambda: O.TopK(2), [((4, 6), F32)]),
        "Select": (O.Select, [((4, 8), BOOL), ((4, 8), F32), ((4, 8), F32)]),
        "Scan": (lambda: O.Scan(1, kind), [((4, 6), I32 if kind == "mul" else F32)]),
        "Gather": (lambda: O.Gather(0), [((4, 6), F32), ((3,), I32)]),
        "InsertSlice": (O.InsertSlice, [((6,), F32), ((2,), F32), ((), I32)]),
        "CacheUpdate": (O.CacheUpdate, [((1, 8, 2, 4), F32), ((), I32), ((), I32),
                                        ((1, 3, 2, 4), F32)]),
        "MatMul": (O.MatMul, [((4, 8), F32), ((8, 6), F32)]),
        "Sort": (O.Sort, [((4, 6), F32)]),
        "Mma": (O.Mma, [((4, 8), F32), ((8, 6), F32), ((4, 6), F32)]),
        "Conv2D": (O.Conv2D, [((2, 3, 8, 8), F32), ((4, 3, 3, 3), F32), ((4,), F32)]),
        "LayerNorm": (O.LayerNorm, [v2, ((8,), F32), ((8,), F32)]),
        "RMSNorm": (O.RMSNorm, [v2, ((8,), F32)]),
        "RoPE": (O.RoPE, [((2, 6, 8), F32), ((2, 6, 8), F32), ((16, 8), F32), ((16, 8), F32),
                          ((6,), I32)]),
        "SeededReduce": (lambda: O.SeededReduce((1,), kind, "fold_left", False),
                         [((4, 8), F32), ((4,), F32)]),
        "MaskedReduce": (lambda: O.MaskedReduce((1,), kind, "fold_left", False),
                         [((4, 8), F32), ((4,), F32), ((4, 8), BOOL)]),
    }
    if op == "CustomReduce":
        from tilefoundry.semantics.reducers import REDUCERS

        cases[op] = (lambda: O.CustomReduce((1,), kind, "fold_left", False),
                     [((4, 8), F32), ((4, len(REDUCERS[kind].state)), F32)])
    if op == "Binary":
        bk = BinaryKind(kind)
        dt = BOOL if bk.is_boolean else F32
        make, specs = (lambda: O.Binary(bk)), [((4, 8), dt), ((4, 8), dt)]
    elif op == "Unary":
        uk = UnaryKind(kind)
        make, specs = (lambda: O.Unary(uk)), [((4, 8), BOOL if uk is UnaryKind.LOGICAL_NOT
                                                 else F32)]
    elif op in cases:
        make, specs = cases[op]
    else:
        make, specs = getattr(O, op), [v2]
    mesh = Mesh("device", ("x",), (2,))
    parts = pattern.split("+")
    args = []
    for i, (name, (shape, dt)) in enumerate(zip(_rule_operands(op), specs, strict=True)):
        layout = None
        if name in parts:
            r = red if red != "mixed" else ("sum" if name == parts[0] else "max")
            layout = ShardLayout(mesh, (Partial(r),), Layout(shape))
        args.append(Var(f"v{i}", TensorType(shape, dt, layout)))
    return Call(make(), tuple(args))


def coverage_gaps() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(gaps, notes): combinations the real type rule meets without a row (and how it then
    decides), and the other combinations without a row (rejected before the table)."""
    import tilefoundry.semantics.typeinfer.math
    import tilefoundry.semantics.typeinfer.nn
    import tilefoundry.semantics.typeinfer.tensor
    import tilefoundry.semantics.typeinfer.tile_reduce  # noqa: F401  (register the rules)
    from tilefoundry.semantics.typeinfer import TypeInferError, infer_expr
    from tilefoundry.semantics.typeinfer.commutation import lookup

    table_ops = {r.op for r in TABLE}
    gaps: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    for op in sorted(table_ops, key=lambda o: [c.__name__ for c in ALL_OPS].index(o)):
        for combo in _combos(op):
            if lookup(*combo) is not None:
                continue
            cid = f"{combo[0]}.{combo[1]}({combo[2]}; {combo[3]})"
            try:
                infer_expr(_rule_call(*combo))
            except TypeInferError as e:
                if "has no row in the commutation table" in str(e):
                    gaps.append((cid, "met by the rule, no row: rejected as unproven "
                                      "(fails closed)"))
                else:
                    notes.append((cid, f"rejected before the table: {e.rule}"))
                continue
            gaps.append((cid, "met by the rule and ACCEPTED without a row"))
    return gaps, notes


@obligation("commutation.coverage")
def coverage(ctx: ProveCtx) -> Outcome:
    """Every (op, kind, Partial operands, reduction) the type rules can meet has a table row;
    ops that never consult the table are listed with the reason."""
    all_ops = [c.__name__ for c in ALL_OPS]
    table_ops = {r.op for r in TABLE}
    sub: list[tuple[str, str]] = []
    problems: list[str] = []
    for op in all_ops:
        if op in table_ops:
            sub.append((op, f"table ({len(_combos(op))} combinations)"))
        elif op in NON_TABLE_OPS:
            sub.append((op, f"never consults the table: {NON_TABLE_OPS[op]}"))
        else:
            problems.append(f"{op}: neither in the table nor explained in NON_TABLE_OPS")
    problems += [f"{op}: in the table but not an op of ALL_OPS"
                 for op in sorted(table_ops - set(all_ops))]
    extra = [r for r in TABLE if r.op in all_ops and
             (r.op, r.kind, r.pattern, r.reduction) not in set(_combos(r.op))]
    problems += [f"{row_id(r)}: names no operand combination of the rule" for r in extra]
    gaps, notes = coverage_gaps()
    sub += [(cid, f"gap: {why}") for cid, why in gaps] + notes
    lines = problems + [f"{len(gaps)} combination(s) the rules meet without a row:"] + \
        [f"  {cid}: {why}" for cid, why in gaps] if (problems or gaps) else []
    n = sum(len(_combos(op)) for op in table_ops)
    head = f"{len(table_ops)} table ops, {n} combinations, {len(TABLE)} rows; " \
           f"{len(all_ops) - len(table_ops)} ops never consult the table"
    if problems or gaps:
        return Outcome("counterexample", head + "\n" + "\n".join(lines),
                       {"missing": ", ".join(cid for cid, _ in gaps[:12]) +
                        (f" ... ({len(gaps)} in all)" if len(gaps) > 12 else "")}, sub=sub)
    return Outcome("proved", head, sub=sub)

"""The Partial commutation table: one data table, (op, kind, operand pattern, reduction) →
allow / reject with the reason, used by every op rule that can meet a Partial operand.

A *pattern* names the operands that carry ``Partial`` on one mesh axis, joined by ``+`` in
operand order (``"lhs"``, ``"lhs+rhs"``, ``"x"``); every other value operand is replicated
(Broadcast or plain) on that axis. ``reduction`` is the Partial's reduction (``sum`` / ``max`` /
``min``), or ``"mixed"`` when the Partial operands disagree. Decisions are made independently for
each mesh axis (HIR Binary entry). Rows are derived once from the HIR spec sentences and the op
property data in ``semantics/ops/math.py``, then frozen; ``smt/`` proves each row.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilefoundry.semantics.combine_laws import REDUCE_COMBINES, order_reductions
from tilefoundry.semantics.ops.math import UNARY_PROPERTIES, BinaryKind, UnaryKind
from tilefoundry.semantics.ops.nn import ACTIVATIONS
from tilefoundry.semantics.ops.tensor import ReduceKind
from tilefoundry.semantics.ops.tile_scan import SCAN_COMBINES
from tilefoundry.semantics.types import REDUCTIONS

REDS = REDUCTIONS  # the Partial reductions (semantics/combine_laws.py)
FIX = "insert an explicit Reshard of that operand to Broadcast on the mesh axis first"


@dataclass(frozen=True)
class Row:
    op: str
    kind: str  # "-" for ops without a kind
    pattern: str
    reduction: str
    allow: bool
    reason: str


#: why an activation without the "monotone" fact is not monotone (explanatory text only; the
#: fact itself is ``FACTS`` on the op class)
_WHY_NOT_MONOTONE = {"Gelu": "x·Φ(x) dips below zero", "Silu": "minimum near x = -1.278"}


def _rows() -> list[Row]:
    rows: list[Row] = []

    def add(op, kind, pattern, red, allow, reason):
        rows.append(Row(op, kind, pattern, red, allow, reason))

    # ---- Binary (HIR Binary entry) --------------------------------------------------------
    for k in BinaryKind:
        for red in (*REDS, "mixed"):
            if k is BinaryKind.ADD:
                both = red == "sum"
                add("Binary", k.value, "lhs+rhs", red, both,
                    "sum(x)+sum(y) = sum(x+y)" if both else
                    ("Partial states on one axis must agree" if red == "mixed" else
                     f"{red}(x)+{red}(y) is not {red}(x+y)"))
                if red != "mixed":
                    one = red in order_reductions()
                    for p in ("lhs", "rhs"):
                        add("Binary", k.value, p, red, one,
                            "adding a replicated constant is order-preserving" if one else
                            "sum(x)+b != sum(x+b): the constant is added once per device")
            elif k is BinaryKind.MUL:
                add("Binary", k.value, "lhs+rhs", red, False,
                    "a product of two partial values does not distribute over the reduction")
                if red != "mixed":
                    for p in ("lhs", "rhs"):
                        add("Binary", k.value, p, red, red == "sum",
                            "scaling by a replicated constant distributes over sum"
                            if red == "sum" else "the constant's sign is not statically "
                            "provable; a negative scale flips max to min")
            else:
                add("Binary", k.value, "lhs+rhs", red, False,
                    f"{k.value} is not proven to commute with any reduction")
                if red != "mixed":
                    for p in ("lhs", "rhs"):
                        add("Binary", k.value, p, red, False,
                            f"{k.value} is not proven to commute with any reduction")

    # ---- Unary (HIR Unary entry; properties are data in ops/math.py) ------------------------
    for k in UnaryKind:
        props = UNARY_PROPERTIES[k]
        for red in REDS:
            if "monotone" in props:
                ok, why = red in order_reductions(), ("monotone non-decreasing: commutes with "
                                                  "max / min, not sum")
            elif "linear" in props:
                ok, why = red == "sum", "linear: commutes with sum; negation reverses order"
            else:
                ok, why = False, f"{k.value} is not proven to commute with any reduction"
            add("Unary", k.value, "x", red, ok, why)

    # ---- Reduce (HIR Reduce entry) ---------------------------------------------------------
    for k in ReduceKind:
        for red in REDS:
            ok = (k in (ReduceKind.SUM, ReduceKind.MEAN) and red == "sum") or \
                 (k is ReduceKind.MAX and red == "max") or (k is ReduceKind.MIN and red == "min")
            why = {ReduceKind.SUM: "linear over the reduced axes: commutes with sum only",
                   ReduceKind.MEAN: "linear over the reduced axes: commutes with sum only",
                   ReduceKind.MAX: "the same associative operator: commutes with max only",
                   ReduceKind.MIN: "the same associative operator: commutes with min only",
                   ReduceKind.ABS_MAX: "abs composed with max commutes with no reduction"}[k]
            add("Reduce", k.value, "x", red, ok, why)

    # ---- nn (HIR nn entries) ---------------------------------------------------------------
    # the elementwise activations: their facts are data on the op classes (ops/nn.py, D420)
    for cls in ACTIVATIONS:
        if "monotone" in (cls.FACTS or ()):
            for red in REDS:
                add(cls.__name__, "-", "x", red, red in order_reductions(),
                    "monotone non-decreasing: commutes with max / min, not sum")
    for red in REDS:
        add("SoftMax", "-", "x", red, False,
            "normalizes across an axis: commutes with no reduction")
    for cls in ACTIVATIONS:
        if "monotone" not in (cls.FACTS or ()):
            for red in REDS:
                add(cls.__name__, "-", "x", red, False,
                    f"not monotone ({_WHY_NOT_MONOTONE[cls.__name__]}): commutes with no "
                    "reduction")
    for op, ins in (("LayerNorm", ("x", "weight", "bias")), ("RMSNorm", ("x", "weight"))):
        for pat in _subsets(ins):
            for red in (*REDS, "mixed"):
                if red == "mixed" and "+" not in pat:
                    continue
                add(op, "-", pat, red, False,
                    "normalizes across an axis (a non-monotonic combination): no reduction "
                    "commutes")
    for pat in _subsets(("a", "b")):
        for red in (*REDS, "mixed"):
            if red == "mixed" and "+" not in pat:
                continue
            ok = "+" not in pat and red == "sum"
            add("MatMul", "-", pat, red, ok,
                "linear in one input while the other is replicated" if ok else
                ("a double-Partial input is not linear" if "+" in pat else
                 "matmul commutes with sum only"))
    for pat in _subsets(("x", "weight", "bias")):
        for red in (*REDS, "mixed"):
            if red == "mixed" and "+" not in pat:
                continue
            # Deliberate departure from the HIR nn entry (docs/decisions.md D58): the spec
            # preserves a Partial(sum) on x with weight and bias replicated, but the replicated
            # bias is then added once per device — conv(Σx, w) + b ≠ Σ(conv(x_d, w) + b), the
            # same reason Binary ADD rejects (lhs; sum). smt `commutation.nn` refutes it.
            add("Conv2D", "-", pat, red, False,
                "the replicated bias is added once per device: conv(Σx, w) + b != "
                "Σ(conv(x_d, w) + b)" if pat == "x" and red == "sum" else
                "a secondary Partial on weight or bias, or a non-sum Partial, cannot be "
                "preserved by the result layout")
    for pat in _subsets(("q", "k", "cos_cache", "sin_cache", "pos_ids")):
        for red in (*REDS, "mixed"):
            if red == "mixed" and "+" not in pat:
                continue
            ok = pat in ("q", "k") and red == "sum"
            add("RoPE", "-", pat, red, ok,
                "a branch preserves one Partial(sum) on its query or key input" if ok else
                "a non-sum Partial, several value-carrying Partials or a Partial on a cache / "
                "index input is rejected")

    # ---- tensor ops ------------------------------------------------------------------------
    for red in REDS:
        add("TopK", "-", "x", red, False,
            "indices identify a winner that a per-device partial value cannot recover")
        add("Gather", "-", "x", red, True,
            "gather is a linear row selection: gather(Σ x_i) = Σ gather(x_i)")
        add("Gather", "-", "indices", red, False, "indices are not values to reduce")
        add("Gather", "-", "x+indices", red, False, "indices are not values to reduce")
        for op, (dst, upd) in (("InsertSlice", ("dst", "update")), ("CacheUpdate",
                                                                  ("cache", "new"))):
            add(op, "-", f"{dst}+{upd}", red, True,
                "identical per-mesh-axis state on both: the write keeps it (checked for "
                "identity by the rule)")
            add(op, "-", dst, red, False,
                f"writing a non-Partial {upd} into a still-partial {dst} is unrepresentable")
            add(op, "-", upd, red, False,
                f"a complete {dst} cannot preserve {upd}'s secondary Partial state")
    for op in ("InsertSlice", "CacheUpdate"):
        a, b = ("dst", "update") if op == "InsertSlice" else ("cache", "new")
        add(op, "-", f"{a}+{b}", "mixed", False, "the Partial states must be identical")
    # Positions are indices, not values to reduce: any Partial on them is rejected.
    index_operands = {"InsertSlice": ("dst", "update", "offsets"),
                      "CacheUpdate": ("cache", "cur_pos", "s", "new")}
    for op, ins in index_operands.items():
        for pat in _subsets(ins):
            if not set(pat.split("+")) & {"offsets", "cur_pos", "s"}:
                continue
            for red in (*REDS, "mixed"):
                if red == "mixed" and "+" not in pat:
                    continue
                add(op, "-", pat, red, False,
                    "a write position is an index, not a value to reduce")
    add("Gather", "-", "x+indices", "mixed", False, "indices are not values to reduce")

    # ---- tile family (extensions of the HIR catalog) ---------------------------------------
    for red in REDS:
        add("Sort", "-", "x", red, False,
            "the sort of per-device partial values is not the sort of their reduction, and "
            "the indices name a winner")
    for pat in _subsets(("a", "b", "acc")):
        for red in (*REDS, "mixed"):
            if red == "mixed" and "+" not in pat:
                continue
            ok = pat in ("a+acc", "b+acc") and red == "sum"
            add("Mma", "-", pat, red, ok,
                "linear in (one input, acc) jointly while the other input is replicated" if ok
                else "the Partial states on one axis must agree" if red == "mixed"
                else ("sound over the reals (adding a replicated product keeps the order) but "
                      "rejected conservatively: a reassociating mma may add acc anywhere in the "
                      "K fold") if pat == "acc" and red != "sum"
                else "mma commutes with sum only" if red != "sum"
                else "a double-Partial input is not linear" if "a+b" in pat
                else "the replicated acc is added once per device" if pat in ("a", "b")
                else "the replicated product a·b is added once per device")

    # ---- tile family (extensions from the Tile design; docs/decisions.md D218) -------------
    for pat in _subsets(("cond", "t", "f")):
        for red in (*REDS, "mixed"):
            if red == "mixed" and "+" not in pat:
                continue
            if "cond" in pat.split("+"):
                why = "a condition is not a value to reduce"
            elif pat == "t+f" and red != "mixed":
                why = "both branches carry the state: ite(c, Σt, Σf) = Σ ite(c, t_i, f_i)"
            elif red == "mixed":
                why = "the Partial states must be identical"
            else:
                why = ("the replicated branch would be reduced once per device (sum); "
                       "rejected conservatively for max / min")
            add("Select", "-", pat, red, pat == "t+f" and red != "mixed", why)
    for c in SCAN_COMBINES:
        for red in REDS:
            ok = (c, red) in (("add", "sum"), ("max", "max"), ("min", "min"))
            add("Scan", c, "x", red, ok,
                f"every prefix is a {red} of the same leaves: scan({c}) commutes with {red}"
                if ok else f"a {c} prefix is not a {red} of per-device prefixes")
    _tile_rows(add)
    return rows


def _tile_rows(add) -> None:
    """The ``tile`` family's reductions (semantics/ops/tile_reduce.py): every row rejects. A
    Partial x under a seeded sum adds the seed once per device (the design: the seed "is not
    copied into every worker's partial"); the rows that would hold over the reals (max / min,
    or x and seed both Partial(sum)) are rejected conservatively (the result would need a
    Partial layout these ops do not produce) and reported sound-but-rejected by smt."""
    from tilefoundry.semantics.reducers import REDUCERS

    why = ("the seed is incoming state included once; a Partial operand would include it (or "
           "the other operands) once per device, or needs a Partial result these ops do not "
           "produce")
    for op, ins in (("SeededReduce", ("x", "seed")), ("MaskedReduce", ("x", "seed", "mask"))):
        for k in REDUCE_COMBINES:  # the seeded / masked kinds (semantics/combine_laws.py)
            for pat in _subsets(ins):
                for red in (*REDS, "mixed"):
                    if red == "mixed" and "+" not in pat:
                        continue
                    add(op, k, pat, red, False,
                        "a mask is a flag, not a value to reduce" if "mask" in pat else why)
    for name in REDUCERS:
        for pat in _subsets(("x", "seed")):
            for red in (*REDS, "mixed"):
                if red == "mixed" and "+" not in pat:
                    continue
                add("CustomReduce", name, pat, red, False,
                    f"the {name} state is not proven a homomorphism of any Partial reduction")


def _subsets(names: tuple[str, ...]) -> list[str]:
    out = []
    for mask in range(1, 1 << len(names)):
        out.append("+".join(n for i, n in enumerate(names) if mask >> i & 1))
    return out


TABLE: tuple[Row, ...] = tuple(_rows())
_INDEX = {(r.op, r.kind, r.pattern, r.reduction): r for r in TABLE}
assert len(_INDEX) == len(TABLE), "duplicate commutation rows"


def lookup(op: str, kind: str, pattern: str, reduction: str) -> Row | None:
    return _INDEX.get((op, kind, pattern, reduction))


def format_matrix() -> str:
    """The table as a Markdown matrix: one line per (op, kind, pattern), one column per
    reduction."""
    cols = (*REDS, "mixed")
    keys: dict[tuple[str, str, str], dict[str, Row]] = {}
    for r in TABLE:
        keys.setdefault((r.op, r.kind, r.pattern), {})[r.reduction] = r
    lines = ["| op | kind | Partial operands | " + " | ".join(cols) + " | reasons |",
             "|---|---|---|" + "---|" * (len(cols) + 1)]
    for (op, kind, pat), by in keys.items():
        cells = ["allow" if c in by and by[c].allow else ("reject" if c in by else "·")
                 for c in cols]
        reasons: dict[str, list[str]] = {}
        for c in cols:
            if c in by:
                reasons.setdefault(by[c].reason, []).append(c)
        why = "; ".join(f"{'/'.join(cs)}: {r}" for r, cs in reasons.items())
        lines.append(f"| {op} | {kind} | {pat} | " + " | ".join(cells) + f" | {why} |")
    return "\n".join(lines)


def check_partials(ctx, types: tuple, *, kind: str = "-",
                   names: tuple[str, ...] | None = None) -> dict[int, str]:
    """Decide, per mesh axis, whether the Partial operands among ``types`` commute with the op.

    ``names`` are the operand names used in patterns (default: the op's INPUTS; variadic ops
    pass their own). Raises a TypeInferError naming the offending operand, the table row and the
    Reshard-to-Broadcast fix on a reject; returns {mesh-axis index: reduction} for the Partial
    states the result carries.
    """
    from tilefoundry.semantics.types import TensorType

    if names is None:  # variadic operands share their base name ("offsets[2]" -> "offsets")
        names = tuple(ctx.operand_name(i).split("[")[0] for i in range(len(types)))
    sharded = [(i, t.shard) for i, t in enumerate(types)
               if isinstance(t, TensorType) and t.shard is not None]
    if not sharded:
        return {}
    mesh = sharded[0][1].mesh
    for i, s in sharded[1:]:
        if s.mesh != mesh:
            ctx.error(f"operands live on different meshes ({mesh} and {s.mesh})", operand=i,
                      rule="operand mesh ownership", fix="Reshard one operand onto the other's "
                      "mesh")
    out: dict[int, str] = {}
    op = ctx.name
    for ax, axis_name in enumerate(mesh.axis_names):
        parts = [(i, s.attrs[ax].reduction) for i, s in sharded if ax in s.partials]
        if not parts:
            continue
        pattern = "+".join(dict.fromkeys(names[i] for i, _ in parts))
        reds = {r for _, r in parts}
        red = reds.pop() if len(reds) == 1 else "mixed"
        row = lookup(op, kind, pattern, red)
        rule = f"Partial commutation ({op}, {kind}, {pattern}, {red}) on mesh axis {axis_name}"
        if row is None:
            ctx.error(f"Partial({red}) on {pattern} has no row in the commutation table, so it "
                      f"is not proven to commute", operand=names[parts[0][0]], rule=rule,
                      fix=FIX)
        if not row.allow:
            ctx.error(f"Partial({red}) does not commute: {row.reason}",
                      operand=names[parts[0][0]], rule=rule, fix=FIX)
        out[ax] = red
    return out

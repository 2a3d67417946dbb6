"""The ``reshape.ownership`` obligation (split out of ``smt/obligations/layout.py`` by concern,
D440): which device owns each element of a sharded Reshape's result — the symbolic proof of the
ownership rules and the concrete check over small layouts, cross-checked against the reference
(``ownership``, ``sound_layout``). ``layout.py`` imports this module last, so the obligation
registers after ``envelope.partition`` and ``reshard.strides`` as before, and re-exports its
public names."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import z3

from tilefoundry.semantics.typeinfer.reshape import (
    ReshapeRejected,
    enumerate_reshapes,
    reshape_layout,
)
from tilefoundry.semantics.types import (
    Broadcast,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
)
from tilefoundry.smt.framework import Outcome, ProveCtx, obligation
from tilefoundry.smt.obligations.layout import Num, _in_box, _worst

__all__ = ["ownership", "reshape_ownership", "sound_layout"]


# =============================================================================================
# reshape.ownership
# =============================================================================================
# A position for the symbolic proofs: (extent, (mesh extent, local extent) for a split one).
Pos = tuple[Any, tuple[Any, Any] | None]


def _horner(idx: Sequence[Num], radices: Sequence[Num]) -> Num:
    """The row-major address of ``idx`` over ``radices`` (outermost first)."""
    acc: Any = z3.IntVal(0)
    for v, e in zip(idx, radices, strict=True):
        acc = acc * e + v
    return acc


def _prod(xs: Sequence[Num]) -> Num:
    return math.prod(xs, start=z3.IntVal(1))


def _prove_ownership(ctx: ProveCtx, name: str, segments: Sequence[tuple[list[Pos], list[Pos]]],
                     splits: Sequence[tuple[int, int, int]], assumptions: Sequence[z3.BoolRef]
                     ) -> list[tuple[str, str, dict | None]]:
    """Prove that a reshape from the flat positions ``before`` to ``after`` keeps every
    element's owner along each split mesh axis. The element is its row-major address over the
    positions (the logical shape's, since positions refine axes outermost first); the owner of
    a split position of extent E = m·l is d with index = d·l + r, 0 <= r < l (the block
    [d·E/m, (d+1)·E/m)).

    The proof is cut into lemmas Z3 discharges quickly, each proved for every value in range:
    ``segments`` pairs aligned runs (before, after) of equal product; (a) each pair's products
    agree; (b) each run's row-major address lies in [0, product); (c) the address over all
    positions is the row-major address, over the runs' products, of the runs' addresses
    (a polynomial identity); (d) row-major addressing over the runs is injective on the box,
    so equal element addresses give equal run addresses; (e) for each ``(run, before position,
    after position)`` in ``splits``, equal run addresses give the same owner. (a)–(e) together
    are the claim. Returns (lemma, status, counterexample) per query."""
    out: list[tuple[str, str, dict | None]] = []
    assume = list(assumptions)

    def prove(what: str, claim: z3.BoolRef, extra: Sequence[z3.BoolRef] = (),
              show: dict | None = None) -> None:
        st, vals = ctx.prove(claim, f"{name}.{what}", assumptions=(*assume, *extra), show=show)
        out.append((what, st, vals))

    idx: list[tuple[list[z3.ArithRef], list[z3.ArithRef]]] = []
    boxes: list[z3.BoolRef] = []
    for k, (bef, aft) in enumerate(segments):
        ib = [z3.Int(f"{name}_b{k}_{p}") for p in range(len(bef))]
        ia = [z3.Int(f"{name}_a{k}_{p}") for p in range(len(aft))]
        idx.append((ib, ia))
        boxes += _in_box(ib, [e for e, _ in bef]) + _in_box(ia, [e for e, _ in aft])
        rb, ra = _prod([e for e, _ in bef]), _prod([e for e, _ in aft])
        prove(f"(a) run {k}: equal products", rb == ra)
        for side, ii, pos in (("before", ib, bef), ("after", ia, aft)):
            if len(pos) > 1:
                h = _horner(ii, [e for e, _ in pos])
                prove(f"(b) run {k} {side}: address in [0, product)",
                      z3.And(h >= 0, h < _prod([e for e, _ in pos])),
                      _in_box(ii, [e for e, _ in pos]))
    radices = [_prod([e for e, _ in bef]) for bef, _ in segments]
    for side, col in (("before", 0), ("after", 1)):
        flat_i = [v for pair in idx for v in pair[col]]
        flat_e = [e for seg in segments for e, _ in seg[col]]
        runs = [_horner(pair[col], [e for e, _ in seg[col]]) for pair, seg in
                zip(idx, segments, strict=True)]
        prove(f"(c) {side}: address = address over the runs",
              _horner(flat_i, flat_e) == _horner(runs, radices))
    if len(segments) > 1:
        wb = [z3.Int(f"{name}_wb{k}") for k in range(len(segments))]
        wa = [z3.Int(f"{name}_wa{k}") for k in range(len(segments))]
        prove("(d) addressing over the runs is injective",
              z3.Implies(_horner(wb, radices) == _horner(wa, radices),
                         z3.And([u == v for u, v in zip(wb, wa, strict=True)])),
              [*_in_box(wb, radices), *_in_box(wa, radices)])
    for n, (k, pb, pa) in enumerate(splits):
        bef, aft = segments[k]
        ib, ia = idx[k]
        cons = [*_in_box(ib, [e for e, _ in bef]), *_in_box(ia, [e for e, _ in aft]),
                _horner(ib, [e for e, _ in bef]) == _horner(ia, [e for e, _ in aft])]
        owners = []
        for side, ii, pos, p in (("before", ib, bef, pb), ("after", ia, aft, pa)):
            _m, loc = pos[p][1]  # type: ignore[misc]
            d, r = z3.Int(f"{name}_d{side}{n}"), z3.Int(f"{name}_r{side}{n}")
            cons += [ii[p] == d * loc + r, r >= 0, r < loc]
            owners.append(d)
        prove(f"(e) split {n}: same owner", owners[0] == owners[1], cons,
              {"owner_before": owners[0], "owner_after": owners[1]})
    return out


def _rule2_positions(X: Num, m: Num, a: Num, B: Num, Y: Num) -> tuple[list, list]:
    """Rule 2 transcribed (reshape.py): Split position E = m·a·B between runs X and Y becomes
    (m, Split)(a, plain) | (B, plain)."""
    return ([(X, None), (m * a * B, (m, a * B)), (Y, None)],
            [(X, None), (m, (m, 1)), (a, None), (B, None), (Y, None)])


def _in_range(*pairs: tuple[z3.ArithRef, int, int]) -> list[z3.BoolRef]:
    return [c for v, lo, hi in pairs for c in (v >= lo, v <= hi)]


def _symbolic_ownership(ctx: ProveCtx) -> tuple[list[tuple[str, str]], list[str]]:
    """Rule 2 and rule 1 ownership, symbolic (see ``_prove_ownership``)."""
    X, Y, m, a, B, f, m2, l1, m3, l3 = (z3.Int(f"own_{k}") for k in
                                        ("X", "Y", "m", "a", "B", "f", "m2", "l1", "m3", "l3"))
    r2 = _in_range((X, 1, 8), (Y, 1, 8), (m, 1, 8), (a, 1, 8), (B, 1, 8))
    before, after = _rule2_positions(X, m, a, B, Y)
    F: Pos = (m2 * f, (m2, f))
    runs2 = [([before[0]], [after[0]]), ([before[1]], after[1:4]), ([before[2]], [after[4]])]
    proofs = [
        ("rule 2: Split E = m·a·B between runs X, Y -> (m, Split)(a) | (B); X, Y, m, a, B in "
         "[1, 8]", "r2", runs2, [(1, 0, 0)], r2),
        ("rule 2 beside a whole Split F = m2·f ahead of it (rule 1 for F); m2, f in [1, 4]",
         "r2f", [([F], [F]), *runs2], [(0, 0, 0), (2, 0, 0)],
         [*r2, *_in_range((m2, 1, 4), (f, 1, 4))]),
        ("rule 1: whole positions regrouped, a unit position dropped, two Splits E = m·l1, "
         "E3 = m3·l3 (m, l1, m3, l3 in [1, 8]): [E, 1, X, E3, Y] -> [E, X, E3, Y]", "r1",
         [([(m * l1, (m, l1))], [(m * l1, (m, l1))]), ([(1, None), (X, None)], [(X, None)]),
          ([(m3 * l3, (m3, l3))], [(m3 * l3, (m3, l3))]), ([(Y, None)], [(Y, None)])],
         [(0, 0, 0), (2, 0, 0)],
         _in_range((X, 1, 8), (Y, 1, 8), (m, 1, 8), (l1, 1, 8), (m3, 1, 8), (l3, 1, 8))),
    ]
    sub: list[tuple[str, str]] = []
    lines: list[str] = []
    for what, tag, segs, splits, assume in proofs:
        res = _prove_ownership(ctx, tag, segs, splits, assume)
        st = _worst(s for _, s, _ in res)
        sub.append((f"{what} ({len(res)} lemmas)", st))
        lines += [f"{what}: lemma {w}: {s} {v or ''}" for w, s, v in res if s != "proved"]
    return sub, lines


def _cross_check_rule2() -> tuple[int, list[str]]:
    """``_rule2_positions`` against ``reshape_layout`` on concrete rule-2 reshapes: the result's
    (extent, split) positions are the transcription's, unsplit unit positions aside."""
    bad, count = [], 0
    for X, m, a, B, Y in itertools.product((1, 3), (1, 2, 4), (1, 2, 3), (2, 3), (1, 5)):
        if m * a == 1:  # the outer sub-factor is 1: the position fits whole (rule 1)
            continue
        E = m * a * B
        sl = ShardLayout(Mesh("device", ("x",), (m,)), (Split(1),), Layout((X, E, Y)))
        _, after = _rule2_positions(X, m, a, B, Y)
        # unsplit unit positions (a size-1 axis, an a = 1 sub-factor) carry nothing
        want = [(e, k == 1) for k, (e, _s) in enumerate(after) if e != 1 or k == 1]
        for new in ((X * m * a, B * Y), (X, m * a, B * Y), (X * m * a, B, Y)):
            count += 1
            try:
                got = reshape_layout(sl, (X, E, Y), new)
            except ReshapeRejected as err:
                bad.append(f"{sl.layout.shape} -> {new}: rejected ({err.reason})")
                continue
            assert got is not None
            split = {a_.position for a_ in got.attrs if isinstance(a_, Split)}
            have = [(e, k in split) for k, e in enumerate(got.layout.positions)
                    if e != 1 or k in split]
            if have != want:
                bad.append(f"{sl.layout.shape} -> {new}: (extent, split) positions {have}, "
                           f"transcription {want}")
    return count, bad


def ownership(shard: ShardLayout) -> tuple[tuple, np.ndarray]:
    """Which devices hold each element (row-major over the logical shape): per mesh axis its
    state (``'split'`` / ``Broadcast()`` / ``Partial(r)``) and, for split axes, the owning
    coordinate of every element (``E``'s block ``[d·E/m, (d+1)·E/m)``); other axes -1."""
    pos = shard.layout.positions
    n = math.prod(pos)
    g = np.arange(n, dtype=np.int64)
    inner = [math.prod(pos[p + 1:]) for p in range(len(pos))]
    rows, states = [], []
    for a, m in zip(shard.attrs, shard.mesh.axis_extents, strict=True):
        if isinstance(a, Split):
            e = pos[a.position]
            rows.append((g // inner[a.position]) % e // (e // m))
            states.append("split")
        else:
            rows.append(np.full(n, -1, dtype=np.int64))
            states.append(a)
    return tuple(states), np.array(rows).reshape(len(rows), n)


def sound_layout(shard: ShardLayout, new: tuple[int, ...],
                   own: np.ndarray) -> ShardLayout | None:
    """A ShardLayout over ``new`` with ``shard``'s mesh and attrs whose ownership equals
    ``own``, when one exists. A split axis of extent m on new axis j is expressible exactly as
    a position of extent m·l at sub-stride T, owner (c_j // (T·l)) % m; l = 1 is the least
    constraining choice, so the search is over (j, D = T) with D·m | n_j; two split axes on one
    new axis need nested non-overlapping digit ranges."""
    n = math.prod(new)
    g = np.arange(n, dtype=np.int64)
    inner = [math.prod(new[j + 1:]) for j in range(len(new))]
    coords = [(g // inner[j]) % new[j] for j in range(len(new))]
    exts = shard.mesh.axis_extents
    split_axes = [ax for ax, a in enumerate(shard.attrs) if isinstance(a, Split)]
    if any(exts[ax] == 1 for ax in split_axes):  # extent-1 mesh axes: not searched
        return None
    options: list[list[tuple[int, int]]] = []
    for ax in split_axes:
        m = exts[ax]
        opts = [(j, d) for j, nj in enumerate(new) for d in range(1, nj + 1)
                if nj % (d * m) == 0 and np.array_equal(coords[j] // d % m, own[ax])]
        if not opts:
            return None
        options.append(opts)
    for choice in itertools.product(*options):
        by_axis: dict[int, list[tuple[int, int, int]]] = {}
        for ax, (j, d) in zip(split_axes, choice, strict=True):
            by_axis.setdefault(j, []).append((d, d * exts[ax], ax))
        ok = all(hi1 <= lo2 and lo2 % hi1 == 0
                 for rs in by_axis.values()
                 for (_l1, hi1, _), (lo2, _h2, _) in itertools.pairwise(sorted(rs)))
        if not ok:
            continue
        entries, attrs, flat = [], dict(enumerate(shard.attrs)), 0
        for j, nj in enumerate(new):
            cuts = sorted({1, nj, *(c for d, hi, _ in by_axis.get(j, ()) for c in (d, hi))},
                          reverse=True)
            owner_at = {hi: ax for _d, hi, ax in by_axis.get(j, ())}
            parts = []
            for hi, lo in itertools.pairwise(cuts):
                if hi in owner_at:
                    attrs[owner_at[hi]] = Split(flat + len(parts))
                parts.append(hi // lo)
            parts = parts or [nj]
            entries.append(parts[0] if len(parts) == 1 else tuple(parts))
            flat += len(parts)
        wit = ShardLayout(shard.mesh, tuple(attrs[k] for k in range(len(shard.attrs))),
                          Layout(tuple(entries)))
        if np.array_equal(ownership(wit)[1], own):
            return wit
    return None


def _ownership_layouts() -> Iterator[ShardLayout]:
    """The concrete layouts enumerated, one position per axis: 2 positions with extents in
    {1, 2, 3, 4, 6, 8}, and 3 positions with those extents holding at most 16 elements; on each,
    a Split over a mesh axis of extent 2 or 4 on every divisible position, two Splits over a
    (2, 4) mesh, a Split beside a Partial over a (2, 2) mesh (3 positions), and a Partial-only
    layout (2 positions)."""
    ext = (1, 2, 3, 4, 6, 8)
    shapes = [s for k in (2, 3) for s in itertools.product(ext, repeat=k)
              if k == 2 or math.prod(s) <= 16]
    for s in shapes:
        lay = Layout(s)
        for m in (2, 4):
            for p in range(len(s)):
                if s[p] % m == 0:
                    yield ShardLayout(Mesh("device", ("x",), (m,)), (Split(p),), lay)
        for p, q in itertools.permutations(range(len(s)), 2):
            if s[p] % 2 == 0 and s[q] % 4 == 0:
                yield ShardLayout(Mesh("device", ("x", "y"), (2, 4)), (Split(p), Split(q)), lay)
        if len(s) == 3:
            for p in range(len(s)):
                if s[p] % 2 == 0:
                    yield ShardLayout(Mesh("device", ("x", "y"), (2, 2)),
                                      (Split(p), Partial("sum")), lay)
        else:
            yield ShardLayout(Mesh("device", ("x",), (2,)), (Partial("sum"),), lay)


def _reason_class(reason: str) -> str:
    for key, cls in (("is not Split-bound", "plain position divided across axes (D70 strict "
                      "rule 1)"),
                     ("straddles the boundary", "position straddles a boundary at a "
                      "non-dividing point"),
                     ("does not divide the outer sub-factor", "mesh extent does not divide "
                      "the outer sub-factor"),
                     ("spans more than one new-axis boundary", "device block spans more than "
                      "one boundary"),
                     ("two Split-bound positions", "two Split-bound positions in one regroup"),
                     ("every new axis has size 1", "all new axes size 1")):
        if key in reason:
            return cls
    return "other"


def _concrete_ownership(ctx: ProveCtx) -> tuple[str, str, dict[str, Any] | None,
                                                list[tuple[str, str]]]:
    layouts = cases = accepted = 0
    broken: list[str] = []
    sound: Counter[tuple[str, bool]] = Counter()
    unsound: Counter[tuple[str, bool]] = Counter()
    examples: dict[tuple[str, bool], str] = {}
    for sl in _ownership_layouts():
        layouts += 1
        states, own = ownership(sl)
        has_split = bool(sl.split_positions)
        for case in enumerate_reshapes(sl, max_rank=3):
            cases += 1
            if case.accepted:
                accepted += 1
                res = case.result
                if res is None:
                    broken.append(f"{sl} -> {case.new_shape}: accepted with a plain output")
                    continue
                st2, own2 = ownership(res)
                if st2 != states or not np.array_equal(own, own2) or \
                        res.layout.axis_extents != case.new_shape:
                    moved = np.nonzero((own != own2).any(axis=0))[0] if \
                        own.shape == own2.shape else np.array([], dtype=np.int64)
                    broken.append(f"Layout{sl.layout.shape} {_attrs_str(sl)} -> "
                                  f"{case.new_shape}: "
                                  + (f"{moved.size} elements change owner (first: element "
                                     f"{int(moved[0])})" if moved.size else
                                     "the mesh-axis states or the shape differ")
                                  + f"; result {res.layout.shape} {_attrs_str(res)}")
                continue
            key = (_reason_class(case.reason or ""), has_split)
            wit = sound_layout(sl, case.new_shape, own)
            if wit is not None:
                sound[key] += 1
                examples.setdefault(key, f"Layout{sl.layout.shape} {_attrs_str(sl)} -> "
                                    f"{case.new_shape} (witness {wit.layout.shape} "
                                    f"{_attrs_str(wit)})")
            else:
                unsound[key] += 1
    rejected = cases - accepted
    n_sound = sum(sound.values())
    n_sound_split = sum(v for (_c, hs), v in sound.items() if hs)
    sub = [(f"enumerated: {accepted} accepted reshapes preserve ownership",
            "counterexample" if broken else "proved"),
           (f"enumerated: {n_sound} of {rejected} rejected reshapes would have been sound",
            "report")]
    lines = [f"enumerated {cases} reshapes of {layouts} concrete ShardLayouts "
             f"(enumerate_reshapes, max_rank 3, one inserted unit axis): {accepted} accepted, "
             f"{rejected} rejected"]
    if broken:
        lines.append(f"{len(broken)} accepted reshapes change ownership:")
        lines += [f"  {b}" for b in broken[:10]]
    else:
        lines.append(f"every accepted reshape preserves ownership ({accepted} checked by direct "
                     f"computation over every element)")
    lines.append(f"sound-but-rejected report: {n_sound} of {rejected} rejected reshapes would "
                 f"have been sound — a ShardLayout over the new shape (same mesh and mesh-axis "
                 f"states) carries the same ownership; a witness was built and its ownership "
                 f"checked — {n_sound_split} of them on layouts with a Split, "
                 f"{n_sound - n_sound_split} Partial-only; {sum(unsound.values())} would move "
                 f"data. By the rejection reason:")
    for key in sorted(set(sound) | set(unsound)):
        cls, hs = key
        lines.append(f"  {cls}{'' if hs else ' [Partial-only layouts]'}: {sound[key]} sound, "
                     f"{unsound[key]} unsound"
                     + (f"; e.g. {examples[key]}" if key in examples else ""))
    cex = {"reshape": broken[0]} if broken else None
    return ("counterexample" if broken else "proved"), "\n".join(lines), cex, sub


def _attrs_str(sl: ShardLayout) -> str:
    return "(" + ", ".join(f"Split({a.position})/{m}" if isinstance(a, Split) else
                           (f"Partial({a.reduction})" if isinstance(a, Partial) else
                            "Broadcast" if isinstance(a, Broadcast) else str(a))
                           for a, m in zip(sl.attrs, sl.mesh.axis_extents, strict=True)) + ")"


@obligation("reshape.ownership")
def reshape_ownership(ctx: ProveCtx) -> Outcome:
    """Accepted reshapes preserve device ownership; report rejected ones that would be sound."""
    n_x, mism = _cross_check_rule2()
    if mism:
        return Outcome("error", f"the rule-2 transcription disagrees with reshape_layout on "
                       f"{len(mism)} of {n_x} concrete reshapes:\n" + "\n".join(mism[:10]))
    sub, sym_lines = _symbolic_ownership(ctx)
    c_status, c_text, cex, c_sub = _concrete_ownership(ctx)
    sub += c_sub
    status = _worst([*(s for _, s in sub if s != "report"), c_status])
    detail = "\n".join([
        "symbolic (Z3): rule 2 (Split E = m·a·B divided as (m, Split)(a) | (B) between runs "
        "X, Y; X, Y, m, a, B in [1, 8]), rule 2 beside a whole Split, and rule 1 (whole "
        "positions, a dropped unit position, two Splits) keep every element's owner: "
        + ("proved" if not sym_lines else "; ".join(sym_lines)),
        f"rule-2 transcription cross-checked against reshape_layout on {n_x} concrete reshapes",
        c_text])
    return Outcome(status, detail, counterexample=cex, sub=sub)

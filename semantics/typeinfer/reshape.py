"""Reshape factorization of ShardLayouts, and the stride forms shared by the tensor rules.

The HIR Reshape entry (and ARCHITECTURE.md, "Types") accepts exactly two ways for a genuinely
sharded value to carry through a reshape; everything else fails closed:

* **rule 1** — every non-size-1 new axis is the product of a contiguous run of *whole* layout
  positions (either merge direction: several old axes merge, or one refined old axis splits
  along its position boundaries); size-1 new axes insert / drop freely and hold no sharding; a
  ``Split`` layout-position reference remaps to its new position index; ``Partial`` /
  ``Broadcast`` carry through (they are mesh-axis states with no layout position);
* **rule 2** — a Split-bound position of extent ``E = A·B`` divides across exactly one new-axis
  boundary, with its mesh extent ``m`` dividing the outer sub-factor ``A``: it becomes
  ``(m, Split)(A/m, plain)`` at the end of the outer axis and ``(B, plain)`` at the start of the
  inner one, so every Split-bound position keeps local extent 1.

``reshape_layout`` is a pure function over types (no IR, no context) so the SMT layer can call
it; it raises :class:`ReshapeRejected` carrying the reason when it must fail closed.
``enumerate_reshapes`` lists, for a small layout, every candidate new shape with its verdict.

Decisions (docs/decisions.md): a plain ``Layout`` input, like ``None``, reshapes to an
unconstrained (``None``) layout; an unsplit extent-1 layout position carries nothing and is
dropped; an extent-1 Split position (mesh extent 1) stays in the run it sits in; a ``(A/m)``
sub-factor of 1 is not written; output strides keep the input's *form* (shared-engine C-order,
per-instance, or — for verbose strides — each position's own stride, the divided position's
sub-positions derived from it), and ``strides=None`` on an input reads as shared-engine C-order.
A zero-size sharded reshape is accepted only as the identity; a symbolic new shape with a
genuine ShardLayout fails closed (layout extents are static).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from tilefoundry.errors import TilefoundryError
from tilefoundry.semantics.types import (
    Layout,
    ShapeDim,
    ShardLayout,
    Split,
    simplify,
)

__all__ = [
    "ReshapeCase", "ReshapeRejected", "enumerate_reshapes", "materialize", "rebuild",
    "reshape_layout", "stride_form",
]

SHARED, PER_INSTANCE, CUSTOM = "shared_engine", "per_instance", "custom"


class ReshapeRejected(TilefoundryError, ValueError):
    """A reshape of a genuinely sharded layout that neither rule expresses (fail closed)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


# =============================================================================================
# stride forms (ARCHITECTURE.md "Strides")
# =============================================================================================
def stride_form(shard: ShardLayout) -> str:
    """``shared_engine`` (also for ``strides=None``, the sugar), ``per_instance`` or
    ``custom`` (verbose strides matching neither form)."""
    flat = shard.layout.flat_strides
    if flat is None or flat == shard.shared_engine_strides():
        return SHARED
    if flat == shard.per_instance_strides():
        return PER_INSTANCE
    return CUSTOM


def materialize(shard: ShardLayout) -> ShardLayout:
    """``shard`` with concrete strides: the ``strides=None`` sugar becomes shared-engine C-order
    over the global positions (the form signature binding gives a kernel parameter)."""
    if shard.layout.strides is not None:
        return shard
    return shard.with_strides(shard.shared_engine_strides())


def rebuild(shard: ShardLayout, entries: tuple, pos_map: dict[int, int], form: str, *,
            attrs: dict[int, object] | None = None,
            zero_positions: frozenset[int] = frozenset()) -> ShardLayout:
    """A ShardLayout on ``shard``'s mesh over the layout shape ``entries``: each Split's
    position goes through ``pos_map`` (old flat position -> new), ``attrs`` overrides per mesh
    axis, strides are the ``form`` (``custom`` re-derives shared-engine C-order: the result is
    a new tensor) with ``zero_positions`` forced to stride 0."""
    attrs = attrs or {}
    new_attrs = []
    for ax, a in enumerate(shard.attrs):
        if ax in attrs:
            new_attrs.append(attrs[ax])
        elif isinstance(a, Split):
            new_attrs.append(Split(pos_map[a.position]))
        else:
            new_attrs.append(a)
    out = ShardLayout(shard.mesh, tuple(new_attrs), Layout(tuple(entries)))
    flat = out.per_instance_strides() if form == PER_INSTANCE else out.shared_engine_strides()
    return out.with_strides(tuple(0 if i in zero_positions else s for i, s in enumerate(flat)))


# =============================================================================================
# the factorization
# =============================================================================================
@dataclass
class _Piece:
    extent: int
    mesh_axis: int | None  # the mesh axis splitting this piece, if any
    stride: int  # custom-form stride
    source: int  # the old position it comes from
    divided: bool = False  # a sub-factor of a rule-2 divided position


def _static(shape, what: str) -> tuple[int, ...]:
    out = tuple(simplify(d) for d in shape)
    if not all(isinstance(d, int) for d in out):
        raise ReshapeRejected(f"the {what} shape {tuple(map(str, out))} is symbolic; a sharded "
                              f"layout's positions are static, so the factorization cannot be "
                              f"derived")
    return out  # type: ignore[return-value]


def reshape_layout(layout: Layout | ShardLayout | None, old_shape: tuple,
                   new_shape: tuple[ShapeDim, ...]) -> ShardLayout | None:
    """The result layout of reshaping a value with ``layout`` from ``old_shape`` to
    ``new_shape`` (HIR Reshape entry). Plain (``None`` / ``Layout``) and fully-Broadcast inputs
    give ``None``; a genuine ShardLayout gives a ShardLayout with concrete strides, or raises
    :class:`ReshapeRejected` naming why neither rule applies."""
    if not isinstance(layout, ShardLayout) or layout.is_fully_broadcast:
        return None
    shard = materialize(layout)
    new = _static(new_shape, "new")
    pos = shard.layout.positions
    if math.prod(pos) != math.prod(new):
        raise ReshapeRejected(f"the layout positions {pos} hold {math.prod(pos)} elements but "
                              f"the new shape {new} holds {math.prod(new)}")
    old_static = tuple(simplify(d) for d in old_shape)
    if all(isinstance(d, int) for d in old_static) and math.prod(old_static) != math.prod(new):
        raise ReshapeRejected(f"size({old_static}) != size({new})")
    if new == shard.layout.axis_extents:
        return shard  # the identity keeps every position where it was
    if math.prod(new) == 0:
        raise ReshapeRejected("a zero-size sharded tensor has no position factorization "
                              "beyond the identity")
    form = stride_form(shard)
    flat = shard.layout.flat_strides
    assert flat is not None  # materialized above
    split_of = {a.position: ax for ax, a in enumerate(shard.attrs) if isinstance(a, Split)}
    exts = shard.mesh.axis_extents
    pieces = [_Piece(e, split_of.get(p), flat[p], p) for p, e in enumerate(pos)
              if e != 1 or p in split_of]
    axes = [j for j, s in enumerate(new) if s != 1]
    if not axes:
        if pieces:
            raise ReshapeRejected("every new axis has size 1 and size-1 axes hold no "
                                  "sharding, but the layout has an extent-1 Split position")
        # nothing is split: the Partial / Broadcast states carry to an all-size-1 layout
        return rebuild(shard, tuple(new), {}, form)
    runs: dict[int, list[_Piece]] = {j: [] for j in axes}
    k, need = 0, new[axes[0]]

    def advance() -> None:
        nonlocal k, need
        k += 1
        need = new[axes[k]] if k < len(axes) else 1

    for pc in pieces:
        if pc.extent == 1:  # an extent-1 Split position stays in the run it sits in
            runs[axes[min(k, len(axes) - 1)]].append(pc)
            continue
        if k >= len(axes):  # cannot happen: the sizes agree
            raise ReshapeRejected("layout positions remain after every new axis is filled")
        j = axes[k]
        if need % pc.extent == 0:  # a whole position: rule 1
            runs[j].append(pc)
            need //= pc.extent
            if need == 1:
                advance()
            continue
        # the position does not fit whole: only rule 2 may apply
        a_out = need
        where = f"layout position {pc.source} (extent {pc.extent})"
        if pc.extent % a_out:
            raise ReshapeRejected(f"{where} straddles the boundary of new axis {j} (size "
                                  f"{new[j]}) at a point that does not divide it: only whole "
                                  f"positions (rule 1) or a Split position divided at a factor "
                                  f"(rule 2) carry through")
        if pc.mesh_axis is None:
            raise ReshapeRejected(f"{where} is not Split-bound but would be divided across new "
                                  f"axes {j} and {j + 1}: rule 1 needs whole positions and "
                                  f"rule 2 covers only a Split-bound position")
        m = exts[pc.mesh_axis]
        b_in = pc.extent // a_out
        if a_out % m:
            raise ReshapeRejected(f"{where} is Split over a mesh axis of extent {m}, which does "
                                  f"not divide the outer sub-factor {a_out} it leaves in new "
                                  f"axis {j}")
        if k + 1 >= len(axes) or new[axes[k + 1]] % b_in:
            raise ReshapeRejected(f"the device-owned block of Split {where} spans more than "
                                  f"one new-axis boundary (inner residual {b_in}); only one "
                                  f"divide is supported")
        runs[j].append(_Piece(m, pc.mesh_axis, (a_out // m) * b_in * pc.stride, pc.source,
                              True))
        if a_out // m > 1:
            runs[j].append(_Piece(a_out // m, None, b_in * pc.stride, pc.source, True))
        advance()
        runs[axes[k]].append(_Piece(b_in, None, pc.stride, pc.source, True))
        need //= b_in
        if need == 1:
            advance()
    # two Split-bound positions interacting across one divided regroup fail closed
    for j, run in runs.items():
        if any(p.divided for p in run):
            srcs = {p.source for p in run if p.divided or p.mesh_axis is not None}
            if len(srcs) > 1:
                raise ReshapeRejected(f"new axis {j} holds a divided Split position together "
                                      f"with another Split-bound position (old positions "
                                      f"{sorted(srcs)}); two Split-bound positions interacting "
                                      f"across one regroup are not supported")
    entries: list = []
    out_pieces: list[_Piece | None] = []
    for j, s in enumerate(new):
        if s == 1:
            entries.append(1)
            out_pieces.append(None)
            continue
        run = runs[j]
        entries.append(run[0].extent if len(run) == 1 else tuple(p.extent for p in run))
        out_pieces.extend(run)
    new_pos = {p.mesh_axis: i for i, p in enumerate(out_pieces)
               if p is not None and p.mesh_axis is not None}
    attrs = {ax: Split(new_pos[ax]) for ax in split_of.values()}
    out = rebuild(shard, tuple(entries), {}, SHARED if form == CUSTOM else form, attrs=attrs)
    if form == CUSTOM:
        out = out.with_strides(tuple(0 if p is None else p.stride for p in out_pieces))
    return out


# =============================================================================================
# enumeration (for the SMT layer and the tests)
# =============================================================================================
@dataclass(frozen=True)
class ReshapeCase:
    new_shape: tuple[int, ...]
    result: ShardLayout | None  # None with a reason: rejected; None without: plain output
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.reason is None


def _factorizations(n: int, max_rank: int) -> list[tuple[int, ...]]:
    """Ordered factorizations of ``n`` into factors > 1, at most ``max_rank`` of them."""
    if n == 1:
        return [()]
    out = []
    for f in range(2, n + 1):
        if n % f == 0:
            out.extend((f, *rest) for rest in _factorizations(n // f, max_rank - 1)
                       if max_rank >= 1)
    return [t for t in out if len(t) <= max_rank]


def enumerate_reshapes(layout: ShardLayout, old_shape: tuple | None = None, *,
                       max_rank: int = 4, unit_axes: int = 1) -> list[ReshapeCase]:
    """Every new shape of the same size with at most ``max_rank`` non-size-1 axes and at most
    ``unit_axes`` inserted size-1 axes, plus the identity, with the rules' verdict on each
    (small shapes only: the number of cases grows with the ordered factorizations)."""
    old_shape = layout.layout.axis_extents if old_shape is None else old_shape
    n = math.prod(layout.layout.positions)
    shapes: set[tuple[int, ...]] = {tuple(layout.layout.axis_extents)}  # the identity
    for base in _factorizations(n, max_rank) if n else [(0,)]:
        for ones in range(unit_axes + 1):
            for where in itertools.combinations_with_replacement(range(len(base) + 1), ones):
                s = list(base)
                for w in sorted(where, reverse=True):
                    s.insert(w, 1)
                shapes.add(tuple(s))
    cases = []
    for s in sorted(shapes, key=lambda t: (len(t), t)):
        try:
            cases.append(ReshapeCase(s, reshape_layout(layout, old_shape, s)))
        except ReshapeRejected as e:
            cases.append(ReshapeCase(s, None, e.reason))
    return cases

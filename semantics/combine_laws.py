"""The combine laws as data (issue 36 item 3, D439): for each binary combine that a reduction or
a scan folds with, which algebraic laws hold exactly, per dtype class.

A law holds *exactly* when it holds bit for bit on every input of the dtype class (NaN
propagation and the -0 < +0 order of max / min included). The entries are the facts that
``smt/obligations`` proves or refutes (``laws.sum_*``, ``laws.max_*`` / ``laws.min_*`` proved;
``laws.f32_add_assoc`` / ``laws.bf16_add_assoc`` refuted; ``scan.*`` for every Scan combine);
``tests/package/test_op_facts_tables.py`` holds the table and the obligations to each other.
The consumers read it instead of restating lists:

* ``order``: the combine is a lattice operation (max / min): every monotone non-decreasing
  map commutes with it, and a replicated constant added to every element commutes with it
  (the Partial commutation table, ``semantics/typeinfer/commutation.py``, and the SMT models'
  classification, ``smt/obligations/commutation_formats.py``);
* ``REDUCE_COMBINES`` (reduction kind -> combine) is the set of Partial reductions and of
  seeded / masked reduction kinds (``semantics/types.py REDUCTIONS``, ``ops/tile_reduce.py
  SEEDED_KINDS``, the generator), ``SCAN_COMBINES`` the combines of Scan;
* the SMT law obligations are registered per entry (``smt/obligations/laws.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["COMBINE_LAWS", "REDUCE_COMBINES", "SCAN_COMBINES", "CombineLaws", "order_reductions"]

#: dtype classes a law is stated for
DTYPE_CLASSES = ("int", "float")


@dataclass(frozen=True)
class CombineLaws:
    """The exact laws of one combine. ``associative`` / ``commutative``: the dtype classes on
    which the law holds bit for bit; ``identity``: has a two-sided identity element on every
    dtype class it is defined on (``reductions.identity``); ``idempotent``: op(a, a) == a;
    ``order``: a lattice operation (max / min; see the module docstring); ``int_only``: defined
    on integer dtypes only (Scan's ``mul``)."""

    associative: frozenset[str]
    commutative: frozenset[str]
    identity: bool
    idempotent: bool
    order: bool
    int_only: bool = False


_BOTH = frozenset(DTYPE_CLASSES)
_INT = frozenset({"int"})

#: combine -> its laws. IEEE addition is commutative but not associative (laws.f32_add_assoc);
#: wraparound integer addition and multiplication are both; max / min (NaN-propagating,
#: -0 < +0) are both on every dtype (laws.max_f32, laws.max_bf16, ...).
COMBINE_LAWS: Mapping[str, CombineLaws] = MappingProxyType({
    "add": CombineLaws(associative=_INT, commutative=_BOTH, identity=True, idempotent=False,
                       order=False),
    "max": CombineLaws(associative=_BOTH, commutative=_BOTH, identity=True, idempotent=True,
                       order=True),
    "min": CombineLaws(associative=_BOTH, commutative=_BOTH, identity=True, idempotent=True,
                       order=True),
    "mul": CombineLaws(associative=_INT, commutative=_INT, identity=True, idempotent=False,
                       order=False, int_only=True),
})

#: the reduction kinds that fold with one combine (Partial reductions, seeded / masked reduce)
REDUCE_COMBINES: Mapping[str, str] = MappingProxyType({"sum": "add", "max": "max", "min": "min"})

#: the combines of Scan, in table order
SCAN_COMBINES: tuple[str, ...] = tuple(COMBINE_LAWS)


def order_reductions() -> tuple[str, ...]:
    """The reduction kinds whose combine is a lattice operation (commute with monotone maps)."""
    return tuple(r for r, c in REDUCE_COMBINES.items() if COMBINE_LAWS[c].order)

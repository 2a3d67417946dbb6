"""Whole well-typed HIR programs as a hypothesis strategy (issue 7, deliverable 2).

``programs(...)`` is a strategy of ``GeneratedProgram``: a ``Module``, its entry name, the entry's
inputs (numpy arrays of the storage dtypes, or ``Sharded`` values) and metadata (the op classes
reachable from the entry, with counts; structural features; the DimVar binding; the mesh).
``generate_program(seed, ...)`` builds the same kind of program from a seed without hypothesis
(deterministic: the same seed and options give the same program and inputs) — the fast path the
volume test and the benchmark use; the strategy drives the identical generator with hypothesis
draws, so hypothesis can shrink programs (fewer steps, earlier / simpler choices).

How a program is built (docs/decisions.md D140–D146):

* A function body is a DAG grown step by step over a **pool** of typed values: parameters,
  literals and every earlier result. Each step picks an op class and calls that op's **builder**
  (``BUILDERS``: exactly one per class of ``ALL_OPS``), which draws attributes and operands that
  satisfy the op's type rule — reusing pool values wherever their types fit (sharing), creating
  fresh leaves (parameters of the entry, literals elsewhere) otherwise — or declines. The result
  type is computed by calling the op's registered type rule directly on the operand types (no
  stamping, so the finished module is inferred from scratch by whoever checks it). Unsharded
  builders are exact by construction (the volume test asserts that no proposal is ever rejected);
  sharded builders propose and the rule arbitrates (a rejected proposal is dropped and counted in
  ``GeneratedProgram.stats``).
* Structural steps: a **GridRegionExpr** loop (one to three carries, static or DimVar extent,
  start / step, an induction variable usable as an index), a **call** to a new or an existing
  Function (sharing a callee between call sites), a call to a **dispatch prototype** whose
  variants partition a DimVar's envelope into one to three ranges.
* The body returns every value no other node consumed (so nearly every generated op is
  reachable), as one value or a Tuple. With ``sharded=True`` the entry takes ShardLayout
  parameters on a 1-D or 2-D mesh and every sharded result is Resharded to Broadcast at the end.
* **Unspecified behaviour is avoided** unless ``avoid_unspecified=False``: a float → int Cast
  reads only values known to truncate into the target's range (a fresh leaf drawn in range, or a
  value with a known integer bound); Gather / RoPE indices, InsertSlice offsets, CacheUpdate
  positions are drawn inside their valid windows (for symbolic extents, inside the envelope's
  lower bound); extents are >= 1 so no mean reduces an empty set; Zeros never takes f8e8m0 (no
  zero exists) and f4e2m1 appears only with ``type_level_only=True`` (the evaluator rejects it).
  With ``avoid_unspecified=False`` float → int Casts read arbitrary values (NaN, inf, out of
  range). Indices and windows stay valid either way (out-of-range ones are evaluation errors,
  not unspecified values).
* Sharded programs are built so that evaluating per device and gathering equals the erased
  program exactly (``check_erasure``): leaves hold small integers, and every op that reads or
  produces a Partial state must keep values integral and inside the dtype's exactly
  representable integers (a tracked magnitude bound), so no summation order can change a value.

The generator itself is the package ``oracle/generator/`` (D384: ``config``, ``engine``,
``base``, a builder module per op family, ``structure``, ``limits``); this module is its public
API and imports every builder module, so ``BUILDERS`` is complete once it is imported.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterator, Sequence
from types import MappingProxyType
from typing import Any

from hypothesis import strategies as st

# every builder module registers its op classes in BUILDERS when imported (D384)
import tilefoundry.oracle.generator.math
import tilefoundry.oracle.generator.nn
import tilefoundry.oracle.generator.shape
import tilefoundry.oracle.generator.sharding
import tilefoundry.oracle.generator.tensor
import tilefoundry.oracle.generator.tile_mma
import tilefoundry.oracle.generator.tile_reduce
import tilefoundry.oracle.generator.tile_scan
import tilefoundry.oracle.generator.tile_scan_flags
import tilefoundry.oracle.generator.tile_select
import tilefoundry.oracle.generator.tile_sort  # noqa: F401
from tilefoundry.errors import TilefoundryError
from tilefoundry.oracle.generator.base import BUILDERS
from tilefoundry.oracle.generator.config import GenConfig, GeneratedProgram, _Limit, count_ops
from tilefoundry.oracle.generator.engine import _Gen
from tilefoundry.oracle.generator.limits import capability_limit
from tilefoundry.oracle.strategies import (
    DrawSource,
    RandomSource,
)
from tilefoundry.semantics.ops import (
    ALL_OPS,
    Local,
    Reshard,
)

__all__ = [
    "BUILDERS",
    "CAPS_ATTEMPTS",
    "SHARDED_FRACTION",
    "GenConfig",
    "GeneratedProgram",
    "capability_limit",
    "count_ops",
    "generate_program",
    "iter_programs",
    "programs",
]


# =============================================================================================
# public API
# =============================================================================================
def _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, sharded,
            avoid_unspecified, symbolic, type_level_only, limit=None,
            motifs: float = 0.0) -> GenConfig:
    ops_t = tuple(ALL_OPS) if ops is None else tuple(ops)
    unknown = [o for o in ops_t if o not in BUILDERS]
    if unknown:
        raise TilefoundryError(f"programs(): no builder for {unknown}; ops must be classes of "
                               f"ALL_OPS")
    if not ops_t:
        raise TilefoundryError("programs(): ops is empty")
    if limit is not None:
        if not set(ops_t) & (limit.classes - {Reshard, Local}):
            raise TilefoundryError(f"programs(): none of the ops "
                                   f"{sorted(o.__name__ for o in ops_t)} is inside the "
                                   f"capabilities")
        if sharded and not limit.sharded:
            raise TilefoundryError("programs(): sharded=True, but the capabilities declare no "
                                   "mesh (or admit no Reshard, or no dtype a sharded "
                                   "parameter can have)")
    if not 0.0 <= motifs <= 1.0:
        raise TilefoundryError(f"programs(): motifs must be a share in [0, 1], got {motifs!r}")
    return GenConfig(ops_t, max_ops, allow_loops, allow_calls, allow_dispatch, bool(sharded),
                     avoid_unspecified, symbolic, type_level_only, limit, float(motifs))


#: the fraction of capability-directed programs that are sharded (when a mesh is declared)
SHARDED_FRACTION = 0.3


#: draws of a capability-directed program before one that holds an op is accepted
CAPS_ATTEMPTS = 8


def _attempt_seed(seed: int, k: int) -> int:
    return seed if k == 0 else zlib.crc32(f"tilefoundry-caps:{seed}:{k}".encode())


def generate_program(seed: int, *, ops: Sequence[type] | None = None, max_ops: int = 8,
                     allow_loops: bool = True, allow_calls: bool = True,
                     allow_dispatch: bool = True, sharded: bool | None = None,
                     avoid_unspecified: bool = True, symbolic: bool | None = None,
                     type_level_only: bool = False, caps: Any = None,
                     motifs: float | None = None) -> GeneratedProgram:
    """One program from ``seed`` (deterministic; no hypothesis). Options as in ``programs``.

    ``motifs``: the share of steps that draw one of the shapes random steps rarely make
    (``oracle/program_motifs.py``: a narrow-float elementwise chain, a float comparison in a
    Select's condition, a nonlinear consumer of a completed mixed-sign Partial(sum), a sharded
    Reshape merging a split inner position); None means ``MOTIF_RATE`` with ``caps`` (what
    ``conformance fuzz`` draws) and 0 without them.

    ``caps`` (a backend's ``Capabilities``, see ``capability_limit``) draws only inside them:
    op classes and kinds, dtypes (of every leaf, literal, result and op attribute), reduction
    policies, overflow modes; with ``sharded=None`` (the default) a program is sharded with
    probability ``SHARDED_FRACTION`` (a coin of its own per seed) when and only when the
    capabilities declare a mesh. A draw that ends without any op is redrawn from derived seeds
    (up to ``CAPS_ATTEMPTS`` times; ``stats['caps_attempts']``), so the same seed and
    capabilities always give the same program. Without ``caps``, ``sharded=None`` is False and
    every program is what it always was for its seed."""
    from tilefoundry.oracle.program_motifs import MOTIF_RATE

    if caps is None:
        cfg = _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, bool(sharded),
                      avoid_unspecified, symbolic, type_level_only, None, motifs or 0.0)
        return _Gen(RandomSource(seed), cfg, seed).run(seed)
    limit = caps if isinstance(caps, _Limit) else capability_limit(caps)
    if sharded is None:
        import random

        sharded = limit.sharded and \
            random.Random(f"tilefoundry-sharded:{seed}").random() < SHARDED_FRACTION
    cfg = _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, sharded,
                  avoid_unspecified, symbolic, type_level_only, limit,
                  MOTIF_RATE if motifs is None else motifs)
    for k in range(CAPS_ATTEMPTS):
        s = _attempt_seed(seed, k)
        p = _Gen(RandomSource(s), cfg, s).run(seed)
        if p.op_counts:
            break
    return dataclasses.replace(p, stats=MappingProxyType({**p.stats, "caps_attempts": k + 1}))


def iter_programs(seed: int, n: int, **options: Any) -> Iterator[GeneratedProgram]:
    """``n`` programs from consecutive seeds ``seed, seed + 1, ...`` (``generate_program``)."""
    for i in range(n):
        yield generate_program(seed + i, **options)


def programs(*, ops: Sequence[type] | None = None, max_ops: int = 8, allow_loops: bool = True,
             allow_calls: bool = True, allow_dispatch: bool = True, sharded: bool = False,
             avoid_unspecified: bool = True, symbolic: bool | None = None,
             type_level_only: bool = False, caps: Any = None,
             motifs: float = 0.0) -> st.SearchStrategy:
    """A strategy of ``GeneratedProgram``s: well-typed DAGs of at most ``max_ops`` builder
    steps per function body over ``ops`` (default: every class of ``ALL_OPS``), with
    GridRegionExpr loops, calls and dispatch prototypes when allowed, and ShardLayout parameters
    on a 1-D / 2-D mesh when ``sharded``. ``symbolic`` forces (True) or forbids (False) DimVar
    parameter shapes (default: drawn). ``caps`` draws only inside a backend's capabilities
    (as in ``generate_program``; ``sharded`` stays as given); ``motifs`` the share of steps
    drawing an under-drawn shape (``program_motifs``; default none). See the module docstring
    for what is avoided."""
    limit = None if caps is None else caps if isinstance(caps, _Limit) else \
        capability_limit(caps)
    cfg = _config(ops, max_ops, allow_loops, allow_calls, allow_dispatch, sharded,
                  avoid_unspecified, symbolic, type_level_only, limit, motifs)

    @st.composite
    def _programs(draw):
        return _Gen(DrawSource(draw), cfg).run(None)

    return _programs()

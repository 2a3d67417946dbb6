"""The enclosure rule of every op class (``ENCLOSURES``): importing this module registers them all.

The rules live in ``oracle/enclosures/``, one module per op family mirroring
``semantics/evaluator/`` (D382): ``core`` (``Site``, what every rule works with), ``math``,
``nn``, ``tensor``, ``shape``, ``sharding``, ``tile_select``, ``tile_scan``,
``tile_scan_flags`` (MaskedScan, SegmentedScan), ``gather_fill`` (Gather's fill); the tile family's
MMA, sort and reduction rules are ``enclosure_tile_mma.py``, ``enclosure_tile_sort.py`` and
``tile_reduce.py``. A rule gets a ``Site`` and returns the result's enclosure: an ``Enc``,
``None`` (the result is exact), or a tuple of them for tuple results.
"""

from __future__ import annotations

from tilefoundry.oracle import tile_reduce as _tile_reduce  # noqa: F401  (registers its rules)
from tilefoundry.oracle.enclosures import (  # noqa: F401  (each registers its family's rules)  # noqa: F401  (after tensor: it wraps Gather's rule)
    core,
    gather_fill,
    math,
    nn,
    shape,
    sharding,
    tensor,
    tile_scan,
    tile_scan_flags,
    tile_select,
)

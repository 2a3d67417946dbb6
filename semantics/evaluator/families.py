"""Importing this module registers every family's evaluator implementations."""

from __future__ import annotations

from tilefoundry.semantics.evaluator import (  # noqa: F401
    math,
    nn,
    shape,
    sharding,
    tensor,
    tile_mma,
    tile_reduce,
    tile_scan,
    tile_scan_flags,
    tile_select,
    tile_sort,
)

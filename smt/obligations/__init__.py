"""The proof obligations; importing this package registers every one of them."""

from __future__ import annotations

from tilefoundry.smt.obligations import (  # noqa: F401
    commutation,
    laws,
    layout,
    reducers,
    relax,
    rounding,
    scan,
    scan_segmented,
    tile_sort,
)

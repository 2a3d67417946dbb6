"""Enclosure rule of the shape ops and the other ops whose result is exact (split from
``oracle/enclosure_rules.py``, D382; the package mirrors ``semantics/evaluator/``).
"""

from __future__ import annotations

from tilefoundry.oracle.enclosure import (
    register_enclosure,
)
from tilefoundry.oracle.enclosures.core import Site
from tilefoundry.semantics.ops.shape import ShapeCompose, ShapeExtract
from tilefoundry.semantics.ops.tensor import (
    Rank,
    ShapeOf,
    Zeros,
)


# ---------------------------------------------------------------------------------------------
# shapes and zeros are exact; Reshard / Local on plain values (mesh values take the mesh path)
# ---------------------------------------------------------------------------------------------
@register_enclosure(ShapeOf, Rank, ShapeExtract, ShapeCompose, Zeros)
def _exact(s: Site):
    return None

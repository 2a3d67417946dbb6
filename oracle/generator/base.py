"""The builder registry ``BUILDERS``: one builder per op class of ``ALL_OPS`` (split from
``oracle/programs.py``, D384; the package mirrors ``semantics/ops``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the builders' signature; engine imports this registry
    from tilefoundry.oracle.generator.engine import _Gen, _Scope


# =============================================================================================
# op builders: one per op class
# =============================================================================================
BUILDERS: dict[type, Callable[[_Gen, _Scope], bool]] = {}


def _builder(cls: type) -> Callable:
    def deco(fn):
        assert cls not in BUILDERS, cls
        BUILDERS[cls] = fn
        return fn
    return deco

"""Enclosure rule of ``Reshard`` and ``Local`` (split from ``oracle/enclosure_rules.py``, D382; the
package mirrors ``semantics/evaluator/``).
"""

from __future__ import annotations

from tilefoundry.oracle.enclosure import (
    register_enclosure,
)
from tilefoundry.oracle.enclosures.core import Site
from tilefoundry.semantics.ops.sharding import Local, Reshard


@register_enclosure(Reshard, Local)
def _sharded(s: Site):
    if s.exact_inputs:
        return None  # a Partial completion on exact inputs: judged by its admitted set
    if isinstance(s.op, Reshard):
        # a plain value to a plain type (a storage / layout annotation only): the kernel
        # copies it, so the enclosure is the operand's (mesh values take the mesh path)
        return s.enc(0)
    return "sharded"

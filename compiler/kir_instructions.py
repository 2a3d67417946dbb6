"""The kernel IR's instruction set as data (issue 36 item 3, D438).

``INSTRUCTIONS`` names every instruction class of ``compiler/kir.py`` (the ``Instr`` subclasses),
in the order the kernel IR module defines them. It is the key every per-instruction concern is
checked against: the verifier's and the interpreter's ``i_<Name>`` handlers, the symbolic
executor of ``validate/``, and each renderer's spelling (the renderers' own completeness tests
key on this tuple). ``tests/package/test_op_registries.py`` fails when an ``Instr`` subclass is
missing here, or named here without being defined.

This module imports nothing from the compiler, so a renderer or a test can import it without the
kernel IR itself.
"""

from __future__ import annotations

__all__ = ["INSTRUCTIONS", "Instruction"]

#: every kernel-IR instruction class name (``kir.<Name>``), in definition order
INSTRUCTIONS: tuple[str, ...] = (
    "Const", "Coord", "EdgeMask", "Load", "Store", "Broadcast", "Widen", "Round", "Cast",
    "BinOp", "UnOp", "Select", "Bitcast", "Math", "Reduce", "Dot", "TileLoop",
)

#: the type of one entry (a class name of ``compiler/kir.py``)
Instruction = str

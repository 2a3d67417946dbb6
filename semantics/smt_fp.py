"""Z3 floating-point spellings of the reference's float rules, shared by the law checker
(``semantics/reducer_laws.py``) and the translation validator (``validate/encode.py``).

z3 is imported when a spelling is built, not with the module: every semantics module imports
where z3 is absent (tests/package/test_no_z3.py); the law checker then falls back to its random
trials.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fminmax"]


def fminmax(a: Any, b: Any, largest: bool) -> Any:
    """NaN-propagating min / max ordering -0 < +0 (interp._fminmax, reductions._pick), on
    ``z3.FPRef`` terms."""
    import z3

    if largest:
        tie = z3.If(z3.fpIsNegative(a), b, a)
        r = z3.If(z3.fpGT(a, b), a, z3.If(z3.fpGT(b, a), b, tie))
    else:
        tie = z3.If(z3.fpIsNegative(a), a, b)
        r = z3.If(z3.fpLT(a, b), a, z3.If(z3.fpLT(b, a), b, tie))
    return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(a.sort()), r)

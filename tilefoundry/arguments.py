"""Type checks of the arguments of public calls that take user data (issue 34, Deliver 2): one
line naming the argument and the fix, as the project's own error, never numpy's ``ValueError``
about an inhomogeneous shape or Python's ``TypeError`` about iteration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.errors import InvalidArgumentError

__all__ = ["as_array", "input_list"]


def as_array(x: Any, what: str) -> np.ndarray:
    """``x`` as a numpy array (an array is returned as it is); an ``InvalidArgumentError``
    naming ``what`` when it is no array-like (a ragged nested list, a dict, an object)."""
    if isinstance(x, np.ndarray):
        return x
    try:
        a = np.asarray(x)
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidArgumentError(f"{what}: not an array ({type(x).__name__}: "
                                   f"{str(e).split('.')[0]}); pass a numpy array of the "
                                   f"parameter's dtype and shape") from None
    if a.dtype == object:
        raise InvalidArgumentError(f"{what}: not an array of numbers (a {type(x).__name__} "
                                   f"holding Python objects); pass a numpy array of the "
                                   f"parameter's dtype and shape")
    return a


def input_list(inputs: Any, what: str, *, keep: tuple[type, ...] = ()) -> list:
    """``inputs`` (a sequence of input values) as a list, each nested Python sequence made an
    array (``as_array``); values of the ``keep`` types (e.g. ``Sharded``) and arrays are kept.
    An ``InvalidArgumentError`` naming ``what`` when ``inputs`` is not a sequence."""
    if isinstance(inputs, str | bytes | np.ndarray) or not isinstance(inputs, Sequence):
        raise InvalidArgumentError(f"{what}: inputs must be a list of arrays (one per "
                                   f"parameter), got {type(inputs).__name__}")
    return [x if isinstance(x, (np.ndarray, *keep)) else as_array(x, f"{what}: inputs[{i}]")
            for i, x in enumerate(inputs)]

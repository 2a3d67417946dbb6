"""The project's exception types. Every error a user can cause is one of these."""

from __future__ import annotations

from collections.abc import Iterable


class TilefoundryError(Exception):
    """Base class of every error tilefoundry raises on user input."""


class InvalidArgumentError(TilefoundryError, ValueError):
    """An argument has a value the callee does not take."""


class UnsupportedDTypeError(TilefoundryError, TypeError):
    """A dtype exists at the type level but this operation cannot evaluate it."""


class StorageMismatchError(TilefoundryError, TypeError):
    """A numpy array's storage type does not match the dtype it is declared to hold."""


class BackendUnsupportedError(TilefoundryError, NotImplementedError):
    """A backend cannot run a program (an op, dtype or construct it has no implementation of).

    Raised from a conformance backend's ``compile`` or ``run``, it makes the case NOT_SUPPORTED
    with the error's message (which names what is missing), never a FAIL or an ERROR."""


#: The run-time checks of the HIR spec: the checks whose operands are run-time values, so no
#: type rule can make them; a program that fails one has no result. Name -> what it checks.
RUN_TIME_CHECKS: dict[str, str] = {
    "index_range": "a Gather index outside [0, extent) of the gathered axis, or a RoPE pos_ids "
                   "entry outside the cache positions [0, P)",
    "cache_bounds": "CacheUpdate's cur_pos >= 0, 1 <= s <= new.len, cur_pos + s <= cache.len",
    "slice_window": "an InsertSlice run-time offset placing the update's window outside dst "
                    "(0 <= offset, offset + update extent <= dst extent, per axis)",
    "dispatch_envelope": "a concrete extent outside a DimVar's envelope [lo, hi) at the entry "
                         "(a dispatch prototype matches no variant there)",
    "sort_nan": "a tile-family Sort with nan='error' (the implemented API's non-NaN "
                "requirement) meeting a NaN in x",
    "topk_nan": "a Top-K merge reduce (CustomReduce with TopKMerge(nan='error')) meeting a NaN "
                "in x or in the seed's values",
}


class RunTimeCheckError(TilefoundryError, RuntimeError):
    """A run-time check of the semantics failed: the program has no result for these inputs.

    The conformance protocol's way for a backend to report it (``conformance/backend.py``): raise
    it from ``run``, naming the check (one of ``RUN_TIME_CHECKS``) or ``check=None`` when the
    backend does not know which. The reference backend raises it for exactly the evaluator
    errors of those checks."""

    def __init__(self, message: str, check: str | None = None):
        if not isinstance(message, str):
            raise InvalidArgumentError(f"RunTimeCheckError: message must be a str, got "
                                       f"{type(message).__name__}")
        if check is not None and (not isinstance(check, str) or check not in RUN_TIME_CHECKS):
            raise InvalidArgumentError(bad_choice("RunTimeCheckError: check", check,
                                                  [*RUN_TIME_CHECKS, None]))
        super().__init__(message)
        self.check = check

    def __reduce__(self):  # picklable with its check (crossing a process boundary)
        return (type(self), (str(self), self.check))


class EmptyReductionError(TilefoundryError, ValueError):
    """A reduction without an identity (mean) was asked to reduce an axis of no elements."""


def bad_choice(what: str, got: object, allowed: Iterable[object], fix: str | None = None) -> str:
    """Format the standard message for an argument outside its allowed set."""
    allowed_s = ", ".join(repr(a) for a in allowed)
    msg = f"{what}: got {got!r}; allowed values are {allowed_s}"
    if fix:
        msg += f". {fix}"
    return msg

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


class EmptyReductionError(TilefoundryError, ValueError):
    """A reduction without an identity (mean) was asked to reduce an axis of no elements."""


def bad_choice(what: str, got: object, allowed: Iterable[object], fix: str | None = None) -> str:
    """Format the standard message for an argument outside its allowed set."""
    allowed_s = ", ".join(repr(a) for a in allowed)
    msg = f"{what}: got {got!r}; allowed values are {allowed_s}"
    if fix:
        msg += f". {fix}"
    return msg

"""The resource limits of the public entry points, in one place.

Every entry point that takes user input (the IR constructors, ``infer_module``, ``evaluate``,
``compile``, ``parse_module``, the printers, the conformance runner) works within these limits
and, past one, raises ``LimitError`` naming the limit, the value that crossed it and how to raise
it. The defaults come from ``Limits()``; the environment variable ``TILEFOUNDRY_LIMITS`` (e.g.
``TILEFOUNDRY_LIMITS="max_elements=1e9,max_value_bytes=8e9"``) overrides them for a process, and
``use_limits(...)`` for a block of code::

    from tilefoundry.limits import use_limits
    with use_limits(max_elements=1 << 32, max_value_bytes=16 << 30):
        evaluate(module, "f", inputs)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tilefoundry.errors import InvalidArgumentError, TilefoundryError

__all__ = ["ENV", "LimitError", "Limits", "check_value_size", "deep_recursion", "limits",
           "use_limits"]

ENV = "TILEFOUNDRY_LIMITS"


class LimitError(TilefoundryError, ValueError):
    """An input crossed one of the configurable limits (``tilefoundry.limits.Limits``)."""

    def __init__(self, message: str, limit: str | None = None):
        super().__init__(message)
        self.limit = limit

    def __reduce__(self):
        return (type(self), (str(self), self.limit))


@dataclass(frozen=True)
class Limits:
    """The limits (see the module docstring for how to change them)."""

    #: elements of one value (an evaluator result, an input, a compiled buffer)
    max_elements: int = 1 << 27
    #: bytes of one value's storage
    max_value_bytes: int = 1 << 30
    #: nesting of function calls, dispatch variants and loops in a program (each level one)
    max_nesting: int = 256
    #: loop iterations one ``evaluate`` runs, over all its loops (nested loops multiply)
    max_loop_iterations: int = 100_000
    #: nesting of a DSL source's syntax tree (expressions inside expressions, blocks)
    max_source_nesting: int = 100
    #: bits of an integer the DSL's static evaluator computes (``10 ** 10 ** 10`` is refused)
    max_static_int_bits: int = 4096
    #: items of a tuple / string the DSL's static evaluator builds (``(1,) * 10 ** 9``)
    max_static_items: int = 100_000
    #: seconds ``parse_module`` may spend on one source
    max_parse_seconds: float = 30.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and v > 0 and \
                math.isfinite(v)
            if not ok:
                raise InvalidArgumentError(f"Limits.{f.name} must be a positive finite number, "
                                           f"got {v!r}")
            if f.type == "int" and not float(v).is_integer():
                raise InvalidArgumentError(f"Limits.{f.name} must be an integer, got {v!r}")
            if f.type == "int":
                object.__setattr__(self, f.name, int(v))

    def how(self, name: str) -> str:
        """The fix sentence of a message about limit ``name``."""
        return (f"raise it with {ENV}=\"{name}=<n>\" or tilefoundry.limits.use_limits({name}=...) "
                f"(now {getattr(self, name):,})")


def _from_env() -> Limits:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return Limits()
    kw: dict[str, float] = {}
    names = {f.name for f in dataclasses.fields(Limits)}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise InvalidArgumentError(f"{ENV}: {item!r} is not NAME=VALUE with NAME one of "
                                       f"{', '.join(sorted(names))}")
        try:
            kw[name] = float(value)
        except ValueError:
            raise InvalidArgumentError(f"{ENV}: {name}={value!r} is not a number") from None
    return Limits(**kw)


_CURRENT: list[Limits] = []


def limits() -> Limits:
    """The limits in force (``use_limits`` blocks, else the environment, else the defaults)."""
    if not _CURRENT:
        _CURRENT.append(_from_env())
    return _CURRENT[-1]


@contextlib.contextmanager
def use_limits(**changes: float) -> Iterator[Limits]:
    """Run a block under the current limits with ``changes`` (names of ``Limits`` fields)."""
    names = [f.name for f in dataclasses.fields(Limits)]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise InvalidArgumentError(f"use_limits: no limit named {unknown[0]!r}; the limits are "
                                   f"{', '.join(names)}")
    new = dataclasses.replace(limits(), **changes) if changes else limits()
    _CURRENT.append(new)
    try:
        yield new
    finally:
        _CURRENT.pop()


#: the most axes a numpy array has (numpy 2's NPY_MAXDIMS)
NUMPY_MAX_DIMS = 64


def check_value_size(shape: tuple, itemsize: int, what: str | Callable[[], str]) -> None:
    """Refuse a value of ``shape`` (ints) and ``itemsize`` bytes per element that crosses
    ``max_elements`` or ``max_value_bytes``; ``what`` (or what it returns) names the value in
    the message."""
    lim = limits()
    n = math.prod(shape)
    if len(shape) > NUMPY_MAX_DIMS:  # not configurable: numpy's own bound
        raise LimitError(f"{what() if callable(what) else what}: a value of rank {len(shape)}; "
                         f"the reference holds values as numpy arrays, which have at most "
                         f"{NUMPY_MAX_DIMS} axes: reshape to fewer axes")
    if n <= lim.max_elements and n * itemsize <= lim.max_value_bytes:
        return
    if callable(what):
        what = what()
    if n > lim.max_elements:
        raise LimitError(f"{what}: shape {tuple(shape)} has {n:,} elements, more than the limit "
                         f"max_elements; {lim.how('max_elements')}", "max_elements")
    if n * itemsize > lim.max_value_bytes:
        raise LimitError(f"{what}: shape {tuple(shape)} takes {n * itemsize:,} bytes, more than "
                         f"the limit max_value_bytes; {lim.how('max_value_bytes')}",
                         "max_value_bytes")


#: Python frames one nesting level of a program may take in the recursive parts (a function
#: call through elaboration and evaluation, a loop through the evaluator)
_FRAMES_PER_LEVEL = 40


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Run a block with a recursion limit that admits ``max_nesting`` levels of calls and loops
    (a deeper program is refused before it runs); a RecursionError that escapes is reported as
    the nesting limit, never raw."""
    need = 1000 + _FRAMES_PER_LEVEL * limits().max_nesting
    old = sys.getrecursionlimit()
    if need > old:
        sys.setrecursionlimit(need)
    try:
        yield
    except RecursionError:
        raise LimitError(f"the program nests deeper than this Python stack allows; lower its "
                         f"nesting or the limit max_nesting ({limits().max_nesting:,}) to refuse "
                         f"it up front", "max_nesting") from None
    finally:
        if need > old:
            sys.setrecursionlimit(old)

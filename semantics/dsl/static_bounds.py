"""Size bounds of the DSL static evaluator's ``%`` on strings and bytes (issue 34).

``'%0*d' % (2**31 - 1, 1)`` asks Python for a 2 GiB string; the static evaluator must refuse it
before computing it, as it refuses ``(1,) * 10**9`` (``max_static_items``). Python's
printf-style formatting has no size hook, so the format is read here first: every conversion
spec is parsed (flags, a mapping key, a width and a precision that are digits or ``*``, a
length modifier, the conversion) and the result's length is bounded from above by the
format's literal text, each spec's width and precision, and each converted argument's length.
A ``%`` this parser does not understand is refused (not guessed at), so the bound is never
fooled by a spelling it skipped.

``str.format``, f-strings and ``str.join`` are not static operations of the DSL (an f-string
is an unsupported construct, attribute access on a string is refused), so ``%`` is the only
formatting the evaluator runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["FormatRefused", "percent_format_bound", "static_size"]

#: one printf-style conversion spec (Python's grammar, "printf-style String Formatting"; the
#: mapping key without nested parentheses)
_SPEC = re.compile(r"%(?:\((?P<key>[^()]*)\))?(?P<flags>[#0\- +]*)(?P<width>\*|\d+)?"
                   r"(?:\.(?P<prec>\*|\d*))?[hlL]?(?P<conv>[diouxXeEfFgGcrsab%])")

#: characters of the widest float ``%f`` / ``%d`` prints without a precision (1.8e308 has
#: 309 integer digits) and of the default precision's fraction
_FLOAT_CHARS = 330


class FormatRefused(ValueError):
    """The format has a ``%`` outside every conversion spec the bound understands."""


def _arg_chars(conv: str, v: Any) -> int:
    """An upper bound on the characters conversion ``conv`` makes of argument ``v`` (its
    width and precision apart)."""
    if conv == "c":
        return 4
    if conv in "diouxXeEfFgG":
        if isinstance(v, int):
            return v.bit_length() // 3 + 3  # octal digits bound every base >= 8; sign, prefix
        return _FLOAT_CHARS
    if isinstance(v, str | bytes):
        return len(v) if conv in "sb" else 10 * len(v) + 3  # repr / ascii: \U0010ffff
    # a tuple's text: its expanded size, each leaf as wide as the widest int / float / repr
    return 10 * static_size(v) * _LEAF_CHARS + 3


#: the size of a value that holds itself (an outer-scope list can)
_CYCLIC = 1 << 62

#: characters of one leaf of a static tuple in its repr (a 4,096-bit int has 1,234 digits)
_LEAF_CHARS = 1300


def static_size(v: Any) -> int:
    """The expanded size of a static value: a string or bytes counts its characters, a tuple
    or list the sizes of its items (at least one per item: a tuple holding one tuple 1,000
    times is 1,000 times that tuple's size), anything else 1 — a flat tuple of n ints is n. Shared items are counted once per reference, as
    ``repr`` / ``hash`` / ``==`` walk them; each distinct object is visited once (the sizes are
    memoized by identity, iteratively: no recursion however deep the nesting)."""
    sizes: dict[int, int] = {}
    keep: list[Any] = []  # the visited objects stay alive while their ids key ``sizes``
    visiting: set[int] = set()
    stack: list[tuple[Any, bool]] = [(v, False)]
    while stack:
        x, done = stack.pop()
        if id(x) in sizes:
            continue
        if isinstance(x, tuple | list):
            if done:
                sizes[id(x)] = max(len(x), sum(sizes[id(y)] for y in x))
                keep.append(x)
            elif id(x) in visiting:  # a list that holds itself: no finite size
                return _CYCLIC
            else:
                visiting.add(id(x))
                stack.append((x, True))
                stack.extend((y, False) for y in x if id(y) not in sizes)
            continue
        sizes[id(x)] = max(1, len(x)) if isinstance(x, str | bytes) else 1
        keep.append(x)
    return sizes[id(v)]


def percent_format_bound(fmt: str | bytes, args: Any) -> int:
    """An upper bound on ``len(fmt % args)``; ``FormatRefused`` for a ``%`` that no spec
    covers. Argument errors (too few, wrong types) are left to Python's own ``%``."""
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else fmt
    positional = list(args) if isinstance(args, tuple) else [args]
    mapping = args if isinstance(args, Mapping) else None
    total, pos, at = 0, 0, 0

    def take() -> Any:
        nonlocal pos
        v = positional[pos] if pos < len(positional) else 0
        pos += 1
        return v

    for m in _SPEC.finditer(text):
        literal = text[at:m.start()]
        if "%" in literal:
            raise FormatRefused(f"the format has a % at offset {at + literal.index('%')} that is "
                                f"not a conversion spec the DSL reads")
        total += len(literal)
        at = m.end()
        if m["conv"] == "%":
            total += 1
            continue
        for part in ("width", "prec"):
            w = m[part]
            if w == "*":
                n = take()
                total += abs(n) if isinstance(n, int) and not isinstance(n, bool) else 0
            elif w:
                total += int(w) if len(w) <= 18 else 10 ** 18  # int() of 4,300+ digits raises
        if m["key"] is not None:
            v = mapping.get(m["key"]) if mapping is not None else None
        else:
            v = take()
        total += _arg_chars(m["conv"], v)
    rest = text[at:]
    if "%" in rest:
        raise FormatRefused(f"the format has a % at offset {at + rest.index('%')} that is not "
                            f"a conversion spec the DSL reads")
    return total + len(rest)

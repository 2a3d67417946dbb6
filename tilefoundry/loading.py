"""One way to name a Python object on the command line (``--backend``, ``--catalog``,
``--generator``, ``compile SPEC``, ``prove --module``, repro candidates), D252:

* ``package.module:attr`` — imported; the **current directory is importable** (appended to
  ``sys.path`` when it is not on it, so it never shadows an installed package);
* ``path/to/file.py:attr`` — the file is executed once as a module of its own (named after its
  resolved path, cached in ``sys.modules`` so a second load, and forked workers, reuse it);
* ``attr`` may be dotted (``factories.fast``).

Every failure is an ``InvalidArgumentError`` naming the spec and what to do (a missing file, a
file that does not parse — with its line —, a module that cannot be imported, an attribute
that is not there — with the closest names the module has). Loading never prints a traceback.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from tilefoundry.errors import InvalidArgumentError

__all__ = ["is_file_spec", "load_object", "split_spec"]


def split_spec(spec: str, what: str) -> tuple[str, str]:
    """``(module or file, attr)`` of ``spec``; a one-line error for anything else."""
    if not isinstance(spec, str) or ":" not in spec:
        raise InvalidArgumentError(f"{what} {spec!r}: expected 'package.module:attr' or "
                                   f"'path/to/file.py:attr'")
    # a Windows drive letter never occurs here (Linux / macOS: the runner forks); the last colon
    # separates the attribute, so 'dir:with:colons/file.py:attr' still reads
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise InvalidArgumentError(f"{what} {spec!r}: expected 'package.module:attr' or "
                                   f"'path/to/file.py:attr' (both sides of ':' non-empty)")
    return target, attr


def is_file_spec(target: str) -> bool:
    return target.endswith(".py") or os.sep in target or target.startswith(".")


def _cwd_importable() -> None:
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.append(cwd)


def load_file(path: str, what: str, spec: str) -> Any:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidArgumentError(f"{what} {spec!r}: no such file {str(p)!r}")
    real = p.resolve()
    name = f"tilefoundry_user_{real.stem}_{hashlib.sha256(str(real).encode()).hexdigest()[:10]}"
    if name in sys.modules:
        return sys.modules[name]
    mspec = importlib.util.spec_from_file_location(name, real)
    if mspec is None or mspec.loader is None:
        raise InvalidArgumentError(f"{what} {spec!r}: {str(p)!r} cannot be loaded as a Python "
                                   f"module")
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[name] = mod
    # its own directory is importable while it runs (so it can import its neighbours)
    added = str(real.parent) not in sys.path
    if added:
        sys.path.insert(0, str(real.parent))
    try:
        mspec.loader.exec_module(mod)
    except SyntaxError as e:
        del sys.modules[name]
        raise InvalidArgumentError(f"{what} {spec!r}: {p} does not parse (line {e.lineno}: "
                                   f"{e.msg})") from None
    except Exception as e:
        del sys.modules[name]
        raise InvalidArgumentError(f"{what} {spec!r}: running {p} raised "
                                   f"{type(e).__name__}: {e}") from None
    finally:
        if added:
            sys.path.remove(str(real.parent))
    return mod


def load_object(spec: str, what: str = "spec") -> Any:
    """The object ``spec`` names (see the module docstring)."""
    target, attr = split_spec(spec, what)
    if is_file_spec(target):
        mod = load_file(target, what, spec)
    else:
        _cwd_importable()
        try:
            mod = importlib.import_module(target)
        except ImportError as e:
            hint = "" if Path(target.replace(".", os.sep) + ".py").exists() or \
                not Path(target).exists() else f" (for a file, write {target}.py:{attr})"
            raise InvalidArgumentError(f"{what} {spec!r}: cannot import {target!r}: {e}{hint}") \
                from None
        except SyntaxError as e:
            raise InvalidArgumentError(f"{what} {spec!r}: {target!r} does not parse (line "
                                       f"{e.lineno}: {e.msg})") from None
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            near = difflib.get_close_matches(part, names, n=3)
            raise InvalidArgumentError(
                f"{what} {spec!r}: {target!r} has no attribute {part!r}"
                + (f" (closest: {', '.join(repr(n) for n in near)})" if near else ""))
        obj = getattr(obj, part)
    return obj

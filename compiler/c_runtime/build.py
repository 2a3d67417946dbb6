"""Build and load C sources through a content-hashed cache (docs/decisions.md D183-D185).

``load(source)`` returns a ``ctypes.CDLL`` for a C translation unit. The shared object lives in
the cache directory under the sha256 of everything that decides the bytes of the build: the
source text, the contents of every header on the include path (this folder's ``tf_numerics.h``
included), the compiler's resolved path and ``--version`` text, the flags, and the instruction
set ``-march`` resolves to (the compiler's predefined macros under it). Equal keys mean equal
builds, so a key that is present is loaded without invoking the compiler.

* Cache directory: ``$TILEFOUNDRY_CACHE`` if set, else ``$XDG_CACHE_HOME/tilefoundry`` (default
  ``~/.cache/tilefoundry``); builds go to its ``c/`` subfolder, read at every call.
* The cache folder (``c/``) is the user's own, mode 0700 (made so when it is not; refused when it
  belongs to another user). Every build records ``<key>.json``: the key, the sha256 of the
  source it was built from and of the shared object. A hit is loaded only when that record
  matches the object's bytes; a tampered or unrecorded object is removed and built again, and
  an edited ``<key>.c`` is rewritten from the text before compiling (D205).
* Writes are atomic: the compiler writes a uniquely named temporary file in the cache folder,
  which ``os.replace`` moves onto the final name, so a reader (another process building the
  same key at the same moment included) sees no file or a complete one, never a partial one.
  Two racing builders both compile and the last rename wins; the contents are equal.
* The compiler runs from an argument list (``subprocess.run`` without a shell) on a snapshot
  ``<key>.c`` of the text the key was computed from, kept in the cache folder for inspection (a
  file source's snapshot starts with ``#line 1 "<file>"``, so diagnostics name the file). A
  failing build raises ``CCompileError`` carrying the compiler's stderr, the command and the
  source path (the file, or the snapshot of a text source).
* Flags keep IEEE semantics: no fast-math, no FP contraction (``-ffp-contract=off``); see
  ``DEFAULT_FLAGS`` and D183 for each flag and why ``-march=native`` is safe here.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilefoundry.compiler.errors import CompilerError

__all__ = [
    "COMPILE_HOOKS",
    "DEFAULT_FLAGS",
    "RUNTIME_DIR",
    "BuildResult",
    "CCompileError",
    "Toolchain",
    "build",
    "build_key",
    "cache_dir",
    "forget_loaded",
    "gcc_vectorized_functions",
    "load",
    "toolchain",
]

#: The folder holding ``tf_numerics.h`` / ``.c``; always on the include path.
RUNTIME_DIR = Path(__file__).resolve().parent

#: Flags of every build (D183). ``-O3`` vectorizes; the rest keep IEEE value semantics:
#: ``-fno-fast-math`` (the default, stated), ``-ffp-contract=off`` (no a*b+c -> fma),
#: ``-fno-trapping-math`` (FP operations are assumed not to trap: the default environment masks
#: every trap and no one reads the flags; it lets GCC if-convert, hence vectorize, selects that
#: contain FP operations; values are unchanged, and it is clang's default),
#: ``-fno-math-errno`` (sqrtf and friends need not set errno, so they inline as the correctly
#: rounded instruction; values are unchanged). ``-march`` comes separately (``MARCH``).
DEFAULT_FLAGS: tuple[str, ...] = (
    "-std=gnu11",
    "-O3",
    "-fno-fast-math",
    "-ffp-contract=off",
    "-fno-trapping-math",
    "-fno-math-errno",
    "-fPIC",
    "-shared",
    "-Werror=implicit-function-declaration",
    "-Werror=incompatible-pointer-types",
    "-Werror=int-conversion",
)

#: ``-march=`` value: the host's instruction set. Without fast-math and with contraction off it
#: changes speed, not values; the key holds what it resolves to (D183).
MARCH = "native"

#: Called with the argument list before every compiler invocation (tests count builds).
COMPILE_HOOKS: list[Callable[[list[str]], None]] = []

_COMPILE_TIMEOUT_S = 600


class CCompileError(CompilerError, RuntimeError):
    """The C compiler rejected a source (or could not be run).

    ``source_path``: the file it compiled (kept for inspection); ``stderr``: the compiler's
    diagnostics; ``command``: the argument list; ``returncode``: its exit status (None when it
    could not be started or timed out).
    """

    def __init__(self, message: str, *, source_path: Path | None, stderr: str,
                 command: Sequence[str], returncode: int | None) -> None:
        super().__init__(message)
        self.source_path = source_path
        self.stderr = stderr
        self.command = list(command)
        self.returncode = returncode


@dataclass(frozen=True)
class Toolchain:
    """A C compiler: resolved path, ``--version`` text, and the predefined macros under
    ``-march=MARCH`` (they name every ISA extension the build may use)."""

    path: str
    version: str
    target: str


@dataclass(frozen=True)
class BuildResult:
    key: str
    path: Path  # the shared object
    source_path: Path  # the source that was (or would be) compiled
    compiled: bool  # False: a cache hit


# ---------------------------------------------------------------------------------------------
# toolchain and key
# ---------------------------------------------------------------------------------------------
def _find_cc(cc: str | None) -> str:
    name = cc or os.environ.get("TILEFOUNDRY_CC") or shutil.which("cc") or shutil.which("gcc")
    found = shutil.which(name) if name else None
    if not found:
        raise CCompileError(
            f"no C compiler found (looked for {name or 'cc / gcc'} on PATH); install gcc or "
            f"set TILEFOUNDRY_CC to the compiler's path",
            source_path=None, stderr="", command=[], returncode=None)
    return os.path.realpath(found)


def _run_info(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL, env=_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CCompileError(f"could not run {argv[0]}: {exc}", source_path=None, stderr="",
                            command=argv, returncode=None) from exc
    if out.returncode != 0:
        raise CCompileError(
            f"{argv[0]} failed while describing itself (exit {out.returncode}): "
            f"{out.stderr.strip()}", source_path=None, stderr=out.stderr, command=argv,
            returncode=out.returncode)
    return out.stdout


@functools.cache
def _toolchain(path: str, march: str) -> Toolchain:
    version = _run_info([path, "--version"])
    macros = _run_info([path, f"-march={march}", "-E", "-dM", "-x", "c", os.devnull])
    return Toolchain(path, version, "\n".join(sorted(macros.splitlines())))


def toolchain(cc: str | None = None, march: str = MARCH) -> Toolchain:
    """The compiler ``cc`` (default: ``$TILEFOUNDRY_CC``, else ``cc`` / ``gcc`` on PATH),
    described once per process."""
    return _toolchain(_find_cc(cc), march)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["LC_ALL"] = "C"  # diagnostics in one language, whatever the user's locale
    return env


def _headers(include_dirs: Iterable[Path]) -> list[tuple[str, str]]:
    out = []
    for d in include_dirs:
        for h in sorted(Path(d).glob("*.h")):
            out.append((str(h), hashlib.sha256(h.read_bytes()).hexdigest()))
    return out


def build_key(source_text: str, *, flags: Sequence[str], tc: Toolchain,
              include_dirs: Sequence[Path], file: Path | None = None) -> str:
    """sha256 of everything that decides the built bytes (see the module docstring)."""
    blob = json.dumps({
        "source": source_text,
        "file": str(file) if file is not None else None,
        "headers": _headers(include_dirs),
        "cc": tc.path,
        "version": tc.version,
        "target": tc.target,
        "flags": list(flags),
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_dir() -> Path:
    """The cache root: ``$TILEFOUNDRY_CACHE``, else ``$XDG_CACHE_HOME/tilefoundry``, else
    ``~/.cache/tilefoundry``."""
    env = os.environ.get("TILEFOUNDRY_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tilefoundry"


# ---------------------------------------------------------------------------------------------
# build and load
# ---------------------------------------------------------------------------------------------
def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _include_args(include_dirs: Sequence[str | os.PathLike],
                  file: Path | None) -> tuple[list[Path], list[str]]:
    """(folders whose headers enter the key, the compiler's search options). The compiler
    reads a snapshot in the cache folder, so a file source's own folder is searched first for
    `#include "..."` (``-iquote``), where the compiler would have looked beside the file."""
    incs = [Path(d).resolve() for d in include_dirs]
    search = [f"-I{d}" for d in (*incs, RUNTIME_DIR)]
    if file is not None:
        search = ["-iquote", str(file.parent), *search]
        incs.insert(0, file.parent)
    return [*incs, RUNTIME_DIR], search


def _source_of(source: str | os.PathLike) -> tuple[str, Path | None]:
    """(text, file): a ``str`` is C source text; a path-like names a file."""
    if isinstance(source, str):
        return source, None
    p = Path(source).resolve()
    try:
        return p.read_text(), p
    except OSError as exc:
        raise CCompileError(f"cannot read C source {p}: {exc}", source_path=p, stderr="",
                            command=[], returncode=None) from exc


def build(source: str | os.PathLike, *, include_dirs: Sequence[str | os.PathLike] = (),
          extra_flags: Sequence[str] = (), cc: str | None = None,
          march: str = MARCH, libs: Sequence[str] = ()) -> BuildResult:
    """Compile ``source`` (C text, or a path-like naming a ``.c`` file) to a shared object in
    the cache, unless its key is already there. ``libs`` (``-lNAME``) are linked after the
    source, before ``-lm``. Raises ``CCompileError`` on failure."""
    text, file = _source_of(source)
    tc = toolchain(cc, march)
    incs, search = _include_args(include_dirs, file)
    flags = [*DEFAULT_FLAGS, f"-march={march}", *extra_flags]
    key = build_key(text, flags=[*flags, *libs], tc=tc, include_dirs=incs, file=file)
    root = _private_dir(cache_dir() / "c")
    so = root / f"{key}.so"
    # The compiler reads a snapshot of the text the key was computed from (so a file edited
    # meanwhile cannot land under this key); for a file, `#line` makes the diagnostics name it.
    snapshot = root / f"{key}.c"
    src_path = file if file is not None else snapshot
    if file is not None:
        quoted = str(file).replace("\\", "\\\\").replace('"', '\\"')
        want = f'#line 1 "{quoted}"\n{text}'.encode()
    else:
        want = text.encode()
    if so.exists():
        if _verified(root, key, so, want):
            return BuildResult(key, so, src_path, compiled=False)
        so.unlink(missing_ok=True)  # tampered or unrecorded: never loaded, built again
    # an edited snapshot must not be compiled under this key: it is rewritten from the text
    if not snapshot.exists() or snapshot.read_bytes() != want:
        _write_atomic(snapshot, want)
    tmp = root / f".{key}.{os.getpid()}.{uuid.uuid4().hex}.so.tmp"
    argv = [tc.path, *flags, *search, "-o", str(tmp), str(snapshot), *libs, "-lm"]
    for hook in list(COMPILE_HOOKS):
        hook(argv)
    try:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, env=_env(),
                                 stdin=subprocess.DEVNULL, timeout=_COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise CCompileError(
                f"C compile of {src_path} timed out after {_COMPILE_TIMEOUT_S} s",
                source_path=src_path, stderr=str(exc.stderr or ""), command=argv,
                returncode=None) from exc
        except OSError as exc:
            raise CCompileError(f"could not run the C compiler {tc.path}: {exc}",
                                source_path=src_path, stderr="", command=argv,
                                returncode=None) from exc
        if out.returncode != 0 or not tmp.exists():
            raise CCompileError(
                f"C compile of {src_path} failed (exit {out.returncode}); source kept at "
                f"{src_path}\n{out.stderr.rstrip()}",
                source_path=src_path, stderr=out.stderr, command=argv,
                returncode=out.returncode)
        digest = _sha256(tmp.read_bytes())
        os.replace(tmp, so)
        _write_atomic(root / f"{key}.json", json.dumps(
            {"key": key, "so_sha256": digest, "source_sha256": _sha256(want)}).encode())
    finally:
        tmp.unlink(missing_ok=True)
    return BuildResult(key, so, src_path, compiled=True)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verified(root: Path, key: str, so: Path, want: bytes, field: str = "so_sha256") -> bool:
    """A cached shared object is loaded only when its record (``<key>.json``, written after the
    build) names this key, the source it was built from, and the object's own bytes (under
    ``field``: the CUDA cache's artefacts use the same rule)."""
    try:
        rec = json.loads((root / f"{key}.json").read_text())
        return (isinstance(rec, dict) and rec.get("key") == key and
                rec.get("source_sha256") == _sha256(want) and
                rec.get(field) == _sha256(so.read_bytes()))
    except (OSError, ValueError):
        return False


def _private_dir(d: Path) -> Path:
    """The cache folder, created with mode 0700; an existing one must belong to this user (it
    is then made 0700). Anything else is refused: a folder others can write lets them choose
    the code this process loads."""
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CompilerError(f"the build cache {d} belongs to user id {st.st_uid}, not to you "
                            f"({os.getuid()}); set TILEFOUNDRY_CACHE to a folder of your own")
    if st.st_mode & 0o077:
        try:
            d.chmod(0o700)
        except OSError as e:
            raise CompilerError(f"the build cache {d} has mode {st.st_mode & 0o777:o} and "
                                f"cannot be made 0700 ({e}); set TILEFOUNDRY_CACHE to a folder "
                                f"of your own") from None
    return d


_LOADED: dict[Path, ctypes.CDLL] = {}
_LOCK = threading.Lock()


def load(source: str | os.PathLike, **build_kw) -> ctypes.CDLL:
    """``build`` then ``ctypes.CDLL`` (memoized per process by the shared object's path).

    A cached object the loader rejects (for instance truncated by a full disk before this
    cache wrote atomically) is removed and built again once.
    """
    res = build(source, **build_kw)
    with _LOCK:
        lib = _LOADED.get(res.path)
        if lib is not None:
            return lib
        try:
            lib = ctypes.CDLL(str(res.path))
        except OSError:
            if res.compiled:
                raise
            res.path.unlink(missing_ok=True)
            res = build(source, **build_kw)
            lib = ctypes.CDLL(str(res.path))
        _LOADED[res.path] = lib
        return lib


def forget_loaded() -> None:
    """Drop the per-process memo of ``load`` (the next ``load`` goes back to the cache
    folder; already loaded libraries stay mapped)."""
    with _LOCK:
        _LOADED.clear()


# ---------------------------------------------------------------------------------------------
# vectorization report (GCC)
# ---------------------------------------------------------------------------------------------
def gcc_vectorized_functions(source: str | os.PathLike, *,
                             include_dirs: Sequence[str | os.PathLike] = (),
                             extra_flags: Sequence[str] = (), cc: str | None = None,
                             march: str = MARCH) -> dict[str, int]:
    """Compile ``source`` with the build flags and GCC's vectorizer dump; return, per function,
    how many loops GCC vectorized (a vectorized epilogue counts as one more). Nothing is
    cached; GCC only."""
    text, file = _source_of(source)
    tc = toolchain(cc, march)
    _, search = _include_args(include_dirs, file)
    flags = [f for f in DEFAULT_FLAGS if f != "-shared"]
    with tempfile.TemporaryDirectory(prefix="tf-vect-") as tmpd:
        src = Path(tmpd) / "unit.c"
        src.write_text(text)
        argv = [tc.path, *flags, f"-march={march}", *extra_flags, *search,
                "-c", "-o", str(Path(tmpd) / "unit.o"), "-fdump-tree-vect-optimized",
                f"-dumpdir={tmpd}/", str(src)]
        out = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=tmpd,
                             stdin=subprocess.DEVNULL, timeout=_COMPILE_TIMEOUT_S)
        if out.returncode != 0:
            raise CCompileError(f"vectorization report of {file or src} failed\n{out.stderr}",
                                source_path=file or src, stderr=out.stderr, command=argv,
                                returncode=out.returncode)
        dumps = list(Path(tmpd).glob("*.vect"))
        if not dumps:
            raise CCompileError(f"{tc.path} wrote no vectorizer dump (not GCC?)",
                                source_path=file or src, stderr=out.stderr, command=argv,
                                returncode=out.returncode)
        txt = dumps[0].read_text()
    parts = re.split(r"\n;; Function (\S+)", txt)
    res: dict[str, int] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        res[name] = len(re.findall(r"optimized: loop vectorized", body))
    return res

"""NVRTC builds of CUDA C++ sources through a content-hashed cache (docs/decisions.md D210).

``build(source, arch)`` compiles a rendered CUDA source (``render_cuda``) with NVRTC through
NVIDIA's ``cuda-python`` (``cuda.bindings.nvrtc``; the optional extra ``tilefoundry[cuda]``)
and returns the PTX (``arch="compute_90"``: needs no GPU, the CI check) or the cubin
(``arch="sm_90"``: what the executable loads). NVRTC needs no device, so every build here runs
on a CPU-only machine.

* Options (``OPTIONS``): ``--fmad=false`` (no contraction of ``a * b + c`` into an FMA),
  ``--prec-div=true --prec-sqrt=true --ftz=false`` (IEEE division, square root and subnormals;
  NVRTC's defaults, spelled out so the key records them), ``-std=c++17``; never
  ``-use_fast_math`` (``tf_numerics.h`` refuses to compile under it).
* The header ``tf_numerics.h`` is handed to NVRTC in memory (no include path).
* Key: sha256 of the source text, the header's contents, NVRTC's version, the options and the
  architecture. The cache is ``<cache>/cuda`` (``c_runtime.build.cache_dir``), mode 0700 and
  the user's own (``c_runtime.build``'s rules); a build writes ``<key>.cu`` (the source, kept
  for inspection and named in compile errors), the artefact ``<key>.ptx`` / ``<key>.cubin`` and
  ``<key>.json`` (the key and the sha256 of source and artefact), each atomically. A hit is
  used only when its record matches the artefact's bytes; anything else is built again.
* An NVRTC error raises ``CudaCompileError`` carrying NVRTC's log and the path of the kept
  source.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tilefoundry.compiler.c_runtime.build import (
    RUNTIME_DIR,
    _private_dir,
    _verified,
    _write_atomic,
    cache_dir,
)
from tilefoundry.compiler.errors import CompilerError
from tilefoundry.errors import InvalidArgumentError

__all__ = ["HEADER", "OPTIONS", "PTX_ARCH", "TARGET_SM", "CudaBuild", "CudaCompileError", "build",
           "compile_source", "cuda_python", "nvrtc_version", "unpack"]

OPTIONS: tuple[str, ...] = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true",
                            "--ftz=false", "-std=c++17")
#: the virtual architecture of the CPU-side PTX check (Hopper: the H200)
PTX_ARCH = "compute_90"
#: the SM the CUDA backend renders for (Hopper: the H200). The wgmma mapping (D520) is chosen
#: only for 90: its programs are built for ``compute_90a`` (arch-specific: sm_90 only)
TARGET_SM = 90
HEADER = RUNTIME_DIR / "tf_numerics.h"
HOW = ("install the CUDA extra: pip install 'tilefoundry[cuda]' (cuda-bindings and "
       "nvidia-cuda-nvrtc)")

#: called with (arch, options) before every NVRTC compile (tests count builds)
COMPILE_HOOKS: list = []


class CudaCompileError(CompilerError, RuntimeError):
    """NVRTC rejected a source: ``log`` is NVRTC's log, ``source_path`` the kept source."""

    def __init__(self, message: str, *, source_path: Path | None = None, log: str = "",
                 options: Sequence[str] = ()):
        super().__init__(message)
        self.source_path = source_path
        self.log = log
        self.options = list(options)


@dataclass(frozen=True)
class CudaBuild:
    key: str
    path: Path  # the PTX or cubin
    source_path: Path  # the kept source
    compiled: bool  # False: a cache hit

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()


def cuda_python(module: str):
    """``cuda.bindings.<module>`` (``nvrtc``, ``driver``), or the error naming the extra."""
    try:
        return importlib.import_module(f"cuda.bindings.{module}")
    except ImportError as e:
        raise InvalidArgumentError(f"the CUDA backend needs cuda-python ({e}); {HOW}") from None


def unpack(res: tuple, success: object, name_of, error: type, what: str):
    """The values of a cuda-python result ``(status, *values)``: None, one value or a tuple; a
    status other than ``success`` raises ``error`` naming the call and ``name_of(status)``."""
    if res[0] != success:
        raise error(f"{what} failed: {name_of(res[0])}")
    vals = res[1:]
    return None if not vals else vals[0] if len(vals) == 1 else vals


def _nvrtc():
    return cuda_python("nvrtc")


def _ok(nvrtc, res, what: str):
    return unpack(res, nvrtc.nvrtcResult.NVRTC_SUCCESS,
                  lambda e: nvrtc.nvrtcGetErrorString(e)[1].decode(errors="replace"),
                  CudaCompileError, f"NVRTC {what}")


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    major, minor = _ok(nvrtc, nvrtc.nvrtcVersion(), "version")
    return int(major), int(minor)


def _key(source: str, header: bytes, arch: str, options: Sequence[str]) -> str:
    blob = json.dumps({"source": source, "header": hashlib.sha256(header).hexdigest(),
                       "nvrtc": list(nvrtc_version()), "arch": arch,
                       "options": list(options)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compile_source(source: str, arch: str = PTX_ARCH, *, name: str = "tf_program.cu",
                   options: Sequence[str] = OPTIONS,
                   source_path: Path | None = None) -> bytes:
    """NVRTC ``source`` (no cache): the PTX (``compute_*``) or cubin (``sm_*``) bytes."""
    if not (arch.startswith("compute_") or arch.startswith("sm_")):
        raise InvalidArgumentError(f"CUDA architecture {arch!r}: expected compute_NN (PTX) "
                                   f"or sm_NN (cubin), e.g. compute_90")
    nvrtc = _nvrtc()
    opts = [f"--gpu-architecture={arch}", *options]
    for hook in list(COMPILE_HOOKS):
        hook(arch, opts)
    prog = _ok(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 1,
                                               [HEADER.read_bytes()], [b"tf_numerics.h"]),
               "program creation")
    try:
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        size = _ok(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log_text = log.rstrip(b"\0 ").decode(errors="replace")
        if res[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            where = source_path or name
            raise CudaCompileError(f"NVRTC compile of {where} failed; source kept at {where}\n"
                                   f"{log_text}", source_path=source_path, log=log_text,
                                   options=opts)
        if arch.startswith("compute_"):
            n = _ok(nvrtc, nvrtc.nvrtcGetPTXSize(prog), "PTX size")
            buf = b" " * n
            _ok(nvrtc, nvrtc.nvrtcGetPTX(prog, buf), "PTX")
        else:
            n = _ok(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
            buf = b" " * n
            _ok(nvrtc, nvrtc.nvrtcGetCUBIN(prog, buf), "cubin")
        return bytes(buf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def build(source: str, arch: str = PTX_ARCH, *,
          options: Sequence[str] = OPTIONS) -> CudaBuild:
    """``compile_source`` through the cache (see the module docstring)."""
    header = HEADER.read_bytes()
    key = _key(source, header, arch, options)
    root = _private_dir(cache_dir() / "cuda")
    ext = "ptx" if arch.startswith("compute_") else "cubin"
    art = root / f"{key}.{ext}"
    src_path = root / f"{key}.cu"
    want = source.encode()
    if art.exists():
        if _verified(root, key, art, want, "artefact_sha256"):
            return CudaBuild(key, art, src_path, compiled=False)
        art.unlink(missing_ok=True)  # tampered or unrecorded: built again
    if not src_path.exists() or src_path.read_bytes() != want:
        _write_atomic(src_path, want)
    data = compile_source(source, arch, name=src_path.name, options=options,
                          source_path=src_path)
    _write_atomic(art, data)
    _write_atomic(root / f"{key}.json", json.dumps(
        {"key": key, "artefact_sha256": _sha(data), "source_sha256": _sha(want)}).encode())
    return CudaBuild(key, art, src_path, compiled=True)

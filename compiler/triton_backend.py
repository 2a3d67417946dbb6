"""The Triton backend (``--backend triton``; pipeline target ``triton``; issue 17).

The pipeline runs as for ``kernel-interp`` (typeinfer, elaborate, canonicalize, lower, fuse);
``render_triton.render`` turns the fused kernel IR into a Triton module (one ``@triton.jit``
function per kernel), written to a content-hashed file under ``<cache>/triton``
(``c_runtime.build.cache_dir``, private to the user as for the C runtime; Triton reads a
kernel's source from its file) and imported once per process. The executable keeps the
kernel-IR interpreter's flat numpy storage (inputs, temps, consts; outputs read back through
the buffers' strides) and launches each kernel on it: host loops run on the host.

Where it runs (``TritonBackend(device=...)``; by default from the environment):

* ``TRITON_INTERPRET=1`` (or ``device="interpret"``): Triton's interpreter on the CPU, on the
  storage itself (torch CPU tensors sharing the numpy memory). The variable must be set before
  the generated module is imported; the backend sets it in its own process when asked for the
  interpreter, so ``TRITON_INTERPRET=1 tilefoundry conformance run --backend triton`` and
  ``TritonBackend(device="interpret")`` are the same.
* ``device="cuda"`` (the default when the machine has an NVIDIA device node): the kernels run
  on the GPU; each launch uploads the storage its kernel reads and downloads what it writes
  (numpy stays the one copy of record, so host loops and run-time checks are unchanged).
  CUDA is initialised only at the first launch, inside the process that runs the case (the
  conformance runner forks its workers: a parent that initialised CUDA breaks every worker).
  Kernels are launched with ``enable_fp_fusion=False`` (no FMA contraction).
* neither: constructing the backend raises a one-line ``InvalidArgumentError`` saying how to
  run it. There is never a fallback to another backend.

Capabilities: the lowering's ops, dtypes, policies and overflow modes (those of
``kernel-interp``, sharded programs and ``Local`` included: the per-device lowering runs
every device's launches on the one device, collectives on the host between them, D347); whatever the renderer cannot handle
for a particular program raises ``NotSupportedError`` naming the kernel-IR construct during
the render pass, before any kernel is built or launched. A Triton compile error becomes
``TritonCompileError`` with the generated source kept on disk (``source_path``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilefoundry.compiler import kir
from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.c_runtime.build import _private_dir, _write_atomic, cache_dir
from tilefoundry.compiler.errors import CompilerError
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Kernel, Program
from tilefoundry.compiler.pipeline import TARGETS, source_target
from tilefoundry.compiler.render_triton import render, storage_view
from tilefoundry.compiler.render_triton_gemm import ensure_allocator
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.conformance.backend import (
    Capabilities,
)
from tilefoundry.errors import InvalidArgumentError

__all__ = ["DEVICES", "TRITON_TILES", "DeviceRun", "TritonBackend", "TritonCompileError", "TritonExecutable",
           "load_module", "triton_device"]

DEVICES = ("interpret", "cuda")
#: the Triton backend's tiles: matmul kernels get 128 x 128 output tiles and a K block of 64,
#: the shape ``tl.dot`` runs on tensor cores (``render_triton_dot.DotLoopT.mma_operands``);
#: narrow softmax in f32 (``TileConfig.narrow_f32``)
TRITON_TILES = TileConfig(k_block=64, dot_mn=(128, 128), narrow_f32=True)
HOW = ("the triton backend needs a CUDA GPU or Triton's CPU interpreter: run it as "
       "`TRITON_INTERPRET=1 tilefoundry conformance run --backend triton ...` "
       "(or TritonBackend(device='interpret'))")


class TritonCompileError(CompilerError, RuntimeError):
    """Triton rejected a rendered kernel; ``source_path`` is the generated module (kept)."""

    def __init__(self, message: str, *, source_path: Path | None):
        super().__init__(message)
        self.source_path = source_path


def _gpu_present() -> bool:
    """An NVIDIA device node, found without initialising CUDA in this process."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def triton_device(device: str | None = None) -> str:
    """Where kernels run: ``device``, else ``interpret`` under ``TRITON_INTERPRET=1``, else
    ``cuda`` when a GPU is present; otherwise a one-line error saying how to run it."""
    if device is None:
        if os.environ.get("TRITON_INTERPRET") == "1":
            return "interpret"
        if _gpu_present():
            return "cuda"
        raise InvalidArgumentError(HOW)
    if device not in DEVICES:
        raise InvalidArgumentError(f"triton device {device!r}: expected one of {DEVICES}")
    if device == "cuda" and not _gpu_present():
        raise InvalidArgumentError(f"triton device 'cuda': no NVIDIA GPU here; {HOW}")
    return device


def _cache_dir() -> Path:
    """``<cache>/triton``, private to this user (the C runtime's rules: a folder others can
    write would let them choose the code this process imports)."""
    return _private_dir(cache_dir() / "triton")


_MODULES: dict[str, Any] = {}


def _interpret_mode() -> None:
    """Ask for Triton's interpreter in this process. ``triton.jit`` reads ``TRITON_INTERPRET``
    when it decorates a function, triton's own library functions (``tl.zeros``, ``tl.sum``)
    included, which happens when ``triton`` is first imported: a process that imported it
    without the variable cannot interpret (an error saying so, not a half-interpreted run)."""
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton" in sys.modules:
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction

        if not isinstance(tl.zeros, InterpretedFunction):
            raise InvalidArgumentError(
                "the triton interpreter was asked for after triton was imported without "
                "TRITON_INTERPRET=1: set TRITON_INTERPRET=1 before the process imports triton")


def load_module(source: str, device: str) -> tuple[Any, Path]:
    """Import a rendered module (content-hashed file; one import per process and device)."""
    if device == "interpret":
        _interpret_mode()
    h = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = _cache_dir() / f"tf_triton_{h}.py"
    key = f"{device}:{h}"
    hit = _MODULES.get(key)
    if hit is not None:
        return hit, path
    if not path.exists() or path.read_text() != source:
        _write_atomic(path, source.encode())
    name = f"tf_triton_{h}_{device}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        sys.modules.pop(name, None)
        raise TritonCompileError(f"the generated Triton module {path} does not load: "
                                 f"{type(e).__name__}: {e}", source_path=path) from e
    _MODULES[key] = mod
    return mod, path


class TritonExecutable(Interpreter):
    """Runs a program's rendered Triton kernels on flat numpy storage (the interpreter's)."""

    def __init__(self, program: Program, source: str, device: str):
        super().__init__(program)
        self.source, self.device = source, device
        self.module, self.source_path = load_module(source, device)
        self.table = self.module.KERNELS
        self.opts = {} if device == "interpret" else {"enable_fp_fusion": False}
        #: kernels with device-side TMA descriptors (the GEMM path, D408) need Triton's
        #: scratch allocator in the launching thread
        self.tma = device != "interpret" and "make_tensor_descriptor" in source

    def launch(self, k: Kernel, st: dict[str, np.ndarray]) -> None:
        if k.instances == 0 or any(n == 0 for n in k.domain):
            return
        import torch

        fn, roots, n, _, launch = self.table[k.name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read-only inputs: no kernel writes them
            host = [torch.from_numpy(storage_view(st[r], self.bm[r].dtype)) for r in roots]
        args = host if self.device == "interpret" else [t.to("cuda") for t in host]
        if self.tma:
            ensure_allocator()
        try:
            fn[(n,)](*args, **self.opts, **({} if self.device == "interpret" else launch))
        except Exception as e:
            from triton.compiler.errors import CompilationError
            from triton.runtime.errors import InterpreterError

            # the interpreter reports a kernel its front end rejects as an InterpreterError
            if isinstance(e, CompilationError | InterpreterError):
                raise TritonCompileError(f"kernel {k.name}: Triton could not compile it "
                                         f"(source kept in {self.source_path}): "
                                         f"{str(e)[-1500:]}",
                                         source_path=self.source_path) from e
            raise
        if self.device != "interpret":
            written = {kir.root_of(i.buffer, self.bm).name for i in kir.iter_instrs(k.body)
                       if isinstance(i, kir.Store)}
            for r, h, d in zip(roots, host, args, strict=True):
                if r in written:
                    h.copy_(d.cpu())


class DeviceRun:
    """A compiled program with its whole storage resident on the GPU, for timing
    (``benchmarks/bench_gpu.py``): the inputs are uploaded once, ``launch()`` runs every kernel
    in program order with no host copies, ``outputs()`` reads the results back (as
    ``TritonExecutable.run`` returns them). Programs with host loops or run-time checks are
    refused: their steps need the host between launches."""

    def __init__(self, exe: TritonExecutable, inputs: Sequence[np.ndarray]):
        if exe.device != "cuda":
            raise InvalidArgumentError(f"DeviceRun needs the triton backend on 'cuda', not "
                                       f"{exe.device!r}")
        if any(not isinstance(s, Kernel) for s in exe.p.steps):
            raise InvalidArgumentError(f"program {exe.p.name}: host loops need the host "
                                       f"between launches; DeviceRun runs kernels only")
        if exe.checks.host or exe.checks.probed:
            raise InvalidArgumentError(f"program {exe.p.name} has run-time checks; DeviceRun "
                                       f"does not make them")
        import torch

        self.exe = exe
        self.st = exe.storage(inputs)
        self.dev = {n: torch.from_numpy(storage_view(a, exe.bm[n].dtype)).to("cuda")
                    for n, a in self.st.items()}
        self.calls = []
        for k in exe.p.steps:
            if k.instances == 0 or any(n == 0 for n in k.domain):
                continue
            fn, roots, n, _, launch = exe.table[k.name]
            self.calls.append((fn, n, [self.dev[r] for r in roots], launch))

    def launch(self) -> None:
        if self.exe.tma:
            ensure_allocator()
        for fn, n, args, launch in self.calls:
            fn[(n,)](*args, **self.exe.opts, **launch)

    def outputs(self) -> Any:
        for name, d in self.dev.items():
            if self.exe.bm[name].kind != "input":
                h = self.st[name]
                storage_view(h, self.exe.bm[name].dtype)[...] = d.cpu().numpy()
        return self.exe._outputs(self.exe.p.outputs, self.st)


TARGETS.setdefault("triton", source_target(
    "triton", lambda p: render(p, interpret=True),
    lambda p, src: TritonExecutable(p, src, "interpret"), TRITON_TILES))
def _tuned(module: Any, entry: str, shapes: Any) -> TileConfig:
    from tilefoundry.compiler.triton_tune import tuned_config

    return tuned_config(module, entry, shapes, TRITON_TILES)


TARGETS.setdefault("triton-cuda", source_target(
    "triton-cuda", lambda p, cfg: render(p, launch=dict(cfg.launch)),
    lambda p, src: TritonExecutable(p, src, "cuda"), _tuned, render_cfg=True))


class TritonBackend(KernelInterpBackend):
    """Triton as a conformance backend (``--backend triton``): on CUDA when a GPU is present,
    through Triton's interpreter on the CPU under ``TRITON_INTERPRET=1``."""

    name = "triton"

    def __init__(self, *, device: str | None = None, fuse: bool = True, cfg=None):
        super().__init__(fuse=fuse, cfg=cfg or TRITON_TILES)
        self.device = triton_device(device)
        if self.device == "interpret":
            _interpret_mode()
        self.target = "triton" if self.device == "interpret" else "triton-cuda"

    def capabilities(self) -> Capabilities:
        """The lowering's, sharded programs included: a mesh program runs as the per-device
        lowering (``lower_mesh.compile_mesh``) with every device's launches on this one device
        and the collectives simulated on the host between them (D347)."""
        return KernelInterpBackend.capabilities(self)

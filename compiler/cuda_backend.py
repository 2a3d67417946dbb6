"""The CUDA C++ backend (``--backend cuda``; pipeline target ``cuda``; issue 18).

The pipeline runs as for ``kernel-interp`` (typeinfer, elaborate, canonicalize, lower, fuse);
``render_cuda.render`` turns the fused kernel IR into CUDA C++ (the SIMD C renderer's code in
its CUDA spelling: one thread per program instance); the build pass compiles it with NVRTC to
PTX (``cuda_build``: needs no GPU, so a rendering error surfaces on any machine). The executable
keeps the kernel-IR interpreter's flat numpy storage (inputs, temps, consts; outputs read back
through the buffers' strides), runs host loops on the host and launches each kernel on the GPU:
it copies the roots the kernel loads or stores to device buffers (and a second copy of each
root it both reads and writes: the snapshot its loads read), launches, and copies back the
roots it stores. numpy stays the one copy of record.

CUDA is initialised only at the first launch, in the process that runs the case, through
``cuda.bindings.driver`` (the conformance runner forks its workers: a parent that initialised
CUDA breaks every worker; nothing here touches the driver before a launch). The module loaded
is the build pass's compute_90 PTX (a cache hit), which the driver compiles for the device
(D210); ``cuda_build.build(source, "sm_90")`` makes a cubin where one is wanted.

Where it runs: ``CudaBackend()`` needs an NVIDIA device node and ``cuda-python``; without a GPU
constructing it raises a one-line ``InvalidArgumentError`` naming the missing device and how
to run it. There is never a fallback to another backend.

Capabilities: the lowering's ops, dtypes, policies and overflow modes (those of
``kernel-interp``, sharded programs and ``Local`` included: the per-device lowering runs
every device's launches on the one device, collectives on the host between them, D347), as for SIMD C, whose renderer this one is; whatever the renderer
cannot handle raises ``NotSupportedError`` naming the construct in the render pass, before any
NVRTC compile. An NVRTC error is ``CudaCompileError`` with NVRTC's log and the kept source.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilefoundry.compiler import cuda_build
from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.errors import CompilerError
from tilefoundry.compiler.interp import Interpreter
from tilefoundry.compiler.kir import Kernel, Program
from tilefoundry.compiler.pipeline import TARGETS, source_target
from tilefoundry.compiler.render_cuda import kernel_roots, kernel_threads, parse_plan, render
from tilefoundry.compiler.schedule import TileConfig
from tilefoundry.errors import InvalidArgumentError

__all__ = ["CUDA_TILES", "DEVICES", "HOW", "SCRATCH_LIMIT", "CudaBackend", "CudaError", "CudaExecutable",
           "gpu_present", "host_backend", "host_source"]

HOW = ("the cuda backend needs an NVIDIA GPU and none is here (no /dev/nvidiactl): run "
       "`tilefoundry conformance run --backend cuda ...` on a machine with one (or render "
       "only: `tilefoundry compile ... --target cuda --print-after render`)")
#: "cuda": the GPU; "host": the source compiled for the host (a test harness, never chosen
#: for you: ``CudaBackend(device="host")``)
DEVICES = ("cuda", "host")
#: bytes of scratch one launch may use; more instances run as several launches
SCRATCH_LIMIT = 1 << 30
#: blocks of one launch at most (CUDA's grid x limit)
MAX_BLOCKS = (1 << 31) - 1


class CudaError(CompilerError, RuntimeError):
    """The CUDA driver reported an error (the message names the call and the error)."""


def gpu_present() -> bool:
    """An NVIDIA device node, found without initialising CUDA in this process."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def _driver():
    return cuda_build.cuda_python("driver")


def _ok(cu, res, what: str):
    return cuda_build.unpack(res, cu.CUresult.CUDA_SUCCESS,
                             lambda e: cu.cuGetErrorName(e)[1].decode(errors="replace"),
                             CudaError, f"CUDA {what}")


class _Device:
    """The process's CUDA context on device 0 and its loaded modules (made on first use)."""

    _lock = threading.Lock()
    _current: tuple[int, _Device] | None = None

    def __init__(self) -> None:
        cu = self.cu = _driver()
        try:
            res = cu.cuInit(0)
        except RuntimeError as e:  # cuda-python could not load the driver library
            raise CudaError(f"CUDA cuInit failed: {e} (is the NVIDIA driver installed?)") \
                from None
        _ok(cu, res, "cuInit")
        self.dev = _ok(cu, cu.cuDeviceGet(0), "cuDeviceGet")
        a = cu.CUdevice_attribute
        major = _ok(cu, cu.cuDeviceGetAttribute(
            a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev), "cuDeviceGetAttribute")
        minor = _ok(cu, cu.cuDeviceGetAttribute(
            a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev), "cuDeviceGetAttribute")
        self.arch = f"sm_{major}{minor}"
        self.ctx = _ok(cu, cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        _ok(cu, cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.modules: dict[str, Any] = {}
        self.functions: dict[tuple[str, str], Any] = {}

    @classmethod
    def get(cls) -> _Device:
        with cls._lock:
            cur = cls._current
            if cur is None or cur[0] != os.getpid():  # a forked child starts its own
                cls._current = cur = (os.getpid(), cls())
            _ok(cur[1].cu, cur[1].cu.cuCtxSetCurrent(cur[1].ctx), "cuCtxSetCurrent")
            return cur[1]

    def function(self, source: str, name: str, smem: int = 0):
        key = (source, name)
        f = self.functions.get(key)
        if f is None:
            mod = self.modules.get(source)
            if mod is None:
                # the build pass's PTX (a cache hit): the driver compiles it for this device
                ptx = cuda_build.build(source, source_arch(source)).data
                mod = self.modules[source] = _ok(self.cu, self.cu.cuModuleLoadData(ptx),
                                                 "cuModuleLoadData")
            f = _ok(self.cu, self.cu.cuModuleGetFunction(mod, name.encode()),
                    f"cuModuleGetFunction({name})")
            if smem > 48 * 1024:  # dynamic shared memory past the default 48 KiB (D520)
                a = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _ok(self.cu, self.cu.cuFuncSetAttribute(f, a, smem), "cuFuncSetAttribute")
            self.functions[key] = f
        return f

    def tensor_map(self, addr: int, spec: dict) -> np.ndarray:
        """The 128-byte ``CUtensorMap`` of a plan's ``tmaps`` entry over device address
        ``addr`` (``cuTensorMapEncodeTiled``: 128-byte swizzle, out-of-range lanes 0)."""
        return encode_tensor_map(self.cu, addr, spec)

    def alloc(self, nbytes: int):
        return _ok(self.cu, self.cu.cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc")

    def upload(self, dptr, a: np.ndarray) -> None:
        if a.nbytes:
            _ok(self.cu, self.cu.cuMemcpyHtoD(dptr, a.ctypes.data, a.nbytes), "cuMemcpyHtoD")

    def download(self, a: np.ndarray, dptr) -> None:
        if a.nbytes:
            _ok(self.cu, self.cu.cuMemcpyDtoH(a.ctypes.data, dptr, a.nbytes), "cuMemcpyDtoH")

    def launch(self, f, blocks: int, threads: int, params: Sequence[int],
               sync: bool = True, smem: int = 0, maps: Sequence[np.ndarray] = ()) -> None:
        """``f`` on ``blocks`` x ``threads`` with 8-byte parameters (pointers, int64) and then
        the 128-byte tensor maps ``maps`` by value, ``smem`` bytes of dynamic shared memory,
        on the legacy default stream; ``sync`` waits for it (and reports its error here)."""
        vals = np.array([int(p) & 0xFFFFFFFFFFFFFFFF for p in params], np.uint64)
        ptrs = np.array([vals.ctypes.data + 8 * i for i in range(len(vals))] +
                        [m.ctypes.data for m in maps], np.uint64)
        _ok(self.cu, self.cu.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, smem, 0,
                                            ptrs.ctypes.data, 0), "cuLaunchKernel")
        if sync:
            _ok(self.cu, self.cu.cuCtxSynchronize(), "kernel run (cuCtxSynchronize)")

    def free(self, dptr) -> None:
        self.cu.cuMemFree(dptr)


_HOST_SHIM = r"""/* host emulation of the CUDA C++ source (CudaBackend(device="host")): the host C++
 * compiler, the grid as a sequential loop over blocks and threads */
#include <math.h>
#include <stdint.h>
#include <string.h>
#define __global__
#define __launch_bounds__(...)
#define __grid_constant__
struct tf__dim3 { int64_t x; };
static tf__dim3 blockIdx, blockDim, threadIdx;
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
/* the block mapping (D276): a phase (the code between two barriers) runs for every thread of
 * the block in turn, so a value one thread reads from another must come from an earlier phase;
 * shared and register arrays are per block / per thread arrays that outlive the phases */
#define TF_PHASE_BEGIN for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x) {
#define TF_PHASE_END }
#define TF_SYNC
#define TF_SYNCWARP
#define TF_SHARED static thread_local
#define TF_REG(type, name, threads, slots) static thread_local type name[threads][slots]
#define TF_R(name) (name[threadIdx.x])
#define TF_HOST_EMULATION 1
"""


def host_source(source: str) -> str:
    """The CUDA source as host C++: the shim, the source, one ``<fn>_grid`` per kernel that
    runs every (block, thread) of a launch in order."""
    plan = parse_plan(source)
    n = len(plan["roots"])
    out = [_HOST_SHIM, source]
    for k in plan["kernels"].values():
        args = [f"p{i}" for i in range(n)] + [f"q{i}" for i in range(len(k["snap"]))] + \
            ["S0", "lo", "hi"]
        params = ", ".join([f"char *{a}" for a in args[:-2]] + ["int64_t lo", "int64_t hi"])
        if k.get("tmaps"):  # tensor maps by pointer, passed on by value (D520)
            params += "".join(f", const tf_tmap *m{i}" for i in range(len(k["tmaps"])))
            args += [f"*m{i}" for i in range(len(k["tmaps"]))]
        if k.get("mapping") in ("block", "mma", "rows", "wgmma", "transpose"):  # own threads
            out.append(f'''extern "C" void {k["fn"]}_grid(int64_t blocks, int64_t threads, {params})
{{
    blockDim.x = threads;
    for (int64_t b = 0; b < blocks; ++b) {{
        blockIdx.x = b; threadIdx.x = 0;
        {k["fn"]}({", ".join(args)});
    }}
}}''')
            continue
        out.append(f'''extern "C" void {k["fn"]}_grid(int64_t blocks, int64_t threads, {params})
{{
    blockDim.x = threads;
    for (int64_t b = 0; b < blocks; ++b)
        for (int64_t t = 0; t < threads; ++t) {{
            blockIdx.x = b; threadIdx.x = t;
            {k["fn"]}({", ".join(args)});
        }}
}}''')
    return "\n".join(out) + "\n"


class _HostDevice:
    """``_Device``'s interface on the host: memory is numpy, kernels are the host-compiled
    source (``host_source``). It checks the rendering, the launch plan and the launch logic
    on a CPU; it says nothing about the GPU's own arithmetic or memory model."""

    def __init__(self) -> None:
        self.mem: dict[int, np.ndarray] = {}
        self.functions: dict[tuple[str, str], Any] = {}

    def function(self, source: str, name: str, smem: int = 0):

        from tilefoundry.compiler.c_runtime.build import load

        key = (source, name)
        f = self.functions.get(key)
        if f is None:
            lib = load(host_source(source), cc=os.environ.get("TILEFOUNDRY_CXX", "g++"),
                       extra_flags=("-x", "c++", "-std=gnu++17", "-O1"))
            f = getattr(lib, f"{name}_grid")
            f.restype = None
            self.functions[key] = f
        return f

    def alloc(self, nbytes: int) -> int:
        a = np.zeros(max(int(nbytes), 1), np.uint8)
        self.mem[a.ctypes.data] = a
        return a.ctypes.data

    def upload(self, dptr: int, a: np.ndarray) -> None:
        if a.nbytes:
            self.mem[dptr][:a.nbytes] = np.frombuffer(a.tobytes(), np.uint8)

    def download(self, a: np.ndarray, dptr: int) -> None:
        if a.nbytes:
            a.reshape(-1).view(np.uint8)[:] = self.mem[dptr][:a.nbytes]

    def tensor_map(self, addr: int, spec: dict) -> np.ndarray:
        """The host form of a tensor map (``render_cuda_wgmma``'s ``tf_tma_emul`` reads it):
        address, rank | element bytes << 8, dims, byte strides of dims 1.., box."""
        from tilefoundry.compiler.render_cuda_wgmma import esize

        m = _map_buffer()
        rank, es = len(spec["dims"]), esize(spec["dtype"])
        m[0], m[1] = addr + es * spec["offset"], rank | es << 8
        m[2:2 + rank] = spec["dims"]
        m[7:7 + rank - 1] = spec["strides"]
        m[11:11 + rank] = spec["box"]
        return m

    def launch(self, f, blocks: int, threads: int, params: Sequence[int], smem: int = 0,
               maps: Sequence[np.ndarray] = ()) -> None:
        f(ctypes.c_int64(blocks), ctypes.c_int64(threads),
          *[ctypes.c_int64(int(p) - (1 << 64) if int(p) >= 1 << 63 else int(p))
            for p in params], *[ctypes.c_void_p(m.ctypes.data) for m in maps])

    def free(self, dptr: int) -> None:
        self.mem.pop(dptr, None)


def launch_slices(entry: dict, threads: int) -> tuple[int, list[tuple[int, int, int]]]:
    """A kernel's launches: (instances per launch, [(blocks, first lane, end lane)]). Threads
    are one per instance, or one per lane of each instance (the lane mapping); scratch is per
    instance and a launch covers whole instances, at most ``SCRATCH_LIMIT`` bytes of it. Under
    the block mapping a block is an instance (first / end are instances)."""
    n, lanes, per = entry["instances"], entry.get("lanes", 1), entry["scratch"]
    if entry.get("mapping") in ("wgmma", "transpose"):  # own tiles of the domain (D520, D551)
        return entry["blocks"], [(entry["blocks"], 0, entry["blocks"])]
    if entry.get("mapping") in ("block", "mma", "rows"):  # one block per instance, no scratch
        chunk = min(n, MAX_BLOCKS)
        return chunk, [(min(n, lo + chunk) - lo, lo, min(n, lo + chunk))
                       for lo in range(0, n, chunk)]
    chunk = n if per == 0 else max(1, min(n, SCRATCH_LIMIT // per))
    out = []
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        out.append((-(-(hi - lo) * lanes // threads), lo * lanes, hi * lanes))
    return chunk, out


class CudaExecutable(Interpreter):
    """Runs a program's rendered CUDA kernels on flat numpy storage (the interpreter's)."""

    def __init__(self, program: Program, source: str, device: str = "cuda"):
        super().__init__(program)
        self.source, self.device = source, device
        self.plan = parse_plan(source)
        # NVRTC to PTX (cached) in the build pass: a compile error needs no GPU. The host
        # emulation compiles the same source with the host's C++ compiler instead.
        self.ptx = cuda_build.build(source, self.plan.get("arch", cuda_build.PTX_ARCH)) \
            if device == "cuda" else None
        self._roots = {k.name: kernel_roots(k, self.bm) for k in program.kernels()}

    def launch(self, k: Kernel, st: dict[str, np.ndarray]) -> None:
        if k.instances == 0 or any(n == 0 for n in k.domain):
            return
        entry = self.plan["kernels"][k.name]
        dev = _Device.get() if self.device == "cuda" else _HOST
        f = dev.function(self.source, entry["fn"], *([entry["smem"]] if "smem" in entry else []))
        loads, stores = self._roots[k.name]
        order = self.plan["roots"]
        bufs: list = []
        try:
            ptr: dict[str, Any] = {}
            for r in order:
                if r in loads or r in stores:
                    a = np.ascontiguousarray(st[r])
                    ptr[r] = dev.alloc(a.nbytes)
                    bufs.append(ptr[r])
                    dev.upload(ptr[r], a)
            snaps = []
            for r in entry["snap"]:
                q = dev.alloc(st[r].nbytes)
                bufs.append(q)
                dev.upload(q, np.ascontiguousarray(st[r]))
                snaps.append(q)
            threads = kernel_threads(self.plan, entry)
            chunk, launches = launch_slices(entry, threads)
            per = entry["scratch"]
            scratch = dev.alloc(chunk * per) if per else 0
            if per:
                bufs.append(scratch)
            base = [int(ptr[r]) if r in ptr else 0 for r in order] + [int(q) for q in snaps]
            # the wgmma mapping's tensor maps and dynamic shared memory (D520)
            kw = {"smem": entry["smem"], "maps": [dev.tensor_map(int(ptr[order[m["root"]]]), m)
                                                  for m in entry["tmaps"]]} \
                if entry.get("tmaps") else {}
            for blocks, first, end in launches:
                dev.launch(f, blocks, threads, [*base, int(scratch), first, end], **kw)
            for r in order:
                if r in stores:
                    out = st[r]
                    if out.flags.c_contiguous and out.flags.writeable:
                        dev.download(out, ptr[r])
                    else:
                        tmp = np.empty_like(out)
                        dev.download(tmp, ptr[r])
                        st[r] = tmp
        finally:
            for b in bufs:
                dev.free(b)


_HOST = _HostDevice()


def source_arch(source: str) -> str:
    """The NVRTC architecture a rendered source is built for: its plan's ``arch``
    (``compute_90a`` for the wgmma mapping, D520), else ``cuda_build.PTX_ARCH``."""
    return parse_plan(source).get("arch", cuda_build.PTX_ARCH)


def encode_tensor_map(cu, addr: int, spec: dict) -> np.ndarray:
    """``cuTensorMapEncodeTiled`` of a plan's tensor map (``render_cuda_wgmma.TmaOperand.spec``)
    over the root at device address ``addr``: bf16 / f16 elements, or fp8 as bytes (TMA copies
    them as they are), 128-byte swizzle, out-of-range lanes filled with zeros; the 128 bytes,
    64-byte aligned, for ``cuLaunchKernel``."""
    from tilefoundry.compiler.render_cuda_wgmma import esize

    dt = cu.CUtensorMapDataType
    kind = {"bf16": dt.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            "f16": dt.CU_TENSOR_MAP_DATA_TYPE_FLOAT16}.get(spec["dtype"],
                                                          dt.CU_TENSOR_MAP_DATA_TYPE_UINT8)
    rank = len(spec["dims"])
    tm = _ok(cu, cu.cuTensorMapEncodeTiled(
        kind, rank, addr + esize(spec["dtype"]) * spec["offset"], [cu.cuuint64_t(x) for x in spec["dims"]],
        [cu.cuuint64_t(x) for x in spec["strides"]], [cu.cuuint32_t(x) for x in spec["box"]],
        [cu.cuuint32_t(1)] * rank, cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    out = _map_buffer()
    ctypes.memmove(out.ctypes.data, int(tm.getPtr()), 128)
    return out


def _map_buffer() -> np.ndarray:
    """128 zero bytes, 64-byte aligned (a tensor map's alignment; the view keeps its buffer)."""
    buf = np.zeros(16 + 8, np.uint64)
    at = (-buf.ctypes.data % 64) // 8
    return buf[at:at + 16]


class CudaDeviceRun:
    """A compiled CUDA program with its whole storage resident on the GPU, for timing
    (``benchmarks/bench_gpu.py``; the Triton backend's ``DeviceRun``): every root buffer and
    each kernel's scratch and snapshot buffers are allocated and uploaded once, ``launch()``
    enqueues every kernel in program order on the default stream without waiting, ``sync()``
    waits. Values are judged through ``CudaExecutable.run`` (which snapshots per launch), not
    here: a snapshot buffer keeps its first upload. Programs with host loops are refused."""

    def __init__(self, exe: CudaExecutable, inputs: Sequence[np.ndarray]):
        if exe.device != "cuda":
            raise InvalidArgumentError(f"CudaDeviceRun needs the cuda device, not "
                                       f"{exe.device!r}")
        if any(not isinstance(s, Kernel) for s in exe.p.steps):
            raise InvalidArgumentError(f"program {exe.p.name}: host loops need the host "
                                       f"between launches; CudaDeviceRun runs kernels only")
        self.dev = dev = _Device.get()
        st = exe.storage(inputs)
        order = exe.plan["roots"]
        self.bufs: list = []
        ptr: dict[str, Any] = {}
        for r in order:
            if r in st:
                a = np.ascontiguousarray(st[r])
                ptr[r] = self._alloc(a.nbytes)
                dev.upload(ptr[r], a)
        self.calls = []
        self.kernels: list[str] = []  # the kernel of each call
        for k in exe.p.steps:
            if k.instances == 0 or any(n == 0 for n in k.domain):
                continue
            entry = exe.plan["kernels"][k.name]
            f = dev.function(exe.source, entry["fn"], entry.get("smem", 0))
            snaps = []
            for r in entry["snap"]:
                q = self._alloc(st[r].nbytes)
                dev.upload(q, np.ascontiguousarray(st[r]))
                snaps.append(q)
            threads = kernel_threads(exe.plan, entry)
            chunk, launches = launch_slices(entry, threads)
            scratch = self._alloc(chunk * entry["scratch"]) if entry["scratch"] else 0
            base = [int(ptr[r]) if r in ptr else 0 for r in order] + [int(q) for q in snaps]
            maps = [dev.tensor_map(int(ptr[order[m["root"]]]), m) for m in entry.get("tmaps", ())]
            self.calls += [(f, blocks, threads, [*base, int(scratch), first, end],
                            entry.get("smem", 0), maps) for blocks, first, end in launches]
            self.kernels += [k.name] * len(launches)

    def _alloc(self, nbytes: int):
        p = self.dev.alloc(nbytes)
        self.bufs.append(p)
        return p

    def launch(self, only: str | None = None) -> None:
        """Enqueue every kernel in program order (``only``: the launches of that kernel alone,
        e.g. a GEMM without the copy before it)."""
        for name, (f, blocks, threads, params, smem, maps) in zip(self.kernels, self.calls,
                                                                  strict=True):
            if only is None or name == only:
                self.dev.launch(f, blocks, threads, params, sync=False, smem=smem, maps=maps)

    def sync(self) -> None:
        _ok(self.dev.cu, self.dev.cu.cuCtxSynchronize(), "kernel run (cuCtxSynchronize)")

    def close(self) -> None:
        for b in self.bufs:
            self.dev.free(b)
        self.bufs = []


#: the CUDA targets' tiles: matmul kernels get 128x128 (M, N) blocks so that a reassociated
#: ``dot`` maps onto the tensor cores (``render_cuda_mma``, D280); K tiles of 32
CUDA_TILES = TileConfig(dot_mn=(128, 128), narrow_f32=True)


def _render(p: Program, cfg) -> str:  # the tiles' launch options reach the renderer (D536)
    return render(p, launch=dict(cfg.launch) if cfg is not None else None)


TARGETS.setdefault("cuda", source_target(
    "cuda", _render, lambda p, src: CudaExecutable(p, src, "cuda"), CUDA_TILES, True))
TARGETS.setdefault("cuda-host", source_target(
    "cuda-host", _render, lambda p, src: CudaExecutable(p, src, "host"), CUDA_TILES, True))


class CudaBackend(KernelInterpBackend):
    """The CUDA C++ backend as a conformance backend (``--backend cuda``); capabilities are
    the lowering's (``KernelInterpBackend.capabilities``) without sharded programs, the
    renderer raising ``NotSupportedError`` for the rest."""

    name = "cuda"
    target = "cuda"

    def __init__(self, *, device: str = "cuda", fuse: bool = True, cfg=None):
        super().__init__(fuse=fuse, cfg=cfg or CUDA_TILES)
        if device not in DEVICES:
            raise InvalidArgumentError(f"cuda device {device!r}: expected one of {DEVICES}")
        if device == "cuda":
            if not gpu_present():
                raise InvalidArgumentError(HOW)
            _driver()  # cuda-python importable (imports only; CUDA is not initialised here)
        self.device = device
        self.target = "cuda" if device == "cuda" else "cuda-host"

    def capabilities(self):
        """The lowering's, sharded programs included: the per-device lowering
        (``compiler/lower_mesh.py``) runs every device's launches on this one device, the
        collectives simulated on the host between them (D347)."""
        return super().capabilities()


def host_backend(**kw) -> CudaBackend:
    """``CudaBackend(device="host")`` (for ``--backend
    tilefoundry.compiler.cuda_backend:host_backend``): the CUDA source run on the CPU, a test
    harness of the rendering and the launch logic, not of the GPU."""
    return CudaBackend(device="host", **kw)

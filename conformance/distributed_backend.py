"""``--backend distributed``: sharded programs on real processes through ``torch.distributed``.

Each device of the program's mesh is one process (a *rank*) of a ``torch.distributed`` process
group (``gloo`` on CPU; ``TILEFOUNDRY_DIST_BACKEND`` or the factory's ``dist_backend`` picks
another, such as ``nccl``, which needs GPUs). Device ``(d0, d1, ...)`` is the rank with that
C-order linear index; a collective over some mesh axes runs in the sub-group of the ranks that
differ only along those axes (one sub-group per mesh axis, or per set of axes a Partial
completes jointly), created lazily and cached in every rank.

What runs where:

* The **driver** (``DistributedBackend.run``, inside the conformance runner's worker) checks the
  inputs against the entry's signature, distributes each sharded parameter (``mesh.shard``: every
  rank receives only its own local block) and sends each rank the program and its blocks.
* Every **rank** evaluates the whole typed entry function on its local data with
  ``RankEvaluator``: an op on mesh values runs the reference evaluator's per-device driver
  (``semantics/evaluator/mesh_driver.py``, by the op's mesh rule) for the rank's own device with
  the rank's collectives (``RankDevices``) — the op's implementation on the rank's local block
  (``--local-target reference``, the only local target so far), the same local computation the
  mesh simulation (``sharding.AllDevices``) gives that device; the steps that cross devices are the library's collectives:

  - ``Reshard`` completing ``Partial(r)``: ``all_reduce`` with SUM / MAX / MIN in the value's
    own dtype (gloo reduces f32 / f64 / f16 / bf16 / integers itself). A dtype the library does
    not reduce (fp8, e8m0, f4, unsigned > 8 bits) is composed: ``all_gather`` of the pieces,
    then the reference's reduction of them on each rank.
  - ``Reshard`` Split(p) -> Split(q) on one mesh axis (same layout otherwise): ``all_to_all``.
  - every other ``Reshard``: ``all_gather`` of each Split (Split -> Broadcast), then a local
    slice (Broadcast -> Split; Partial(sum) targets keep the value on coordinate 0 and ``-0`` /
    0 elsewhere, as ``mesh.shard`` does). A Split the target keeps is gathered and re-sliced:
    correct, not minimal traffic.
  - ``Reduce`` over an axis whose position is Split: ``all_gather`` of that position first (the
    HIR rule makes the result Broadcast on that mesh axis).
  - data movement uses the bytes of the storage dtype (any dtype moves); gloo's
    ``all_gather_into_tensor`` / ``all_to_all_single`` are used on contiguous byte views.
* The program's outputs are completed on the ranks (a sharded output is Reshard-ed to a plain
  value by the same collectives); every rank returns its copy and the driver checks the replicas
  are bit-identical (a diverged replica is an error of the backend, never hidden).

Processes start with ``torch.multiprocessing``'s ``spawn`` context from inside the runner's
worker (never forked, never touched by the runner), rendezvous on ``tcp://127.0.0.1:<port>``
(``TILEFOUNDRY_DIST_PORT``; a free port otherwise), and are **reused across cases**: one pool,
whose ranks 0..n-1 run a mesh of n devices (the others only join the sub-groups' creation). Each rank dies with its parent (``PR_SET_PDEATHSIG``
plus a watchdog), so a worker killed for a TIMEOUT leaves no rank behind.

Faults: a rank that dies during a case makes the driver kill the pool and then itself with the
same signal (the runner reports the case as CRASH, naming the signal, and starts a fresh worker);
a rank that hangs keeps ``run`` waiting until the runner's per-case timeout (TIMEOUT). Outside the
runner ``on_rank_death="raise"`` raises ``DistributedRankError`` instead, and ``timeout_s``
bounds the wait. ``TILEFOUNDRY_DIST_FAULT=kill:<rank>:<marker file>`` / ``hang:<rank>:<marker>``
(comma-separated, fired in order) injects such faults for the tests: a fault fires at the rank's
first collective while its marker file does not exist (the rank creates the marker).

NOT_SUPPORTED (``BackendUnsupportedError``): a program without a mesh, meshes of different sizes
in one program, a per-device (``Local``) value as an output, a local target other than
``reference``.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import queue
import signal
import socket
import sys
import threading
import time
from typing import Any

import numpy as np

from tilefoundry.conformance.backend import Capabilities, reference_check
from tilefoundry.conformance.distributed_rank import (  # the rank side (D431)
    DistributedRankError,
    LocalShard,
    LocalVarying,
    _align,
    _Comm,
    _contig,
    _gather_axes,
    _positions_local,
    _rank_evaluator_class,
    _slice_global,
    _to_global,
    _try_all_to_all,
    coord_of,
)
from tilefoundry.errors import (
    BackendUnsupportedError,
    InvalidArgumentError,
    RunTimeCheckError,
    TilefoundryError,
)
from tilefoundry.semantics.formats import DType

__all__ = ["DistributedBackend", "DistributedRankError"]

LOCAL_TARGETS = ("reference", "kernel-interp", "simd")
#: the compiler target of each compiled local target
_COMPILED = {"kernel-interp": "interp", "simd": "simd"}
_READY_S = 120.0  # spawning ranks and the rendezvous


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _parse_fault(spec: str | None) -> tuple | None:
    """``kill:<rank>:<marker>`` / ``hang:<rank>:<marker>``, several separated by commas (they
    fire one after the other, one per case)."""
    if not spec:
        return None
    out = []
    for one in spec.split(","):
        kind, _, rest = one.partition(":")
        who, _, marker = rest.partition(":")
        if kind not in ("kill", "hang") or not who.isdigit() or not marker:
            raise InvalidArgumentError(f"TILEFOUNDRY_DIST_FAULT={spec!r}: expected "
                                       f"'kill:<rank>:<marker file>' or 'hang:<rank>:<marker "
                                       f"file>' (comma-separated)")
        out.append((kind, int(who), marker))
    return tuple(out)


def _rank_main(rank: int, world: int, port: int, backend: str, parent: int, tasks, results,
               fault: tuple | None) -> None:
    import warnings
    from datetime import timedelta

    warnings.filterwarnings("ignore")
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=3600))
    except Exception as e:
        results.put(("init-error", rank, None, f"{type(e).__name__}: {e}"))
        return
    from tilefoundry.semantics.evaluator import families  # noqa: F401

    comm = _Comm(rank, world, fault)
    results.put(("ready", rank, None, None))
    while True:
        task = tasks.get()
        if task is None:
            break
        case_no, payload = task
        try:
            out = _rank_run(comm, payload)
            results.put(("ok", rank, case_no, out))
        except Exception as e:
            from tilefoundry.semantics.evaluator.registry import EvaluationError

            check = e.check if isinstance(e, RunTimeCheckError) else \
                (reference_check(e) if isinstance(e, EvaluationError) else None)
            import traceback

            tb = traceback.extract_tb(e.__traceback__)
            where = " ← ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in tb[-3:][::-1])
            results.put(("err", rank, case_no,
                         (type(e).__name__, str(e) if check is not None else f"{e} ({where})",
                          check,
                          isinstance(e, BackendUnsupportedError))))
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def _rank_run(comm: _Comm, payload: bytes) -> Any:
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module, select_variant

    meshes, body = pickle.loads(payload)
    comm.prepare(meshes)
    if body is None:  # a rank outside this program's (smaller) mesh
        return None, 0
    module, entry, shapes, blocks, local_target = body
    if local_target in _COMPILED:
        return _rank_run_compiled(comm, module, entry, shapes, blocks, _COMPILED[local_target])
    session = Session()
    m = infer_module(module, session)
    fn = m[entry]
    if fn.body is None:
        fn = select_variant(fn, shapes)
    args = []
    for p, b in zip(fn.params, blocks, strict=True):
        sh = getattr(p.type, "shard", None)
        args.append(LocalShard(sh, b) if sh is not None else b)

    def coord_for(mesh):
        return coord_of(comm.rank, tuple(mesh.axis_extents))

    ev = _rank_evaluator_class()(session, comm, coord_for)
    value = ev.call_function(fn, args)

    def finish(v):
        if isinstance(v, tuple):
            return tuple(finish(f) for f in v)
        if isinstance(v, LocalVarying):
            raise BackendUnsupportedError("a per-device (Local) value as a program output has no "
                                          "logical value to return")
        if isinstance(v, LocalShard):
            return _to_global(comm, v)
        return np.asarray(v)

    return finish(value), comm.collectives


_COMPILED_CACHE: dict[tuple, Any] = {}


def _rank_run_compiled(comm: _Comm, module, entry: str, shapes, blocks, target: str) -> Any:
    """``--local-target kernel-interp | simd``: the compiler's per-device lowering
    (``lower_mesh.compile_mesh``) run on this rank's device: each launch is the target's
    executable on the rank's local values, each collective step the library's collective (or
    this device's share of a local one: slice, align, the gather index steps), each host loop
    (``MeshLoop``) run here around them (``lower_mesh.run_steps``)."""
    import hashlib

    from tilefoundry.compiler.lower_mesh import compile_mesh, run_steps

    key = (hashlib.sha256(pickle.dumps((module, entry))).hexdigest(), tuple(shapes), target)
    c = _COMPILED_CACHE.get(key)
    if c is None:
        c = compile_mesh(module, entry, shapes, target)
        if len(_COMPILED_CACHE) > 64:
            _COMPILED_CACHE.clear()
        _COMPILED_CACHE[key] = c
    mp = c.program
    sm = mp.slot_map()
    coord = coord_of(comm.rank, tuple(mp.mesh.axis_extents))
    values: dict[str, np.ndarray] = {n: _contig(b) for n, b in zip(mp.inputs, blocks,
                                                                     strict=True)}
    exes = dict(zip((ln.name for ln in mp.launches()), c.executables, strict=True))

    def launch(st, vals: dict[str, np.ndarray]) -> None:
        r = exes[st.name].run([_contig(vals[n]) for n in st.inputs])
        r = list(r) if isinstance(r, tuple) else [r]
        for n, a in zip(st.outputs, r, strict=True):
            vals[n] = _contig(a).reshape(sm[n].shape)

    # a host loop (MeshLoop) runs on every rank alike: the same trips, the same collectives in
    # every iteration, each a real collective of the process group
    run_steps(mp.steps, values, sm, (), launch,
              lambda st, vals: _rank_collective(comm, st, sm, vals, coord))
    outs = tuple(values[n] for n in mp.outputs)
    return (outs if mp.tuple_output else outs[0]), comm.collectives


def _rank_collective(comm: _Comm, st, sm, values, coord: tuple) -> np.ndarray:
    """This rank's value of a ``MeshProgram`` collective step (``lower_mesh.run_collective``
    is the simulation of all devices at once; this is one device of it)."""
    from tilefoundry.semantics.evaluator.mesh import neutral_sum
    from tilefoundry.semantics.formats import dtype_of
    from tilefoundry.semantics.types import Broadcast, Partial, ShardLayout, Split

    src, dst = sm[st.srcs[0]], sm[st.dst]
    x = values[st.srcs[0]]
    if st.kind == "all_reduce":
        lay = src.layout
        ext = tuple(lay.mesh.axis_extents)
        reds = {lay.partials[i] for i in st.axes}
        if len(reds) == 1:
            return comm.all_reduce(x, next(iter(reds)), ext, tuple(st.axes))
        for i in st.axes:
            x = comm.all_reduce(x, lay.partials[i], ext, (i,))
        return x
    if st.kind == "all_gather":
        return _gather_axes(comm, src.layout, x, list(st.axes))[1]
    if st.kind == "all_to_all":
        return _try_all_to_all(comm, src.layout, x, dst.layout)
    if st.kind == "replicate":
        return _contig(x).reshape(dst.shape)
    if st.kind == "slice":
        if src.layout is None or src.layout.is_fully_broadcast:
            glob = _contig(x).reshape(tuple(dst.layout.layout.axis_extents))
            return _slice_global(glob, dst.layout, coord)
        lay, tgt = src.layout, dst.layout
        data = _contig(x).reshape(_positions_local(lay))
        for i, (a, b) in enumerate(zip(lay.attrs, tgt.attrs, strict=True)):
            if a == b:
                continue
            if isinstance(b, Split):
                blk = data.shape[b.position] // lay.mesh.axis_extents[i]
                sl = [slice(None)] * data.ndim
                sl[b.position] = slice(coord[i] * blk, (coord[i] + 1) * blk)
                data = data[tuple(sl)]
            elif isinstance(b, Partial) and b.reduction == "sum" and coord[i] != 0:
                data = np.full_like(data, neutral_sum(dtype_of(data)))
            elif not isinstance(b, Partial | Broadcast):
                raise TilefoundryError(f"slice to {b} on mesh axis {i}")
        return _contig(data).reshape(tgt.local_axis_extents())
    if st.kind == "align":
        (attrs,) = st.attrs
        out = ShardLayout(dst.layout.mesh, attrs, dst.layout.layout)
        v = LocalShard(src.layout, x) if src.layout is not None else x
        return _align(v, out, coord)
    if st.kind in ("gather_index", "gather_mask"):
        n_glob, blk, axis = st.attrs
        (i,) = st.axes
        iv_src = values[st.srcs[0] if st.kind == "gather_index" else st.srcs[1]]
        iv = np.asarray(iv_src).astype(np.int64)
        lo = coord[i] * blk
        own = (iv >= lo) & (iv < lo + blk)
        if st.kind == "gather_index":
            bad = (iv < 0) | (iv >= n_glob)
            if bad.any():
                pos = tuple(int(j) for j in np.argwhere(bad)[0])
                raise RunTimeCheckError(f"Gather: index {int(iv[pos])} at indices{list(pos)} "
                                        f"is outside [0, {n_glob}) on axis {axis}",
                                        "index_range")
            return _contig(np.where(own, iv - lo, 0).astype(x.dtype))
        r = x
        mask = own.reshape((1,) * axis + own.shape + (1,) * (r.ndim - axis - own.ndim))
        return _contig(np.where(mask, r, neutral_sum(dtype_of(r))).astype(r.dtype))
    raise TilefoundryError(f"unknown collective step {st.kind!r}")


# =============================================================================================
# the driver
# =============================================================================================
def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _no_main_reimport():
    """Spawned ranks must not re-run the parent's ``__main__`` (pytest, the CLI, a script read
    from stdin): hide its spec and path while the ranks start; they import this module only."""
    main = sys.modules.get("__main__")
    saved = {k: getattr(main, k) for k in ("__spec__", "__file__") if hasattr(main, k)}
    try:
        if main is not None:
            main.__spec__ = None
            if hasattr(main, "__file__"):
                del main.__file__
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


class _RankPool:
    def __init__(self, world: int, dist_backend: str, port: int, fault: tuple | None):
        import torch.multiprocessing as tmp

        ctx = tmp.get_context("spawn")
        self.world, self.port = world, port
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(world)]
        self.procs = []
        self.cases = 0
        with _no_main_reimport():
            for r in range(world):
                p = ctx.Process(target=_rank_main, daemon=True,
                                args=(r, world, port, dist_backend, os.getpid(), self.tasks[r],
                                      self.results, fault))
                p.start()
                self.procs.append(p)
        ready: set[int] = set()
        t0 = time.monotonic()
        while len(ready) < world:
            msg = None
            with contextlib.suppress(queue.Empty):
                msg = self.results.get(timeout=0.1)
            if msg is None:
                dead = [r for r, p in enumerate(self.procs) if not p.is_alive()]
                if dead or time.monotonic() - t0 > _READY_S:
                    self.kill()
                    why = f"rank {dead[0]} exited with status {self.procs[dead[0]].exitcode}" \
                        if dead else f"no rendezvous within {_READY_S:g} s"
                    raise DistributedRankError(f"distributed: starting {world} ranks on "
                                               f"127.0.0.1:{port} failed ({why})")
                continue
            kind, rank, _, info = msg
            if kind == "init-error":
                self.kill()
                if "in use" in info or "EADDRINUSE" in info:
                    raise InvalidArgumentError(
                        f"distributed: the rendezvous port {port} is in use; set "
                        f"TILEFOUNDRY_DIST_PORT to a free port (or unset it to pick one)")
                raise InvalidArgumentError(f"distributed: rank {rank} could not join the "
                                           f"process group: {info.splitlines()[0]}")
            ready.add(rank)

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.procs)

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                with contextlib.suppress(Exception):
                    os.kill(p.pid, signal.SIGKILL)
        for p in self.procs:
            p.join(2)

    def stop(self) -> None:
        for q in self.tasks:
            with contextlib.suppress(Exception):
                q.put(None)
        for p in self.procs:
            p.join(2)
        self.kill()


class DistributedBackend:
    """``--backend distributed``: see the module docstring. Options (arguments win over the
    environment): ``dist_backend`` / ``TILEFOUNDRY_DIST_BACKEND`` (``gloo``), ``local_target`` /
    ``TILEFOUNDRY_DIST_LOCAL_TARGET`` (``reference``), ``port`` / ``TILEFOUNDRY_DIST_PORT``
    (a free port per pool when unset), ``max_ranks`` / ``TILEFOUNDRY_DIST_MAX_RANKS`` (8),
    ``ranks`` / ``TILEFOUNDRY_DIST_RANKS`` (the pool's least size: a pool of 8 serves every mesh
    of up to 8 devices without restarting; unset, the pool is the mesh's size and is replaced by
    a larger one when a larger mesh comes),
    ``reuse`` (keep the process group across cases; False starts a fresh one per case, for the
    throughput measurement), ``on_rank_death`` (``"exit"``: the runner's CRASH; ``"raise"``),
    ``timeout_s`` (the driver's own wait bound; None: wait for the runner's timeout)."""

    name = "distributed"

    def __init__(self, dist_backend: str | None = None, local_target: str | None = None,
                 port: int | None = None, max_ranks: int | None = None,
                 ranks: int | None = None, reuse: bool = True,
                 on_rank_death: str = "exit", timeout_s: float | None = None):
        import torch.distributed as dist

        env = os.environ
        self.dist_backend = dist_backend or env.get("TILEFOUNDRY_DIST_BACKEND", "gloo")
        self.local_target = local_target or env.get("TILEFOUNDRY_DIST_LOCAL_TARGET",
                                                    "reference")
        if self.local_target not in LOCAL_TARGETS:
            raise InvalidArgumentError(
                f"distributed: local target {self.local_target!r} is not available (one of "
                f"{list(LOCAL_TARGETS)}); set TILEFOUNDRY_DIST_LOCAL_TARGET=reference")
        avail = {"gloo": dist.is_gloo_available(), "nccl": dist.is_nccl_available(),
                 "mpi": dist.is_mpi_available()}
        if self.dist_backend not in avail:
            raise InvalidArgumentError(
                f"distributed: unknown torch.distributed backend {self.dist_backend!r}; set "
                f"TILEFOUNDRY_DIST_BACKEND to one of {sorted(avail)} (gloo on CPU)")
        if not avail[self.dist_backend]:
            raise InvalidArgumentError(
                f"distributed: this torch build has no {self.dist_backend!r} backend; set "
                f"TILEFOUNDRY_DIST_BACKEND=gloo (CPU)")
        if self.dist_backend == "nccl":
            import torch

            if not torch.cuda.is_available():
                raise InvalidArgumentError("distributed: backend 'nccl' needs CUDA GPUs and "
                                           "none is visible; set TILEFOUNDRY_DIST_BACKEND=gloo")
            raise InvalidArgumentError("distributed: the nccl path (ranks on GPUs) is not "
                                       "implemented yet; set TILEFOUNDRY_DIST_BACKEND=gloo")
        p = port if port is not None else env.get("TILEFOUNDRY_DIST_PORT")
        if p is not None:
            try:
                p = int(p)
            except ValueError:
                raise InvalidArgumentError(f"distributed: TILEFOUNDRY_DIST_PORT={p!r} is not a "
                                           f"port number") from None
            if not 0 < p < 65536:
                raise InvalidArgumentError(f"distributed: port {p} is outside 1..65535; set "
                                           f"TILEFOUNDRY_DIST_PORT to a free port")
            if not _port_free(p):
                raise InvalidArgumentError(
                    f"distributed: the rendezvous port {p} is in use; set TILEFOUNDRY_DIST_PORT "
                    f"to a free port (or unset it to pick one)")
        self.port = p
        mr = max_ranks if max_ranks is not None else env.get("TILEFOUNDRY_DIST_MAX_RANKS", 8)
        try:
            self.max_ranks = int(mr)
        except ValueError:
            raise InvalidArgumentError(f"distributed: TILEFOUNDRY_DIST_MAX_RANKS={mr!r} is not "
                                       f"an integer") from None
        if self.max_ranks < 1:
            raise InvalidArgumentError(f"distributed: max ranks must be >= 1, got "
                                       f"{self.max_ranks}; set TILEFOUNDRY_DIST_MAX_RANKS")
        rk = ranks if ranks is not None else env.get("TILEFOUNDRY_DIST_RANKS", 0)
        try:
            self.min_ranks = int(rk)
        except ValueError:
            raise InvalidArgumentError(f"distributed: TILEFOUNDRY_DIST_RANKS={rk!r} is not an "
                                       f"integer") from None
        if self.min_ranks > self.max_ranks:
            raise InvalidArgumentError(f"distributed: {self.min_ranks} ranks requested but at "
                                       f"most {self.max_ranks} are available; lower "
                                       f"TILEFOUNDRY_DIST_RANKS or raise "
                                       f"TILEFOUNDRY_DIST_MAX_RANKS")
        if on_rank_death not in ("exit", "raise"):
            raise InvalidArgumentError(f"distributed: on_rank_death must be 'exit' or 'raise', "
                                       f"got {on_rank_death!r}")
        self.reuse, self.on_rank_death, self.timeout_s = reuse, on_rank_death, timeout_s
        self.fault = _parse_fault(env.get("TILEFOUNDRY_DIST_FAULT"))
        self._pool_obj: _RankPool | None = None
        self.pools_started = 0
        self._case_no = 0

    def capabilities(self) -> Capabilities:
        # the ranks evaluate every op through the reference's op rules and the shared
        # per-device driver (its mesh rules: operand alignment, split-axis gathers, ...), the
        # tile family's Select (operands broadcast to the result) included
        from tilefoundry.semantics.ops import ALL_OPS

        return Capabilities.everything(
            ops=frozenset(c.__name__ for c in ALL_OPS),
            dtypes=frozenset(d for d in DType if d is not DType.F4E2M1), mesh=True)

    def compile(self, module: Any, entry: str) -> Any:
        return (module, entry)

    # -- pools -----------------------------------------------------------------------------------
    def _pool(self, n: int) -> _RankPool:
        """The live pool if it has at least ``n`` ranks (a smaller mesh runs on ranks
        0..n-1 and its own sub-groups); otherwise a fresh pool of max(n, ranks) ranks."""
        pool = self._pool_obj
        if pool is not None and pool.alive() and pool.world >= n:
            return pool
        self.close()
        port = self.port if self.port is not None else _free_port()
        if self.port is not None and not _port_free(port):
            raise InvalidArgumentError(
                f"distributed: the rendezvous port {port} is in use; set TILEFOUNDRY_DIST_PORT "
                f"to a free port (or unset it to pick one)")
        self._pool_obj = _RankPool(max(n, self.min_ranks), self.dist_backend, port, self.fault)
        self.pools_started += 1
        return self._pool_obj

    def close(self) -> None:
        if self._pool_obj is not None:
            self._pool_obj.stop()
            self._pool_obj = None

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()

    # -- a case ------------------------------------------------------------------------------------
    def run(self, compiled: Any, inputs: list[np.ndarray]) -> Any:
        from tilefoundry.semantics.evaluator import families  # noqa: F401
        from tilefoundry.semantics.evaluator.core import check_inputs, shape_of
        from tilefoundry.semantics.evaluator.mesh import Sharded
        from tilefoundry.semantics.evaluator.registry import EvaluationError
        from tilefoundry.semantics.typeinfer.core import Session, TypeInferError
        from tilefoundry.semantics.typeinfer.functions import infer_module, select_variant

        module, entry = compiled
        m = infer_module(module, Session())
        fn = m[entry]
        try:
            if fn.body is None:
                try:
                    fn = select_variant(fn, [shape_of(x) for x in inputs])
                except TypeInferError as e:
                    raise EvaluationError(f"dispatch of @{fn.name}: {e}") from None
            args = check_inputs(fn, list(inputs))
        except EvaluationError as e:
            check = reference_check(e)
            if check is None:
                raise
            raise RunTimeCheckError(str(e), check) from e
        meshes = _meshes(m)
        if not meshes:
            raise BackendUnsupportedError("the program has no mesh (no ShardLayout-typed "
                                          "value); the distributed backend runs sharded "
                                          "programs only")
        sizes = {math.prod(ms.axis_extents) for ms in meshes}
        if len(sizes) > 1:
            raise BackendUnsupportedError(f"meshes of different sizes {sorted(sizes)} in one "
                                          f"program (one process group per program)")
        (world,) = sizes
        if world > self.max_ranks:
            raise InvalidArgumentError(
                f"distributed: the program's mesh has {world} devices but only "
                f"{self.max_ranks} ranks are available; raise TILEFOUNDRY_DIST_MAX_RANKS "
                f"(one process per device)")
        shapes = [shape_of(x) for x in args]
        if not self.reuse:
            self.close()
        pool = self._pool(world)
        shapes_of_meshes = sorted({tuple(ms.axis_extents) for ms in meshes})
        per_rank = []
        for r in range(pool.world):
            if r >= world:
                per_rank.append(pickle.dumps((shapes_of_meshes, None)))
                continue
            blocks = []
            for x in args:
                if isinstance(x, Sharded):
                    c = coord_of(r, tuple(x.mesh.axis_extents))
                    blocks.append(_contig(x.data[c]))
                else:
                    blocks.append(x)
            per_rank.append(pickle.dumps((shapes_of_meshes, (module, entry, shapes, blocks,
                                                             self.local_target))))
        self._case_no += 1
        case_no = self._case_no
        for r in range(pool.world):
            pool.tasks[r].put((case_no, per_rank[r]))
        got = self._collect(pool, case_no, world)
        if not self.reuse:
            self.close()
        return got

    def _collect(self, pool: _RankPool, case_no: int, n: int) -> Any:
        outs: dict[int, Any] = {}
        errs: dict[int, tuple] = {}
        t0 = time.monotonic()
        first_err = None
        while len(outs) + len(errs) < pool.world:
            msg = None
            with contextlib.suppress(queue.Empty):
                msg = pool.results.get(timeout=0.05)
            if msg is None:
                dead = [r for r, p in enumerate(pool.procs) if not p.is_alive()]
                if dead:
                    self._rank_died(pool, dead[0])
                if first_err is not None and time.monotonic() - first_err > 5.0:
                    self._drop(pool)  # the others wait in a collective the failed rank left
                    break
                if self.timeout_s is not None and time.monotonic() - t0 > self.timeout_s:
                    self._drop(pool)
                    raise DistributedRankError(
                        f"distributed: ranks {sorted(set(range(pool.world)) - set(outs))} did "
                        f"not answer within {self.timeout_s:g} s")
                continue
            kind, rank, no, info = msg
            if no != case_no:
                continue  # a late answer of an earlier, abandoned case
            if kind == "ok":
                outs[rank] = info
            else:
                errs[rank] = info
                first_err = first_err or time.monotonic()
        pool.cases += 1
        if errs:
            name, msg, check, unsupported = errs[min(errs)]
            if unsupported:
                raise BackendUnsupportedError(msg)
            if check is not None:
                raise RunTimeCheckError(msg, check)
            raise DistributedRankError(f"rank {min(errs)} raised {name}: {msg}")
        from tilefoundry.semantics.dtypes import to_bits

        vals = {r: outs[r][0] for r in outs if r < n}
        ref = vals[0]
        for r in range(1, n):
            for i, (a, b) in enumerate(zip(_as_list(ref), _as_list(vals[r]), strict=True)):
                if a.shape != b.shape or not np.array_equal(to_bits(_contig(a)),
                                                            to_bits(_contig(b))):
                    raise DistributedRankError(f"output {i}: rank {r}'s replica differs from "
                                               f"rank 0's (a replicated value diverged)")
        return ref

    def _drop(self, pool: _RankPool) -> None:
        pool.kill()
        if self._pool_obj is pool:
            self._pool_obj = None

    def _rank_died(self, pool: _RankPool, rank: int) -> None:
        code = pool.procs[rank].exitcode
        self._drop(pool)
        what = f"killed by signal {-code}" if code is not None and code < 0 else \
            f"exited with status {code}"
        msg = f"distributed: rank {rank} of {pool.world} {what} during the case"
        if self.on_rank_death == "raise":
            raise DistributedRankError(msg)
        # the runner's CRASH: this worker dies the way the rank did
        print(msg, file=sys.stderr, flush=True)
        if code is not None and code < 0:
            with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            time.sleep(5)
        os._exit(code if code and code > 0 else 70)


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, tuple) else [v]


def _meshes(m) -> list:
    """Every mesh of the typed module's ShardLayouts."""
    from tilefoundry.semantics.ir import reachable, yield_children
    from tilefoundry.semantics.types import TensorType, TupleType

    found: dict[tuple, Any] = {}

    def see(t):
        if isinstance(t, TensorType) and t.shard is not None:
            ms = t.shard.mesh
            found.setdefault((tuple(ms.axis_names), tuple(ms.axis_extents)), ms)
        elif isinstance(t, TupleType):
            for f in t.fields:
                see(f)

    for f in m.functions:
        for fn in (f, *f.variants):
            for p in fn.params:
                see(p.type)
            if fn.body is None:
                continue
            for n in reachable(fn.body, yield_children):
                if n.has_type:
                    see(n.checked_type)
    return list(found.values())

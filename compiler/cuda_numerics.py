"""The C runtime's conversion loops on the GPU: ``tf_numerics.c`` compiled by NVRTC with each
loop a ``__global__`` kernel (one element a thread), so the exhaustive conversion tests of
``tests/compiler/test_c_runtime.py`` can run on the device (D208).

``device_runner()`` returns a ``c_runtime.convert.RUNNER``: it runs loop ``tfl_<name>`` on the
GPU through ``cuda_backend``'s device (CUDA initialised on first use, in this process). The
tests use it when ``TILEFOUNDRY_C_RUNTIME=cuda`` is set::

    TILEFOUNDRY_C_RUNTIME=cuda python -m pytest tests/compiler/test_c_runtime.py
"""

from __future__ import annotations

import numpy as np

from tilefoundry.compiler.c_runtime.build import RUNTIME_DIR

__all__ = ["THREADS", "device_runner", "unit_source"]

THREADS = 256

_LOOP = r"""#define TF_LOOP(NAME, S, D, EXPR)                                                          \
    extern "C" __global__ void tfl_##NAME(const S *x, D *y, int64_t n)                        \
    {                                                                                          \
        const int64_t i = (int64_t)blockIdx.x * (int64_t)blockDim.x + (int64_t)threadIdx.x;    \
        if (i < n) {                                                                           \
            const S v = x[i];                                                                  \
            y[i] = (EXPR);                                                                     \
        }                                                                                      \
    }
"""


def unit_source() -> str:
    """``tf_numerics.c`` with its loops as kernels (the CUDA source NVRTC compiles)."""
    return _LOOP + (RUNTIME_DIR / "tf_numerics.c").read_text()


def device_runner():
    """A ``convert.RUNNER`` running the loops on the GPU (``cuda_backend``'s device)."""
    from tilefoundry.compiler.cuda_backend import _Device

    source = unit_source()

    def run(name: str, x: np.ndarray, out: np.ndarray) -> None:
        dev = _Device.get()
        f = dev.function(source, f"tfl_{name}")
        bufs = [dev.alloc(x.nbytes), dev.alloc(out.nbytes)]
        try:
            dev.upload(bufs[0], x)
            dev.launch(f, -(-x.size // THREADS), THREADS,
                       [int(bufs[0]), int(bufs[1]), x.size])
            dev.download(out, bufs[1])
        finally:
            for b in bufs:
                dev.free(b)

    return run

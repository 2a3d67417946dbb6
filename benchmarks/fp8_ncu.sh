#!/usr/bin/env bash
# Nsight Compute on the CUDA backend's fp8 wgmma GEMM at 8192^3 (issue 35's fp8 profile), one
# launch of the matmul kernel per variant (the fifth: three adversarial shapes and the judged
# 8192^3 run come first), after run_h200_gpu_perf.sh has installed the package in /tmp/tf.
# The matmul is the program's second kernel, tf_k1 (the K-major copy is tf_k0; kernels are
# named by position, so a name regex on "matmul" matched nothing: 2026-12-06's first try):
#     bash benchmarks/fp8_ncu.sh 128x192x4xwait0:128 128x192x4xwait0xstagger:128
set -uo pipefail
R=$PWD
export PYTHONPATH=/tmp/tf PATH=/tmp/tf/bin:$PATH XDG_CACHE_HOME=/tmp/tf-cache
cd /tmp
for v in "$@"; do
    echo "=== $v"
    timeout 150 ncu --clock-control none --kernel-name tf_k1 --launch-skip 4 \
        --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --section LaunchStats \
        --section MemoryWorkloadAnalysis \
        python "$R/benchmarks/bench_gpu_gemm.py" --cuda-fp8-one "$v" --n 8192 2>&1 \
        | grep -E "Duration|Throughput|Pipe|Issue Slots|Warp Cycles Per|Stall|Registers Per|Achieved Occ|Executed Ipc|Hit Rate|Grid Size|Waves|ERR|rror|utilized" \
        | head -40
done

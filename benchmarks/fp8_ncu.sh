#!/usr/bin/env bash
# Nsight Compute on the CUDA backend's fp8 wgmma GEMM at 8192^3 (issue 35's fp8 profile), one
# launch of the matmul kernel per variant (the fifth: three adversarial shapes and the judged
# 8192^3 run come first), after run_h200_gpu_perf.sh has installed the package in /tmp/tf:
#     bash benchmarks/fp8_ncu.sh 128x192x4xwait0:128 128x192x4xwait0xstagger:128
set -uo pipefail
R=$PWD
export PYTHONPATH=/tmp/tf PATH=/tmp/tf/bin:$PATH XDG_CACHE_HOME=/tmp/tf-cache
cd /tmp
for v in "$@"; do
    echo "=== $v"
    timeout 150 ncu --clock-control none --kernel-name regex:matmul --launch-skip 4 \
        --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --section LaunchStats \
        python "$R/benchmarks/bench_gpu_gemm.py" --cuda-fp8-one "$v" --n 8192 2>&1 \
        | grep -E "Duration|Throughput|Pipe|Issue Slots|Warp Cycles Per|Stall|Registers Per|Achieved Occ|Executed Ipc|ERR|rror" \
        | head -40
done

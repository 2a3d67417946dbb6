#!/usr/bin/env bash
# Issue 35's device measurement in one call (at most ~9 minutes of wall time) on the H200
# machine (torch and triton preinstalled, no network):
#
#     OUT=$OUT bash benchmarks/run_h200_gpu_perf.sh            # every part
#     PARTS="gemm fp8" bash benchmarks/run_h200_gpu_perf.sh    # some of them
#
# from the repository root. Parts, each its own process under its own `timeout`, so a part that
# fails or hangs leaves the others' results:
#   gemm   bf16 GEMM 8192^3, 4096x14336x4096, 4095x14336x4096: the persistent TMA path
#          autotuned per shape (every candidate judged by the oracle before it is timed) beside
#          cuBLAS (benchmarks/bench_gpu_gemm.py --tune)                      [limit 220 s]
#   fp8    fp8e4m3 GEMM 8192^3: ours (f16 staging by cvt or decode; native fp8 promoted 32 / 128)
#          beside torch._scaled_mm fast accumulation on and off; share of outputs inside the
#          contract on the adversarial inputs (bench_gpu_gemm.py --fp8 --no-bf16) [limit 170 s]
#   cudafp8  fp8e4m3 GEMM 8192^3 on the CUDA backend's native fp8 wgmma kernel promoted every
#          32 / 64 / 128 products (D536; TF_CUDA_FP8_VARIANTS "TILE:PROMOTE,...", default all of
#          bench_gpu_gemm.CUDA_FP8_VARIANTS), each in its own process, beside cuBLAS fp8 fast /
#          slow accumulation; share inside the contract on the adversarial inputs, timed with
#          the K-major copy of B and alone                                  [limit 330 s]
#   tier   the quick conformance tier on the Triton backend, 14 workers (matmuls now take the
#          TMA path where it applies): must stay 0 FAIL / 0 ERROR       [limit 150 s; not default]
#   tiercuda  the same on the CUDA C++ backend                             [limit 120 s; not default]
#   cudagemm  the CUDA C++ backend's bf16 GEMM 8192^3 beside cuBLAS: the mma.sync kernel and the
#          wgmma plans (D520; TF_CUDA_GEMM_VARIANTS, e.g. "128x256x4,128x128x5"), each in its own
#          process (a kernel that fails to compile or launch, or hangs, is reported and the next
#          runs), each judged by the oracle before it is timed (bench_gpu.py --cuda-gemm),
#          at TF_CUDA_GEMM_SHAPES (MxNxK list, default 8192x8192x8192)
#                                                                [limit 200 s; not default]
#   rows   the row kernels (RMSNorm, softmax, SwiGLU, residual-add + RMSNorm, softmax with
#          scale and mask) at 32768x4096 / 8192^2 / 4096x14336, Triton and CUDA backends beside
#          torch, torch.compile and Liger (benchmarks/bench_gpu.py --rows; TF_CUDA_ROWS_VARIANTS
#          adds CUDA row-mapping settings, e.g. "4:1024")                   [limit 260 s]
#   ncu    Nsight Compute on one launch of RMSNorm (CUDA, Triton), SwiGLU and softmax (CUDA), 8192^2
#          (NCU_KERNELS="entry:backend:RxC ..." picks others):
#          benchmarks/rows_ncu.py), where the runtime lets ncu read the counters   [limit 120 s]
#   rows32 the same table after timing each row program's recorded best against 32 warps
#          (--tune --tune-warps32); the record comes back as triton_tuned_w32.json     [400 s]
#   rowshoist  the same table after timing each row program's recorded best against its
#          loads-first variants (--tune --tune-hoist, D485); the record of that run comes back
#          as triton_tuned_hoist.json (merged into compiler/triton_tuned.json by hand) [330 s]
# Results: $OUT/summary.md (every table, each part's exit status and seconds) and
# $OUT/parts.tgz (each part's .log and .json, the tuning record triton_tuned_user.json,
# install.log): two files, inside the device tool's limit of 8 files coming back.
# Wheels in ./.whl (Liger-Kernel: `pip download --no-deps liger-kernel -d .whl` where there is
# a network) are installed beside the package, as run_h200_session.sh does.
set -uo pipefail
R=$PWD
OUT=${OUT:-$R/h200-out}
PARTS=${PARTS:-gemm fp8 rows}
mkdir -p "$OUT"
rm -rf /tmp/tf
pip install -q --no-build-isolation --no-deps --target /tmp/tf . >"$OUT/install.log" 2>&1 || {
    echo "install failed (see install.log)"; tail -5 "$OUT/install.log"; exit 1; }
if compgen -G ".whl/*.whl" >/dev/null; then
    pip install -q --no-index --no-deps --no-compile --target /tmp/tf .whl/*.whl \
        >>"$OUT/install.log" 2>&1 || echo "wheel install failed (Liger left out)"
fi
export PYTHONPATH=/tmp/tf PATH=/tmp/tf/bin:$PATH
# the tuning record goes to a private cache under $OUT's sibling, not the user's home
export XDG_CACHE_HOME=/tmp/tf-cache
mkdir -p "$XDG_CACHE_HOME"
cd /tmp
: >"$OUT/status.txt"
part() {  # part NAME LIMIT COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc, $(( $(date +%s) - t0 )) s$([ $rc = 124 ] && echo ' (timed out)')" \
        | tee -a "$OUT/status.txt"
}
for p in $PARTS; do
    case $p in
    smoke) part smoke 150 python "$R/benchmarks/bench_gpu_gemm.py" --quick --fp8 \
              --json "$OUT/smoke.json" ;;
    tiercuda) part tiercuda 120 python -m tilefoundry conformance run --backend cuda -j 14 \
              --tier quick --no-progress --jsonl "$OUT/tiercuda.jsonl" ;;
    tier) part tier 150 python -m tilefoundry conformance run --backend triton -j 14 --tier quick \
              --no-progress --jsonl "$OUT/tier.jsonl" ;;
    cudagemm) part cudagemm 200 python "$R/benchmarks/bench_gpu.py" --cuda-gemm \
              --cuda-gemm-shapes "${TF_CUDA_GEMM_SHAPES:-8192x8192x8192}" \
              --cuda-gemm-limit 60 --json "$OUT/cudagemm.json" ;;
    gemm) part gemm 220 python "$R/benchmarks/bench_gpu_gemm.py" --tune --json "$OUT/gemm.json" ;;
    cudafp8) part cudafp8 "${CUDAFP8_LIMIT:-330}" python "$R/benchmarks/bench_gpu_gemm.py" --fp8 --no-bf16 \
              --no-triton-fp8 --cuda-fp8 "${TF_CUDA_FP8_VARIANTS:-all}" --cuda-fp8-limit 90 \
              --json "$OUT/cudafp8.json" ;;
    fp8)  part fp8 170 python "$R/benchmarks/bench_gpu_gemm.py" --fp8 --no-bf16 \
              --json "$OUT/fp8.json" ;;
    rows) part rows "${ROWS_LIMIT:-260}" python "$R/benchmarks/bench_gpu.py" --rows --json "$OUT/rows.json" ;;
    rows32) part rows32 400 python "$R/benchmarks/bench_gpu.py" --rows --tune --tune-warps32 \
              --tune-out "$OUT/triton_tuned_w32.json" --json "$OUT/rows.json" ;;
    rowshoist) part rowshoist 330 python "$R/benchmarks/bench_gpu.py" --rows --tune --tune-hoist \
              --tune-out "$OUT/triton_tuned_hoist.json" --json "$OUT/rows.json" ;;
    ncu)  part ncu 120 bash -c 'for ebs in $1; do
              IFS=: read -r e b shp <<<"$ebs"; r=${shp%x*}; c=${shp#*x}
              echo "=== $e $b $shp"; ncu --clock-control none --launch-skip 1 --launch-count 1 \
                  --section SpeedOfLight --section Occupancy --section LaunchStats \
                  --section WarpStateStats --section MemoryWorkloadAnalysis \
                  python "$0/benchmarks/rows_ncu.py" "$e" "$r" "$c" --backend "$b"; done' \
              "$R" "${NCU_KERNELS:-rmsnorm:cuda:8192x8192 rmsnorm:triton:8192x8192 swiglu:cuda:8192x8192 softmax_rows:cuda:8192x8192}" ;;
    *) echo "unknown part $p" | tee -a "$OUT/status.txt" ;;
    esac
done
rm -f "$OUT/tier.jsonl" "$OUT/tiercuda.jsonl"  # few files come back; the log has the counts
find "$XDG_CACHE_HOME" -name tuned.json -exec cp {} "$OUT/triton_tuned_user.json" \; 2>/dev/null
{
    echo "# issue 35 device run, $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
    echo; echo '## parts'; cat "$OUT/status.txt"
    for p in $PARTS; do
        [ -f "$OUT/$p.log" ] || continue
        echo; echo "## $p"
        if [ "$p" = tier ] || [ "$p" = tiercuda ]; then head -n 16 "$OUT/$p.log"; continue; fi
        if [ "$p" = ncu ]; then grep -E "^===|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Warp Cycles Per Issued|Executed Ipc|L1/TEX Hit|ERR|Error" "$OUT/$p.log" | head -n 120; continue; fi
        grep -E "^(device|tune|gemm|GEMM|cuda gemm|fp8e4m3|  (cublas|tilefoundry)|\||result|cases|[A-Z_]+ +[0-9])" \
            "$OUT/$p.log" | head -n 60
        grep -E "Error|error|Traceback" "$OUT/$p.log" | head -n 8 | cut -c1-300
    done
} >"$OUT/summary.md"
# at most 8 files come back from the device machine: every log and JSON goes into one archive
(cd "$OUT" && tar czf parts.tgz --exclude summary.md --exclude parts.tgz ./* && \
    find . -maxdepth 1 -type f ! -name summary.md ! -name parts.tgz -delete)
cat "$OUT/summary.md"

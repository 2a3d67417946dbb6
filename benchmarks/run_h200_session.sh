#!/usr/bin/env bash
# The GPU runs of issues 17 / 18 / 21 on the device machine (an H200 with 16 cores, torch and
# triton preinstalled, no z3): `bash benchmarks/run_h200_session.sh STAGE...` from the repository
# root; logs go to $OUT (default ./h200-out). Stages:
#   fuzzir   the malformed-input fuzz, 10^5 inputs split over 16 processes (issue 21)
#   cuda     --backend cuda: 5-minute fuzz (seed 0, no example DB; MINUTES=N), quick and full
#            tiers (TIERS="quick full"; TIERS="" runs the fuzz only)
#   triton   --backend triton: 5-minute fuzz, quick and full tiers
#   mma      benchmarks/mma_admitted.py for the CUDA and the Triton backend (is tensor-core
#            accumulation inside the admitted set?)
#   bench    benchmarks/bench_gpu.py (rows and GEMM, Triton and CUDA beside torch); BENCH_ARGS
#            adds flags, e.g. BENCH_ARGS="--tune --tune-out $OUT/triton_tuned.json" (the
#            autotuner's record, committed as compiler/triton_tuned.json)
#   rows     benchmarks/bench_gpu.py --rows --no-cuda (the Triton row kernels beside torch,
#            torch.compile and Liger-Kernel; one table); BENCH_ARGS as for bench; then
#            benchmarks/rmsnorm_guard_cost.py (what RMSNorm's strict guard costs)
# Wheels in ./.whl (e.g. Liger-Kernel: `pip download --no-deps liger-kernel -d .whl` on a
# machine with a network; the device machine has none) are installed beside the package.
set -uo pipefail
R=$PWD
OUT=${OUT:-$R/h200-out}
mkdir -p "$OUT"
rm -rf /tmp/tf
pip install -q --no-build-isolation --no-deps --target /tmp/tf . >/dev/null 2>&1 || {
    echo "install failed"; exit 1; }
if compgen -G ".whl/*.whl" >/dev/null; then
    pip install -q --no-index --no-deps --no-compile --target /tmp/tf .whl/*.whl >/dev/null 2>&1 || {
        echo "wheel install failed"; exit 1; }
fi
export PYTHONPATH=/tmp/tf PATH=/tmp/tf/bin:$PATH
cd /tmp
J=${J:-14}
for stage in "$@"; do
    t0=$(date +%s)
    case $stage in
    fuzzir)
        for s in $(seq 0 15); do
            python -m tilefoundry.conformance.fuzz_ir 6250 --start $((s * 6250)) \
                > "$OUT/fuzzir_$s.log" 2>&1 &
        done
        wait
        for s in $(seq 0 15); do  # each process's final report, one file (few files come back)
            echo "== process $s"; sed -n '/^malformed-input fuzz: 6,250 inputs/,$p' \
                "$OUT/fuzzir_$s.log" | tail -n 20
        done > "$OUT/fuzzir.log"
        rm -f "$OUT"/fuzzir_*.log
        grep -E "non-project|^ +[0-9]+ " "$OUT/fuzzir.log" ;;
    cuda|triton)
        if [ "${MINUTES:-5}" != 0 ]; then  # MINUTES=0: the tiers only
            python -m tilefoundry conformance fuzz --backend "$stage" -j "$J" --minutes "${MINUTES:-5}" \
                --seed 0 --no-db --no-progress --jsonl "$OUT/${stage}_fuzz.jsonl" \
                > "$OUT/${stage}_fuzz.log" 2>&1
        else
            echo "no fuzz (MINUTES=0)" > "$OUT/${stage}_fuzz.log"
        fi
        for tier in ${TIERS-quick full}; do
            python -m tilefoundry conformance run --backend "$stage" -j "$J" --tier $tier --no-progress \
                --jsonl "$OUT/${stage}_$tier.jsonl" > "$OUT/${stage}_$tier.log" 2>&1
        done
        rm -f "$OUT"/*.jsonl
        for f in fuzz ${TIERS-quick full}; do head -n 12 "$OUT/${stage}_$f.log"; done
        grep -E "^(FAIL|ERROR|CRASH|TIMEOUT) " "$OUT/${stage}_fuzz.log" | cut -c1-400 ;;
    mma)
        for b in cuda triton; do
            python "$R/benchmarks/mma_admitted.py" --backend $b > "$OUT/mma_$b.log" 2>&1
        done
        cat "$OUT"/mma_*.log ;;
    bench)
        python "$R/benchmarks/bench_gpu.py" ${BENCH_ARGS:-} --json "$OUT/bench_gpu.json" \
            > "$OUT/bench.log" 2>&1
        cat "$OUT/bench.log" ;;
    rows)
        python "$R/benchmarks/bench_gpu.py" --rows --no-cuda ${BENCH_ARGS:-} \
            --json "$OUT/rows_gpu.json" > "$OUT/rows.log" 2>&1
        python "$R/benchmarks/rmsnorm_guard_cost.py" >> "$OUT/rows.log" 2>&1
        sed -n '/^| kernel/,$p' "$OUT/rows.log"
        grep -E "^tune|Error|error" "$OUT/rows.log" | cut -c1-300 ;;
    *) echo "unknown stage $stage" ;;
    esac
    echo "stage $stage: $(( $(date +%s) - t0 )) s"
done

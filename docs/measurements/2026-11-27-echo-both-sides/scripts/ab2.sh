#!/bin/bash
# Interleaved same-code calibrations: base (the landed tree, devrun/base) and new (this tree).
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
mkdir -p $OUT/runs
[ -n "${GPUTESTS:-}" ] && { timeout ${GPUTESTS} python3 -m pytest -m gpu tests/gpu tests/redteam/test_gpu_attacks.py -p no:django -p no:cacheprovider -q -rs > $OUT/gpu-tests.txt 2>&1; echo "gpu tests rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt; tail -15 $OUT/gpu-tests.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
i=0
while :; do
  for v in new base; do
    [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-500} ] && break 2
    i=$((i+1)); out=$OUT/runs/$v-$i
    dir=$ROOT; [ $v = base ] && dir=$ROOT/devrun/base
    E=""; [ $v = new ] && E="${NEW_ENV:-}"; (cd $dir && env $E PYTHONPATH=$dir timeout 150 python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 ${SIZES:+--sizes $SIZES} --out $out > $out.log 2>&1)
    rc=$?
    [ -f $out/clock.json ] && cp $out/clock.json $OUT/runs/$v-$i.json
    echo "$v $i rc=$rc t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
    [ $rc != 0 ] && { tail -20 $out.log; exit 1; }
  done
done
python3 devrun/summary.py $OUT/runs > $OUT/summary.txt; cat $OUT/summary.txt $OUT/progress.txt
cd $OUT && tar czf runs.tgz runs && rm -rf runs

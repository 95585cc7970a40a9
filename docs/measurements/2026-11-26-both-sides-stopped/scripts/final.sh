#!/bin/bash
set -u
# Final code: the floor (5 passes), three same-code calibrations at the default cap, the GPU tests.
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
git rev-parse HEAD > $OUT/commit.txt 2>/dev/null; git status --short >> $OUT/commit.txt 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
date -u > $OUT/started.txt
python3 -m evaluator.tools.floor --out $OUT/floor --rounds 10 --calls 50 --repeats ${REPEATS:-5} --world-size 1 > $OUT/floor.log 2>&1
echo "floor rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
for i in 1 2 3; do
  timeout 150 python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --out $OUT/cal-$i > $OUT/cal-$i.log 2>&1
  echo "cal $i rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
done
if [ "${TESTS:-1}" = 1 ]; then
  left=$(( 585 - ($(date +%s) - T0) ))
  timeout $left python3 -m pytest -m gpu tests/gpu tests/redteam/test_gpu_attacks.py -p no:django -p no:cacheprovider -q -rs > $OUT/gpu-tests.txt 2>&1
  echo "tests rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
fi
python3 devrun/summary.py $OUT > /dev/null 2>&1
for i in 1 2 3; do [ -f $OUT/cal-$i/clock.json ] && cp $OUT/cal-$i/clock.json $OUT/final-$i.json; done
python3 devrun/summary.py $OUT > $OUT/summary.txt 2>&1
cat $OUT/progress.txt $OUT/summary.txt; tail -3 $OUT/gpu-tests.txt; grep -E "^\| (all|empty)" $OUT/floor/floor.md

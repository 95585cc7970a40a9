#!/bin/bash
# The floor on the final tree, then same-code calibrations until LIMIT.
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export PYTHONPATH=$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
[ "${FLOOR_S:-400}" != 0 ] && timeout ${FLOOR_S:-400} python3 -m evaluator.tools.floor --out $R/floor --rounds 10 --calls 50 --repeats 5 --max-repeats ${MAXREP:-10} --world-size 1 > $R/floor.log 2>&1
echo "floor rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
grep -E "^\| (all|copy|empty)" $R/floor/floor.md; grep -o "Passes stopped[^.]*" $R/floor/floor.md
i=0
while [ $(( ${LIMIT:-560} - ($(date +%s) - T0) )) -gt 45 ]; do
  i=$((i+1))
  timeout $(( ${LIMIT:-560} - ($(date +%s) - T0) )) python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --out $R/cal-$i > $R/cal-$i.log 2>&1
  echo "cal $i rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
  [ -f $R/cal-$i/clock.json ] && cp $R/cal-$i/clock.json $R/new-$i.json
done
python3 devrun/summary.py $R
cat $R/progress.txt
cd $OUT && tar czf r.tgz r && rm -rf r

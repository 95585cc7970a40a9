#!/bin/bash
# Final code: the floor (5 passes) and same-code calibrations at the default cap (CALS),
# or the GPU tests (TESTS=1); everything tarred (few files come back).
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
date -u > $R/started.txt
if [ "${TESTS:-0}" = 1 ]; then
  timeout ${TLIMIT:-570} python3 -m pytest -m gpu tests/gpu tests/redteam/test_gpu_attacks.py -p no:django -p no:cacheprovider -q -rs > $R/gpu-tests.txt 2>&1
  echo "tests rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
  tail -15 $R/gpu-tests.txt
else
  python3 -m evaluator.tools.floor --out $R/floor --rounds 10 --calls 50 --repeats 5 --world-size 1 > $R/floor.log 2>&1
  echo "floor rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
  for i in $(seq 1 ${CALS:-3}); do
    timeout 150 python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --out $R/cal-$i > $R/cal-$i.log 2>&1
    echo "cal $i rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
    [ -f $R/cal-$i/clock.json ] && cp $R/cal-$i/clock.json $R/final-$i.json
  done
  python3 devrun/summary.py $R > $R/summary.txt 2>&1
  cat $R/summary.txt; grep -E "^\| (all|empty)" $R/floor/floor.md
  python3 - $R <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/final-*.json")):
    d = json.load(open(f))
    print(f.split("/")[-1], " ".join(f"{c['median']:.3f}" for c in d["cases"]))
PY
fi
cat $R/progress.txt
cd $OUT && tar czf r.tgz r && rm -rf r

#!/bin/bash
# The floor on this tree (FLOOR_S), then interleaved same-code calibrations: new (this tree) and base (devrun/base).
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/floor
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
if [ "${FLOOR_S:-0}" != 0 ]; then
  PYTHONPATH=$PWD timeout ${FLOOR_S} python3 -m evaluator.tools.floor --out $OUT/floor --rounds 10 --calls 50 --repeats 5 --max-repeats ${MAXREP:-10} --world-size 1 > $OUT/floor/floor.log 2>&1
  echo "floor rc=$? t=$(( $(date +%s) - T0 ))" | tee -a $OUT/progress.txt
  grep -E "^\| (all|copy|empty)" $OUT/floor/floor.md; grep -o "Passes stopped[^.]*" $OUT/floor/floor.md
fi
LIMIT=$(( ${LIMIT:-540} - ($(date +%s) - T0) )) bash devrun/ab.sh

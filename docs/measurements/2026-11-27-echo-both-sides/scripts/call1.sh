#!/bin/bash
# GPU tests on this tree, then same-code calibrations until LIMIT (floor.sh with FLOOR_S=0).
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
timeout ${GPUTESTS:-380} python3 -m pytest -m gpu tests/gpu tests/redteam/test_gpu_attacks.py -p no:django -p no:cacheprovider -q -rs > $OUT/gpu-tests.txt 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s) - T0 ))" | tee -a $OUT/progress.txt; tail -15 $OUT/gpu-tests.txt
LIMIT=$(( ${LIMIT:-540} - ($(date +%s) - T0) )) FLOOR_S=0 bash devrun/floor.sh

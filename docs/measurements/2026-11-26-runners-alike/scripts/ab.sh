#!/bin/bash
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export PYTHONPATH=$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/runs
i=0
while :; do
  for v in box plain; do
    [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-500} ] && break 2
    i=$((i+1)); out=$OUT/runs/$v-$i
    N=0; [ $v = plain ] && N=1
    NOBOX=$N timeout 150 python3 devrun/ab.py --calibrate --profile h200x2 --world-size 1 --rounds 20 --out $out > $out.log 2>&1
    rc=$?
    echo "$v $i rc=$rc t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
    [ $rc != 0 ] && { tail -20 $out.log; exit 1; }
  done
done

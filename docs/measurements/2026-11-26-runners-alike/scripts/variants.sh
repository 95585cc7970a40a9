#!/bin/bash
# Experiment: which difference between the runners makes the candidate's lean.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-560}
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
id pkbtest >/dev/null 2>&1 || useradd -M -s /bin/bash pkbtest
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
mkdir -p $OUT/runs
if [ "${FLOOR:-1}" = 1 ]; then
  python3 -m evaluator.tools.floor --out $OUT/floor --rounds 10 --calls 50 --repeats 2 --world-size 1 > $OUT/floor.log 2>&1
  echo "floor done $(( $(date +%s) - T0 ))s" >> $OUT/progress.txt
fi
NOLIM="PKB_CANDIDATE_CPU_S=0 PKB_CANDIDATE_TASKS=0 PKB_CANDIDATE_OPEN_FILES=0 PKB_CANDIDATE_FILE_MB=0 PKB_EVALUATION_MEMORY_MB=0"
i=0
while :; do
  for v in ${VARIANTS:-base plain plainnolim user nostop}; do
    now=$(( $(date +%s) - T0 ))
    [ $now -gt $LIMIT ] && break 2
    i=$((i+1)); out=$OUT/runs/$v-$i
    case $v in
      base) env_extra="";;
      plain) env_extra="PKB_ISOLATE_NETWORK=false";;
      plainnolim) env_extra="PKB_ISOLATE_NETWORK=false $NOLIM";;
      nolim) env_extra="$NOLIM";;
      nostop) env_extra="PKB_EXP_NOSTOP=1";;
      user) env_extra="";;
    esac
    cmd="python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --max-rounds ${MAXR:-60} --out $out"
    if [ $v = user ]; then
      mkdir -p $out; chown pkbtest $out
      timeout 120 su pkbtest -c "cd $PWD && env NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TMPDIR=/tmp $cmd" > $out.log 2>&1
    else
      timeout 120 env $env_extra $cmd > $out.log 2>&1
    fi
    echo "$v $i rc=$? t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
  done
done
echo end $(( $(date +%s) - T0 )) >> $OUT/progress.txt

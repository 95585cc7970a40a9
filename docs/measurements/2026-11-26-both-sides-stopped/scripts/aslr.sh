#!/bin/bash
# Interleaved same-code calibrations of this tree: as is, and with address-space
# randomisation off for every process of the evaluation (setarch -R, inherited).
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export PYTHONPATH=$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/runs
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
cat /proc/sys/kernel/randomize_va_space > $OUT/randomize_va_space.txt
i=0
while :; do
  for v in norand new; do
    [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-500} ] && break 2
    i=$((i+1)); out=$OUT/runs/$v-$i
    pre=""; [ $v = norand ] && pre="setarch $(uname -m) -R"
    timeout 150 $pre python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --out $out > $out.log 2>&1
    rc=$?
    [ -f $out/clock.json ] && cp $out/clock.json $OUT/runs/$v-$i.json
    echo "$v $i rc=$rc t=$(( $(date +%s) - T0 ))" >> $OUT/progress.txt
    [ $rc != 0 ] && { tail -20 $out.log; break 2; }
  done
done
python3 devrun/summary.py $OUT/runs > $OUT/summary.txt; cat $OUT/summary.txt $OUT/progress.txt
python3 - $OUT/runs <<'PY' >> $OUT/summary.txt
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*-*.json")):
    d = json.load(open(f))
    print(f.split("/")[-1], " ".join(f"{c['median']:.3f}" for c in d["cases"]))
PY
tail -30 $OUT/summary.txt
cd $OUT && tar czf runs.tgz runs && rm -rf runs

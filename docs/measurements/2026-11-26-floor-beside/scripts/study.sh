#!/bin/bash
# MODE=floor: the floor, 5 to 15 passes; MODE=long: 16M-only calibrations run to the cap.
set -u
T0=$(date +%s)
python3 -m pip install --no-index --no-deps --break-system-packages devrun/*.whl -q 2>&1 | tail -1
scripts/ensure-candidate-access python3 > /dev/null
export PYTHONPATH=$PWD NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
date -u > $R/started.txt; git log -1 --format=%H > $R/commit.txt 2>/dev/null
case $MODE in
floor)
  timeout 200 python3 -m pytest -m gpu tests/gpu/test_floor.py -p no:django -p no:cacheprovider -q > $R/gpu-test-floor.txt 2>&1
  echo "gpu test_floor rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt; tail -3 $R/gpu-test-floor.txt
  timeout $(( ${LIMIT:-560} - ($(date +%s) - T0) )) python3 -m evaluator.tools.floor --out $R/floor --rounds 10 --calls 50 --repeats 5 --max-repeats ${MAXREP:-15} --world-size 1 > $R/floor.log 2>&1
  echo "floor rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
  grep -E "^\| (all|empty)" $R/floor/floor.md; grep -o "Passes stopped[^.]*" $R/floor/floor.md;;
long)
  for i in $(seq 1 ${RUNS:-10}); do
    left=$(( ${LIMIT:-560} - ($(date +%s) - T0) )); [ $left -lt 60 ] && break
    PKB_TARGET_HALFWIDTH=0 timeout $left python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --max-rounds ${CAP:-400} --sizes ${SIZES:-16777216} --out $R/long-$i > $R/long-$i.log 2>&1
    echo "long $i rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
  done
  python3 - $R <<'PY'
import glob, json, sys, statistics as st
for f in sorted(glob.glob(sys.argv[1] + "/long-*/clock.json")):
    d = json.load(open(f))
    for c in d["cases"]:
        rs = [r for r in d["rounds"] if r["case"] == c["case"]]
        rat = [r["reference_us"] / r["candidate_us"] for r in rs]
        ch = [st.median(rat[i:i + 50]) for i in range(0, len(rat), 50)]
        print(f.split("/")[-2], c["case"], f"{c['median']:.3f} ({c['low']:.3f}-{c['high']:.3f}) pairs {c['pairs']} wall {d['wall_s']}", " ".join(f"{x:.3f}" for x in ch))
PY
  ;;
cal)
  # ORDERS: case orders to alternate (one calibration each in turn), e.g. "a:65536,1048576,16777216 b:16777216,65536,1048576"
  i=0
  while true; do
    for o in ${ORDERS:-d:65536,1048576,16777216}; do
      left=$(( ${LIMIT:-560} - ($(date +%s) - T0) )); [ $left -lt 45 ] && break 2
      i=$((i+1)); tag=${o%%:*}
      timeout $left python3 -m evaluator.tools.floor --calibrate --profile h200x2 --world-size 1 --rounds 20 --sizes ${o#*:} --out $R/cal-$i-$tag > $R/cal-$i-$tag.log 2>&1
      echo "cal $i $tag rc=$? t=$(( $(date +%s) - T0 ))" >> $R/progress.txt
      [ $i -ge ${RUNS:-99} ] && break 2
    done
  done
  python3 - $R <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/cal-*/clock.json"), key=lambda f: int(f.split("/")[-2].split("-")[1])):
    d = json.load(open(f))
    print(f.split("/")[-2], d["settings"]["target_halfwidth"], d["settings"]["max_rounds"], d["wall_s"], " | ".join(f"{c['median']:.3f} ({c['low']:.3f}-{c['high']:.3f}) {c['pairs']}{'' if c['settled'] else ' cap'}" for c in d["cases"]))
PY
  ;;
esac
cat $R/progress.txt
cd $OUT && tar czf r.tgz r && rm -rf r

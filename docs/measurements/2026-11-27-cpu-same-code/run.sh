cd /work/main
export PKB_SEED_SECRET=cpu-cal-secret-0123456789 PKB_PROFILE=cpu
for w in 2 4; do for i in $(seq 1 20); do
  timeout 600 .venv/bin/python -m evaluator.tools.floor --calibrate --world-size $w --out /tmp/cpucal/w$w-$i > /tmp/cpucal/w$w-$i.log 2>&1 || echo "FAIL w$w-$i" >> /tmp/cpucal/fails
done; done
echo DONE > /tmp/cpucal/done

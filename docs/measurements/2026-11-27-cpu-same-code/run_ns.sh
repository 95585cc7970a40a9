cd /work/main
export PKB_SEED_SECRET=cpu-cal-secret-0123456789 PKB_PROFILE=cpu PKB_SANDBOX=namespaces
for i in $(seq 1 12); do
  timeout 600 .venv/bin/python -m evaluator.tools.floor --calibrate --world-size 2 --out /tmp/cpucal/ns/w2-$i > /tmp/cpucal/ns/w2-$i.log 2>&1 || echo "FAIL $i" >> /tmp/cpucal/ns/fails
done
echo DONE > /tmp/cpucal/ns/done

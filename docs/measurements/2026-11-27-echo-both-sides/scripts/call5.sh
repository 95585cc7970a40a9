#!/bin/bash
# Interleaved same-code calibrations: new (this tree, with NEW_ENV) and base (devrun/base).
set -u
NEW_ENV="${NEW_ENV:-PKB_WARMUP=50}" LIMIT=${LIMIT:-540} bash devrun/ab2.sh

#!/bin/bash
# Interleaved same-code calibrations at the defaults: new (this tree) and base (devrun/base).
set -u
NEW_ENV="" LIMIT=${LIMIT:-450} bash devrun/ab2.sh

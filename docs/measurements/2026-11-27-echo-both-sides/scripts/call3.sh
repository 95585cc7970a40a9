#!/bin/bash
# Same-code calibrations of this tree at a tighter settling target (TARGET, CAP), until LIMIT.
set -u
export PKB_TARGET_HALFWIDTH=${TARGET:-0.015} PKB_MAX_ROUNDS=${CAP:-800}
LIMIT=${LIMIT:-550} FLOOR_S=0 bash devrun/floor.sh

#!/usr/bin/env bash
# Reproduce this verdict from the logs in this bundle (run it from this directory).
# The slime commands behind the logs were not recorded: the logs were given to cpverify.
set -euo pipefail
cpverify verdict --baseline logs/cp1.log --candidate logs/cp2.log --baseline-cp 1 --candidate-cp 2 --pass-ratio 1.3 --warmup 2 --min-steps 3 --workload slime --out reproduced --expected-rollouts 24

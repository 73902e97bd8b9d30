#!/usr/bin/env bash
# The main job: set everything up, then train the 4→8→1 MLP example under the `checked_cpu`
# profile: the plan report (which capsule computes each op, on what evidence, from which catalog
# bytes), the loss falling, and the capsules that actually ran. Extra arguments go to
# `capsule run` (for example --show-backend or --format json).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
./build/tools/cli/capsule run mlp_regression --profile checked_cpu "$@"

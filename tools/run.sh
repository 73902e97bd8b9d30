#!/usr/bin/env bash
# The main job: set everything up, then plan the ops of a small MLP training step under the
# `checked_cpu` profile and print TorchLean's plan report (which capsule computes each op, on
# what evidence, from which catalog bytes). Extra arguments go to `capsule plan`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup.sh
./build/tools/cli/capsule plan --profile checked_cpu \
  --ops reshape,permute,matmul,broadcast,add,relu,mse_loss "$@"

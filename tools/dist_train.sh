#!/usr/bin/env bash
# Distributed training with torchrun and mmengine's launcher (DDP; gloo on CPU, as configs/_base_ sets).
#   bash tools/dist_train.sh CONFIG NUM_PROCESSES [tools/train.py options ...]
# Environment: PYTHON (default: python), PORT (default 29500), NNODES/NODE_RANK/MASTER_ADDR for several nodes.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bash tools/dist_train.sh CONFIG NUM_PROCESSES [train.py options]" >&2
  exit 2
fi
config=$1
processes=$2
shift 2
exec "${PYTHON:-python}" -m torch.distributed.run \
  --nnodes="${NNODES:-1}" --node_rank="${NODE_RANK:-0}" --master_addr="${MASTER_ADDR:-127.0.0.1}" \
  --nproc_per_node="$processes" --master_port="${PORT:-29500}" \
  "$(dirname "$0")/train.py" "$config" --launcher pytorch "$@"

#!/bin/sh
# Run the example as a jetfleet job under a power budget: submit a job that adopts the training process
# (`job submit --attach`), then run the training on this board; prints the job's id as its last line.
#
#   examples/own-training/run.sh CONTROLLER DEVICE BUDGET [SOCKET]
#
# Run it on the board (or, on a lab, beside it: SOCKET is DATA_DIR/sessions/DEVICE.sock). It works on a fresh lab:
# with no model of (board model, digits-mlp) the job profiles modes online on the script's own steps and transfers a
# reference, or fits from scratch when the lab has none (its summary says so). STEPS (default 4000) is the job's
# length (at least 800: the profiling takes at most a quarter of it); PROFILE_MODES (default: sized to the job, at
# most 50) the modes profiled online; EPOCHS (default 200, ~44 steps each) how long the script trains: a little more
# than the job, whose steps between its commands are the script's own.
set -eu
if [ $# -lt 3 ]; then
    echo "usage: $0 CONTROLLER DEVICE BUDGET [SOCKET]" >&2
    exit 2
fi
CONTROLLER=$1
DEVICE=$2
BUDGET=$3
SOCKET=${4:-${JETFLEET_SESSION_SOCKET:-/run/jetfleet/session.sock}}
PY=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
job=$("$PY" -m jetfleet.cli job submit --controller "$CONTROLLER" --attach digits-mlp --device "$DEVICE" \
      --power-budget "$BUDGET" --minibatches "${STEPS:-4000}" --profile-modes "${PROFILE_MODES:-0}" --output json \
      | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["job_id"])')
echo "job $job submitted: digits-mlp on $DEVICE under $BUDGET; training (follow it: jetfleet job show $job)" >&2
"$PY" "$here/train.py" --epochs "${EPOCHS:-200}" --socket "$SOCKET" >&2
echo "$job"

#!/usr/bin/env bash
# The CUDA half of the runtime companion, in one run on a machine with a GPU.
#
#   bash bench/gpu_check.sh [--dry-run] [--out DIR]
#
# Runs, each under its own time limit (the whole script stays under 8 minutes):
#   1. dslint verify on the CUDA rules: DSL204 and DSL705 (CUDA in forked workers after
#      CUDA init), DSL508 (pageable vs pinned host-to-device copies, CUDA events) and
#      DSL505 (on nccl where the machine has a GPU per rank, else gloo; the row says which);
#   2. dslint bench --device cuda on the DSL508 pair (bad.py: pin_memory=False,
#      good.py: pin_memory=True), sweeping num_workers and pin_memory;
#   3. dslint bench --device cuda on the DSL507 pair (single-process vs worker loading).
# and writes DIR/results.json (every figure) and DIR/summary.txt (a short table).
#
# --dry-run runs the same steps on the CPU (--device cpu, GPU rows skipped) so that
# everything but the device calls is exercised; tests/test_gpu_check.py runs it.
# Without --dry-run, a machine without CUDA gets "gpu_check: no CUDA device" and exit 3.
#
# Dependencies: torch (with CUDA), pillow, numpy, psutil, libcst, click, pathspec.
# A machine that cannot reach PyPI can be handed wheels in .whl/ (they are installed
# into a private target directory first; nothing else is installed).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON:-python3}
OUT="$REPO/gpu-check-results"
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"

if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/dslint-gpu-site .whl/*.whl \
    || { echo "gpu_check: installing the wheels in .whl/ failed" >&2; exit 2; }
  export PYTHONPATH="/tmp/dslint-gpu-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

"$PY" - <<'PYEOF' || { echo "gpu_check: missing dependencies (see above); hand them over as wheels in .whl/" >&2; exit 2; }
import importlib, sys
missing = [m for m in ("torch", "PIL", "numpy", "psutil", "libcst", "click", "pathspec") if importlib.util.find_spec(m) is None]
if missing:
    print("missing:", ", ".join(missing), file=sys.stderr)
    sys.exit(1)
PYEOF

DEVICE=cuda
if [ "$DRY" = 1 ]; then
  DEVICE=cpu
else
  if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)'; then
    echo "gpu_check: no CUDA device (torch.cuda.is_available() is False); nothing was measured" >&2
    exit 3
  fi
fi
"$PY" -c 'import json, platform, torch; print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "gpus": torch.cuda.device_count(), "python": platform.python_version()}))' > "$OUT/machine.json"

step() {  # name, seconds, command...: runs one step, keeps its output and exit status
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"
  local rc=$?
  echo "{\"rc\": $rc, \"seconds\": $((SECONDS - start))}" > "$OUT/$name.status"
  echo "gpu_check: $name exit $rc" >&2
}

BENCH=(bench --batches 30 --epochs 2 --warmup 3 --output-format json -q --device "$DEVICE" --timeout 60)
step verify 240 "$PY" -m dslint verify --select DSL204 --select DSL508 --select DSL505 --select DSL705 --output-format json -q --timeout 60
step bench_dsl508_bad 90 "$PY" -m dslint "${BENCH[@]}" --grid num_workers=0,2 --grid pin_memory=false,true fixtures/DSL508-unpinned-cuda-transfer/bad.py:build
step bench_dsl508_good 90 "$PY" -m dslint "${BENCH[@]}" --grid num_workers=0,2 --grid pin_memory=false,true fixtures/DSL508-unpinned-cuda-transfer/good.py:build
step bench_dsl507_bad 60 "$PY" -m dslint "${BENCH[@]}" --grid num_workers=0,2 fixtures/DSL507-single-process-loading/bad.py:build

"$PY" bench/gpu_summary.py "$OUT" $([ "$DRY" = 1 ] && echo --dry-run)

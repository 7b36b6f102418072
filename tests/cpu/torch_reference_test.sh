#!/bin/bash
# tools/bench/torch-reference on a machine without PyTorch or a GPU: bad
# arguments exit 2 naming the argument, a missing torch or CUDA device exits
# 77 saying which, and every net it times is one braid bundles, at braid's
# image size for that net (braid-train --summary, when given).
#   torch_reference_test.sh SOURCE_DIR [BRAID_TRAIN]
set -uo pipefail
src=${1:?usage: torch_reference_test.sh SOURCE_DIR [BRAID_TRAIN]}
train=${2:-}
script="$src/tools/bench/torch-reference"
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# expect RC PATTERN ARGS...: the exit status and a line of the output.
expect() {
  local want=$1 pattern=$2
  shift 2
  local out rc
  out=$(python3 "$script" "$@" 2>&1)
  rc=$?
  [ "$rc" -eq "$want" ] || fail "torch-reference $*: exit $rc, expected $want; output: $out"
  grep -qE -- "$pattern" <<<"$out" || fail "torch-reference $*: no line matching '$pattern' in: $out"
}

expect 2 "unknown net 'googlenet'.*BVLC" --nets googlenet
expect 2 "unknown net 'resnet51'" --nets resnet50,resnet51
expect 2 "--batch: must be at least 1, got 0" --batch 0
expect 2 "--iters: must be a whole number, got 'x'" --iters x
expect 2 "unknown mode 'replay'" --modes eager,replay

if ! python3 -c 'import torch' >/dev/null 2>&1; then
  expect 77 "PyTorch is not importable" --nets resnet50
elif ! python3 -c 'import torchvision' >/dev/null 2>&1; then
  expect 77 "torchvision is not importable" --nets resnet50
elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  expect 77 "no CUDA device" --nets resnet50
else
  echo "PyTorch sees a CUDA device here: the timing run is left to tools/gpu-check"
fi

# The script's nets and image sizes against braid's bundled nets.
if [ -n "$train" ]; then
  nets=$(python3 - "$script" <<'PY'
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("torch_reference", sys.argv[1])
spec = importlib.util.spec_from_loader("torch_reference", loader)
module = importlib.util.module_from_spec(spec)
loader.exec_module(module)
for net, image in module.NETS.items():
    print(net, image)
PY
)
  [ -n "$nets" ] || fail "could not read NETS from $script"
  while read -r net image; do
    out=$("$train" --net "$net" --batch 1 --summary 2>&1) || { fail "braid-train --net $net --summary: $out"; continue; }
    grep -q "(3x${image}x${image} images" <<<"$out" ||
      fail "torch-reference times $net at ${image}x${image}, braid-train's default differs: $(grep -m1 'images' <<<"$out")"
  done <<<"$nets"
fi

[ $failed -eq 0 ] && echo "torch-reference: all checks passed"
exit $failed

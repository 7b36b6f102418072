#!/bin/bash
# tools/gpu-check on a machine without a GPU: every row of its program list
# starts, takes its command line and exits 77 ("no CUDA device"), so a
# mistyped option or a program that is not built shows up here, not in the
# minutes of a lent GPU. With a GPU present the check itself is the test,
# and this one skips.
#   gpu_check_rows_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=${1:?usage: gpu_check_rows_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: gpu_check_rows_test.sh SOURCE_DIR BUILD_DIR}
probe="$build/tests/gpu/test-gpu-occupancy"
if [ ! -x "$probe" ]; then
  echo "no GPU programs in $build (configured without CUDA): nothing to check"
  exit 77
fi
"$probe" >/dev/null 2>&1
if [ $? -ne 77 ]; then
  echo "a CUDA device is visible here: run tools/gpu-check itself"
  exit 77
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
out=$(GPU_CHECK_LOGS="$logs" GPU_CHECK_PYTHON=/nonexistent/python "$src/tools/gpu-check" "$build" 2>&1)
table=$(sed -n '/^== gpu-check summary/,/^total time/p' <<<"$out" | sed '1,2d;$d')
rows=$(grep -c . <<<"$table")
failed=0
while read -r name kind result _; do
  [ -n "$name" ] || continue
  if [ "$result" != SKIP ]; then
    echo "FAIL: row $name ($kind) gave $result, not SKIP (exit 77 without a GPU); its log:"
    cat "$logs/$name.log" 2>/dev/null | tail -20
    failed=1
  fi
done <<<"$table"
listed=$(sed -n '/^PROGRAMS=(/,/^)/p' "$src/tools/gpu-check" | grep -c '^  "')
# Every listed row, the test-gpu-* programs found beside them, and torch-reference.
if [ "$rows" -le "$listed" ]; then
  echo "FAIL: the summary has $rows rows for $listed listed programs:"
  echo "$out"
  failed=1
fi
# GPU_CHECK_ONLY: just the rows named; a name no row has is refused.
only=$(GPU_CHECK_LOGS="$logs" GPU_CHECK_PYTHON=/nonexistent/python GPU_CHECK_ONLY=bench-gpu-train,profile-example \
       "$src/tools/gpu-check" "$build" 2>&1)
only_rows=$(sed -n '/^== gpu-check summary/,/^total time/p' <<<"$only" | sed '1,2d;$d' | awk '{print $1}' | sort | tr '\n' ' ')
if [ "$only_rows" != "bench-gpu-train profile-example " ]; then
  echo "FAIL: GPU_CHECK_ONLY=bench-gpu-train,profile-example ran rows '$only_rows':"
  echo "$only"
  failed=1
fi
# Every named group (@NAME) names rows the check has, and runs just those.
for group in $(sed -n '/^declare -A ROW_GROUPS=(/,/^)/p' "$src/tools/gpu-check" | sed -n 's/^  \[\([a-z]*\)\]=.*/\1/p'); do
  want=$(sed -n "s/^  \[$group\]=\"\(.*\)\"$/\1/p" "$src/tools/gpu-check" | tr ',' '\n' | sort | tr '\n' ' ')
  got=$(GPU_CHECK_LOGS="$logs" GPU_CHECK_PYTHON=/nonexistent/python GPU_CHECK_ONLY="@$group" "$src/tools/gpu-check" "$build" 2>&1)
  got_rows=$(sed -n '/^== gpu-check summary/,/^total time/p' <<<"$got" | sed '1,2d;$d' | awk '{print $1}' | sort | tr '\n' ' ')
  if [ -z "$want" ] || [ "$got_rows" != "$want" ]; then
    echo "FAIL: GPU_CHECK_ONLY=@$group ran rows '$got_rows', not '$want':"
    echo "$got"
    failed=1
  fi
  groups+="@$group "
done
if [ -z "${groups:-}" ]; then echo "FAIL: no ROW_GROUPS found in tools/gpu-check"; failed=1; fi
nogroup=$(GPU_CHECK_LOGS="$logs" GPU_CHECK_ONLY=@nosuch "$src/tools/gpu-check" "$build" 2>&1)
if [ $? -ne 2 ] || ! grep -q "GPU_CHECK_ONLY names group '@nosuch', which is not one of" <<<"$nogroup"; then
  echo "FAIL: an unknown group was not refused:"
  echo "$nogroup"
  failed=1
fi
bad=$(GPU_CHECK_LOGS="$logs" GPU_CHECK_ONLY=bench-gpu-trian "$src/tools/gpu-check" "$build" 2>&1)
if [ $? -ne 2 ] || ! grep -q "GPU_CHECK_ONLY names 'bench-gpu-trian', which no row has" <<<"$bad"; then
  echo "FAIL: a mistyped GPU_CHECK_ONLY name was not refused:"
  echo "$bad"
  failed=1
fi
[ $failed -eq 0 ] && echo "gpu-check: all $rows rows start and skip without a GPU; GPU_CHECK_ONLY selects (groups ${groups:-}too) and refuses as it should"
exit $failed

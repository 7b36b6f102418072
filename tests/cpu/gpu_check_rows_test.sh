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
device_out=$(mktemp -d)
trap 'rm -rf "$logs" "$device_out"' EXIT
# The row names of a gpu-check summary table, sorted, on one line.
summary_rows() { sed -n '/^== gpu-check summary/,/^total time/p' | sed '1,2d;$d' | awk '{print $1}' | sort | tr '\n' ' '; }
# The whole list, as in a device run ($OUT set).
out=$(OUT="$device_out" GPU_CHECK_LOGS="$logs" GPU_CHECK_PYTHON=/nonexistent/python "$src/tools/gpu-check" "$build" 2>&1)
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
# A device run brings back at most 8 files from $OUT: the logs come back as one archive beside the table.
# (grep reads the whole listing: grep -q would stop early and, under pipefail, tar's SIGPIPE fail the check.)
returned=$(find "$device_out" -type f | wc -l)
if [ "$returned" -gt 8 ] || [ ! -f "$device_out/gpu-check-logs.tar.gz" ] ||
   ! grep -q '^== gpu-check summary' "$device_out/gpu-check-summary.txt" 2>/dev/null ||
   ! tar -tzf "$device_out/gpu-check-logs.tar.gz" | grep -x './test-gpu-samples.log' >/dev/null; then
  echo "FAIL: \$OUT holds $returned files (at most 8 come back), or no log archive with the rows' logs and table:"
  find "$device_out" -type f
  failed=1
fi
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
only_rows=$(summary_rows <<<"$only")
if [ "$only_rows" != "bench-gpu-train profile-example " ]; then
  echo "FAIL: GPU_CHECK_ONLY=bench-gpu-train,profile-example ran rows '$only_rows':"
  echo "$only"
  failed=1
fi
# Every named group (@NAME) names rows the check has, runs just those, and
# fits the default budget (540 s) by its rows' limits: within= where a row
# has one, else its timeout; measure-fresh-dataset 300 s; torch-reference
# runs in what is left.
programs=$(sed -n '/^PROGRAMS=(/,/^)/p' "$src/tools/gpu-check")
row_limit() {  # the limit of row $1
  case $1 in measure-fresh-dataset) echo 300; return ;; torch-reference) echo 0; return ;; esac
  awk -v row="$1" '/^  "/ {
      gsub(/"/, ""); name = $2; sub(/.*\//, "", name); limit = $3; within = ""
      for (i = 4; i <= NF; i++) { if ($i ~ /^name=/) name = substr($i, 6); else if ($i ~ /^within=/) within = substr($i, 8) }
      if (name == row) { print (within != "" ? within : limit); exit }
    }' <<<"$programs"
}
group_block=$(sed -n '/^declare -A ROW_GROUPS=(/,/^)/p' "$src/tools/gpu-check")
groups=""
for group in $(sed -n 's/^  \[\([^]]*\)\]=.*/\1/p' <<<"$group_block"); do
  members=$(sed -n "s/^  \[$group\]=\"\(.*\)\"$/\1/p" <<<"$group_block" | tr ',' ' ')
  want=$(tr ' ' '\n' <<<"$members" | sort | tr '\n' ' ')
  got=$(GPU_CHECK_LOGS="$logs" GPU_CHECK_PYTHON=/nonexistent/python GPU_CHECK_ONLY="@$group" "$src/tools/gpu-check" "$build" 2>&1)
  got_rows=$(summary_rows <<<"$got")
  if [ -z "$members" ] || [ "$got_rows" != "$want" ]; then
    echo "FAIL: GPU_CHECK_ONLY=@$group ran rows '$got_rows', not '$want':"
    echo "$got"
    failed=1
  fi
  total=0
  for m in $members; do
    l=$(row_limit "$m")
    if [ -z "$l" ]; then echo "FAIL: group @$group: no limit found for row $m"; failed=1; l=0; fi
    total=$(( total + l ))
  done
  if [ "$total" -gt 540 ]; then
    echo "FAIL: group @$group's rows may take ${total}s, more than the default budget (540 s)"
    failed=1
  fi
  groups+="@$group (${total}s) "
done
if [ -z "$groups" ]; then echo "FAIL: no ROW_GROUPS found in tools/gpu-check"; failed=1; fi
# The fresh data set's profiles are each written by a braid-profile row of @dataset.
dataset=$(sed -n 's/^  \[dataset\]="\(.*\)"$/\1/p' <<<"$group_block")
for p in $(sed -n 's/^FRESH_PROFILES=(\(.*\))$/\1/p' "$src/tools/gpu-check"); do
  writer=$(grep -F "@LOGS@/$p.profile.json" <<<"$programs" | grep -o 'name=[^ ]*' | head -1)
  if [ -z "$writer" ] || [[ ",$dataset," != *",${writer#name=},"* ]]; then
    echo "FAIL: FRESH_PROFILES names $p, which no row of @dataset writes (writer: ${writer:-none})"
    failed=1
  fi
done
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

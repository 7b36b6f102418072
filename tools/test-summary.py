"""Sums doctest's per-program totals from Meson's test log.

Usage: test-summary.py build/meson-logs/testlog.json [more logs...]
Prints a table per test program and ends with "N passed, M failed" over all
logs. With several logs, each name is prefixed by its build folder.
Exit status 1 when anything failed or no test ran.
"""
import json
import os
import re
import sys

SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(\d+) skipped")

passed = failed = skipped = 0
several = len(sys.argv) > 2
for path in sys.argv[1:]:
    prefix = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path)))) + "/" if several else ""
    if not os.path.exists(path):
        failed += 1
        print(f"  {path}: missing (its tests did not run)")
        continue
    with open(path) as log:
        for line in log:
            if not line.strip():
                continue
            entry = json.loads(line)
            name = prefix + entry["name"]
            result = entry["result"]
            found = SUMMARY.findall(entry.get("stdout", "") or "")
            if result == "SKIP":
                skipped += 1
                print(f"  {name:<40} SKIP (no device or not built)")
            elif found:
                # doctest's "skipped" are cases a --test-case filter left to
                # another test of the same program: not counted here.
                _, p, f, _ = (int(x) for x in found[-1])
                if result != "OK" and f == 0:
                    f = 1  # the program failed outside any test case
                passed += p
                failed += f
                print(f"  {name:<40} {p} passed, {f} failed")
            else:
                ok = result == "OK"
                passed += ok
                failed += not ok
                print(f"  {name:<40} {'passed' if ok else 'FAILED (' + result + ')'}")
print(f"skipped programs (no GPU here, or not built): {skipped}")
print(f"{passed} passed, {failed} failed")
sys.exit(0 if failed == 0 and passed > 0 else 1)

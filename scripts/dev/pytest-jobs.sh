#!/bin/sh
# pytest-jobs.sh PYTHON JOBS: print the pytest arguments that run the suite in JOBS pytest-xdist
# workers, each taking a whole test file at a time (its tests share module fixtures: servers, the
# fuzz corpus replay's build). Nothing (one process) for JOBS=0 or without xdist, which is said on
# stderr. make check / make test (CHECK_JOBS) and the sanitizer run (SAN_JOBS) both ask here.
python=${1:?python} jobs=${2:?jobs}
[ "$jobs" = 0 ] && exit 0
if "$python" -c 'import xdist' 2>/dev/null; then
  echo "-n $jobs --dist loadfile"
else
  echo "note: pytest-xdist not installed: the suite runs in one process (make test-deps)" >&2
fi

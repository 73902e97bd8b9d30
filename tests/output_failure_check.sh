#!/bin/sh
# Output that cannot be written must fail the command (issue 8, item 11). Checked on the real
# binary, because the failure only shows at the process's own stdout: /dev/full, a closed
# stdout, and a reader that went away while SIGPIPE is ignored (the write fails with EPIPE).
# Usage: output_failure_check.sh CAPSULE SOURCE_DIR WORK_DIR
set -u
capsule=$1
root=$2
work=$3
mkdir -p "$work"
fail=0
check() {  # check STATUS WHAT ERRFILE
  if [ "$1" -ne 2 ]; then
    echo "FAIL: $2 exited $1, expected 2"; fail=1
  elif ! grep -q "cannot write standard output" "$3"; then
    echo "FAIL: $2 exited 2 without saying why"; fail=1
  else
    echo "ok: $2 exits 2 and says why"
  fi
}

if [ -w /dev/full ]; then
  "$capsule" list capsules --root "$root" > /dev/full 2> "$work/full.err"
  check $? "list > /dev/full" "$work/full.err"
else
  echo "skip: this machine has no /dev/full"
fi

"$capsule" list capsules --root "$root" >&- 2> "$work/closed.err"
check $? "list with stdout closed" "$work/closed.err"

# The reader (`true`) has exited before capsule writes; with SIGPIPE ignored (inherited from
# `trap '' PIPE`) the write fails with EPIPE instead of killing the process.
{ trap '' PIPE; sleep 1; "$capsule" list capsules --root "$root" 2> "$work/pipe.err"; echo $? > "$work/pipe.status"; } | true
check "$(cat "$work/pipe.status")" "list into a closed pipe" "$work/pipe.err"
exit $fail

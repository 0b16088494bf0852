#!/bin/sh
# The calculator's tests: the helper every operation uses, and each operation written so far.
fail=0
if [ -f ops/common.sh ]; then
  . ./ops/common.sh
  check_args 2 3 || { echo "FAIL check_args: refused the two numbers 2 3"; fail=1; }
  check_args 2 x && { echo "FAIL check_args: accepted 2 x"; fail=1; }
fi
expect() {
  [ -f "ops/$1.sh" ] || return 0
  got=$(sh calc.sh "$1" "$2" "$3" 2>&1)
  if [ "$got" = "$4" ]; then echo "ok $1 $2 $3 = $4"; else echo "FAIL $1 $2 $3: got '$got', expected $4"; fail=1; fi
}
expect add 2 3 5
expect sub 5 3 2
expect mul 4 3 12
exit $fail

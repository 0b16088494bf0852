#!/bin/sh
# The demo's test suite, in TAP: greenlight's digest turns a failure into a few exact lines.
. ./calc.sh
n=0
failed=0
check() {
    n=$((n + 1))
    got=$($1 $2 $3)
    if [ "$got" = "$4" ]; then
        echo "ok $n - $1 $2 $3 = $4"
    else
        failed=$((failed + 1))
        echo "not ok $n - $1 $2 $3 = $4"
        echo "  ---"
        echo "  message: expected $4, got $got"
        echo "  at: calc.sh:$(grep -n "^$1()" calc.sh | cut -d: -f1)"
        echo "  ..."
    fi
}
echo "TAP version 13"
check mul 3 4 12
check add 2 2 4
check add 10 5 15
check mul 0 9 0
echo "1..$n"
echo "# tests $n"
echo "# pass $((n - failed))"
echo "# fail $failed"
[ "$failed" -eq 0 ]

#!/bin/sh
# calc.sh OP A B: runs the operation OP (ops/OP.sh) on two whole numbers.
. ./ops/common.sh
. "./ops/$1.sh"
check_args "$2" "$3" || { echo "calc: $2 and $3 must be whole numbers" >&2; exit 2; }
"op_$1" "$2" "$3"

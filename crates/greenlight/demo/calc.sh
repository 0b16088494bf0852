#!/bin/sh
# A tiny calculator library for the greenlight demo.

add() {
    echo $(( $1 - $2 ))
}

mul() {
    echo $(( $1 * $2 ))
}

#!/bin/sh
# run1.sh DIR FLAGS... : build and run one verifier
d=$1; shift
mkdir -p $d && cp lease.pml $d/ && cd $d && spin -a "$@" lease.pml >/dev/null && gcc -O2 -w -DMEMLIM=3000 -DVECTORSZ=2048 -DCOLLAPSE -o pan pan.c && timeout ${TMO:-100} ./pan -m3000000 -E -w26

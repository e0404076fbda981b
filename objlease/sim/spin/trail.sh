#!/bin/sh
# trail.sh DIR FLAGS... : the shortest counterexample (breadth-first), as steps
d=$1; shift
mkdir -p $d && cp lease.pml $d/ && cd $d && spin -a -DNOHIDE "$@" lease.pml >/dev/null &&
gcc -O2 -w -DBFS -DMEMLIM=3000 -DVECTORSZ=2048 -DCOLLAPSE -o pan pan.c && ./pan -E >pan.out 2>&1
grep -E "assertion violated|errors:" pan.out
spin -t -DNOHIDE "$@" lease.pml 2>&1 | grep -E "STEP|assertion" | sed 's/^ *//'

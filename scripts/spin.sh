#!/usr/bin/env bash
# Model-checks the lease protocol with SPIN (objlease/sim/spin/lease.pml):
#
#   1. installs SPIN if it is missing (apt-get, as root, quietly);
#   2. for every run in the table below, generates the verifier, compiles
#      it and runs it: each property on the safe model must find no error
#      (and complete), each safeguard-off variant must find one;
#   3. prints one summary line per run, and exits non-zero on any surprise.
#
# Exit status: 0 every run as expected, 1 a surprise, 2 bad usage, 3 SPIN or
# gcc missing and not installable.
#
# Usage: ./scripts/spin.sh            # the CI runs (about 3 minutes on 2 idle cores)
#        ./scripts/spin.sh -trails    # also rewrite objlease/sim/spin/trails/*.txt
#        ./scripts/spin.sh -only NAME # one run of the table
#
# Runs go two at a time (SPIN_JOBS). The replays of the trails against the
# real code are Go tests: go test -tags objlease_unsafe ./objlease/sim/spin/.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=$repo/objlease/sim/spin/lease.pml
trails=$repo/objlease/sim/spin/trails
jobs=${SPIN_JOBS:-2}
writetrails=0
only=
while [ $# -gt 0 ]; do
	case $1 in
	-trails) writetrails=1 ;;
	-only) only=$2; shift ;;
	*) echo "usage: $0 [-trails] [-only NAME]" >&2; exit 2 ;;
	esac
	shift
done

if ! command -v spin >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin) >/dev/null 2>&1
	fi
fi
if ! command -v spin >/dev/null || ! command -v gcc >/dev/null; then
	echo "spin.sh: SPIN and gcc are needed and could not be installed (apt-get install spin gcc, as root)" >&2
	exit 3 # scripts/test.sh reports the step skipped, or failed with CI=true
fi

# name | expect (clean, error, live) | flags
# The bounds (-D...) are discussed in objlease/sim/spin/README.md; the
# numbers of each run are in RESULTS.md there.
runs='
excl              | clean | -DP_EXCL -DFAULTS=1 -DMAXTOK=2 -DBREAKS=0
token             | clean | -DP_TOKEN -DFAULTS=1 -DMAXTOK=2 -DBREAKS=0
release           | clean | -DP_RELEASE -DFAULTS=1 -DMAXTOK=2 -DBREAKS=0
excl_breaks       | clean | -DP_EXCL -DP_TOKEN -DP_RELEASE -DFAULTS=0 -DMAXTOK=3
operator          | clean | -DP_RELEASE -DP_TOKEN -DOPERATOR -DFAULTS=0 -DMAXTOK=2 -DBREAKS=0
twins             | clean | -DP_EXCL -DP_TOKEN -DTWINS -DFAULTS=1 -DMAXTOK=2 -DBREAKS=0
storeclock        | clean | -DP_EXCL -DSTORECLOCK -DFAULTS=0 -DMAXTOK=2 -DBREAKS=0
fence             | clean | -DP_FENCE -DDATA -DFAULTS=0 -DMAXTOK=3 -DBREAKS=0
takeover          | live  | -DLIVE -DFAULTS=1 -DMAXTOK=3 -DBREAKS=0
drift_margin      | error | -DP_EXCL -DNO_DRIFT_MARGIN -DFAULTS=0 -DMAXTOK=2 -DBREAKS=0
keep_record       | error | -DP_TOKEN -DNO_KEEP_RECORD -DFAULTS=0 -DMAXTOK=2 -DBREAKS=0
nonce_check       | error | -DP_TOKEN -DNO_NONCE_CHECK -DFAULTS=1 -DMAXTOK=2 -DBREAKS=0
unique_nonces     | error | -DP_TOKEN -DNO_UNIQUE_NONCES -DTWINS -DFAULTS=1 -DMAXTOK=2 -DBREAKS=0
own_write_check   | error | -DP_RELEASE -DNO_OWN_WRITE_CHECK -DOPERATOR -DFAULTS=0 -DMAXTOK=2 -DBREAKS=0
unique_tombstones | error | -DP_FENCE -DNO_UNIQUE_TOMBSTONES -DDATA -DFAULTS=0 -DMAXTOK=3 -DBREAKS=0
callback_before_release | error | -DP_EXCL -DNO_CALLBACK_BEFORE_RELEASE -DFAULTS=0 -DMAXTOK=2 -DBREAKS=0
'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# one NAME EXPECT FLAGS...: prints its summary line; its status says whether
# the outcome was the expected one.
one() {
	local name=$1 expect=$2; shift 2
	local d=$work/$name
	mkdir -p "$d" && cp "$model" "$d/" && cd "$d" || return 1
	local cflags="-O0 -w -DMEMLIM=3000 -DVECTORSZ=2048 -DCOLLAPSE" pflags="-m3000000 -w26"
	case $expect in
	live) pflags="$pflags -a -f" ;;
	*) cflags="$cflags -DSAFETY"; pflags="$pflags -E" ;;
	esac
	local start=$SECONDS
	if ! spin -a "$@" lease.pml >spin.out 2>&1 || ! gcc $cflags -o pan pan.c >gcc.out 2>&1; then
		echo "FAIL  $name: the verifier did not build ($(head -1 spin.out gcc.out | tr '\n' ' '))"
		return 1
	fi
	./pan $pflags >pan.out 2>&1
	local errors states depth mem
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
	states=$(sed -n 's/^ *\([0-9e+.]*\) states, stored.*/\1/p' pan.out | head -1)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -1)
	mem=$(sed -n 's/^ *\([0-9.]*\)\ttotal actual memory usage.*/\1/p' pan.out | head -1)
	local line="states=$states depth=$depth mem=${mem}MB time=$((SECONDS - start))s flags: $*"
	local complete=1
	grep -q "Search not completed\|max search depth too small\|out of memory" pan.out && complete=0
	case $expect in
	clean | live)
		if [ "$errors" = 0 ] && [ $complete = 1 ]; then
			echo "ok    $name: no error, complete; $line"
			return 0
		fi
		echo "FAIL  $name: expected no error and a complete search, got errors=$errors complete=$complete; $line"
		grep -m1 -E "assertion violated|acceptance cycle|error:" pan.out | sed 's/^/      /'
		return 1
		;;
	error)
		if [ "${errors:-0}" -gt 0 ]; then
			echo "ok    $name: counterexample found ($(grep -m1 -o 'assertion violated.*' pan.out | cut -c1-60)...); $line"
			if [ $writetrails = 1 ]; then
				# the shortest trail we can get within a minute: iterative
				# deepening from the first one found
				timeout 60 ./pan $pflags -i >/dev/null 2>&1
				{
					echo "# spin $* lease.pml; ./pan -E -i"
					grep -m1 -o 'assertion violated.*' pan.out
					spin -t "$@" lease.pml 2>&1 | grep -E "STEP|assertion" | sed 's/^ *//'
				} >"$trails/$name.txt"
			fi
			return 0
		fi
		echo "FAIL  $name: safeguard off but no counterexample found; $line"
		return 1
		;;
	esac
}
export -f one
export work model trails writetrails

list=$(echo "$runs" | sed '/^$/d' | { if [ -n "$only" ]; then awk -v n="$only" -F'|' '{k=$1; gsub(/ /,"",k)} k==n'; else cat; fi; })
[ -n "$list" ] || { echo "spin.sh: no run named $only" >&2; exit 2; }
out=$(echo "$list" | awk -F'|' '{gsub(/ /,"",$1); gsub(/ /,"",$2); print $1, $2, $3}' |
	xargs -P "$jobs" -L 1 bash -c 'one "$@"' _)
echo "$out" | sort
n=$(echo "$out" | grep -c '^\(ok\|FAIL\)')
bad=$(echo "$out" | grep -c '^FAIL')
echo "spin.sh: $((n - bad)) of $n runs as expected"
[ "$bad" = 0 ]

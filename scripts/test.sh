#!/usr/bin/env bash
# Runs the whole test suite:
#
#   1. scripts/install-emulators.sh (a no-op once they are installed);
#   2. go vet and a gofmt check, in the root module and in integration/;
#   3. go test -race -count=1 ./... in the root module;
#   4. the same in integration/, against emulators the tests start
#      themselves from $OBJLEASE_EMULATORS_DIR.
#
# Usage: ./scripts/test.sh [go test flags]
#
# Flags are passed to both go test runs, e.g. ./scripts/test.sh -run Lease -v
# or -timeout 30m. Every step runs even if an earlier one failed (except a
# failed install); the exit status is non-zero if any failed.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OBJLEASE_EMULATORS_DIR=${OBJLEASE_EMULATORS_DIR:-$repo/.cache/emulators}

log() { echo "test.sh: $*" >&2; }

bash "$repo/scripts/install-emulators.sh" || {
	log "FAILED: installing the emulators"
	exit 1
}

# step NAME CMD...: runs CMD, records "NAME ok" or "NAME FAILED" in $summary.
summary=""
failed=false
step() {
	local name=$1 start=$SECONDS
	shift
	log "$name: $*"
	if "$@"; then
		summary+=" $name ok ($((SECONDS - start))s),"
	else
		summary+=" $name FAILED ($((SECONDS - start))s),"
		failed=true
	fi
}

# gofmt_check DIR PRUNE...: lists unformatted Go files under DIR, skipping
# hidden directories (the emulators' cache), testdata and PRUNE paths.
gofmt_check() {
	local dir=$1 p
	shift
	local prune=(-path "$dir/.*" -o -name testdata -o -name node_modules)
	for p; do prune+=(-o -path "$dir/$p"); done
	local bad
	bad=$(find "$dir" \( "${prune[@]}" \) -prune -o -name '*.go' -print0 | xargs -0 -r gofmt -l) || return 1
	[[ -z $bad ]] && return 0
	echo "not gofmt-ed:" >&2
	echo "$bad" >&2
	return 1
}

module() {
	local name=$1 dir=$2
	shift 2
	summary=""
	cd "$dir" || return 1
	step vet go vet ./...
	step gofmt gofmt_check "$dir" "$@"
	step test go test -race -count=1 "${test_flags[@]}" ./...
	results+=("$name:${summary%,}")
}

test_flags=("$@")
results=()
module "root module" "$repo" integration
module "integration module" "$repo/integration"

for r in "${results[@]}"; do log "$r"; done
if [[ $failed == true ]]; then
	log "FAILED"
	exit 1
fi
log "all passed"

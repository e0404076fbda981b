#!/usr/bin/env bash
# Runs the whole test suite:
#
#   1. scripts/install-emulators.sh (a no-op once they are installed);
#   2. go vet, a check that no required module version is retracted, and
#      a gofmt check, in the root module and in integration/
#      (in the root module the vet step also runs staticcheck, with and
#      without -tags objlease_unsafe, installed with go install through
#      the module proxy into .cache/bin: a finding fails the step),
#      then go vet again for GOOS=darwin and GOOS=windows and a
#      cross-compiled build of the CLI (in integration/, darwin only);
#      go install of the CLI at the CHANGELOG's version from a file module
#      proxy (scripts/goinstall-check.sh); go get of the k8s module's
#      resourcelock and the gocron module's gocronlease at that version
#      into a fresh module, the core and those modules served by such a
#      proxy (scripts/modinstall-check.sh);
#      the release archives, SBOMs and multi-platform image layout, the
#      linux/amd64 ones built twice to compare, the SBOMs checked against
#      go version -m and the arm64 image's binary against its platform
#      (scripts/release-check.sh); govulncheck on every module
#      (scripts/vulncheck.sh): where its database cannot be reached (as in
#      CI) the step says "not checked" and does not fail the run;
#   3. go test -race -count=1 ./... in the root module; then, built with
#      -tags objlease_unsafe, the tests of its *_unsafe_test.go files (the
#      ones that turn a safety measure off to show what it prevents, and
#      the simulation's safeguards-off table); the core and the stores
#      again with -cpu 1 while two busy loops load both cores (timing
#      flakes fail there); then 1,000 more seeds of the simulation, 1,000
#      more of the job simulation, and the SPIN model checks
#      (scripts/spin.sh);
#   4. vet, gofmt and the tests of the examples/ module (the Lambda and
#      Cloud Run handlers against the emulators, the Kubernetes manifests
#      decoded strictly), then of the k8s/ module, and of its election
#      tests' own module k8s/internal/electiontest (client-go's leader
#      election on the resourcelock, against the emulators), then of the
#      gocron/ module, and of its scheduler tests' own module
#      gocron/internal/schedulertest (gocron schedulers on its Elector and
#      Locker, on a directory and the emulators);
#   5. the same in integration/ twice: against emulators the tests start as
#      local processes from $OBJLEASE_EMULATORS_DIR, then against the same
#      emulators as containers (OBJLEASE_EMULATORS=docker), with a Docker
#      engine and images from scripts/containers.sh; then its
#      *_unsafe_test.go tests, with -tags objlease_unsafe, on processes;
#      in the container run also the image (scripts/image.sh: the
#      release's linux image for this machine, docker load-ed) with
#      integration/image: run, elect and group join in containers,
#      stopped by the engine and taken over.
#
# Usage: ./scripts/test.sh [go test flags]
#
# Flags are passed to every go test run, e.g. ./scripts/test.sh -run Lease
# or -timeout 30m. Every step runs even if an earlier one failed (except a
# failed install); the exit status is non-zero if any failed.
#
# OBJLEASE_EMULATORS=process or =docker runs the integration tests in that
# mode only. Both integration runs must run, and skip, the same number of
# tests, and after the container run no container or volume may be left.
# With CI=true a missing emulator or engine fails the tests that need it
# (the harness sees to that) and a machine where no engine can be had fails
# the run; elsewhere those tests skip, or the container run is skipped, and
# the summary says so. A dockerd this script started is stopped at the end.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OBJLEASE_EMULATORS_DIR=${OBJLEASE_EMULATORS_DIR:-$repo/.cache/emulators}
logs=$repo/.cache/test-logs
mkdir -p "$logs"
modes=${OBJLEASE_EMULATORS:-process docker}
unset OBJLEASE_EMULATORS

log() { echo "test.sh: $*" >&2; }
# shellcheck source=interrupt.sh
source "$repo/scripts/interrupt.sh"

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

# spin_check: scripts/spin.sh, recorded like a step; without SPIN (and no
# way to install it) it is skipped, saying so, except with CI=true.
spin_check() {
	local start=$SECONDS rc
	log "model checking (SPIN): scripts/spin.sh"
	bash "$repo/scripts/spin.sh"
	rc=$?
	if [[ $rc == 0 ]]; then
		summary+=" model checking ok ($((SECONDS - start))s),"
	elif [[ $rc == 3 && ${CI:-} != true ]]; then
		log "SKIPPING the model checks: no SPIN (see above); with CI=true this fails"
		summary+=" model checking SKIPPED (no SPIN),"
	else
		summary+=" model checking FAILED ($((SECONDS - start))s),"
		failed=true
	fi
}

# vulncheck: scripts/vulncheck.sh, recorded like a step; a database that
# cannot be reached (exit 3) is reported as not checked, not as a failure.
vulncheck() {
	local start=$SECONDS rc
	log "known vulnerabilities: scripts/vulncheck.sh"
	bash "$repo/scripts/vulncheck.sh"
	rc=$?
	if [[ $rc == 0 ]]; then
		summary+=" known vulnerabilities ok ($((SECONDS - start))s),"
	elif [[ $rc == 3 ]]; then
		summary+=" known vulnerabilities NOT CHECKED (no database),"
	else
		summary+=" known vulnerabilities FAILED ($((SECONDS - start))s),"
		failed=true
	fi
}

# under_load CMD...: runs CMD while two busy loops keep every core of a
# 2-core machine busy, so that a test that depends on timing it does not
# control fails here rather than now and then in somebody's run. The loops
# end with the step (and with the script, if it is interrupted).
under_load() {
	local hogs=() rc=0
	for _ in 1 2; do
		bash -c 'while :; do :; done' &
		hogs+=($!)
	done
	"$@" || rc=$?
	kill "${hogs[@]}" 2>/dev/null
	wait "${hogs[@]}" 2>/dev/null
	return $rc
}

# cross "OS..." [PKG]: go vet (and, with a package, go build) for each
# GOOS of the list.
cross() {
	local os oses=$1 rc=0
	shift
	for os in $oses; do
		GOOS=$os go vet ./... || rc=1
		if [[ $# -gt 0 ]]; then GOOS=$os go build -o /dev/null "$@" || rc=1; fi
	done
	return $rc
}

# unsafe_tests MODE [go test flags]: runs, built with -tags objlease_unsafe,
# the tests of the current module's *_unsafe_test.go files, package by
# package, with OBJLEASE_EMULATORS=MODE unless MODE is "-". Only a build
# with that tag has the switches that turn a safety measure off; a normal
# build has every measure on as a constant.
unsafe_tests() {
	local mode=$1 dir run rc=0 ran=0
	shift
	[[ $mode == - ]] && mode=""
	for dir in $(find . \( -path './.*' -o -path ./integration -o -name testdata \) -prune -o -name '*_unsafe_test.go' -printf '%h\n' | sort -u); do
		run=$(grep -hoE '^func Test[A-Za-z0-9_]+' "$dir"/*_unsafe_test.go | cut -d' ' -f2 | paste -sd'|')
		[[ -z $run ]] && continue
		env ${mode:+OBJLEASE_EMULATORS=$mode} go test -race -count=1 -tags objlease_unsafe "$@" -run "^($run)\$" "$dir" || rc=1
		ran=$((ran + 1))
	done
	if [[ $ran == 0 ]]; then
		echo "no *_unsafe_test.go tests found" >&2
		return 1
	fi
	return $rc
}

# retracted fails if the module requires a version its author retracted
# (the module proxy says which); the message names it and why.
retracted() {
	local found
	found=$(go list -m -retracted -f '{{if .Retracted}}{{.Path}} {{.Version}} is retracted: {{.Retracted}}{{end}}' all) || return 1
	[[ -z $found ]] && return 0
	echo "$found" >&2
	echo "bump it: go get MODULE@VERSION with a version that is not retracted" >&2
	return 1
}

# staticcheck_version is the staticcheck the root module's vet step runs.
staticcheck_version=v0.8.2

# vet: go vet ./...; in the root module also staticcheck, with and without
# -tags objlease_unsafe. A finding, or a staticcheck that cannot be
# installed, fails the step.
vet() {
	local rc=0 sc=$repo/.cache/bin/staticcheck
	go vet ./... || rc=1
	retracted || rc=1
	if [[ $PWD == "$repo" ]]; then
		GOBIN=$repo/.cache/bin go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" || return 1
		"$sc" ./... || rc=1
		"$sc" -tags objlease_unsafe ./... || rc=1
	fi
	return $rc
}

module() {
	local name=$1 dir=$2
	shift 2
	summary=""
	cd "$dir" || return 1
	step vet vet
	step gofmt gofmt_check "$dir" "$@"
	if [[ $dir == "$repo" ]]; then
		step "darwin and windows: vet, build the CLI" cross "darwin windows" ./cmd/objlease
		step "go install @version from a module proxy" bash "$repo/scripts/goinstall-check.sh"
		step "go get k8s and gocron modules @version from a module proxy" bash "$repo/scripts/modinstall-check.sh"
		step "release archives, SBOMs and image, built twice" bash "$repo/scripts/release-check.sh"
		vulncheck
		step test go test -race -count=1 "${test_flags[@]}" ./...
		step "safety switches off (-tags objlease_unsafe)" unsafe_tests - "${test_flags[@]}"
		# The core and the stores again on one CPU under a CPU hog: what
		# passes on an idle machine by timing alone fails here.
		step "core and stores, -cpu 1 under load" under_load \
			go test -count=1 -cpu 1 "${test_flags[@]}" ./objlease/... ./providers/... ./scripts/
		# 1,000 seeds of the simulation beyond the 150 the test step runs
		# (without -race, a few minutes on 2 cores): a violation there fails
		# the run. The whole long run is -sim.long alone (5,000 seeds).
		step "simulation, seeds 151-1150" go test -count=1 -timeout 30m ./objlease/sim/ \
			-run '^TestSimulationLong$' -sim.long -sim.from=151 -sim.seeds=1000
		# And 1,000 seeds of the job simulation beyond the 40 of the test
		# step (about half a minute).
		step "job simulation, seeds 41-1040" go test -count=1 -timeout 30m ./objlease/sim/ \
			-run '^TestJobSimulation$' -sim.from=41 -sim.seeds=1000
		# The SPIN model of the protocol: every property searched
		# exhaustively, every safeguard-off variant caught (installs SPIN
		# with apt-get if it is missing). Its trails replay in the test step.
		spin_check
	else
		# The emulator harness drives processes with Unix signals.
		step "darwin: vet" cross darwin
	fi
	results+=("$name:${summary%,}")
}

# counts LOG: "P passed, S skipped, F failed" from go test -v output
# (subtests included).
count() { grep -cE "^ *--- $1: " "$2"; }
counts() {
	echo "$(count PASS "$1") passed, $(count SKIP "$1") skipped, $(count FAIL "$1") failed"
}

# integration MODE: go test -v in integration/ with OBJLEASE_EMULATORS=MODE;
# the full output goes to $logs/integration-MODE.log, the terminal gets it
# without the per-test progress lines.
integration() {
	local mode=$1 log=$logs/integration-$1.log
	(cd "$repo/integration" && OBJLEASE_EMULATORS=$mode go test -race -count=1 -v "${test_flags[@]}" ./...) 2>&1 |
		tee "$log" | grep -vE '^ *(=== (RUN|PAUSE|CONT|NAME) |--- PASS: )'
	local rc=${PIPESTATUS[0]}
	ran[$mode]=$(($(count PASS "$log") + $(count SKIP "$log") + $(count FAIL "$log")))
	skipped[$mode]=$(count SKIP "$log")
	log "integration on $mode: $(counts "$log") (log: $log)"
	return "$rc"
}

# image_tests: builds the objlease image (scripts/image.sh) and runs
# integration/image against it; output as for integration, in
# $logs/image.log.
image_tests() {
	local tag log=$logs/image.log
	tag=$(bash "$repo/scripts/image.sh") || return 1
	(cd "$repo/integration" && OBJLEASE_EMULATORS=docker OBJLEASE_IMAGE=$tag \
		go test -race -count=1 -tags objlease_image -v "${test_flags[@]}" ./image/) 2>&1 |
		tee "$log" | grep -vE '^ *(=== (RUN|PAUSE|CONT|NAME) |--- PASS: )'
	local rc=${PIPESTATUS[0]}
	log "image tests: $(counts "$log") (log: $log)"
	return "$rc"
}

# engine_up: a Docker engine (DOCKER_HOST exported) and the images.
engine_started=""
docker_ready=false
engine_up() {
	local env
	if ! env=$(bash "$repo/scripts/containers.sh" up); then
		if [[ ${CI:-} == true ]]; then
			log "FAILED: no Docker engine and images for the container run"
			return 1
		fi
		log "SKIPPING the container run: no Docker engine (see above); with CI=true this fails"
		skipped_docker=true
		return 0
	fi
	eval "$env"
	[[ ${OBJLEASE_ENGINE_STARTED:-} == 1 ]] && engine_started=1
	docker_ready=true
}

stop_engine() {
	if [[ -n $engine_started ]]; then
		bash "$repo/scripts/containers.sh" down
		engine_started=""
	fi
}
trap stop_engine EXIT

test_flags=("$@")
results=()
declare -A ran skipped
skipped_docker=false
module "root module" "$repo" integration examples k8s gocron
summary=""
module "integration module" "$repo/integration"
summary=""
module "examples module" "$repo/examples"
# The examples' tests run their handlers against the emulators, as local
# processes, and decode the Kubernetes manifests strictly.
step test env OBJLEASE_EMULATORS=process go test -race -count=1 "${test_flags[@]}" ./...
results[-1]="examples module:${summary%,}"
summary=""
module "k8s module" "$repo/k8s"
step test go test -race -count=1 "${test_flags[@]}" ./...
# client-go's LeaderElector on the resourcelock against the emulators, as
# local processes: a module of its own, so that k8s/go.mod does not
# require the integration module.
cd "$repo/k8s/internal/electiontest" || exit 1
step "election tests: vet" vet
step "election tests" env OBJLEASE_EMULATORS=process go test -race -count=1 "${test_flags[@]}" ./...
results[-1]="k8s module:${summary%,}"
summary=""
module "gocron module" "$repo/gocron"
step test go test -race -count=1 "${test_flags[@]}" ./...
# Two gocron schedulers on its Elector and Locker, one crashed and taken
# over, on a directory and the emulators, as local processes: a module of
# its own, so that gocron/go.mod does not require the integration module.
cd "$repo/gocron/internal/schedulertest" || exit 1
step "scheduler tests: vet" vet
step "scheduler tests" env OBJLEASE_EMULATORS=process go test -race -count=1 "${test_flags[@]}" ./...
results[-1]="gocron module:${summary%,}"
summary=""
for mode in $modes; do
	case $mode in
	process) step "tests on processes" integration process ;;
	docker)
		start=$SECONDS
		if ! engine_up; then
			summary+=" engine and images FAILED ($((SECONDS - start))s),"
			failed=true
		elif [[ $docker_ready == true ]]; then
			summary+=" engine and images ok ($((SECONDS - start))s),"
			step "tests in containers" integration docker
			step "the image: run, elect, group join in containers" image_tests
			step "no containers left" bash "$repo/scripts/containers.sh" leftovers
		fi
		;;
	*) log "FAILED: OBJLEASE_EMULATORS=$mode: want process or docker"; failed=true ;;
	esac
done
case " $modes " in
*" process "*)
	cd "$repo/integration" || exit 1
	step "safety switches off (-tags objlease_unsafe), on processes" unsafe_tests process "${test_flags[@]}"
	;;
esac
if [[ -n ${ran[process]:-} && -n ${ran[docker]:-} ]]; then
	log "tests run: ${ran[process]} on processes (${skipped[process]} skipped), ${ran[docker]} in containers (${skipped[docker]} skipped)"
	if [[ ${ran[process]} != "${ran[docker]}" || ${skipped[process]} != "${skipped[docker]}" ]]; then
		summary+=" same tests in both modes FAILED (${ran[process]} vs ${ran[docker]} run, ${skipped[process]} vs ${skipped[docker]} skipped),"
		failed=true
	else
		summary+=" same tests in both modes ok (${ran[docker]}),"
	fi
fi
[[ $skipped_docker == true ]] && summary+=" tests in containers SKIPPED (no engine),"
results+=("integration tests:${summary%,}")
stop_engine

for r in "${results[@]}"; do log "$r"; done
if [[ $failed == true ]]; then
	log "FAILED"
	exit 1
fi
log "all passed"

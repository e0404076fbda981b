#!/usr/bin/env bash
# Installs the pinned object-store emulators the integration tests start:
#
#   versitygw v1.8.0        S3             go install -> $DIR/bin/versitygw
#   fake-gcs-server v1.56.1 GCS            go install -> $DIR/bin/fake-gcs-server
#   azurite 3.37.0          Azure Blob     npm ci     -> $DIR/node_modules/.bin/azurite-blob
#   s3rver 3.7.1            S3 that ignores preconditions, same npm ci
#   minio (pseudo-version)  S3, a production server that ignores If-Match
#                           on DELETE; go install -> $DIR/bin/minio
#   ceph-rgw (Debian's)     S3 on a single-host Ceph cluster (mon, mgr, one
#                           OSD, radosgw): apt-get install of Debian's
#                           ceph-mon ceph-osd ceph-mgr radosgw ceph-common
#                           (root only; about a minute), and
#                           scripts/ceph-rgw.sh -> $DIR/bin/ceph-rgw, which
#                           runs it in the foreground
#
# MinIO's tags are not semver, so the pin is the pseudo-version of the
# newest build the module proxy serves. It is the longest build here (about
# 11 min on 2 idle cores, over 40 min on 2 shared ones; 150 MB binary):
# OBJLEASE_SKIP_MINIO=1 leaves it out, and its tests then skip (or fail in
# CI).
#
# DIR is $OBJLEASE_EMULATORS_DIR, default <repo>/.cache/emulators. Nothing
# goes into a go.mod: the emulators' dependencies are not objlease's.
# Idempotent: $DIR/stamps/<name> records what is installed, and an emulator
# whose stamp matches is skipped. The npm packages come from the lock file
# in scripts/emulators/, so every machine gets the same dependency tree.
#
# The npm install runs in the background while the Go emulators build one
# after the other: on 2 cores two go installs at once only compete for the
# CPU (see the timings in scripts/README.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${OBJLEASE_EMULATORS_DIR:-$repo/.cache/emulators}
mkdir -p "$dir/bin" "$dir/stamps"
dir=$(cd "$dir" && pwd) # GOBIN must be absolute

log() { echo "install-emulators: $*" >&2; }
# shellcheck source=interrupt.sh
source "$repo/scripts/interrupt.sh"
die() { log "FAILED: $*"; exit 1; }

# stamped NAME WANT FILE...: the stamp says WANT and every FILE exists.
stamped() {
	local name=$1 want=$2
	shift 2
	[[ -f $dir/stamps/$name && $(<"$dir/stamps/$name") == "$want" ]] || return 1
	local f
	for f; do [[ -x $f ]] || return 1; done
}

go_emulator() {
	local name=$1 pkg=$2 version=$3
	if stamped "$name" "$pkg@$version" "$dir/bin/$name"; then
		log "$name $version already installed"
		return
	fi
	log "go install $pkg@$version (several minutes with a cold Go cache)"
	local start=$SECONDS
	# GOFLAGS from the caller (e.g. -mod=vendor) must not reach a foreign module.
	GOBIN=$dir/bin GOFLAGS= go install "$pkg@$version" || {
		log "FAILED: go install $pkg@$version"
		return 1
	}
	echo "$pkg@$version" >"$dir/stamps/$name"
	log "$name $version installed in $((SECONDS - start))s"
}

npm_emulators() {
	local lock=$repo/scripts/emulators/package-lock.json
	local want
	want=$(cat "$repo/scripts/emulators/package.json" "$lock" | sha256sum | cut -d' ' -f1)
	if stamped npm "$want" "$dir/node_modules/.bin/azurite-blob" "$dir/node_modules/.bin/s3rver"; then
		log "azurite and s3rver already installed"
		return
	fi
	command -v npm >/dev/null || die "npm not found; azurite and s3rver need Node.js and npm"
	log "npm ci azurite and s3rver (from scripts/emulators/package-lock.json)"
	local start=$SECONDS
	rm -f "$dir/stamps/npm"
	cp "$repo/scripts/emulators/package.json" "$lock" "$dir/"
	# --ignore-scripts: the emulators need no install scripts; skipping them
	# keeps the result the same whatever npm's script policy.
	(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) 2>&1 |
		sed -u '/^$/d; s/^/  npm: /' >&2 || die "npm ci in $dir"
	echo "$want" >"$dir/stamps/npm"
	log "azurite and s3rver installed in $((SECONDS - start))s"
}

# ceph_emulator: Debian's Ceph packages, if missing and this is root, and
# the script that runs a cluster. Elsewhere its tests skip (fail in CI).
ceph_emulator() {
	if ! command -v radosgw >/dev/null; then
		if [[ $(id -u) != 0 ]]; then
			log "ceph-rgw: not installed, and only root can: apt-get install --no-install-recommends ceph-mon ceph-osd ceph-mgr radosgw ceph-common"
			return 0
		fi
		log "apt-get install Ceph (mon, osd, mgr, radosgw) from Debian's packages"
		local start=$SECONDS
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			ceph-mon ceph-osd ceph-mgr radosgw ceph-common; } >"$dir/ceph-install.log" 2>&1 ||
			{ log "FAILED: apt-get install Ceph; see $dir/ceph-install.log"; return 1; }
		log "Ceph $(radosgw --version | cut -d' ' -f3) installed in $((SECONDS - start))s"
	fi
	install -m 755 "$repo/scripts/ceph-rgw.sh" "$dir/bin/ceph-rgw"
}

command -v go >/dev/null || die "go not found"
log "installing into $dir"
npm_emulators &
npm_pid=$!
ceph_emulator &
ceph_pid=$!
# On failure, still wait for the npm step: it must not go on writing into
# $dir after this script has exited.
ok=true
go_emulator versitygw github.com/versity/versitygw/cmd/versitygw v1.8.0 &&
	go_emulator fake-gcs-server github.com/fsouza/fake-gcs-server v1.56.1 || ok=false
if [[ ${OBJLEASE_SKIP_MINIO:-} != 1 && $ok == true ]]; then
	go_emulator minio github.com/minio/minio v0.0.0-20260212201848-7aac2a2c5b7c || ok=false
fi
wait "$npm_pid" || ok=false
wait "$ceph_pid" || ok=false
[[ $ok == true ]] || die "see the messages above"
log "all emulators installed in $dir"

#!/usr/bin/env bash
# Checks that a fresh module can
# `go get github.com/objlease/objlease/k8s/resourcelock@VERSION` and
# `…/gocron/gocronlease@VERSION` from a module proxy and build a program
# with them: the checkout's core module and its k8s/ and gocron/ modules
# are served as VERSION from a file proxy (GOPROXY=file://…), their
# dependencies come from the usual proxy or the module cache. The nested
# modules' replace of the core is ignored there, as it is for every
# importer, so the check fails unless each requires a core version that a
# proxy serves and nothing that only the checkout has. The fresh module
# then runs what importers run: go get, go mod tidy (which loads the
# packages' tests too), go list -m all and go build; the program built
# makes a lock and a locker and prints the lock's identity.
#
# Usage: scripts/modinstall-check.sh [VERSION]   (default: the newest
# version in CHANGELOG.md)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
core=github.com/objlease/objlease
k8s=$core/k8s
gocron=$core/gocron
version=${1:-$(grep -m1 -oE '^## \[v[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | tr -d '[]# ')}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# The modules are tagged together (docs/release.md): k8s/vX.Y.Z and
# gocron/vX.Y.Z require the core's vX.Y.Z, the only core version the file
# proxy serves.
for dir in k8s gocron; do
	required=$(cd "$dir" && go list -m -f '{{.Version}}' "$core")
	if [[ $required != "$version" ]]; then
		echo "modinstall-check: $dir/go.mod requires $core ${required:-(no version)}, want $version, the version served: go mod edit -require=$core@$version in $dir/" >&2
		exit 1
	fi
done

go build -o "$tmp/modzip" ./scripts/modzip
commit_time=$(git log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)
# serve MODULE DIR: the files git knows under DIR, as MODULE@VERSION.
serve() {
	local module=$1 dir=$2 at=$tmp/proxy/$1/@v
	mkdir -p "$at"
	(cd "$dir" && git ls-files | "$tmp/modzip" "$module" "$version" "$at/$version.zip")
	cp "$dir/go.mod" "$at/$version.mod"
	printf '{"Version":"%s","Time":"%s"}\n' "$version" "$commit_time" >"$at/$version.info"
	echo "$version" >"$at/list"
}
serve "$core" .
serve "$k8s" k8s
serve "$gocron" gocron

# The shared module cache keeps the dependencies; our versions are
# fetched fresh (a copy from an earlier check is removed first), as in
# scripts/goinstall-check.sh.
gomodcache=$(go env GOMODCACHE)
for m in "$core" "$k8s" "$gocron"; do
	chmod -R u+w "$gomodcache/$m@$version" "$gomodcache/cache/download/$m/@v" 2>/dev/null || true
	rm -rf "${gomodcache:?}/$m@$version" "$gomodcache/cache/download/$m/@v/$version".*
done

mkdir "$tmp/app"
cd "$tmp/app"
cat >main.go <<'EOF'
package main

import (
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/objlease/objlease/gocron/gocronlease"
	"github.com/objlease/objlease/k8s/resourcelock"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers/mem"
)

func main() {
	lock, err := resourcelock.New(mem.New(), "leases/app", "app-1")
	if err != nil {
		panic(err)
	}
	var _ rl.Interface = lock
	locker, err := gocronlease.NewLocker(mem.New(), objlease.SessionOptions{}, objlease.Options{TTL: 30 * time.Second, Holder: "app-1"}, gocronlease.LockerConfig{Prefix: "leases/jobs/"})
	if err != nil {
		panic(err)
	}
	var _ gocron.Locker = locker
	fmt.Println(lock.Identity())
}
EOF
# GONOSUMDB: the checksum database has not seen our versions; every
# other module is checked against it.
export GODEBUG=goindex=0 GOPROXY="file://$tmp/proxy,$(go env GOPROXY)" GOFLAGS=-mod=mod GONOSUMDB=$core GOWORK=off
# quiet CMD...: runs CMD, showing its output only if it fails.
quiet() {
	local out
	out=$("$@" 2>&1) || {
		echo "$out" >&2
		echo "modinstall-check: failed: $*" >&2
		return 1
	}
}
quiet go mod init example.com/app
quiet go get "$k8s/resourcelock@$version" "$gocron/gocronlease@$version"
quiet go mod tidy
quiet go list -m all
quiet go build -o app .
got=$(./app)
echo "go get $k8s/resourcelock@$version $gocron/gocronlease@$version: built with $(go list -m -f '{{.Path}} {{.Version}}' "$core"); the lock says $got"
[[ $got == app-1 ]] || {
	echo "modinstall-check: want the lock's identity app-1, got: $got" >&2
	exit 1
}

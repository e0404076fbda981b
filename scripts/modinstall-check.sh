#!/usr/bin/env bash
# Checks that a fresh module can
# `go get github.com/objlease/objlease/k8s/resourcelock@VERSION` from a
# module proxy and build a program with it: the checkout's core module and
# its k8s/ module are both served as VERSION from a file proxy
# (GOPROXY=file://…), their dependencies come from the usual proxy or the
# module cache. k8s/go.mod's replace of the core is ignored there, as it is
# for every importer, so the check fails unless k8s/go.mod requires a core
# version that a proxy serves and nothing that only the checkout has. The
# fresh module then runs what importers run: go get, go mod tidy (which
# loads resourcelock's tests too), go list -m all and go build; the program
# built makes a lock and prints its identity.
#
# Usage: scripts/modinstall-check.sh [VERSION]   (default: the newest
# version in CHANGELOG.md)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
core=github.com/objlease/objlease
k8s=$core/k8s
version=${1:-$(grep -m1 -oE '^## \[v[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | tr -d '[]# ')}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# Both modules are tagged together (docs/release.md): k8s/vX.Y.Z requires
# the core's vX.Y.Z, the only core version the file proxy serves.
required=$(cd k8s && go list -m -f '{{.Version}}' "$core")
if [[ $required != "$version" ]]; then
	echo "modinstall-check: k8s/go.mod requires $core ${required:-(no version)}, want $version, the version served: go mod edit -require=$core@$version in k8s/" >&2
	exit 1
fi

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

# The shared module cache keeps the dependencies; our two versions are
# fetched fresh (a copy from an earlier check is removed first), as in
# scripts/goinstall-check.sh.
gomodcache=$(go env GOMODCACHE)
for m in "$core" "$k8s"; do
	chmod -R u+w "$gomodcache/$m@$version" "$gomodcache/cache/download/$m/@v" 2>/dev/null || true
	rm -rf "${gomodcache:?}/$m@$version" "$gomodcache/cache/download/$m/@v/$version".*
done

mkdir "$tmp/app"
cd "$tmp/app"
cat >main.go <<'EOF'
package main

import (
	"fmt"

	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/objlease/objlease/k8s/resourcelock"
	"github.com/objlease/objlease/providers/mem"
)

func main() {
	lock, err := resourcelock.New(mem.New(), "leases/app", "app-1")
	if err != nil {
		panic(err)
	}
	var _ rl.Interface = lock
	fmt.Println(lock.Identity())
}
EOF
# GONOSUMDB: the checksum database has not seen our two versions; every
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
quiet go get "$k8s/resourcelock@$version"
quiet go mod tidy
quiet go list -m all
quiet go build -o app .
got=$(./app)
echo "go get $k8s/resourcelock@$version: built with $(go list -m -f '{{.Path}} {{.Version}}' "$core"); the lock says $got"
[[ $got == app-1 ]] || {
	echo "modinstall-check: want the lock's identity app-1, got: $got" >&2
	exit 1
}

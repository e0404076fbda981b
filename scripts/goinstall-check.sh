#!/usr/bin/env bash
# Checks that `go install github.com/objlease/objlease/cmd/objlease@VERSION`
# works from a module proxy and that the binary it builds says VERSION: the
# checkout is served as that version from a file proxy (GOPROXY=file://…),
# the module's dependencies come from the usual proxy or the module cache.
#
# Usage: scripts/goinstall-check.sh [VERSION]   (default: the newest
# version in CHANGELOG.md)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
module=github.com/objlease/objlease
version=${1:-$(grep -m1 -oE '^## \[v[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | tr -d '[]# ')}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
at=$tmp/proxy/$module/@v
mkdir -p "$at" "$tmp/bin" "$tmp/cache"
git ls-files | go run ./scripts/modzip "$module" "$version" "$at/$version.zip"
cp go.mod "$at/$version.mod"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(git log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)" >"$at/$version.info"
echo "$version" >"$at/list"
# A module cache of its own for this module only would refetch every
# dependency; instead GOFLAGS=-modcacherw and GONOSUMDB keep the shared
# cache, and GOPROXY puts the file proxy first. The version is fetched
# fresh: a copy of it from an earlier check is removed first.
gomodcache=$(go env GOMODCACHE)
chmod -R u+w "$gomodcache/$module@$version" "$gomodcache/cache/download/$module/@v" 2>/dev/null || true
rm -rf "${gomodcache:?}/$module@$version" "$gomodcache/cache/download/$module/@v/$version".*
# GODEBUG=goindex=0: the go command's index of the module cache (in
# GOCACHE) would still list the files of the copy removed above.
GODEBUG=goindex=0 GOPROXY="file://$tmp/proxy,$(go env GOPROXY)" GOFLAGS=-mod=mod GONOSUMDB=$module GONOSUMCHECK=1 GOSUMDB=off \
	GOBIN=$tmp/bin go install "$module/cmd/objlease@$version"
got=$("$tmp/bin/objlease" version)
echo "go install $module/cmd/objlease@$version: $got"
[[ $got == "objlease $version "* ]] || {
	echo "goinstall-check: want objlease $version, got: $got" >&2
	exit 1
}

#!/usr/bin/env bash
# Builds the release archives of HEAD (scripts/release.sh, every target)
# from a clone, then the linux/amd64 one again from a second clone at
# another path with an empty build cache, and fails unless the two are
# the same bytes, or if a relative link of the archive's README.md or
# CHANGELOG.md names a file the archive does not hold. Prints the
# archives' sizes.
#
# Usage: scripts/release-check.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
git clone -q "$repo" "$tmp/one"
git clone -q "$repo" "$tmp/second-clone"
bash "$tmp/one/scripts/release.sh" "" "$tmp/out-one"
GOCACHE=$tmp/gocache OBJLEASE_RELEASE_TARGETS=linux/amd64 \
	bash "$tmp/second-clone/scripts/release.sh" "" "$tmp/out-two"
ls -l "$tmp/out-one" >&2
a=$(ls "$tmp/out-one"/*_linux_amd64.tar.gz)
b=$tmp/out-two/$(basename "$a")
if ! cmp -s "$a" "$b"; then
	echo "release-check: $(basename "$a") differs between two builds of the same commit" >&2
	sha256sum "$a" "$b" >&2
	exit 1
fi
(cd "$tmp/out-one" && sha256sum -c --quiet ./*_checksums.txt)
# Every relative link of the archive's Markdown resolves inside it.
mkdir "$tmp/unpacked"
tar -xzf "$a" -C "$tmp/unpacked"
unpacked=$(echo "$tmp/unpacked"/*)
(cd "$repo" && go run ./scripts/relink -check - "$unpacked" README.md CHANGELOG.md) || {
	echo "release-check: $(basename "$a") has Markdown links to files it does not hold" >&2
	exit 1
}
echo "release-check: $(basename "$a") built twice, same bytes: $(sha256sum "$a" | cut -c1-16)…" >&2

#!/usr/bin/env bash
# Builds the release of HEAD (scripts/release.sh, every target) from a
# clone, then the linux/amd64 target again (or $OBJLEASE_RELEASE_CHECK_TARGETS,
# e.g. "linux/amd64 linux/arm64", each one more compilation from scratch)
# from a second clone at another path with an empty build cache, and fails
# unless every file of the second build (archives, their SBOMs, the image
# SBOMs) is the same bytes as the first's, and its image layout's every
# platform manifest is the first's (the same digest: the layout is the same
# bytes when the second build has every linux target); then checks the
# first build: its checksums file, every
# archive's SBOM against go version -m of the binary it holds, the image
# layout (scripts/ociimage check: each platform's config, ELF machine and
# SBOM), and that no relative link of the archive's README.md or
# CHANGELOG.md names a file the archive does not hold. Prints the files'
# sizes and the image's digests.
#
# Usage: scripts/release-check.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
git clone -q "$repo" "$tmp/one"
git clone -q "$repo" "$tmp/second-clone"
bash "$tmp/one/scripts/release.sh" "" "$tmp/out-one"
GOCACHE=$tmp/gocache OBJLEASE_RELEASE_TARGETS=${OBJLEASE_RELEASE_CHECK_TARGETS:-linux/amd64} \
	bash "$tmp/second-clone/scripts/release.sh" "" "$tmp/out-two"
ls -l "$tmp/out-one" >&2
compared=0
for b in "$tmp/out-two"/*; do
	[[ $b == *_checksums.txt ]] && continue # it lists fewer files
	a=$tmp/out-one/$(basename "$b")
	if [[ $b == *.oci.tar ]] && ! cmp -s "$a" "$b"; then
		# Fewer platforms: the same manifest for each.
		(cd "$repo" && go run ./scripts/ociimage contains "$a" "$b") || {
			echo "release-check: $(basename "$b"): an image differs between two builds of the same commit" >&2
			exit 1
		}
	elif ! cmp -s "$a" "$b"; then
		echo "release-check: $(basename "$b") differs between two builds of the same commit" >&2
		sha256sum "$a" "$b" >&2
		exit 1
	fi
	compared=$((compared + 1))
done
[[ $compared -ge 4 ]] || {
	echo "release-check: the second build made $compared files, want at least an archive, its SBOM, the image and its SBOM" >&2
	exit 1
}
(cd "$tmp/out-one" && sha256sum -c --quiet ./*_checksums.txt)
listed=$(wc -l <"$tmp"/out-one/*_checksums.txt)
files=$(find "$tmp/out-one" -type f ! -name '*_checksums.txt' | wc -l)
[[ $listed == "$files" ]] || {
	echo "release-check: the checksums file lists $listed files of $files" >&2
	exit 1
}
# Every archive's SBOM lists the modules of its binary.
(
	cd "$repo"
	for archive in "$tmp"/out-one/*.tar.gz "$tmp"/out-one/*.zip; do
		sbom=${archive%.tar.gz}
		sbom=${sbom%.zip}.spdx.json
		go run ./scripts/sbom -check "$sbom" "$archive"
	done
	go run ./scripts/ociimage check "$tmp"/out-one/*_image.oci.tar "$tmp/out-one"
) || {
	echo "release-check: an SBOM or the image does not describe what was built (above)" >&2
	exit 1
}
a=$(ls "$tmp/out-one"/*_linux_amd64.tar.gz)
# Every relative link of the archive's Markdown resolves inside it.
mkdir "$tmp/unpacked"
tar -xzf "$a" -C "$tmp/unpacked"
unpacked=$(echo "$tmp/unpacked"/*)
(cd "$repo" && go run ./scripts/relink -check - "$unpacked" README.md CHANGELOG.md) || {
	echo "release-check: $(basename "$a") has Markdown links to files it does not hold" >&2
	exit 1
}
image=$(ls "$tmp"/out-one/*_image.oci.tar)
echo "release-check: built twice, same bytes: $compared files, $(basename "$a") $(sha256sum "$a" | cut -c1-16)…, $(basename "$image") $(sha256sum "$image" | cut -c1-16)…" >&2

#!/usr/bin/env bash
# Builds the release archives of the CLI: for linux, darwin and windows on
# amd64 and arm64, an archive (.tar.gz; .zip for windows) holding the
# binary, LICENSE, README.md, CHANGELOG.md (their links to files the
# archive does not hold made links to the repository at the version's
# tag), shell completions and the manual page (both printed by the binary
# itself, from the text of its help); beside each archive its SPDX 2.3
# SBOM (scripts/sbom: the binary, the Go version and every module go
# version -m lists); the container image for the linux targets as an OCI
# image layout, one tar holding a multi-platform image (scripts/ociimage,
# FROM-scratch content, no engine or registry needed), with each
# platform's SBOM beside it (the same file as the image's
# /usr/share/doc/objlease/sbom.spdx.json); and a SHA-256 checksums file
# of them all.
#
# Reproducible: the same commit gives the same bytes on any machine with
# the same Go version (-trimpath, no build ID, no VCS stamp but the
# version and commit given by -ldflags, every time in the archives set to
# the commit's time). scripts/test.sh builds twice and compares.
#
# Usage: scripts/release.sh [VERSION [OUTDIR]]
#   VERSION  default: the newest version in CHANGELOG.md
#   OUTDIR   default: dist/VERSION
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
version=${1:-$(grep -m1 -oE '^## \[v[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | tr -d '[]# ')}
out=${2:-dist/$version}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain 2>/dev/null) ]]; then
	revision+=-modified # not the commit's bytes: say so in every binary
	echo "release: the work tree has changes; the binaries say $revision" >&2
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
targets=${OBJLEASE_RELEASE_TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}
ldflags="-s -w -buildid= -X main.version=$version -X main.revision=$revision"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out"
mkdir -p "$out"

# The tools that write the SBOMs and the image, built once.
go build -o "$tmp/tools/sbom" ./scripts/sbom
go build -o "$tmp/tools/ociimage" ./scripts/ociimage

# The completions and the page come from a binary for this machine.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/host/objlease" ./cmd/objlease
got=$("$tmp/host/objlease" version)
[[ $got == "objlease $version $revision "* ]] || {
	echo "release: the binary says \"$got\", want objlease $version $revision" >&2
	exit 1
}
mkdir -p "$tmp/extra/completions" "$tmp/extra/man"
for sh in bash zsh fish; do
	"$tmp/host/objlease" completion "$sh" >"$tmp/extra/completions/objlease.$sh"
done
"$tmp/host/objlease" completion powershell >"$tmp/extra/completions/objlease.ps1"
"$tmp/host/objlease" help man >"$tmp/extra/man/objlease.1"
cp LICENSE README.md CHANGELOG.md "$tmp/extra/"
# The archive holds no docs/: their links point at the repository, at the
# version's tag.
go run ./scripts/relink "https://github.com/objlease/objlease/blob/$version" "$tmp/extra" README.md CHANGELOG.md

image_binaries=()
for target in $targets; do
	os=${target%/*} arch=${target#*/}
	name=objlease_${version}_${os}_${arch}
	stage=$tmp/$name
	mkdir -p "$stage"
	exe=objlease
	[[ $os == windows ]] && exe=objlease.exe
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$stage/$exe" ./cmd/objlease
	cp -R "$tmp/extra/." "$stage/"
	ext=tar.gz
	[[ $os == windows ]] && ext=zip
	go run ./scripts/archive "$out/$name.$ext" "$stage" "$name"
	"$tmp/tools/sbom" -name "$name.$ext" -version "$version" -revision "$revision" "$stage/$exe" >"$out/$name.spdx.json"
	[[ $os == linux ]] && image_binaries+=("$target=$stage/$exe")
	echo "release: $out/$name.$ext ($(du -k "$stage/$exe" | cut -f1) KiB binary)" >&2
done
# The image, for every linux target. Its CA certificates are this
# machine's (Debian's ca-certificates where there is one); the SBOM says
# which.
if [[ ${#image_binaries[@]} -gt 0 ]]; then
	certs=/etc/ssl/certs/ca-certificates.crt
	certs_from="the build machine's $certs"
	if v=$(dpkg-query -W -f='${Version}' ca-certificates 2>/dev/null) && [[ -n $v ]]; then
		certs_from+=", from the Debian package ca-certificates $v"
	fi
	"$tmp/tools/ociimage" build -version "$version" -revision "$revision" -certs "$certs" \
		-certs-comment "$certs_from" -license LICENSE -out "$out/objlease_${version}_image.oci.tar" \
		-sbom-dir "$out" "${image_binaries[@]}"
fi
(
	cd "$out"
	shopt -s nullglob
	sha256sum -- *.tar.gz *.zip *.spdx.json *.oci.tar >"objlease_${version}_checksums.txt"
)
echo "release: $out/objlease_${version}_checksums.txt" >&2

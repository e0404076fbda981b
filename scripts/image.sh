#!/usr/bin/env bash
# Builds the objlease container image for this machine's architecture and
# loads it into the engine: scripts/release.sh builds the linux release
# binary and the image layout of the release (scripts/ociimage, for this
# architecture only: the same manifest as that platform's in the release's
# multi-platform image), and scripts/ociimage docker-archive turns it into
# the archive docker load reads (any engine version: Docker 20.10 reads no
# OCI layout). The engine's image ID is the image config's digest.
#
# The image: the static CLI as the entrypoint, user 65532, CA
# certificates, /etc/passwd and /etc/group, LICENSE, its SBOM at
# /usr/share/doc/objlease/sbom.spdx.json, and nothing else (no shell, no
# package manager).
#
#   docker run --rm objlease/objlease:v0.1.0 version
#   docker run -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY \
#     objlease/objlease:v0.1.0 run s3://bucket/jobs/nightly -- /job
#
# As PID 1 objlease handles SIGTERM (docker stop) as it does anywhere:
# run, elect and group join pass it to the command and release the lease
# once the command has exited. The command runs under a supervisor that is
# a child subreaper, so what the command leaves behind is reaped there.
#
# Usage: scripts/image.sh [TAG]   (default objlease/objlease:VERSION, the
#                                  newest version in CHANGELOG.md)
# DOCKER_HOST must reach an engine (scripts/containers.sh engine). Runs
# the loaded image's `version` and fails unless it names the version.
# Prints the tag on stdout.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
version=$(grep -m1 -oE '^## \[v[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | tr -d '[]# ')
tag=${1:-objlease/objlease:$version}
arch=$(go env GOARCH)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

OBJLEASE_RELEASE_TARGETS=linux/$arch bash scripts/release.sh "$version" "$tmp/dist"
go run ./scripts/ociimage docker-archive "$tmp/dist/objlease_${version}_image.oci.tar" "linux/$arch" "$tag" "$tmp/image.tar"
docker load --quiet -i "$tmp/image.tar" >/dev/null || {
	echo "image: docker load of the linux/$arch image failed" >&2
	exit 1
}
# It runs, and its binary is the release's.
got=$(docker run --rm "$tag" version) || {
	echo "image: docker run --rm $tag version failed" >&2
	exit 1
}
[[ $got == "objlease $version "* ]] || {
	echo "image: $tag says \"$got\", want objlease $version ..." >&2
	exit 1
}
echo "image: $tag ($(docker image inspect --format '{{.Id}}, {{.Size}} bytes' "$tag")): $got" >&2
echo "$tag"

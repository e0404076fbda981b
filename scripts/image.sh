#!/usr/bin/env bash
# Builds the objlease container image (see Dockerfile) from the release
# binary for linux on this machine's architecture, with no registry.
#
# Usage: scripts/image.sh [TAG]   (default objlease/objlease:VERSION, the
#                                  newest version in CHANGELOG.md)
# DOCKER_HOST must reach an engine (scripts/containers.sh engine).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
version=$(grep -m1 -oE '^## \[v[0-9]+\.[0-9]+\.[0-9]+\]' CHANGELOG.md | tr -d '[]# ')
tag=${1:-objlease/objlease:$version}
arch=$(go env GOARCH)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

OBJLEASE_RELEASE_TARGETS=linux/$arch bash scripts/release.sh "$version" "$tmp/dist"
tar -xzf "$tmp/dist/objlease_${version}_linux_${arch}.tar.gz" -C "$tmp"
ctx=$tmp/context
root=$ctx/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/home/objlease" "$root/tmp"
cp Dockerfile "$ctx/"
cp "$tmp/objlease_${version}_linux_${arch}/objlease" "$root/usr/local/bin/objlease"
cp "$tmp/objlease_${version}_linux_${arch}/LICENSE" "$root/LICENSE"
certs=/etc/ssl/certs/ca-certificates.crt
[[ -f $certs ]] || {
	echo "image: $certs missing (apt-get install ca-certificates): the image could not reach a store over TLS" >&2
	exit 1
}
cp "$certs" "$root/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nobjlease:x:65532:65532:objlease:/home/objlease:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nobjlease:x:65532:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
chown -R 65532:65532 "$root/home/objlease" 2>/dev/null || true
# The classic builder: FROM scratch needs nothing from a registry, and it
# ships with every engine (BuildKit's builder is a plugin of its own).
DOCKER_BUILDKIT=0 docker build --quiet --label "org.opencontainers.image.version=$version" \
	--label "org.opencontainers.image.licenses=Apache-2.0" -t "$tag" "$ctx" >/dev/null
echo "image: $tag ($(docker image inspect --format '{{.Size}}' "$tag") bytes)" >&2
echo "$tag"

#!/usr/bin/env bash
# A Docker engine and the emulator images for the integration tests'
# container mode (OBJLEASE_EMULATORS=docker).
#
#   ./scripts/containers.sh up       engine + images; prints `export DOCKER_HOST=…`
#                                    (and OBJLEASE_ENGINE_STARTED=1 if it started dockerd)
#   ./scripts/containers.sh engine   the engine only; prints the same
#   ./scripts/containers.sh images   the images only (DOCKER_HOST must reach an engine)
#   ./scripts/containers.sh down     stops the engine this script started
#   ./scripts/containers.sh leftovers  fails if any container or volume exists
#
# Use it as  eval "$(./scripts/containers.sh up)"  before go test.
#
# Engine: an engine that already answers (DOCKER_HOST or the default socket)
# is used as it is. Otherwise the script starts dockerd as root with its
# state under $OBJLEASE_DOCKER_STATE (default <repo>/.cache/docker), no
# iptables rules, its own socket, and the first storage driver of
# $OBJLEASE_DOCKER_STORAGE (default "overlay2 vfs") with which it starts:
# overlay2 where the kernel and filesystem allow it, else vfs, which works
# anywhere but copies the whole image for every container (about 90 s for
# Azurite's on a loaded 2-core machine, against 0.1 s). dockerd and the docker CLI come from the
# distribution's docker.io package, installed with apt-get when missing if
# CI=true or OBJLEASE_INSTALL_ENGINE=1.
#
# Images: the harness runs the pinned images under their upstream names
# (see integration/emulator/docker.go). An image already present is used;
# a missing one is pulled; if no registry answers (or OBJLEASE_IMAGES=build),
# it is made here from the same pinned versions, without any registry, as a
# one-layer image (docker import of a root filesystem, like FROM scratch
# plus one COPY):
#
#   versity/versitygw:v1.8.0           FROM scratch + static versitygw
#   fsouza/fake-gcs-server:1.56.1      FROM scratch + static fake-gcs-server
#   mcr.microsoft.com/azure-storage/azurite:3.37.0
#                                      FROM scratch + this machine's node, the
#                                      libraries it links and Azurite's
#                                      node_modules from the emulators dir
#   objlease/minio:<pseudo-version>    FROM scratch + the emulators dir's
#                                      minio and the libraries it links;
#                                      always built here, never pulled
#                                      (OBJLEASE_SKIP_MINIO=1: left out)
#
# Each keeps the upstream image's entrypoint and paths, so the harness
# passes the same command line to either. Local builds carry the label
# org.objlease.build (a hash of the recipe); a build whose recipe changed
# is rebuilt, a pulled image is never touched.
#
# Messages go to stderr; only the export line goes to stdout.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${OBJLEASE_DOCKER_STATE:-$repo/.cache/docker}
emulators=${OBJLEASE_EMULATORS_DIR:-$repo/.cache/emulators}
our_sock=$state/docker.sock
our_host=unix://$our_sock

# The pinned versions: the same as scripts/install-emulators.sh and the
# image names in integration/emulator/docker.go.
vgw_pkg=github.com/versity/versitygw/cmd/versitygw
vgw_version=v1.8.0
vgw_image=versity/versitygw:$vgw_version
gcs_pkg=github.com/fsouza/fake-gcs-server
gcs_version=v1.56.1
gcs_image=fsouza/fake-gcs-server:${gcs_version#v}
azurite_version=3.37.0
azurite_image=mcr.microsoft.com/azure-storage/azurite:$azurite_version
minio_version=v0.0.0-20260212201848-7aac2a2c5b7c
# Never pulled: MinIO's own images are tagged by release date.
minio_image=objlease/minio:$minio_version

log() { echo "containers.sh: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# answers HOST: an engine answers at HOST ("" = the docker CLI's default).
answers() {
	command -v docker >/dev/null || return 1
	if [[ -n $1 ]]; then
		DOCKER_HOST=$1 timeout 20 docker info >/dev/null 2>&1
	else
		env -u DOCKER_HOST timeout 20 docker info >/dev/null 2>&1
	fi
}

# ours_running: the dockerd this script started is alive.
ours_running() {
	[[ -f $state/dockerd.pid ]] && kill -0 "$(<"$state/dockerd.pid")" 2>/dev/null
}

install_engine() {
	if [[ ${CI:-} != true && ${OBJLEASE_INSTALL_ENGINE:-} != 1 ]]; then
		die "no Docker engine answers and dockerd is not installed; install Docker, or run with OBJLEASE_INSTALL_ENGINE=1 to apt-get install docker.io"
	fi
	[[ $(id -u) == 0 ]] || die "installing docker.io needs root"
	command -v apt-get >/dev/null || die "no apt-get to install docker.io with; install Docker yourself"
	log "apt-get install docker.io"
	local start=$SECONDS
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io; } >"$state/apt.log" 2>&1 ||
		die "apt-get install docker.io; see $state/apt.log"
	log "docker.io installed in $((SECONDS - start))s"
}

start_engine() {
	mkdir -p "$state"
	if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
		install_engine
	fi
	[[ $(id -u) == 0 ]] || die "no Docker engine answers, and starting dockerd needs root"
	local driver
	for driver in ${OBJLEASE_DOCKER_STORAGE:-overlay2 vfs}; do
		start_dockerd "$driver" && return
	done
	die "dockerd did not start with any of: ${OBJLEASE_DOCKER_STORAGE:-overlay2 vfs}; its log is $state/dockerd.log"
}

# start_dockerd DRIVER: starts dockerd with storage DRIVER and waits until
# it answers; fails if it exits first (the driver does not work here).
start_dockerd() {
	local driver=$1 start=$SECONDS
	log "starting dockerd (storage $driver), state in $state"
	rm -f "$our_sock" "$state/dockerd.pid"
	# setsid: a Ctrl-C at the terminal must not stop the engine before the
	# tests have removed their containers.
	setsid dockerd --storage-driver="$driver" --iptables=false --ip-masq=false \
		--data-root="$state/root" --exec-root="$state/exec" \
		-H "$our_host" --pidfile "$state/dockerd.pid" \
		</dev/null >>"$state/dockerd.log" 2>&1 &
	local pid=$!
	until answers "$our_host"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 5 "$state/dockerd.log" >&2
			log "dockerd exited with storage $driver"
			unmount_state
			return 1
		fi
		((SECONDS - start < 60)) || die "dockerd did not answer within 60 s; its log is $state/dockerd.log"
		sleep 0.5
	done
	log "dockerd (pid $pid, storage $driver) answers on $our_host after $((SECONDS - start))s"
}

# unmount_state: what a stopped dockerd leaves mounted under $state (its
# network namespace, its data root), innermost first.
unmount_state() {
	local m
	for m in $(awk -v s="$state/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" || true
	done
}

# engine: finds or starts an engine and exports DOCKER_HOST for it; sets
# started if it started dockerd.
started=""
engine() {
	if ours_running && answers "$our_host"; then
		export DOCKER_HOST=$our_host
	elif answers "${DOCKER_HOST:-}"; then
		log "using the Docker engine at ${DOCKER_HOST:-the default socket}"
	else
		start_engine
		export DOCKER_HOST=$our_host
		started=1
	fi
}

stop_engine() {
	ours_running || return 0
	local pid
	pid=$(<"$state/dockerd.pid")
	log "stopping dockerd (pid $pid)"
	kill -TERM "$pid"
	for _ in $(seq 60); do
		if ! kill -0 "$pid" 2>/dev/null; then
			unmount_state
			return 0
		fi
		sleep 0.5
	done
	die "dockerd (pid $pid) still runs 30 s after SIGTERM"
}

# recipe NAME: a hash of everything a local build of NAME depends on.
recipe() {
	{ declare -f "build_$1" put_libs; echo "$vgw_version $gcs_version $azurite_version $minio_version"; } | sha256sum | cut -c1-16
}

# image NAME REF: makes REF present, pulling or building it.
image() {
	local name=$1 ref=$2 want have
	want=$(recipe "$name")
	if have=$(docker image inspect -f '{{index .Config.Labels "org.objlease.build"}}' "$ref" 2>/dev/null); then
		if [[ $have == "<no value>" || $have == "" ]]; then
			log "$ref present (not built here)"
			return
		elif [[ $have == "$want" ]]; then
			log "$ref present (built here)"
			return
		fi
		log "$ref was built from an older recipe; rebuilding"
	elif [[ ${OBJLEASE_IMAGES:-} != build ]]; then
		log "docker pull $ref"
		if timeout 300 docker pull -q "$ref" >&2; then
			return
		fi
		log "cannot pull $ref; building it here"
	fi
	local start=$SECONDS root=$state/build/$name
	rm -rf "$root"
	mkdir -p "$root/tmp"
	chmod 1777 "$root/tmp"
	# build_NAME fills $root, sets the image's configuration (Dockerfile
	# instructions) in changes, and may add trees to extra (tar arguments).
	local changes=("LABEL org.objlease.build=$want") extra=()
	"build_$name" "$root"
	local args=() c
	for c in "${changes[@]}"; do args+=(--change "$c"); done
	# One layer from one tar stream, as FROM scratch plus one COPY: docker
	# build would copy Azurite's 50,000 files three times over on vfs.
	tar -c --owner=0 --group=0 --numeric-owner -C "$root" . "${extra[@]}" |
		docker import "${args[@]}" - "$ref" >/dev/null || die "docker import $ref"
	rm -rf "$root"
	# The image this one replaces, if any, is now untagged.
	docker image prune -f --filter "label=org.objlease.build" >/dev/null
	log "$ref built in $((SECONDS - start))s ($(docker image inspect -f '{{.Size}}' "$ref" | numfmt --to=iec))"
}

# go_static DIR PKG VERSION: a statically linked binary of PKG@VERSION in
# DIR, from the Go module and build caches the process mode filled.
go_static() {
	command -v go >/dev/null || die "go not found"
	CGO_ENABLED=0 GOFLAGS= GOBIN=$1 go install "$2@$3" || die "go install $2@$3"
}

build_versitygw() {
	local root=$1
	# Upstream: alpine, /usr/local/bin/versitygw behind an entrypoint
	# script that execs it with the container's arguments, /tmp/vgw.
	mkdir -p "$root/usr/local/bin" "$root/tmp/vgw"
	go_static "$root/usr/local/bin" "$vgw_pkg" "$vgw_version"
	changes+=('ENTRYPOINT ["/usr/local/bin/versitygw"]')
}

build_fake-gcs-server() {
	local root=$1
	# Upstream: alpine, /bin/fake-gcs-server -data /data, mime types.
	mkdir -p "$root/bin" "$root/etc"
	go_static "$root/bin" "$gcs_pkg" "$gcs_version"
	if [[ -f /etc/mime.types ]]; then cp /etc/mime.types "$root/etc/"; fi
	changes+=('EXPOSE 4443' 'ENTRYPOINT ["/bin/fake-gcs-server", "-data", "/data"]')
}

# put_libs ROOT BINARY...: copies each binary's shared libraries and its
# program interpreter into ROOT under the same paths.
put_libs() {
	local root=$1 bin lib
	shift
	for bin; do
		for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
			[[ -e $root$lib ]] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
	done
}

build_azurite() {
	local root=$1 node
	# Upstream: node:22-alpine, Azurite installed globally (azurite-blob on
	# PATH), WORKDIR /opt/azurite, VOLUME /data. Here: this machine's node
	# and the node_modules installed by scripts/install-emulators.sh.
	node=$(command -v node) || die "node not found"
	[[ -x $emulators/node_modules/.bin/azurite-blob ]] ||
		die "no Azurite in $emulators; run ./scripts/install-emulators.sh first"
	mkdir -p "$root/usr/local/bin" "$root/usr/bin" "$root/opt/azurite" "$root/data"
	cp -L "$node" "$root/usr/local/bin/node"
	# The npm bin scripts start with #!/usr/bin/env node.
	cp -L "$(command -v env)" "$root/usr/bin/env"
	put_libs "$root" "$root/usr/local/bin/node" "$root/usr/bin/env"
	# node_modules goes into the stream as it is, renamed on the way.
	# Source maps and type declarations are never loaded at run time and
	# are half its size; vfs copies every byte for every container.
	extra=(-C "$emulators" --exclude='*.map' --exclude='*.d.ts'
		--transform='s,^node_modules,./opt/azurite/node_modules,S' node_modules)
	changes+=(
		'ENV PATH=/opt/azurite/node_modules/.bin:/usr/local/bin:/usr/bin:/bin'
		'ENV HOME=/tmp'
		'WORKDIR /opt/azurite'
		'VOLUME /data'
		'EXPOSE 10000'
		'CMD ["azurite", "-l", "/data", "--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0"]'
	)
}

build_minio() {
	local root=$1 bin=$emulators/bin/minio
	# The binary scripts/install-emulators.sh built (its 10-minute build is
	# not repeated here), with the libraries it links, as /usr/bin/minio;
	# data under /data, as in MinIO's own image.
	[[ -x $bin && $(cat "$emulators/stamps/minio" 2>/dev/null) == "github.com/minio/minio@$minio_version" ]] ||
		die "no MinIO $minio_version in $emulators; run ./scripts/install-emulators.sh first"
	mkdir -p "$root/usr/bin" "$root/data" "$root/etc/ssl/certs"
	cp -L "$bin" "$root/usr/bin/minio"
	put_libs "$root" "$root/usr/bin/minio"
	changes+=('ENV HOME=/tmp' 'VOLUME /data' 'EXPOSE 9000' 'ENTRYPOINT ["/usr/bin/minio"]')
}

images() {
	answers "${DOCKER_HOST:-}" || die "no Docker engine answers at ${DOCKER_HOST:-the default socket}"
	image versitygw "$vgw_image"
	image fake-gcs-server "$gcs_image"
	image azurite "$azurite_image"
	if [[ ${OBJLEASE_SKIP_MINIO:-} != 1 ]]; then
		OBJLEASE_IMAGES=build image minio "$minio_image"
	fi
}

# leftovers: fails if any container or volume exists. A test binary that
# died leaves its reaper a few seconds to remove its containers.
leftovers() {
	local c v i
	for i in $(seq 10); do
		c=$(docker ps -a --format '{{.ID}} {{.Image}} {{.Status}} {{.Names}}')
		v=$(docker volume ls -q)
		[[ -z $c && -z $v ]] && return 0
		sleep 1
	done
	[[ -z $c ]] || log "containers left behind:"$'\n'"$c"
	[[ -z $v ]] || log "volumes left behind:"$'\n'"$v"
	return 1
}

case ${1:-} in
up)
	engine
	images
	echo "export DOCKER_HOST=${DOCKER_HOST:-}"
	[[ -z $started ]] || echo "export OBJLEASE_ENGINE_STARTED=1"
	;;
engine)
	engine
	echo "export DOCKER_HOST=${DOCKER_HOST:-}"
	[[ -z $started ]] || echo "export OBJLEASE_ENGINE_STARTED=1"
	;;
images) images ;;
down) stop_engine ;;
leftovers) leftovers ;;
*)
	sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# ceph-rgw.sh PORT DIR: the smallest Ceph cluster that serves S3, in the
# foreground, for the integration tests (installed as bin/ceph-rgw by
# install-emulators.sh): one monitor, one manager, one bluestore OSD on a
# sparse file, and radosgw on 127.0.0.1:PORT, all under DIR, all children
# of this script in its process group. SIGTERM stops them all. The S3 user
# is objlease / objleasesecret (the harness's credentials for it).
#
# Cephx is off inside the cluster (one host, loopback only); radosgw still
# checks every S3 request's signature. radosgw refuses a monitor without
# cephx unless "ms mon client mode" allows crc: without that line it waits
# 300 s and says only "failed to fetch mon config".
set -euo pipefail
port=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
conf=$dir/ceph.conf
# freeport: a port nothing listens on now, for the monitor.
freeport() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
mon2=$(freeport) mon1=$(freeport)

pids=()
stop() {
	trap - TERM INT EXIT
	((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
	wait
}
trap stop TERM INT EXIT
log() { echo "ceph-rgw: $*" >&2; }

# Always a fresh cluster: the tests need no data across a restart.
rm -rf "${dir:?}"/*
mkdir -p "$dir"/{run,log,mon/ceph-a,mgr/ceph-x,osd/ceph-0,rgw}
fsid=$(cat /proc/sys/kernel/random/uuid)
cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
keyring = $dir/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon max pg per osd = 1000
osd crush chooseleaf type = 0
[mon]
mon data = $dir/mon/\$cluster-\$id
[mgr]
mgr data = $dir/mgr/\$cluster-\$id
[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = bluestore
bluestore block create = true
bluestore block size = 10737418240
osd memory target = 1073741824
osd op num shards = 1
osd op num threads per shard = 2
[client.rgw.a]
rgw data = $dir/rgw
rgw frontends = beast endpoint=127.0.0.1:$port
rgw thread pool size = 64
ms mon client mode = crc secure
CONF
ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring"

ceph-mon -f -c "$conf" -i a &
pids+=($!)
ceph -c "$conf" --connect-timeout 120 mon stat >/dev/null
ceph-mgr -f -c "$conf" -i x 2>"$dir/log/mgr.stderr" &
pids+=($!)
uuid=$(cat /proc/sys/kernel/random/uuid)
ceph -c "$conf" osd new "$uuid" >/dev/null
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" >"$dir/log/osd-mkfs.log" 2>&1
ceph-osd -f -c "$conf" -i 0 &
pids+=($!)
for _ in $(seq 1 180); do
	ceph -c "$conf" osd stat 2>/dev/null | grep -q '1 up' && break
	sleep 1
done
# Before radosgw listens: the harness takes its first answer as ready.
radosgw-admin -c "$conf" -n client.rgw.a user create --uid=objlease --display-name=objlease \
	--access-key=objlease --secret-key=objleasesecret >/dev/null
radosgw -f -c "$conf" -n client.rgw.a &
pids+=($!)
log "up: radosgw on 127.0.0.1:$port"
wait -n "${pids[@]}" || true
log "a daemon exited; stopping the cluster"

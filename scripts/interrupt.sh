# Sourced by the scripts that start long-running children (test.sh,
# install-emulators.sh). On SIGINT or SIGTERM it stops everything the
# script started, then exits 128+N. A Ctrl-C alone would not do it: a
# background job of a non-interactive shell ignores SIGINT, so `npm ci`
# outlived the script that started it, reparented to PID 1.
#
# What the script started is found by a mark in the environment, which
# every child inherits whatever becomes of its parent (a tree walk from
# this shell loses a process whose parent has already died).
: "${OBJLEASE_SCRIPT_MARK:=objlease-script-$$-$RANDOM}"
export OBJLEASE_SCRIPT_MARK

# stop_started sends SIGTERM to every process carrying the mark, except
# this shell and the shells that ran it.
stop_started() {
	local f pid ancestors=" " p=$$
	while [[ $p -gt 1 ]]; do
		ancestors+="$p "
		p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || break
		[[ -n $p ]] || break
	done
	for f in /proc/[0-9]*/environ; do
		pid=${f#/proc/}
		pid=${pid%/environ}
		[[ $ancestors == *" $pid "* || $pid == "$BASHPID" ]] && continue
		if tr '\0' '\n' <"$f" 2>/dev/null | grep -qx "OBJLEASE_SCRIPT_MARK=$OBJLEASE_SCRIPT_MARK"; then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
}

interrupted() {
	trap - INT TERM
	echo "$(basename "$0"): interrupted; stopping what it started" >&2
	stop_started
	exit "$1"
}
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

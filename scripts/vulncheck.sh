#!/usr/bin/env bash
# Runs govulncheck (golang.org/x/vuln, pinned below) on every module of the
# repository (every go.mod but under .cache/ and testdata/): the known
# vulnerabilities of the Go version and of the required modules that the
# code can reach. The database is $GOVULNDB (default https://vuln.go.dev;
# a file:// URL names a copy on disk). govulncheck is installed with go
# install through the module proxy into .cache/bin.
#
# Exit status:
#   0  every module checked, no vulnerability the code reaches
#   1  a vulnerability the code reaches (govulncheck's report above), or
#      govulncheck failed
#   3  the database cannot be reached: nothing was checked (the message
#      says so); scripts/test.sh reports that step as not checked and
#      goes on
#
# Usage: scripts/vulncheck.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=v1.9.0
db=${GOVULNDB:-https://vuln.go.dev}
db=${db%/}

# reachable: the database's index answers (file:// is read from disk).
reachable() {
	case $db in
	file://*) [[ -r ${db#file://}/index/db.json ]] ;;
	http://* | https://*) curl -fsS --max-time 20 -o /dev/null "$db/index/db.json" 2>/dev/null ;;
	*) return 1 ;;
	esac
}
if ! reachable; then
	echo "vulncheck: the vulnerability database at $db cannot be reached: not checked" >&2
	exit 3
fi

GOBIN=$repo/.cache/bin go install "golang.org/x/vuln/cmd/govulncheck@$version" || {
	echo "vulncheck: go install golang.org/x/vuln/cmd/govulncheck@$version failed (above)" >&2
	exit 1
}
rc=0
found=()
while IFS= read -r mod; do
	dir=$(dirname "$mod")
	name=${dir#"$repo"}
	name=${name#/}
	name=${name:-root module}
	echo "vulncheck: $name: govulncheck -db $db ./..." >&2
	status=0
	(cd "$dir" && "$repo/.cache/bin/govulncheck" -db "$db" ./...) || status=$?
	case $status in
	0) ;;
	3) found+=("$name"); rc=1 ;; # govulncheck's status for a finding
	*)
		echo "vulncheck: $name: govulncheck failed (exit $status)" >&2
		rc=1
		;;
	esac
done < <(find "$repo" \( -path "$repo/.*" -o -name node_modules -o -name testdata \) -prune -o -name go.mod -print | sort)
if [[ ${#found[@]} -gt 0 ]]; then
	echo "vulncheck: vulnerabilities the code reaches in: ${found[*]} (reports above)" >&2
fi
[[ $rc == 0 ]] && echo "vulncheck: no known vulnerability the code reaches, in any module ($db)" >&2
exit $rc

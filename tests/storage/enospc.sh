#!/bin/bash
# The posix backend on a full file system (an 8 MiB tmpfs mounted for the
# test): a write that does not fit fails with DPT_ENOSPC and a message that
# names the object's path; what was committed before (a shard and its
# manifest, and an object that the failed write would have replaced) stays
# intact; no half-written object and no temporary file is left; once space
# is freed, writes succeed again. The same file system remounted read-only:
# another error than ENOSPC (DPT_EIO), also naming the path.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

tool=$top_builddir/tests/storage/storage_tool
[ -x "$tool" ] || skip_all "$tool is not built (make check builds it)"
[ "$(id -u)" = 0 ] || skip_all "needs root (it mounts a small tmpfs)"
require_prog mount umount cmp head find
work=$(mktemp -d "${DPT_TEST_TMPDIR:-/tmp}/dptrain-enospc.XXXXXX") || bail_out "no temporary directory"
mnt=$work/fs
mkdir -p "$mnt"
mount -t tmpfs -o size=8m dptrain-enospc "$mnt" 2>"$work/mount.err" ||
	skip_all "cannot mount a tmpfs: $(cat "$work/mount.err")"
cleanup() {
	umount "$mnt" 2>/dev/null || umount -l "$mnt"
	rm -rf "$work"
}
# Unmount first, then the common teardown, with the test's exit status.
trap 'rc=$?; cleanup; (exit $rc); dpt_teardown' EXIT
plan 16

uri=file://$mnt/run
st() { timed "$tool" "$@"; }
tmp_files() { find "$mnt" -name '*.dpt-tmp.*' | wc -l; }
head -c $((1024 * 1024)) /dev/urandom >"$work/shard1"
echo '{"step": 1}' >"$work/manifest1"
head -c $((12 * 1024 * 1024)) /dev/urandom >"$work/shard2"
head -c $((3 * 1024 * 1024)) /dev/urandom >"$work/shard3"

# 1-2. A committed step: a shard, then its manifest.
run_ok "step 1: a 1 MiB shard" st --threads 2 --piece 300000 "$uri" put step-1/shard "$work/shard1"
run_ok "step 1: its manifest, put if absent" st "$uri" put-if-absent step-1/manifest.json "$work/manifest1"

# 3-6. A 12 MiB shard does not fit in what is left.
out=$(st --threads 4 --piece 1000000 "$uri" put step-2/shard "$work/shard2" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_ENOSPC* ]]
ok $? "a 12 MiB shard on the 8 MiB file system: DPT_ENOSPC" || diag "rc $rc: $out"
[[ $out == *"'$mnt/run/step-2/shard'"* && $out == *"No space left on device"* ]]
ok $? "the message names the object's path and the cause" || diag "$out"
diag "the message: $out"
out=$(st "$uri" stat step-2/shard 2>&1)
[[ $out == *DPT_ENOENT* ]]
ok $? "no step-2/shard object, not even a partial one" || diag "$out"
is "$(tmp_files)" 0 "no temporary file left"

# 7-8. Step 1 is intact.
st "$uri" get step-1/shard "$work/back1" && cmp -s "$work/shard1" "$work/back1" &&
	st "$uri" get step-1/manifest.json "$work/backm" && cmp -s "$work/manifest1" "$work/backm"
ok $? "step 1's shard and manifest read back byte for byte"
is "$(st "$uri" list "" | tr '\n' ' ')" "step-1/manifest.json 12 step-1/shard 1048576 " \
	"the listing shows step 1 only"

# 9-10. Replacing an object with one that does not fit leaves the old one.
out=$(st --direct "$uri" put step-1/shard "$work/shard2" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_ENOSPC* && $out == *"'$mnt/run/step-1/shard'"* ]]
ok $? "replacing step-1/shard by 12 MiB (--direct): DPT_ENOSPC naming it" || diag "rc $rc: $out"
st "$uri" get step-1/shard "$work/back1" && cmp -s "$work/shard1" "$work/back1" && [ "$(tmp_files)" = 0 ]
ok $? "the old step-1/shard is intact, no temporary file"

# 11-12. A commit (put if absent) on a full file system.
head -c $((8 * 1024 * 1024)) /dev/zero >"$mnt/filler" 2>/dev/null
out=$(st "$uri" put-if-absent step-2/manifest.json "$work/shard3" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_ENOSPC* && $out == *"'$mnt/run/step-2/manifest.json'"* ]]
ok $? "a manifest on a full file system: DPT_ENOSPC naming it" || diag "rc $rc: $out"
out=$(st "$uri" stat step-2/manifest.json 2>&1)
[[ $out == *DPT_ENOENT* ]] && [ "$(tmp_files)" = 0 ]
ok $? "nothing committed, no temporary file" || diag "$out"

# 13-14. Space freed: the next step commits.
rm -f "$mnt/filler"
run_ok "with space again, step 2 (3 MiB) is written" st "$uri" put step-2/shard "$work/shard3"
st "$uri" get step-2/shard "$work/back3" && cmp -s "$work/shard3" "$work/back3"
ok $? "and reads back byte for byte"

# 15-16. Read-only: DPT_EIO naming the path; what is there still reads.
if mount -o remount,ro "$mnt" 2>"$work/mount.err"; then
	out=$(st "$uri" put step-3/shard "$work/shard1" 2>&1)
	rc=$?
	[ $rc = 1 ] && [[ $out == *DPT_EIO* && $out == *"'$mnt/run/step-3/shard'"* && $out == *"Read-only file system"* ]]
	ok $? "a read-only file system: DPT_EIO naming the path and the cause" || diag "rc $rc: $out"
	st "$uri" get step-2/shard "$work/back3" && cmp -s "$work/shard3" "$work/back3"
	ok $? "step 2 still reads back byte for byte"
else
	skip "a read-only file system: DPT_EIO" "cannot remount read-only: $(cat "$work/mount.err")"
	skip "step 2 still reads back" "no read-only remount"
fi

#!/bin/bash
# What a user of the Python binding reads when a checkpoint goes wrong,
# without a cluster: the exception says what the library logged (the
# cause, not only an error code), also for an error of the background
# writer; a run that finds no checkpoint says so once, at the default log
# level, and a resumed one does not. The permission checks run as nobody
# (root may write anywhere).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
require_prog setpriv
require_python numpy
require_binding
script=$top_srcdir/tests/python/errors.py
dpt_scratch_dir dir pyerr
chmod 755 "$dir"
unset DPTRAIN_LOG_LEVEL DPTRAIN_CKPT_URI DPTRAIN_RUN
# The source tree must be readable by nobody for these checks.
setpriv --reuid=nobody --regid=nogroup --clear-groups $py -c 'import dptrain' 2>/dev/null ||
	skip_all "nobody cannot import dptrain from $top_srcdir"
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
}

plan 8

# A checkpoint root that the user cannot write: the run directory cannot
# be created.
mkdir -m 755 "$dir/ro"
out=$(as_nobody $py "$script" new "file://$dir/ro" run 2>"$dir/new.err")
grep -q "^error DPT_EIO: .*cannot create directory '$dir/ro/run': Permission denied" <<<"$out"
ok $? "Checkpoint() on an unwritable root raises with the cause the log gives" || diag "$out" "$(cat "$dir/new.err")"
grep -q "Permission denied" "$dir/new.err"
ok $? "the log said it too" || diag "$(cat "$dir/new.err")"

# The run directory exists but is not the user's: the background writer
# fails, and dpt_ckpt_wait's exception carries its message.
mkdir -m 755 "$dir/ro/run2"
out=$(as_nobody $py "$script" save "file://$dir/ro" run2 5 2>"$dir/save.err")
grep -q "^error DPT_EIO: .*cannot write .*step-0000000005.*Permission denied" <<<"$out"
ok $? "a save into an unwritable run raises from wait() with the writer's cause" || diag "$out" "$(cat "$dir/save.err")"

# A fresh run says where it looked, once, at the default log level.
mkdir -m 777 "$dir/rw"
fresh="no checkpoint at 'file://$dir/rw/typo': starting run 'typo' from step 0"
out=$($py "$script" load "file://$dir/rw" typo 2>"$dir/load.err")
is "$(echo $out)" "fresh fresh" "load() of a run without a checkpoint returns None"
is "$(grep -cF "$fresh" "$dir/load.err")" 1 "stderr says once that the run starts from step 0" || diag "$(cat "$dir/load.err")"
out=$($py "$script" inspect "file://$dir/rw" typo2 2>"$dir/inspect.err")
grep -qF "no checkpoint at 'file://$dir/rw/typo2': starting run 'typo2' from step 0" "$dir/inspect.err"
ok $? "inspect() (what dptrain.torch loads through) says it too" || diag "$out" "$(cat "$dir/inspect.err")"
out=$($py "$script" save "file://$dir/rw" typo 3 2>&1)
out=$($py "$script" load "file://$dir/rw" typo 2>"$dir/resume.err")
is "$(echo $out)" "loaded 3 loaded 3" "after a save, the run resumes from it"
grep -q "no checkpoint at" "$dir/resume.err"
is $? 1 "a resumed run does not say it starts from step 0" || diag "$(cat "$dir/resume.err")"

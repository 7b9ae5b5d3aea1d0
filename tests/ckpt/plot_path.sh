#!/bin/bash
# `dptrain plot` of a run whose path a neighbour chose (dptrain(1), "dptrain
# plot"; doc/RELIABILITY.md, "Status files and plots"): a run directory in a
# shared checkpoint root, made by a second user (nobody, when this runs as
# root), whose name holds a newline and a gnuplot command. The plot is
# refused with a message that says what to rename, and the command never
# runs; so is an output file name with a newline. A plain run still plots.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

cli=$top_builddir/dptrain
[ -x "$cli" ] || skip_all "build dptrain first ($cli)"
require_prog gnuplot timeout
dpt_scratch_dir dir plot-path
chmod 755 "$dir"
mkdir -m 1777 "$dir/shared"
# as_neighbour COMMAND...: as nobody when root (the second user), else as
# the caller (who then plays both parts).
as_neighbour() {
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
		setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
	else
		"$@"
	fi
}
events='{"event":"log","job":1,"step":1,"time":1,"scalars":{"loss":2.0}}
{"event":"log","job":1,"step":2,"time":2,"scalars":{"loss":1.0}}'
plan 7

# 1-3. The neighbour's run: ".../x\nsystem \"touch pwned\"\nx", plotted
# from $dir, where the command would make $dir/pwned.
pwned=$dir/pwned
evil="$dir/shared/x
system \"touch pwned\"
x"
as_neighbour mkdir "$evil" &&
	printf '%s\n' "$events" | as_neighbour tee "$evil/events.jsonl" >/dev/null ||
	bail_out "cannot make the neighbour's run"
out=$(cd "$dir" && timed "$cli" plot "file://$evil" -o "$dir/evil.png" 2>&1)
rc=$?
[ "$rc" = 1 ]
ok $? "a run path with a newline is refused (exit $rc)" || diag "$out"
grep -q "control character" <<<"$out" && grep -q "rename" <<<"$out"
ok $? "the message says what to rename" || diag "$out"
[ ! -e "$pwned" ] && [ ! -e "$dir/evil.png" ]
ok $? "gnuplot ran none of it: no $pwned, no plot"

# 4-5. An output name with a newline and a command.
mkdir "$dir/run" && printf '%s\n' "$events" >"$dir/run/events.jsonl"
out=$(cd "$dir" && timed "$cli" plot "file://$dir/run" -o "$dir/a.png'
system \"touch pwned2\"
x" 2>&1)
rc=$?
[ "$rc" = 1 ] && grep -q "the output file .* holds a control character" <<<"$out"
ok $? "an output name with a newline is refused (exit $rc)" || diag "$out"
[ ! -e "$dir/pwned2" ]
ok $? "and its command did not run"

# 6-7. A plain run plots, quotes in its name included.
mkdir "$dir/it's" && printf '%s\n' "$events" >"$dir/it's/events.jsonl"
out=$(cd "$dir" && timed "$cli" plot "file://$dir/it's" -o "$dir/ok.png" 2>&1)
ok $? "a run named it's plots" || diag "$out"
[ -s "$dir/ok.png" ] && [ "$(head -c 4 "$dir/ok.png" | tail -c 3)" = PNG ]
ok $? "into a PNG" || diag "$out"

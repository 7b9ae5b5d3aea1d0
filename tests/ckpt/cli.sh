#!/bin/bash
# The `dptrain` tool's command line, without a cluster: --help of the tool,
# of `ckpt` and of every command prints usage and exits 0 (and is never
# taken as a URI); a missing directory is reported and never created;
# `gc --keep-last 0` is refused and deletes nothing, `--keep-last 1` keeps
# the newest step; the bash completion completes commands and options.
# The steps are saved by one C process (tests/ckpt/save_steps), so that the
# whole test runs in the sanitizer build too.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

cli=$top_builddir/dptrain
[ -x "$cli" ] || skip_all "build dptrain first ($cli)"
require_built save_steps tests/ckpt/save_steps
dpt_scratch_dir dir cli
cd "$dir" || bail_out "cannot cd to $dir"

plan 14

out=$("$cli" --help 2>&1)
[ $? = 0 ] && grep -q "^usage: dptrain ckpt COMMAND URI" <<<"$out"
ok $? "dptrain --help prints the usage and exits 0" || diag "$out"

out=$("$cli" ckpt --help 2>/dev/null)
[ $? = 0 ] && grep -q "^  dptrain ckpt gc URI \[--keep-last K\]" <<<"$out"
ok $? "dptrain ckpt --help prints the commands and exits 0" || diag "$out"

bad=
for cmd in ls show verify gc; do
	for args in "--help" "-h" "file://$dir/x --help"; do
		out=$("$cli" ckpt $cmd $args 2>&1)
		rc=$?
		[ $rc = 0 ] && grep -q "^usage: dptrain ckpt $cmd URI" <<<"$out" ||
			bad+="'ckpt $cmd $args': exit $rc: $out"$'\n'
	done
done
[ -z "$bad" ] && [ ! -e "$dir/--help" ] && [ ! -e "$dir/x" ]
ok $? "dptrain ckpt ls|show|verify|gc --help (and -h, and after the URI) print their usage, exit 0, create nothing" ||
	diag "$bad" "$(ls -a "$dir")"

out=$("$cli" 2>&1)
[ $? = 2 ] && grep -q "^usage:" <<<"$out"
ok $? "dptrain without arguments: usage, exit 2" || diag "$out"

out=$("$cli" ckpt ls file://$dir/runs --step 3 2>&1)
[ $? = 2 ] && grep -q "^dptrain: 'ckpt ls' has no option '--step'" <<<"$out"
ok $? "an option of another command is refused, naming it" || diag "$out"

bad=
for cmd in ls show verify gc; do
	out=$("$cli" ckpt $cmd "file://$dir/missing/run" 2>&1)
	rc=$?
	[ $rc = 1 ] && [ "$out" = "dptrain: no such checkpoint directory: $dir/missing/run" ] ||
		bad+="'ckpt $cmd': exit $rc: $out"$'\n'
done
[ -z "$bad" ] && [ ! -e "$dir/missing" ]
ok $? "ls|show|verify|gc of a missing directory: 'no such checkpoint directory', exit 1, nothing created" ||
	diag "$bad" "$(ls -a "$dir")"

# Three committed steps of a run, saved by one process.
out=$("$save_steps" "file://$dir/runs" r 10 20 30 2>&1)
ok $? "one process saves steps 10, 20 and 30 of run r" || diag "$out"
uri=file://$dir/runs/r
committed() { "$cli" ckpt ls "$uri" 2>&1 | awk '$3 == "committed" {printf "%s ", $2}'; }
is "$(committed)" "10 20 30 " "dptrain ckpt ls lists them"

out=$("$cli" ckpt ls "file://$dir/runs" 2>&1)
[ $? = 0 ] && grep -q "^r  *30  committed" <<<"$out"
ok $? "ls of the root of runs names the run" || diag "$out"

out=$("$cli" ckpt gc "$uri" --keep-last 0 2>&1)
[ $? = 2 ] && grep -q "^dptrain: --keep-last 0 would delete every committed step: give K >= 1" <<<"$out"
ok $? "gc --keep-last 0 is refused, saying what to give instead" || diag "$out"
is "$(committed)" "10 20 30 " "and deletes nothing"

out=$("$cli" ckpt gc --keep-last 1 "$uri" 2>&1)
[ $? = 0 ] && grep -q "^2 step(s) deleted" <<<"$out"
ok $? "gc --keep-last 1 (before the URI) deletes 2 steps" || diag "$out"
is "$(committed)" "30 " "the newest step stays"

# The completion, as bash runs it for `dptrain ckpt <TAB>` and
# `dptrain ckpt gc URI --keep-<TAB>`.
out=$(bash -c '
. "$1"
complete -p dptrain
COMP_WORDS=(dptrain ckpt ""); COMP_CWORD=2; _dptrain; echo "${COMPREPLY[*]}"
COMP_WORDS=(dptrain ckpt gc file:///x --keep-); COMP_CWORD=4; _dptrain; echo "${COMPREPLY[*]}"
COMP_WORDS=(dptrain ckpt ls "file://$2/ru"); COMP_CWORD=3; _dptrain; echo "${COMPREPLY[*]}"
' bash "$top_srcdir/contrib/bash-completion/dptrain" "$dir" 2>&1)
is "$out" "complete -F _dptrain dptrain
ls show verify gc --help
--keep-last --keep-every
file://$dir/runs/" "bash completion: commands, a command's options, file:// directories"

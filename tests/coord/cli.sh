#!/bin/bash
# dptrain-coordinator's command line: --help documents every option that
# the program accepts (the list is read from coordinator/options.c and the
# names from common/settings.def, not copied here) with its environment
# variable; bad options and values end
# with status 2 and a message naming the option; environment variables
# work like options and options win over them; --parent-pid ends the
# coordinator with its parent.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

main_c=$top_srcdir/coordinator/options.c
names_h=$top_srcdir/common/settings.def
[ -r "$main_c" ] && [ -r "$names_h" ] || skip_all "no $main_c or $names_h to read the option list from"
# X(ID, OPTION, ENV, FLAG, ...) in settings.def: each setting's names.
declare -A flag_of env_of
while IFS=', ' read -r id _ env flag _; do
	flag_of[$id]=$flag env_of[$id]=$env
done < <(x_rows "$names_h")
# X(WORLD, WORLD_SIZE, "DPTRAIN_WORLD_SIZE" or NULL, ...) in options.c:
# the coordinator's options, by setting; NULL is the setting's variable.
opts=() envs=()
while IFS=', ' read -r _ setting env _; do
	[ -n "${flag_of[$setting]:-}" ] || continue
	opts+=("${flag_of[$setting]}")
	[ "$env" = NULL ] && env=${env_of[$setting]}
	envs+=("$env")
done < <(x_rows "$main_c")
opts+=(help version)
[ "${#opts[@]}" -ge 10 ] || bail_out "could not read the options from $main_c"

bad=(
	"--world-size 0|--world-size: '0' is not a number"
	"--world-size abc|--world-size: 'abc' is not a number"
	"--world-size 70000|--world-size: '70000' is not a number in [1, 65536]"
	"--world-size 4 --heartbeat-ms 5|--heartbeat-ms: '5' is not a number"
	"--world-size 4 --timeout-ms 400 --heartbeat-ms 500|--timeout-ms (400) must be longer than --heartbeat-ms (500)"
	"--world-size 4 --min-workers 5|--min-workers (5) is larger than --world-size (4)"
	"--world-size 4 --log-level chatty|--log-level: 'chatty' is not one of error, warn, info, debug"
	"--world-size 4 --frobnicate|unknown or incomplete option '--frobnicate'"
	"--world-size|unknown or incomplete option '--world-size'"
	"--world-size 4 extra|unexpected argument 'extra'"
	"--bind tcp://127.0.0.1:*|--world-size is required"
	"--world-size 4 --bind nonsense://x|cannot bind 'nonsense://x'"
	"--world-size 4 --secret-file /nonexistent/secret|/nonexistent/secret"
	"--world-size 4 --parent-pid -3|--parent-pid: '-3' is not a number"
	"--world-size 4 --io-threads 0|--io-threads: '0' is not a number in [1, 64]"
)
plan $((3 + ${#opts[@]} + ${#bad[@]} + 6))

help=$("$coord_bin" --help 2>&1)
ok $? "--help exits 0"
grep -q "^usage: dptrain-coordinator" <<<"$help"
ok $? "--help starts with a usage line"
for o in "${opts[@]}"; do
	case $o in
	help | version) grep -q -- "--$o" <<<"$help" ;;
	*) grep -q -- "^  --$o " <<<"$help" ;;
	esac
	ok $? "--help documents --$o"
done
missing=
for e in "${envs[@]}"; do grep -q "$e" <<<"$help" || missing="$missing $e"; done
is "$missing" "" "--help names the environment variable of every option (${#envs[@]})"

export DPTRAIN_SECRET
DPTRAIN_SECRET=$(new_secret)
for case in "${bad[@]}"; do
	args=${case%%|*}
	want=${case#*|}
	# shellcheck disable=SC2086
	out=$(timeout 10 "$coord_bin" $args 2>&1 </dev/null)
	rc=$?
	[ "$rc" = 2 ] && grep -qF -- "$want" <<<"$out"
	ok $? "'$args': exit 2 and \"$want\"" || diag "exit $rc:" "$out"
done

# Environment variables: a bad value names the variable; an option wins.
out=$(DPTRAIN_WORLD_SIZE=many timeout 10 "$coord_bin" 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -qF "DPTRAIN_WORLD_SIZE: 'many' is not a number" <<<"$out"
ok $? "DPTRAIN_WORLD_SIZE=many: exit 2, the message names the variable" || diag "exit $rc: $out"
out=$(DPTRAIN_WORLD_SIZE=many DPTRAIN_LOG_LEVEL=info timeout 5 "$coord_bin" --world-size 3 --bind 'tcp://127.0.0.1:*' --parent-pid $$ 2>&1 &
	sleep 1; kill -TERM $! 2>/dev/null; wait $!)
grep -q "for 3 workers" <<<"$out"
ok $? "--world-size 3 overrides DPTRAIN_WORLD_SIZE" || diag "$out"
grep -q "got signal 15" <<<"$out"
ok $? "SIGTERM stops the coordinator and says why" || diag "$out"

# No secret anywhere.
out=$(env -u DPTRAIN_SECRET timeout 10 "$coord_bin" --world-size 2 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "no secret: set DPTRAIN_SECRET or use --secret-file" <<<"$out"
ok $? "no secret: exit 2 and what to set" || diag "exit $rc: $out"

# --secret-file and --endpoint-file; --parent-pid: the coordinator exits
# with status 1 soon after its parent does.
printf '%s\n' "$(new_secret)" >"$coord_dir/secret"
chmod 600 "$coord_dir/secret"
sleep 60 &
parent=$!
env -u DPTRAIN_SECRET "$coord_bin" --world-size 2 --bind 'tcp://127.0.0.1:*' \
	--secret-file "$coord_dir/secret" --endpoint-file "$coord_dir/ep" \
	--parent-pid "$parent" >"$coord_dir/stdout" 2>"$coord_dir/stderr" &
pid=$!
coord_pids+=("$pid")
wait_for 10 test -s "$coord_dir/ep"
is "$(cat "$coord_dir/ep" 2>/dev/null)" "$(head -n 1 "$coord_dir/stdout")" "--endpoint-file holds the endpoint printed on standard output"
kill "$parent"
wait "$parent" 2>/dev/null
rc=0
pid_wait "$pid" 5 || rc=$?
# No worker had connected: nothing failed, so the status is 0 (with
# workers connected it is 1 and they are told why).
[ "$rc" = 0 ] && grep -q "parent process $parent exited" "$coord_dir/stderr"
ok $? "--parent-pid: the coordinator exits when its parent dies, and says so" || diag "exit $rc: $(cat "$coord_dir/stderr")"

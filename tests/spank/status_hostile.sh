#!/bin/bash
# `dptrain status JOBID` as root among hostile neighbours, on the real test
# cluster (doc/RELIABILITY.md, "Status files and plots"): a second user
# (nobody) plants status files in its own home where root's lookup would
# find them (a record that names its own endpoint, a FIFO, a symbolic link,
# a run whose events hold terminal escapes) and offers its directory as
# DPTRAIN_STATUS_DIR. Root never connects to the planted endpoint, never
# hangs, never prints an escape, never takes a stale record of an earlier
# job with the same id for the job, and reads nobody's own job as nobody.
#
# nobody's home is /nonexistent: the victim's commands run in a private
# mount namespace whose /etc/passwd gives nobody a home under $work, as
# any real user has one (and root an empty one). Nothing outside that
# namespace changes.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_prog setpriv unshare mount mkfifo
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3 (nobody runs a listener with it)"
require_built train tests/ckpt/train_loop
cluster_up NODES=1 CPUS=2 GPUS=0
work_dir status-hostile
plan 14
dptrain=$top_builddir/dptrain
export DPTRAIN_STATUS_DIR=$work/status

# The neighbour, its home, and a listener of its own that logs every
# connection made to it.
mal=$work/mallory
mkdir -m 755 "$mal" && chown nobody:nogroup "$mal"
as_nobody mkdir -p -m 700 "$mal/.dptrain/jobs"
as_nobody mkdir -m 755 "$mal/shared"
# root's home there is an empty one too: the records that other tests
# left in /root/.dptrain/jobs (every test cluster counts its job ids from
# 1) are not this test's.
sed -e "s|^\(nobody:[^:]*:[^:]*:[^:]*:[^:]*:\)[^:]*:|\1$mal:|" \
	-e "s|^\(root:[^:]*:[^:]*:[^:]*:[^:]*:\)[^:]*:|\1$work/root:|" /etc/passwd >"$work/passwd"
grep -q "^nobody:.*:$mal:" "$work/passwd" && grep -q "^root:.*:$work/root:" "$work/passwd" ||
	bail_out "cannot give nobody and root homes in $work/passwd"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1] + ".port", "w").write(str(s.getsockname()[1]))
while True:
    c, a = s.accept(); open(sys.argv[1], "a").write("connection\n"); c.close()
' "$mal/connections" </dev/null >/dev/null 2>&1 &
listener=$!
stop_listener() { kill "$listener" 2>/dev/null || true; }
dpt_exit_hooks+=(stop_listener)
wait_for 10 test -s "$mal/connections.port" || bail_out "the neighbour's listener did not start"
port=$(cat "$mal/connections.port")
connections() { cat "$mal/connections" 2>/dev/null | wc -l; }

# victim COMMAND...: as root, where nobody has its home in $mal; never
# more than 20 s (a hang is exit status 124).
victim() {
	HOME=$work/root timeout -k 2 20 unshare -m --propagation private -- \
		bash -c 'mount --bind "$1" /etc/passwd && shift && exec "$@"' _ "$work/passwd" "$@"
}
# plant NAME TEXT: nobody's file NAME in its status directory.
plant() { printf '%s\n' "$2" | as_nobody tee "$mal/.dptrain/jobs/$1" >/dev/null; }
esc=$'\e'
c1=$'\xc2\x9b'

# A finished dptrain job of root's; a finished job without dptrain.
cat >"$work/victim.sh" <<EOF
#!/bin/bash
#SBATCH -N 1 -n 2 --time=30 -o $work/victim.out -J victim
srun --dp-train=victim --dp-ckpt=file://$work/ckpt $train --steps 30 --step-ms 10 --every 10
EOF
j1=$(sbatch_t --parsable "$work/victim.sh" | cut -d';' -f1)
j2=$(sbatch_t --parsable -o /dev/null --wrap true | cut -d';' -f1)
j3=$(sbatch_t --parsable -o /dev/null --wrap true | cut -d';' -f1)
wait_job "$j1" 60 && wait_job "$j2" 60 && wait_job "$j3" 60 || bail_out "the jobs did not end"
[ -e "$work/status/$j1.run" ] || bail_out "job $j1 wrote no $work/status/$j1.run: $(cat "$work/victim.out")"

# 1-2. A record of root's finished job that names the neighbour's endpoint.
plant "$j1.live" "endpoint=tcp://127.0.0.1:$port
server_key=0000000000000000000000000000000000000000
public_key=0000000000000000000000000000000000000000
secret_key=0000000000000000000000000000000000000000"
out=$(victim "$dptrain" status "$j1" 2>&1)
rc=$?
[ "$(connections)" = 0 ]
ok $? "root never connects to the endpoint nobody planted for job $j1" || diag "$out"
[ "$rc" = 0 ] && grep -q "run file://$work/ckpt/victim  ended" <<<"$out" && grep -q "committed  step 30" <<<"$out"
ok $? "it shows job $j1's own run from root's status files (exit $rc)" || diag "$out"

# 3-4. A FIFO in place of a record: the lookup must not hang.
as_nobody mkfifo "$mal/.dptrain/jobs/$j2.live" "$mal/.dptrain/jobs/$j2.run"
out=$(victim "$dptrain" status "$j2" 2>&1)
rc=$?
[ "$rc" != 124 ] && [ "$rc" != 137 ]
ok $? "a planted FIFO does not hang dptrain status (exit $rc)" || diag "$out"
[ "$rc" = 1 ] && grep -q "no job $j2 of dptrain known here" <<<"$out"
ok $? "job $j2 is unknown to dptrain: root's own status files say nothing of it" || diag "$out"

# 5-8. A run of nobody's whose events hold terminal escapes (OSC, CSI and
# a C1 CSI), named for a job of root's.
as_nobody mkdir -m 755 "$mal/evil"
printf '{"event":"start","job":%s,"time":1}\n{"event":"requeue","job":%s,"time":2,"verdict":"requeue","reason":"\\u001b]2;owned\\u0007\\u001b[2Jwiped \\u009b31mred"}\n' \
	"$j3" "$j3" | as_nobody tee "$mal/evil/events.jsonl" >/dev/null
plant "$j3.run" "run=file://$mal/evil"
out=$(victim "$dptrain" status "$j3" 2>&1)
rc=$?
[ "$rc" = 1 ] && ! grep -q "evil\|wiped" <<<"$out"
ok $? "root does not read the events that nobody named for job $j3 (exit $rc)" || diag "$out"
out=$(victim "$dptrain" status "file://$mal/evil" 2>&1)
rc=$?
[ "$rc" = 0 ] && grep -q "wiped" <<<"$out" && [[ "$out" != *"$esc"* && "$out" != *"$c1"* ]] &&
	grep -qF '?]2;owned??[2Jwiped ?31mred' <<<"$out"
ok $? "asked for that run by its URI, root sees its reasons with each control character as '?'" ||
	diag "$(cat -v <<<"$out")"
out=$(victim "$dptrain" status --json "file://$mal/evil" 2>&1)
[[ "$out" != *"$esc"* && "$out" != *"$c1"* ]] && python3 -c 'import json,sys
d = json.loads(sys.argv[1]); assert d["requeues"] == ["\x1b]2;owned\x07\x1b[2Jwiped \x9b31mred"], d' "$out"
ok $? "and --json escapes them, C1 included, and keeps them intact" || diag "$(cat -v <<<"$out")"
out=$(victim "$dptrain" status "file://$mal/evil" 2>&1 | grep -c "$esc")
is "$out" 0 "no ESC byte reaches the terminal"

# 9-10. nobody's own job: root reads it as nobody, and refuses what is not
# a plain record (a symbolic link to a FIFO, a FIFO).
j4=$(timed setpriv --reuid=nobody --regid=nogroup --clear-groups \
	sbatch --parsable --hold -D /tmp -o /dev/null --wrap true | cut -d';' -f1)
[ -n "$j4" ] || bail_out "nobody cannot submit a job"
as_nobody mkfifo "$mal/fifo"
as_nobody ln -s "$mal/fifo" "$mal/.dptrain/jobs/$j4.live"
as_nobody mkfifo "$mal/.dptrain/jobs/$j4.run"
out=$(victim "$dptrain" status "$j4" 2>&1)
rc=$?
[ "$rc" = 1 ]
ok $? "nobody's job with a symbolic link and a FIFO for records: no hang, exit 1 (exit $rc)" || diag "$out"
grep -q "$j4.live': a symbolic link" <<<"$out" && grep -q "$j4.run' is not a status file" <<<"$out"
ok $? "each is refused by name" || diag "$out"
timed scancel "$j4"

# 11-12. DPTRAIN_STATUS_DIR of the neighbour's: refused, never read.
printf 'endpoint=tcp://127.0.0.1:%s\n' "$port" | as_nobody tee "$mal/shared/$j1.live" >/dev/null
before=$(connections)
out=$(DPTRAIN_STATUS_DIR=$mal/shared victim "$dptrain" status "$j1" 2>&1)
rc=$?
[ "$rc" = 1 ] && grep -q "belongs to uid 65534" <<<"$out"
ok $? "root refuses a DPTRAIN_STATUS_DIR of nobody's (exit $rc)" || diag "$out"
[ "$(connections)" = "$before" ]
ok $? "and connected to nothing it names" || diag "$out"

# 13-14. A running job of root's with the records of an earlier job of
# the same id: written an hour before it was submitted.
j5=$(sbatch_t --parsable -o /dev/null --wrap 'sleep 60' | cut -d';' -f1)
wait_for 30 bash -c "squeue -h -j $j5 -o %T | grep -q RUNNING" || bail_out "job $j5 does not run"
printf 'endpoint=tcp://127.0.0.1:%s\nserver_key=%s\npublic_key=%s\nsecret_key=%s\n' "$port" \
	0000000000000000000000000000000000000000 0000000000000000000000000000000000000000 \
	0000000000000000000000000000000000000000 >"$work/status/$j5.live"
printf 'run=file://%s/ckpt/victim\n' "$work" >"$work/status/$j5.run"
chmod 600 "$work/status/$j5.live" "$work/status/$j5.run"
touch -d '1 hour ago' "$work/status/$j5.live" "$work/status/$j5.run"
before=$(connections)
out=$(victim "$dptrain" status "$j5" 2>&1)
rc=$?
[ "$rc" = 1 ] && [ "$(connections)" = "$before" ] && ! grep -q "run file://" <<<"$out"
ok $? "a stale record is not shown as running job $j5 (exit $rc)" || diag "$out"
grep -q "before the job started: a stale record of an earlier job" <<<"$out" &&
	grep -q "before the job was submitted: a stale record of an earlier job" <<<"$out"
ok $? "dptrain status says both records are stale" || diag "$out"
timed scancel "$j5"

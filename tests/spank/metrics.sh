#!/bin/bash
# The metrics endpoint on the real test cluster (doc/protocol.md,
# "Metrics"; dptrain(8), METRICS): a job run with --dp-metrics=0 publishes
# its port in its status file and answers GET /metrics with curl, in
# Prometheus' text format, world size 4 and a committed step that moves;
# a bad --dp-metrics fails srun saying what is expected; a site with
# allow_user_metrics=no refuses the option, and its metrics_port=0 gives
# a job metrics without it; a port that another user holds costs the job
# its metrics, not its training.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_prog curl python3 setpriv
require_built train tests/ckpt/train_loop
conf_cluster_up "" NODES=2 CPUS=4 GPUS=0
work_dir metrics
export DPTRAIN_STATUS_DIR=$work/status
plan 13

is "$(timed srun --help 2>&1 | grep -c -- '--dp-metrics')" 1 "srun --help lists --dp-metrics"

# scrape ID: the job's /metrics page, found through its status file (the
# port, and the host of its endpoint), in $page; fails while there is none.
scrape() {
	local live=$work/status/$1.live port host
	port=$(sed -n 's/^metrics_port=//p' "$live" 2>/dev/null)
	host=$(sed -n 's|^endpoint=tcp://\(.*\):[0-9]*$|\1|p' "$live" 2>/dev/null)
	[ -n "$port" ] && [ -n "$host" ] || return 1
	page=$(timed curl -sf -m 5 "http://$host:$port/metrics")
}
# value NAME: the value of the one sample of NAME in $page.
value() { sed -n "s/^$1{[^}]*} //p" <<<"$page"; }
# await_commit NAME: the id of the running job NAME in $id, once its page
# shows a committed step (60 s at most).
await_commit() {
	local i
	id= page=
	for ((i = 0; i < 60; i++)); do
		id=$(squeue -h -n "$1" -o %i | head -1)
		[ -n "$id" ] && scrape "$id" && [ -n "$(value dptrain_committed_step)" ] && return
		sleep 1
	done
}

# 2-6. A batch job of 4 ranks on 2 nodes, committing every 10 steps of
# 100 ms, with the endpoint on any free port.
cat >"$work/live.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --time=30 -o $work/live.out -J live
srun --dp-train=live --dp-ckpt=file://$work/ckpt --dp-metrics=0 $train --steps 100000 --step-ms 100 --every 10
EOF
id=$(sbatch_t --parsable "$work/live.sh" | cut -d';' -f1)
page=
for ((i = 0; i < 90; i++)); do
	scrape "$id" && [ -n "$(value dptrain_committed_step)" ] && break
	sleep 1
done
[ -n "$(value dptrain_committed_step)" ]
ok $? "the job's port is in its status file and curl gets /metrics with a committed step" ||
	diag "$(cat "$work/status/$id.live" 2>&1)" "$page" "$(cat "$work/live.out" 2>&1)"
python3 - "$page" "$id" <<'EOF'
import re, sys
page, job = sys.argv[1], sys.argv[2]
seen = {}
for line in page.splitlines():
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split(" ")
        assert kind in ("gauge", "counter"), line
        continue
    if line.startswith("#"):
        continue
    m = re.fullmatch(r'([a-z_]+)\{job="([0-9]*)",run="([^"]*)"(,state="[a-z_]+")?\} (-?[0-9.]+)', line)
    assert m, "not a sample: %r" % line
    assert m.group(2) == job and m.group(3) == "live", line
    if not m.group(4):
        seen[m.group(1)] = float(m.group(5))
assert seen["dptrain_world_size"] == 4, seen
assert seen["dptrain_workers_expected"] == 4 and seen["dptrain_workers_joined"] == 4, seen
assert seen["dptrain_nodes"] == 2, seen
assert seen["dptrain_committed_step"] >= 10 and seen["dptrain_committed_step"] % 10 == 0, seen
assert 0 <= seen["dptrain_committed_age_seconds"] < 30, seen
assert seen["dptrain_walltime_stop_seconds"] > 0, seen
assert seen["dptrain_checkpoint_commits_total"] >= 1, seen
EOF
ok $? "the page parses: labels job=$id run=live, world size 4 on 2 nodes, a committed step" || diag "$page"
grep -q '^dptrain_state{job="'"$id"'",run="live",state="running"} 1$' <<<"$page"
ok $? "the state is running" || diag "$page"
c1=$(value dptrain_committed_step)
s1=$(value dptrain_metrics_scrapes_total)
timed "$top_builddir/dptrain" status "$id" >/dev/null 2>&1
sleep 3
scrape "$id"
c2=$(value dptrain_committed_step)
[ "${c2:-0}" -gt "$c1" ] && [ "$(value dptrain_metrics_scrapes_total)" -gt "$s1" ] &&
	[ "$(value dptrain_status_requests_total)" -ge 1 ]
ok $? "the committed step moves ($c1, then $c2), scrapes and status requests are counted" || diag "$page"
code=$(timed curl -s -o /dev/null -w '%{http_code}' -m 5 "http://$(sed -n 's|^endpoint=tcp://\(.*\):[0-9]*$|\1|p' "$work/status/$id.live"):$(sed -n 's/^metrics_port=//p' "$work/status/$id.live")/")
is "$code" 404 "another path is 404"
timed scancel "$id"
wait_job "$id" 60

# 7-8. A bad value fails srun before anything starts, saying what is
# expected.
out=$(srun_t -N 1 -n 1 --dp-train=bad --dp-ckpt="file://$work/ckpt" --dp-metrics=http true 2>&1)
rc=$?
[ "$rc" != 0 ] && grep -q "dp-metrics: 'http': expected a TCP port from 1024 to 65535, 0 for any free port, or off" <<<"$out"
ok $? "--dp-metrics=http fails srun (exit $rc) with the forms expected" || diag "$out"
out=$(srun_t -N 1 -n 1 --dp-train=bad --dp-ckpt="file://$work/ckpt" --dp-metrics=80 true 2>&1)
[ $? != 0 ] && grep -q "dp-metrics: '80': expected a TCP port from 1024" <<<"$out"
ok $? "--dp-metrics=80 (a port for root) fails srun too" || diag "$out"

# 9-11. A site that forbids the option refuses it; its own metrics_port=0
# gives every job an endpoint.
printf 'allow_user_metrics = no\n' >"$conf"
out=$(srun_t -N 1 -n 1 --dp-train=site --dp-ckpt="file://$work/ckpt" --dp-metrics=0 true 2>&1)
rc=$?
[ "$rc" != 0 ] && grep -q "dp-metrics: the site does not let jobs choose their metrics endpoint (allow_user_metrics=no)" <<<"$out"
ok $? "allow_user_metrics=no: --dp-metrics fails srun (exit $rc) naming the key" || diag "$out"
printf 'allow_user_metrics = no\nmetrics_port = 0\n' >"$conf"
srun_t -N 1 -n 2 -J site --dp-train=site --dp-ckpt="file://$work/ckpt" "$train" --steps 100000 --step-ms 100 --every 10 >"$work/site.out" 2>&1 &
srun_pid=$!
await_commit site
[ "$(value dptrain_world_size)" = 2 ] && [ -n "$(value dptrain_committed_step)" ]
ok $? "metrics_port=0 in dptrain.conf: a job without the option serves /metrics (world size 2)" ||
	diag "$page" "$(cat "$work/site.out")"
[ -n "$id" ] && timed scancel "$id"
wait "$srun_pid"
[ ! -e "$work/status/$id.live" ] && ! scrape "$id"
ok $? "once the step has ended, its status file and its endpoint are gone"

# 12. Another user (nobody) holds the port first: the step trains anyway,
# and says it has no metrics endpoint.
printf '' >"$conf"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", 0))
s.listen(1)
print(s.getsockname()[1], flush=True)
time.sleep(120)
' >"$work/squat" &
squat_pid=$!
for ((i = 0; i < 100; i++)); do [ -s "$work/squat" ] && break; sleep 0.1; done
held=$(cat "$work/squat")
out=$(srun_t -N 1 -n 2 --dp-train=squat --dp-ckpt="file://$work/ckpt" --dp-metrics="$held" \
	"$train" --steps 5 --step-ms 10 2>&1)
rc=$?
kill "$squat_pid" 2>/dev/null
[ "$rc" = 0 ] && [ "$(grep -c '^finished step=5 rank=[01] committed$' <<<"$out")" = 2 ] &&
	grep -q "cannot listen for metrics on port $held" <<<"$out" &&
	grep -q "the step goes on without a metrics endpoint" <<<"$out"
ok $? "--dp-metrics=$held held by nobody: the step trains and commits, saying it has no metrics" || diag "rc $rc" "$out"

# 13. bind=lo in dptrain.conf: the coordinator and its metrics listen on
# 127.0.0.1 only (the test cluster's SLURM_LAUNCH_NODE_IPADDR), and the
# step trains.
printf 'bind = lo\nmetrics_port = 0\n' >"$conf"
srun_t -N 1 -n 2 -J bindlo --dp-train=bindlo --dp-ckpt="file://$work/ckpt" "$train" --steps 100000 --step-ms 100 --every 10 >"$work/bindlo.out" 2>&1 &
srun_pid=$!
await_commit bindlo
coord=$(cluster_pgrep "dptrain-coordinator.*--job-id $id( |$)" | head -1)
listens=$(ss -Htlnp 2>/dev/null | grep "pid=$coord," | awk '{ print $4 }' | sed 's/:[0-9]*$//' | sort -u | xargs)
[ -n "$coord" ] && [ "$listens" = 127.0.0.1 ] && [ -n "$(value dptrain_committed_step)" ]
ok $? "bind=lo: the coordinator and its metrics listen on 127.0.0.1 only, and the step commits" ||
	diag "listening on: $listens" "$page" "$(cat "$work/bindlo.out")"
[ -n "$id" ] && timed scancel "$id"
wait "$srun_pid"
printf '' >"$conf"

#!/bin/bash
# Failure detection on loopback (default heartbeat, 500 ms; the
# stopped worker's coordinator has a heartbeat timeout of 2000 ms, the
# others keep the default, 10000 ms, which none of them waits for). kill -9 of one of N training workers: every survivor
# gets DPT_EPEERLOST or DPT_EGENERATION in under 3 s (under 1 s when only
# the coordinator can tell: the dead worker's connection closed; a
# stopped one is found by the heartbeat timeout), they form generation
# 2 with N-1 members and run every collective in it; --min-workers is
# respected; a worker whose coordinator dies fails with DPT_ECOORDLOST in
# the same bound.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

bound_ms=3000
plan 23

# kill_one PREFIX N VICTIM: let them train a moment, kill -9 the victim;
# sets t_kill.
kill_one() {
	sleep 0.3
	t_kill=$(now_ns)
	kill -KILL "${worker_pid[$1$3]}"
	wait "${worker_pid[$1$3]}" 2>/dev/null
	unset "worker_pid[$1$3]"
}

# survivors_told PREFIX N VICTIM: checks that each survivor printed an
# error, which, and how long after t_kill; sets told_ms (the slowest).
survivors_told() {
	local i line t errs="" bad=0
	told_ms=0
	for ((i = 0; i < $2; i++)); do
		[ "$i" = "$3" ] && continue
		wait_for 10 grep -q '^error=' "$coord_dir/$1$i.out" || { bad=1; continue; }
		line=$(grep '^error=' "$coord_dir/$1$i.out")
		t=$(field t "$line")
		errs="$errs $(field error "$line")"
		[ $(((t - t_kill) / 1000000)) -gt "$told_ms" ] && told_ms=$(((t - t_kill) / 1000000))
	done
	survivors_errors=$(tr ' ' '\n' <<<"$errs" | grep -v '^$' | sort -u | tr '\n' ' ')
	return $bad
}

# 1. Allreduce + barrier loop, 4 workers, minimum 3: the data plane or the
# coordinator tells the survivors.
coord_start 4 --min-workers 3
for i in 0 1 2 3; do worker_start "a$i" 0 "$i" "$i" loop --rejoin; done
wait_for 30 all_joined a 4 || bail_out "4 workers did not join"
victim=$((RANDOM % 4))
kill_one a 4 "$victim"
survivors_told a 4 "$victim"
ok $? "allreduce loop: every survivor of kill -9 (rank $victim) gets an error"
[ "$told_ms" -lt "$bound_ms" ]
ok $? "allreduce loop: the last survivor knew after $told_ms ms (< $bound_ms ms)"
grep -Eq '^(DPT_EPEERLOST |DPT_EGENERATION )+$' <<<"$survivors_errors"
ok $? "allreduce loop: the errors are DPT_EPEERLOST or DPT_EGENERATION ($survivors_errors)"
failed=0
for i in 0 1 2 3; do
	[ "$i" = "$victim" ] && continue
	worker_wait "a$i" 30 || failed=$((failed + 1))
done
ok "$failed" "the 3 survivors re-joined, ran every collective exactly, and left" ||
	for i in 0 1 2 3; do diag "a$i: $(worker_out "a$i")"; done
gen2=$(for i in 0 1 2 3; do
	[ "$i" = "$victim" ] && continue
	line=$(grep '^rejoined' "$coord_dir/a$i.out")
	echo "$(field gen "$line") $(field world "$line") $(field rank "$line")"
done | sort -k3,3n | tr '\n' ' ')
is "$gen2" "2 3 0 2 3 1 2 3 2 " "generation 2 has the 3 survivors, ranks 0..2"
grep -q "generation 1 ended: rank $victim .* (lost_rank\|was silent\|reported a failed collective\|re-joined)\|generation 1 ended: .*rank $victim" "$coord_log"
ok $? "the coordinator logs the end of generation 1 naming rank $victim" || diag "$(grep -i generation "$coord_log")"
grep -q "generation 2 formed: 3 workers" "$coord_log"
ok $? "the coordinator logs generation 2 with 3 workers"
coord_exits 0 "the coordinator exits 0 once the survivors left"

# 2. Barriers only: no data plane sees the death, the coordinator must.
# A killed process's connection closes: the coordinator evicts it at once,
# long before its heartbeat timeout (10 s here).
coord_start 3 --min-workers 2 --timeout-ms 10000
for i in 0 1 2; do worker_start "b$i" 0 "$i" "$i" loop --rejoin --barriers; done
wait_for 30 all_joined b 3 || bail_out "3 workers did not join"
kill_one b 3 1
survivors_told b 3 1
ok $? "barrier loop: both survivors of kill -9 get an error"
[ "$told_ms" -lt 1000 ]
ok $? "barrier loop: told after $told_ms ms (< 1000 ms, timeout 10000 ms): the connection closed"
grep -q "evicting rank 1 .*: its connection closed" "$coord_log"
ok $? "the coordinator logs the eviction and its reason" || diag "$(cat "$coord_log")"
r0=0 r2=0
worker_wait b0 30 || r0=$?
worker_wait b2 30 || r2=$?
is "$r0 $r2 $(grep -h '^rejoined' "$coord_dir/b0.out" "$coord_dir/b2.out" | while read -r l; do echo "$(field world "$l")@$(field gen "$l")"; done | tr '\n' ' ')" \
	"0 0 2@2 2@2 " "barrier loop: generation 2 of 2 workers runs every collective"
coord_wait 10

# A stopped process (or a host gone without closing its connections)
# keeps its connection: the heartbeat timeout (2000 ms) tells.
coord_start 3 --min-workers 2 --timeout-ms 2000
for i in 0 1 2; do worker_start "s$i" 0 "$i" "$i" loop --rejoin --barriers; done
wait_for 30 all_joined s 3 || bail_out "3 workers did not join"
sleep 0.3
t_kill=$(now_ns)
kill -STOP "${worker_pid[s1]}"
survivors_told s 3 1
ok $? "barrier loop: both survivors of a stopped worker get an error"
[ "$told_ms" -lt "$bound_ms" ]
ok $? "barrier loop: told after $told_ms ms (< $bound_ms ms) by the heartbeat timeout"
grep -q "evicting rank 1 .*silent for 2000 ms" "$coord_log"
ok $? "the coordinator logs the silent worker's eviction" || diag "$(cat "$coord_log")"
kill -KILL "${worker_pid[s1]}"
for i in 0 1 2; do worker_wait "s$i" 30; done
coord_wait 10

# A worker killed while the generation gathers is dropped at once (the
# generation then waits for one worker fewer); a worker started next is
# likely to get its descriptor (the kernel hands out the lowest free one)
# and must not be taken for it.
coord_start 3 --timeout-ms 10000
worker_start g0 0 0 0 run
worker_start g1 0 1 1 run
wait_for 30 grep -q "worker (task 1, .*) joins generation 1" "$coord_log" || bail_out "task 1 did not join"
kill -KILL "${worker_pid[g1]}"
wait "${worker_pid[g1]}" 2>/dev/null
unset "worker_pid[g1]"
wait_for 5 grep -q "evicting worker (task 1, .*): its connection closed" "$coord_log"
ok $? "a joining worker killed before the generation formed is dropped at once" || diag "$(cat "$coord_log")"
worker_start g1b 0 1 1 run
r=""
for w in g0 g1b; do worker_wait "$w" 30; r="$r$? "; done
is "$r$(grep -c evicting "$coord_log") $(grep -c 'generation 1 formed: 2 workers' "$coord_log")" "0 0 1 1" \
	"the restarted worker and the first form generation 1; nobody else is evicted" ||
	diag "$(cat "$coord_log")"
coord_wait 10

# 3. --min-workers: 2 workers, minimum 2; after a kill -9 the survivor's
# rejoin fails with DPT_EPEERLOST and the coordinator gives up with 1.
coord_start 2 --min-workers 2
for i in 0 1; do worker_start "c$i" 0 "$i" "$i" loop --rejoin; done
wait_for 30 all_joined c 2 || bail_out "2 workers did not join"
kill_one c 2 0
rc=0
worker_wait c1 30 || rc=$?
grep -q "FAIL rejoin: DPT_EPEERLOST" "$coord_dir/c1.out"
ok $? "below --min-workers: the survivor's rejoin fails with DPT_EPEERLOST" || diag "exit $rc: $(worker_out c1)"
coord_exits 1 "below --min-workers: the coordinator exits 1"
grep -q "(--min-workers 2)" "$coord_log"
ok $? "the coordinator says that --min-workers stopped the job" || diag "$(cat "$coord_log")"

# 4. The coordinator dies: the workers fail with DPT_ECOORDLOST in the
# same bound instead of hanging (at once: their connection closes).
coord_start 2
for i in 0 1; do worker_start "d$i" 0 "$i" "$i" loop --rejoin; done
wait_for 30 all_joined d 2 || bail_out "2 workers did not join"
sleep 0.3
t_kill=$(now_ns)
kill -KILL "$coord_pid"
survivors_told d 2 -1
ok $? "coordinator killed: both workers get an error"
is "$survivors_errors" "DPT_ECOORDLOST " "coordinator killed: the error is DPT_ECOORDLOST"
[ "$told_ms" -lt "$bound_ms" ]
ok $? "coordinator killed: the workers knew after $told_ms ms (< $bound_ms ms)"

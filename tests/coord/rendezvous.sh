#!/bin/bash
# Rendezvous on loopback: a real coordinator and 2..16 real workers started
# in a shuffled order get dense unique ranks ordered by (node, local rank),
# the local ranks of their node, one NCCL unique ID relayed unchanged to
# all, a fresh ID for the next generation (an old one is refused), and
# the coordinator exits 0 once every worker has left.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

sizes=(2 5 16)
plan $((${#sizes[@]} * 6 + 9))

# layout N: "node local task" lines for N workers on nodes of 1..4 tasks,
# in a random order; node indices have gaps, as a sparse SLURM_NODEID set.
layout() {
	local n=$1 task=0 node=0 per
	while [ "$task" -lt "$n" ]; do
		per=$((RANDOM % 4 + 1))
		for ((l = 0; l < per && task < n; l++)); do
			echo "$((node * 3 + 1)) $l $task"
			task=$((task + 1))
		done
		node=$((node + 1))
	done | shuf
}

# expected LAYOUT: "node local rank local_rank local_world" sorted by rank:
# ranks follow (node, local rank); local ranks count within the node.
expected() {
	sort -n -k1,1 -k2,2 <<<"$1" | awk '
		{ node[NR] = $1; local_[NR] = $2; cnt[$1]++ }
		END { seen = ""; for (i = 1; i <= NR; i++) {
			if (node[i] != prev) { lr = 0; prev = node[i] }
			print node[i], local_[i], i - 1, lr++, cnt[node[i]] } }'
}

# 1. libdptrain workers (CPU backend): ranks, local ranks, collectives.
for n in "${sizes[@]}"; do
	lay=$(layout "$n")
	coord_start "$n" --log-level debug
	while read -r node lr task; do
		worker_start "w$n-$task" "$node" "$lr" "$task" run
	done <<<"$lay"
	failed=0
	while read -r node lr task; do
		worker_wait "w$n-$task" 60 || failed=$((failed + 1))
	done <<<"$lay"
	ok "$failed" "$n workers: every libdptrain worker joined, ran every collective exactly and left" ||
		for f in "$coord_dir"/w"$n"-*.out; do diag "$f: $(cat "$f")"; done
	got=$(while read -r node lr task; do
		line=$(grep '^joined' "$coord_dir/w$n-$task.out")
		echo "$node $lr $(field rank "$line") $(field local_rank "$line") $(field world "$line") $(field gen "$line")"
	done <<<"$lay" | sort -n -k3,3)
	want=$(expected "$lay" | awk -v n="$n" '{ print $1, $2, $3, $4, n, 1 }')
	is "$got" "$want" "$n workers: dense unique ranks 0..$((n - 1)) by node then local rank, local ranks per node, generation 1"
	coord_exits 0 "$n workers: the coordinator exits 0 when every worker has left"
	grep -q "every member of generation 1 left: exiting" "$coord_log"
	ok $? "$n workers: the coordinator logs the clean shutdown"
	joins=$(grep -c "joins generation 1" "$coord_log")
	is "$joins" "$n" "$n workers: the coordinator logs each join"

	# 2. The same layout as NCCL workers: one unique ID, created by rank
	# 0 only, relayed unchanged to everyone.
	coord_start "$n"
	while read -r node lr task; do
		worker_start "n$n-$task" "$node" "$lr" "$task" nccl-id "$DPTRAIN_COORDINATOR" "$node" "$lr" "$task"
	done <<<"$lay"
	for task in $(seq 0 $((n - 1))); do worker_wait "n$n-$task" 30; done
	ids=$(cat "$coord_dir"/n"$n"-*.out | grep '^joined' | while read -r line; do
		echo "$(field rank "$line") $(field create "$line") $(field id "$line")"
	done | sort -n)
	summary=$(awk '{ r[$1]++; c += $2; if ($2) cr = $1; id[$3]++ }
		END { printf "%d ranks, %d distinct, %d creator(s), creator rank %s, %d distinct id(s)", NR, length(r), c, cr, length(id) }' <<<"$ids")
	is "$summary" "$n ranks, $n distinct, 1 creator(s), creator rank 0, 1 distinct id(s)" \
		"$n NCCL workers: rank 0 alone creates the ID and all $n get the same blob" ||
		diag "$(cat "$coord_dir"/n"$n"-*.out)"
	coord_wait 10
done

# 3. A world of one.
coord_start 1
worker_start solo 0 0 0 run
rc=0
worker_wait solo 30 || rc=$?
is "$rc" 0 "a world of one: the worker runs its collectives alone" || diag "$(worker_out solo)"
coord_exits 0 "a world of one: the coordinator exits 0"

# 4. A worker that would make the world too large is refused with EBUSY,
# and the job it tried to join is not disturbed.
coord_start 2
worker_start a 0 0 0 loop
worker_start b 0 1 1 loop
wait_for 20 grep -q '^joined' "$coord_dir/b.out" && wait_for 20 grep -q '^joined' "$coord_dir/a.out"
worker_start extra 1 0 2 run
rc=0
worker_wait extra 20 || rc=$?
out=$(worker_out extra)
[ "$rc" != 0 ] && grep -q "DPT_EBUSY" <<<"$out"
ok $? "a third worker for a world of two fails with DPT_EBUSY" || diag "exit $rc: $out"
kill -0 "${worker_pid[a]}" 2>/dev/null && kill -0 "${worker_pid[b]}" 2>/dev/null &&
	! grep -q '^error' "$coord_dir/a.out" "$coord_dir/b.out"
ok $? "the two members go on training undisturbed"
grep -q "refused a join: the job already has its 2 workers" "$coord_log"
ok $? "the coordinator logs the refusal"

# 5. NCCL unique IDs across generations: after a re-join, generation 2 gets
# a new ID (again one for all); a rank 0 that offers generation 1's ID
# again is refused and the generation ends.
coord_start 3
for t in 0 1 2; do
	worker_start "g$t" 0 "$t" "$t" nccl-id "$DPTRAIN_COORDINATOR" 0 "$t" "$t" 2
done
r=0
for t in 0 1 2; do worker_wait "g$t" 30 || r=$((r + 1)); done
lines=$(cat "$coord_dir"/g?.out | grep '^joined' | while read -r line; do
	echo "$(field gen "$line") $(field world "$line") $(field id "$line")"
done | sort)
is "$r $(awk '$1 == 1' <<<"$lines" | wc -l) $(awk '$1 == 2 && $2 == 3' <<<"$lines" | wc -l) $(awk '{ print $3 }' <<<"$lines" | sort -u | wc -l) $(awk '$1 == 1 { print $3 }' <<<"$lines" | sort -u | wc -l)" \
	"0 3 3 2 1" "3 NCCL workers, 2 generations: each generation one ID for all, generation 2's differs from 1's" ||
	diag "$(cat "$coord_dir"/g?.out)"
grep -q "generation 1 ended: .* re-joined" "$coord_log"
ok $? "the coordinator logs that a member's re-join ended generation 1"

coord_start 2
for t in 0 1; do
	worker_start "u$t" 0 "$t" "$t" nccl-id "$DPTRAIN_COORDINATOR" 0 "$t" "$t" 2 reuse
done
for t in 0 1; do worker_wait "u$t" 30; done
refused=$(cat "$coord_dir"/u?.out | grep -c "^FAIL GEN_END gen=2: rank 0 sent the previous generation's nccl unique id")
gen2=$(cat "$coord_dir"/u?.out | grep -c '^joined.* gen=2 ')
is "$refused $gen2" "2 0" "a reused ID is never relayed: generation 2 ends for both members" ||
	diag "$(cat "$coord_dir"/u?.out)"
grep -q "generation 2 ended: rank 0 sent the previous generation's nccl unique id" "$coord_log"
ok $? "the coordinator logs the refused ID" || diag "$(cat "$coord_log")"

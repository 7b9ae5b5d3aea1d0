#!/bin/bash
# torchrun's environment contract (torch.distributed.run) in the tasks of
# a --dp-train step of 2 nodes x 2 tasks: GROUP_RANK, GROUP_WORLD_SIZE,
# ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, TORCHELASTIC_RESTART_COUNT,
# TORCHELASTIC_MAX_RESTARTS (--dp-max-requeues), and TORCHELASTIC_RUN_ID only with
# --dp-torchelastic, which makes torch.distributed (and so Lightning) see a
# torchrun launch while env:// still works. After a requeue,
# TORCHELASTIC_RESTART_COUNT is Slurm's restart count.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
cluster_up NODES=2 CPUS=4 GPUS=0
work=$(mktemp -d /tmp/dptrain-torchrun.XXXXXX) || bail_out "mktemp failed"
dpt_scratch+=("$work")
chmod 755 "$work"
plan 10

# One line per task: the node, then each variable as NAME=VALUE, or
# NAME-unset when it is not in the environment.
cat >"$work/show.sh" <<'EOF'
printf '%s' "$SLURMD_NODENAME"
for v in RANK LOCAL_RANK GROUP_RANK GROUP_WORLD_SIZE ROLE_RANK ROLE_WORLD_SIZE \
	ROLE_NAME LOCAL_WORLD_SIZE WORLD_SIZE TORCHELASTIC_RESTART_COUNT \
	TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE; do
	if printenv "$v" >/dev/null; then
		printf ' %s=%s' "$v" "$(printenv "$v")"
	else
		printf ' %s-unset' "$v"
	fi
done
echo
EOF
show="sh $work/show.sh"
want_line() { # NODE RANK LOCAL GROUP RESTARTS MAX RUN_ID
	local run
	run=$([ -n "$7" ] && echo "TORCHELASTIC_RUN_ID=$7" || echo "TORCHELASTIC_RUN_ID-unset")
	echo "$1 RANK=$2 LOCAL_RANK=$3 GROUP_RANK=$4 GROUP_WORLD_SIZE=2 ROLE_RANK=$2 ROLE_WORLD_SIZE=4" \
		"ROLE_NAME=default LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 TORCHELASTIC_RESTART_COUNT=$5" \
		"TORCHELASTIC_MAX_RESTARTS=$6 $run TORCHELASTIC_USE_AGENT_STORE-unset"
}
want() { # RESTARTS MAX RUN_ID: the 4 lines of a 2 x 2 step, by rank
	want_line n1 0 0 0 "$@"
	want_line n1 1 1 0 "$@"
	want_line n2 2 0 1 "$@"
	want_line n2 3 1 1 "$@"
}
by_rank() { grep '^n[12] RANK=' | sort -t= -k2 -n; }

# 1-4. The values on 2 nodes x 2 tasks.
out=$(cd /tmp && srun_t -N 2 --ntasks-per-node=2 --dp-train=tr $show 2>&1)
is "$(by_rank <<<"$out")" "$(want 0 100 "")" \
	"2 x 2: group = node, role = the whole step, restart count 0, at most the site's 100 requeues, no run id"
out=$(cd /tmp && srun_t -N 2 --ntasks-per-node=2 --dp-train=tr --dp-requeue=off $show 2>&1)
is "$(by_rank <<<"$out")" "$(want 0 0 "")" "--dp-requeue=off: TORCHELASTIC_MAX_RESTARTS=0"
out=$(cd /tmp && srun_t -N 2 --ntasks-per-node=2 --dp-train=tr --dp-max-requeues=7 $show 2>&1)
is "$(by_rank <<<"$out")" "$(want 0 7 "")" "--dp-max-requeues=7: TORCHELASTIC_MAX_RESTARTS=7"
out=$(cd /tmp && srun_t -N 2 --ntasks-per-node=2 --dp-train=tr --dp-torchelastic --dp-torchelastic $show 2>&1)
is "$(by_rank <<<"$out")" "$(want 0 100 tr)" \
	"--dp-torchelastic (given twice): TORCHELASTIC_RUN_ID is the run name"

# 5-6. Real torch: is_torchelastic_launched() follows --dp-torchelastic,
# and env:// still rendezvous without an agent store.
py=/usr/bin/python3
if python_has $py torch.distributed; then
	cat >"$work/te.py" <<'EOF'
import torch
import torch.distributed as dist
launched = dist.is_torchelastic_launched()
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank={dist.get_rank()} launched={launched} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
EOF
	out=$(cd /tmp && DPT_TIMEOUT=180 srun_t -N 2 --ntasks-per-node=2 --dp-train=tr --dp-torchelastic \
		$py "$work/te.py" 2>&1)
	is "$(grep -o '^rank=[0-9] launched=True sum=4$' <<<"$out" | sort | tr '\n' ' ')" \
		"rank=0 launched=True sum=4 rank=1 launched=True sum=4 rank=2 launched=True sum=4 rank=3 launched=True sum=4 " \
		"--dp-torchelastic: torch sees a torchrun launch and env:// works on 4 ranks" || diag "$out"
	out=$(cd /tmp && DPT_TIMEOUT=180 srun_tasks -N 1 -n 1 --dp-train=tr $py -c \
		'import torch.distributed as d; print("launched", d.is_torchelastic_launched())')
	is "$out" "launched False" \
		"without it torch does not take the step for a torchrun launch"
else
	skip "--dp-torchelastic: torch sees a torchrun launch" "$python_missing"
	skip "without it torch does not take the step for a torchrun launch" "$python_missing"
fi

# 7-10. A batch job requeued once (RequeueExit=85 in the test cluster):
# the second run's tasks get TORCHELASTIC_RESTART_COUNT=1.
cat >"$work/rq.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 --ntasks-per-node=2 --requeue --open-mode=append -o $work/rq.out -J rq
srun --dp-train=rq $show
[ -n "\$SLURM_RESTART_COUNT" ] || exit 85
EOF
id=$(cd /tmp && sbatch_t --parsable "$work/rq.sh" | cut -d';' -f1)
[ -n "$id" ]
ok $? "sbatch --requeue of a job that asks to be requeued once: job $id" || bail_out "sbatch failed"
state=
for _ in $(seq 1 120); do
	state=$(scontrol_t show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*\|Restarts=[0-9]*' | tr '\n' ' ')
	[[ $state =~ JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) ]] && break
	sleep 1
done
is "$state" "JobState=COMPLETED Restarts=1 " "it completed after one requeue" || diag "$(cat "$work/rq.out")"
out=$(cat "$work/rq.out" 2>/dev/null)
first=$(by_rank <<<"$(grep 'TORCHELASTIC_RESTART_COUNT=0 ' <<<"$out")")
second=$(by_rank <<<"$(grep 'TORCHELASTIC_RESTART_COUNT=1 ' <<<"$out")")
is "$first" "$(want 0 100 "")" "first run: TORCHELASTIC_RESTART_COUNT=0 on all 4 tasks" || diag "$out"
is "$second" "$(want 1 100 "")" "after the requeue: TORCHELASTIC_RESTART_COUNT=1 on all 4 tasks" ||
	diag "$out"

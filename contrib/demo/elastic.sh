#!/bin/bash
# dptrain's demo: a PyTorch Lightning job as users write it
# (contrib/examples/fmnist_lightning.py: Fashion-MNIST, a small CNN, Adam,
# Lightning's DDP over gloo, a DataLoader with 2 workers) trained past its walltime and
# across world sizes, as one batch job of 1-2 nodes, 2 tasks each, with a
# two-minute time limit and --requeue:
#
#   run 1   4 ranks on 2 nodes; dptrain stops it 80 s before its walltime
#           with a committed checkpoint and requeues the job;
#           meanwhile the demo, as an admin would, drains one of its nodes
#   run 2   2 ranks on the node left (--dp-nodes=1-2 gave the requeued job
#           its range back), resumed from run 1's checkpoint; the drained
#           node comes back while it trains; stopped and requeued again
#   run 3   4 ranks again, to the end; then the test accuracy
#
# Every run resumes the step the previous one committed; the elastic
# sampler gives each global step the same samples whatever the world size.
# At the end contrib/demo/report.py checks that no global step was trained
# twice or skipped and that every step trained on its own samples, and
# plots the loss and the samples per second against the step.
#
#   contrib/demo/elastic.sh [--dir DIR] [--last-steps N]
#
# --dir: the demo's directory, which must not exist yet (it is made 0700;
# default: a new private directory /tmp/dptrain-demo.XXXXXX, which the
# first and the last lines name): the job's script and output, the
# checkpoints, the trace, the plot.
# --last-steps: the steps run 3 trains after run 2's stop (default 150).
# Run 3 finishes because the batch script reads its step target from
# DIR/target at each start, and the demo sets it once run 2 has stopped:
# the demo ends in three runs whether the machine is fast or slow, unless
# it is so loaded that run 3 spends most of its 40 s starting Python:
# then it is stopped and requeued once more, and a fourth run on 4 ranks
# finishes (world_sizes=4,2,4,4).
#
# Needs: root (to drain and resume a node), a Slurm cluster of two nodes
# with dptrain's plugin (SLURM_CONF; tests/cluster/up makes one), torch 2
# and Lightning (the venv /opt/dptrain-torch2 of contrib/setup/install-deps.sh;
# DPTRAIN_TORCH2 to use another), Debian's dataset-fashion-mnist, gnuplot.
# The last line:
#   dptrain demo: restarts=R world_sizes=A,B,C final_step=S test_accuracy=X plot=PATH
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=
last_steps=150
while [ $# -gt 0 ]; do
	case $1 in
	--dir) dir=$2; shift 2 ;;
	--last-steps) last_steps=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "elastic.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done
[[ $last_steps =~ ^[1-9][0-9]*$ ]] || { echo "elastic.sh: --last-steps: expected a number of steps" >&2; exit 2; }
py=${DPTRAIN_TORCH2:-/opt/dptrain-torch2}/bin/python
"$py" -c 'import lightning' 2>/dev/null ||
	{ echo "elastic.sh: no Lightning in $py: run contrib/setup/install-deps.sh" >&2; exit 1; }
# The Python package of this tree and the library of its build tree
# ($top_builddir where the build is elsewhere, as make distcheck's), where
# there is one (installed packages are found without these).
build=${top_builddir:-$top}
if [ -f "$build/worker/.libs/libdptrain.so" ]; then
	export PYTHONPATH=$top/worker/python DPTRAIN_LIBRARY=$build/worker/.libs/libdptrain.so
fi

say() { printf '== %s\n' "$*"; }
fail() { printf 'dptrain demo: %s\n' "$*" >&2; exit 1; }
# until_line PATTERN SECONDS: wait for a line of the job's output.
until_line() {
	local i
	for ((i = 0; i < $2 * 2; i++)); do
		grep -q -- "$1" "$dir/job.out" 2>/dev/null && return 0
		job_ended && return 1
		sleep 0.5
	done
	return 1
}
job_state() { scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_ended() { [[ $(job_state) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|)$ ]]; }

# Made here, never taken over: the demo runs as root, and a path in /tmp
# that another user made first (a link, say) would have root write
# where they chose.
if [ -z "$dir" ]; then
	dir=$(mktemp -d /tmp/dptrain-demo.XXXXXX) || fail "cannot make a directory in /tmp"
else
	[ ! -e "$dir" ] && [ ! -L "$dir" ] || fail "--dir $dir exists: remove it, or name a new directory"
	(umask 077 && mkdir "$dir") || fail "cannot make --dir $dir"
fi
say "the demo's files: $dir"
chmod 755 "$dir"
echo 100000000 >"$dir/target"
cat >"$dir/job.sh" <<EOF
#!/bin/bash
#SBATCH --nodes=1-2 --ntasks-per-node=2 --time=2 --requeue --open-mode=append
#SBATCH -J dptrain-demo -o $dir/job.out
echo "job start \$(date +%s.%N) restart=\${SLURM_RESTART_COUNT:-0} nodes=\$SLURM_JOB_NODELIST"
srun --dp-train=fmnist-demo --dp-ckpt=file://$dir/ckpt --dp-grace=80s \\
	--dp-nodes=1-2 --dp-ckpt-every=10s \\
	$py $top/contrib/examples/fmnist_lightning.py --steps \$(cat $dir/target) \\
	--log-every 50 --trace $dir/trace.jsonl
EOF
say "sbatch --nodes=1-2 --ntasks-per-node=2 --time=2 --requeue $dir/job.sh"
sed -n '/^srun/,$p' "$dir/job.sh" | sed 's/^/   /'
job=$(sbatch --parsable "$dir/job.sh" | cut -d';' -f1)
drained=
cleanup() {
	stop_following
	job_ended || scancel "$job" 2>/dev/null || true
	[ -z "$drained" ] || scontrol update nodename="$drained" state=resume 2>/dev/null || true
}
# The job's output as it comes. tail follows it while $sleeper lives:
# killing that ends the whole pipeline, once tail has printed the rest.
touch "$dir/job.out"
sleep infinity >/dev/null 2>&1 &
sleeper=$!
tail -n +1 -F --pid="$sleeper" "$dir/job.out" 2>/dev/null | grep --line-buffered -v '^ *$' | sed -u 's/^/   | /' &
follower=$!
stop_following() {
	kill "$sleeper" 2>/dev/null || true
	wait "$follower" 2>/dev/null || true
}
trap cleanup EXIT

until_line "fmnist: starting at step 0 on 4 ranks" 120 || fail "run 1 did not start on 4 ranks (see $dir/job.out)"
drained=$(scontrol show hostnames "$(squeue -h -j "$job" -o %N)" | tail -n 1)
until_line "requeueing job $job after step" 120 || fail "run 1 was not requeued (see $dir/job.out)"
scontrol update nodename="$drained" state=drain reason="dptrain demo: maintenance"
say "as an admin: $drained drained for maintenance; the requeued job may start on 1 to 2 nodes"
until_line "fmnist: resumed at step [0-9]* on 2 ranks (restart 1)" 120 ||
	fail "run 2 did not resume on 2 ranks (see $dir/job.out)"
scontrol update nodename="$drained" state=resume
say "as an admin: $drained is back"
drained=
for ((i = 0; i < 240; i++)); do
	[ "$(grep -c "requeueing job $job after step" "$dir/job.out")" -ge 2 ] && break
	job_ended && fail "the job ended in run 2 (see $dir/job.out)"
	sleep 0.5
done
stop2=$(grep -o "requeueing job $job after step [0-9]*" "$dir/job.out" | sed -n '2s/.* //p')
[ -n "$stop2" ] || fail "run 2 was not requeued (see $dir/job.out)"
echo $((stop2 + last_steps)) >"$dir/target"
say "the demo asks run 3 to finish at step $((stop2 + last_steps)) ($last_steps steps after run 2's stop)"
for ((i = 0; i < 480; i++)); do
	job_ended && break
	sleep 0.5
done
stop_following
state=$(job_state)
[ "$state" = COMPLETED ] || fail "the job ended $state (see $dir/job.out)"
accuracy=$(grep -o 'test_accuracy=[0-9.]*' "$dir/job.out" | tail -n 1 | cut -d= -f2)
[ -n "$accuracy" ] || fail "the last run printed no test accuracy (see $dir/job.out)"

say "checks and plot: contrib/demo/report.py $dir/trace.jsonl"
summary=$($py "$top/contrib/demo/report.py" "$dir/trace.jsonl" --png "$dir/demo.png") ||
	fail "the run's trace does not check out"
echo "   every global step trained once, on the sampler's samples for it, whatever the world size"
echo "dptrain demo: $summary test_accuracy=$accuracy plot=$dir/demo.png"

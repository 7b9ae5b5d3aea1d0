#!/bin/bash
# The step secret stays out of the tasks' environment (doc/protocol.md,
# "The secret in the tasks"), on the real test cluster. A requeued batch
# job of 4 Python ranks prints what a careless user's job prints: `env` in
# the batch script and in each task's shell before the program, and the
# environment of a child process and of a forked DataLoader-like worker
# after dptrain.init(), into its 0644 slurm-%j.out. The secret is read
# from the coordinators themselves (/proc/PID/environ, as root), and none
# of it reaches the file; each task finds it in a sealed memfd of its own
# (its user's, 0400, no name in any directory), which dptrain.init()
# closes; a second dptrain.init() of the process still works; training
# resumes across the requeue; a program whose launcher closed the
# descriptor is told to pass it on.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_python numpy
lib=$top_builddir/worker/.libs/libdptrain.so
[ -f "$lib" ] || bail_out "$lib is not built"
export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib
cluster_up NODES=2 CPUS=4 GPUS=0
work_dir secret
plan 12
# The job's tasks print their environments line by line into one output
# file; make check's own variables (TEST_LOGS: several KiB on one line)
# would be split and interleaved among the tasks' lines there.
unset TEST_LOGS MAKEFLAGS MFLAGS MAKEOVERRIDES

# The task: what it finds before and after dptrain.init(), in itself and in
# its children, then 10 steps of training with a checkpoint each. Each run
# waits for $work/go.RESTART once every check is printed, so that the test
# reads the coordinator's secret while the step runs; the first run then
# waits at step 4 to be requeued.
cat >"$work/task.py" <<'EOF'
import fcntl, os, stat, subprocess, sys, time
import numpy as np

work = sys.argv[1]
rank = os.environ.get("SLURM_PROCID")
restart = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
out = lambda *a: print(*a, flush=True)

def memfds():
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "dptrain-secret" in os.readlink("/proc/self/fd/" + fd):
                fds.append(fd)
        except OSError:
            pass
    return fds

def findings(where):
    """What this process holds of the secret: variables and memfds."""
    with open("/proc/self/environ", "rb") as f:
        proc = f.read().split(b"\0")
    got = [k for k in os.environ if k.startswith("DPTRAIN_SECRET")]
    got += ["proc:" + v.split(b"=")[0].decode() for v in proc if v.startswith(b"DPTRAIN_SECRET=")]
    got += ["memfd:" + fd for fd in memfds()]
    for line in sorted("%s=%s" % kv for kv in os.environ.items()):
        out("%s-env rank=%s: %s" % (where, rank, line))  # an env dump
    return "clean" if not got else " ".join(got)

fd = os.environ.get("DPTRAIN_SECRET_FD")
if fd is None:
    out("fd rank=%s none (DPTRAIN_SECRET %s)" % (rank, "set" if "DPTRAIN_SECRET" in os.environ else "unset"))
else:
    fd = int(fd)
    st = os.fstat(fd)
    out("fd rank=%s memfd=%s mode=%o own=%s size=%d sealed=%s" % (
        rank, os.readlink("/proc/self/fd/%d" % fd).startswith("/memfd:"),
        stat.S_IMODE(st.st_mode), st.st_uid == os.getuid(), st.st_size,
        bool(fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE)))

import dptrain

# A first dpt_init that fails (no coordinator there) takes the secret; the
# second one, the real, has only the process's copy left.
try:
    dptrain.init(coordinator="tcp://127.0.0.1:9", connect_timeout_ms=300).finalize()
    first = "joined?"
except dptrain.DptrainError as e:
    first = e.name
ctx = dptrain.init()
out("init rank=%s first=%s second=ok world=%d" % (rank, first, ctx.world_size))
out("after rank=%s %s" % (rank, findings("self")))

child = subprocess.run([sys.executable, work + "/child.py"], stdout=subprocess.PIPE,
                       text=True).stdout
print(child, end="", flush=True)
pid = os.fork()  # what a DataLoader worker is
if pid == 0:
    out("fork rank=%s %s" % (rank, findings("fork")))
    os._exit(0)
os.waitpid(pid, 0)

out("ready rank=%s restart=%d" % (rank, restart))
deadline = time.time() + 120
while not os.path.exists("%s/go.%d" % (work, restart)) and time.time() < deadline:
    time.sleep(0.2)

w = np.zeros(4, dtype=np.float32)
ck = dptrain.Checkpoint(ctx)
ck.register("w", w)
info = ck.load()
if info:
    out("resumed rank=%s step=%d restart=%d w=%g" % (rank, info.step, restart, w[0]))
for step in range(info.step + 1 if info else 0, 10):
    g = np.ones(4, dtype=np.float32)
    ctx.allreduce(g, op="sum")
    w += g
    ck.save(step)
    ck.wait()
    if step == 4 and restart == 0:
        out("saved rank=%s step=4" % rank)
        time.sleep(120)  # until the test requeues the job
        sys.exit(1)
ck.close()
ctx.finalize()
out("finished rank=%s step=9 w=%g" % (rank, w[0]))
EOF
cat >"$work/child.py" <<'EOF'
import os
rank = os.environ.get("SLURM_PROCID")
with open("/proc/self/environ", "rb") as f:
    proc = f.read()
fds = [fd for fd in os.listdir("/proc/self/fd")
       if "dptrain-secret" in (os.readlink("/proc/self/fd/" + fd) if os.path.exists("/proc/self/fd/" + fd) else "")]
for line in proc.split(b"\0"):
    if line:
        print("child-env rank=%s: %s" % (rank, line.decode(errors="replace")))
leaks = [k for k in os.environ if k.startswith("DPTRAIN_SECRET")] + ["memfd:" + fd for fd in fds]
print("child rank=%s %s" % (rank, "clean" if not leaks and b"DPTRAIN_SECRET" not in proc else " ".join(leaks) or "proc"))
EOF
chmod 644 "$work/task.py" "$work/child.py"

cat >"$work/job.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --requeue --open-mode=append
#SBATCH -o $work/slurm-%j.out -J secret
echo "batch restart=\${SLURM_RESTART_COUNT:-0}"
env | sed 's/^/batch-env: /'
srun --dp-train=secret --dp-ckpt=file://$work/ckpt --dp-backend=cpu \\
	bash -c 'env | sed "s/^/task-env rank=\$SLURM_PROCID: /"; exec $py $work/task.py $work'
echo "srun exit \$?"
env | sed 's/^/batch-env: /'
EOF

# The secret of job $id's running step, as its coordinator holds it.
secret_of_step() {
	local pid
	pid=$(cluster_pgrep "dptrain-coordinator .*--job-id $id " | head -n 1)
	[ -n "$pid" ] && tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^DPTRAIN_SECRET=//p'
}

id=$(sbatch_t --parsable "$work/job.sh" | cut -d';' -f1)
[ -n "$id" ]
ok $? "sbatch of 4 ranks on 2 nodes: job $id" || bail_out "sbatch failed"
log=$work/slurm-$id.out
wait_ready() { [ "$(grep -c "^ready rank=[0-3] restart=$1\$" "$log" 2>/dev/null)" = 4 ]; }
wait_for 120 wait_ready 0
secret1=$(secret_of_step)
touch "$work/go.0"
wait_saved() { [ "$(grep -c '^saved rank=[0-3] step=4$' "$log" 2>/dev/null)" = 4 ]; }
wait_for 120 wait_saved
scontrol_t requeue "$id"
wait_for 180 wait_ready 1
secret2=$(secret_of_step)
touch "$work/go.1"
wait_job "$id" 120
out=$(cat "$log")

# 2-6: each rank of each run, and their children.
is "$(grep -c '^fd rank=[0-3] memfd=True mode=400 own=True size=64 sealed=True$' <<<"$out")" 8 \
	"every task of both runs finds the secret in a sealed 0400 memfd of its user, not in its environment" ||
	diag "$(grep '^fd ' <<<"$out")"
is "$(grep -c '^init rank=[0-3] first=DPT_ECOORDLOST second=ok world=4$' <<<"$out")" 8 \
	"a failed dptrain.init() took the secret; the process's second one joins with its copy" ||
	diag "$(grep '^init \|rror' <<<"$out")"
is "$(grep -c '^after rank=[0-3] clean$' <<<"$out")" 8 \
	"after dptrain.init(): no DPTRAIN_SECRET* in os.environ or /proc/self/environ, the memfd closed" ||
	diag "$(grep '^after ' <<<"$out")"
is "$(grep -c '^child rank=[0-3] clean$' <<<"$out")" 8 \
	"a subprocess started after init: neither variable nor descriptor" || diag "$(grep '^child ' <<<"$out")"
is "$(grep -c '^fork rank=[0-3] clean$' <<<"$out")" 8 \
	"a forked worker (as DataLoader's): neither variable nor descriptor" || diag "$(grep '^fork ' <<<"$out")"

# 7-8: training went on across the requeue.
state=$(job_state "$id")
[[ "$state" =~ JobState=COMPLETED.*Restarts=1 ]]
ok $? "the job completed after its requeue ($state)" || diag "$(grep -v -- '-env' <<<"$out")"
[ "$(grep -c '^resumed rank=[0-3] step=4 restart=1 w=20$' <<<"$out")" = 4 ] &&
	[ "$(grep -c '^finished rank=[0-3] step=9 w=40$' <<<"$out")" = 4 ]
ok $? "the second run resumed at step 4 on 4 ranks and finished exact" || diag "$(grep -v -- '-env' <<<"$out")"

# 9-11: the slurm-%j.out that every user can read.
[[ "$secret1" =~ ^[0-9a-f]{64}$ ]] && [[ "$secret2" =~ ^[0-9a-f]{64}$ ]] && [ "$secret1" != "$secret2" ]
ok $? "the coordinators of the two runs had their own secrets" || diag "'$secret1' '$secret2'"
[ "$(grep -c -- '^batch-env: ' <<<"$out")" -gt 0 ] && [ "$(grep -c -- '^task-env rank=' <<<"$out")" -gt 0 ] &&
	[ "$(grep -c -- '^child-env rank=' <<<"$out")" -gt 0 ] && [ "$(grep -c -- '^fork-env rank=' <<<"$out")" -gt 0 ] &&
	! grep -q -e "${secret1:-unset}" -e "${secret2:-unset}" <<<"$out"
ok $? "slurm-$id.out holds env dumps of the batch script, the tasks' shells and children, and neither secret" ||
	diag "$(grep -e "${secret1:-unset}" -e "${secret2:-unset}" <<<"$out" | sed 's/[0-9a-f]\{64\}/SECRET/')"
is "$(grep -c 'DPTRAIN_SECRET=' <<<"$out")" 0 "no DPTRAIN_SECRET= line in it" ||
	diag "$(grep 'DPTRAIN_SECRET=' <<<"$out" | sed 's/[0-9a-f]\{64\}/SECRET/')"

# 12: a launcher that closes inherited descriptors (subprocess's default)
# leaves its child no secret, and dptrain.init() says what to do.
res=$(srun_t -N 1 -n 1 --dp-train=closer --dp-backend=cpu $py -c '
import subprocess, sys
r = subprocess.run([sys.executable, "-c", "import dptrain; dptrain.init()"], stderr=subprocess.PIPE, text=True)
print("rc=%d" % r.returncode, r.stderr)' 2>&1)
grep -q "rc=1" <<<"$res" && grep -q "DPTRAIN_SECRET_FD.*closed or replaced it.*pass_fds" <<<"$res"
ok $? "a child whose launcher closed the descriptor is told to pass it on" || diag "$res"

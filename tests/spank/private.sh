#!/bin/bash
# Private runs on the real test cluster: under a umask of 022, a new run
# directory (and every parent made for it) is 0700 and no other user can
# reach its checkpoints, below which the steps follow the umask by
# default (directories 0755, files 0644); srun --dp-private makes every directory the run creates (parents
# included) 0700 and every file 0600, and the run directory 0700 when it
# exists already; the site's private=yes (dptrain.conf) makes it the
# default, and --dp-private=no overrides it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_built train tests/ckpt/train_loop
conf_cluster_up "" NODES=1 CPUS=4 GPUS=0
work_dir private
umask 022
plan 10

is "$(timed srun --help 2>&1 | grep -c -- '--dp-private')" 1 "srun --help lists --dp-private"

# train ROOT RUN [SRUN OPTIONS]: 2 ranks train to step $steps (default 3)
# and commit it.
train() {
	local root=$1 run=$2
	shift 2
	out=$(srun_t -N 1 -n 2 --dp-train="$run" --dp-ckpt="file://$root" --dp-backend=cpu "$@" \
		"$train" --steps "${steps:-3}" --step-ms 10 2>&1)
	grep -c "^finished step=${steps:-3} rank=[01] committed\$" <<<"$out" | grep -qx 2
}
# The modes under DIR, one "MODE PATH" per line, sorted.
modes() { find "$1" -mindepth "${2:-0}" -printf '%m %P\n' | sort -k2; }
# Whether every directory under DIR is D and every file F.
all_modes() { # DIR D F
	[ -z "$(find "$1" \( -type d ! -perm "$2" \) -o \( -type f ! -perm "$3" \))" ]
}
# Whether ROOT (made by the run) and ROOT/run are 0700, the events file
# 0600, and the steps below follow the umask: 0755 and 0644.
new_run_modes() { # ROOT
	[ "$(stat -c %a "$1" "$1/run" "$1/run/events.jsonl" | tr '\n' ' ')" = "700 700 600 " ] &&
		[ -z "$(find "$1/run" -mindepth 1 \( -type d ! -perm 755 \) -o \
			\( -type f ! -name events.jsonl ! -perm 644 \))" ]
}

train "$work/pub" run
ok $? "a run without --dp-private commits" || diag "$out"
new_run_modes "$work/pub"
ok $? "its new directories are 0700, the steps in them 0755 and 0644 (the umask's)" || diag "$(modes "$work/pub")"

train "$work/new/parent" run --dp-private
ok $? "srun --dp-private commits" || diag "$out"
all_modes "$work/new" 700 600
ok $? "every directory it made (parents included) is 0700, every file 0600" || diag "$(modes "$work/new")"
is "$(find "$work/new" -type f -name 'rank-*' | wc -l):$(find "$work/new" -type f -name manifest.json | wc -l)" \
	"2:1" "the files checked are the shards and the manifest"

# The run made public before, resumed private: its directory becomes 0700.
steps=6 train "$work/pub" run --dp-private --dp-keep=5
ok $? "the public run resumes under --dp-private and commits step 6" || diag "$out"
is "$(modes "$work/pub/run" | grep -v step-0000000003)" "700 
600 events.jsonl
700 step-0000000006
600 step-0000000006/manifest.json
600 step-0000000006/rank-00000-of-00002.safetensors
600 step-0000000006/rank-00001-of-00002.safetensors" \
	"its run directory is made 0700, the new step and the events file (doc/checkpoint-format.md) 0700 and 0600" ||
	diag "$(modes "$work/pub")"

# The site's default.
echo "private = yes" >"$conf"
train "$work/site" run &&
	all_modes "$work/site/run" 700 600 &&
	[ "$(srun_t -n 1 --dp-train=x --dp-ckpt="file://$work/site" printenv DPTRAIN_PRIVATE)" = 1 ]
ok $? "with private=yes in dptrain.conf, runs are private (DPTRAIN_PRIVATE=1)" || diag "$out" "$(modes "$work/site")"
train "$work/site2" run --dp-private=no &&
	new_run_modes "$work/site2" &&
	[ "$(srun_t -n 1 --dp-train=x --dp-private=no --dp-ckpt="file://$work/site" printenv DPTRAIN_PRIVATE)" = 0 ]
ok $? "--dp-private=no overrides the site's private=yes" || diag "$out" "$(modes "$work/site2")"

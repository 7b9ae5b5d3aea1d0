#!/bin/bash
# A neighbour plants links and names in a shared checkpoint tree around a
# non-root user's run, on the real test cluster (doc/RELIABILITY.md, "The
# checkpoint tree (posix)"): before the run's first save and between two
# of its job steps. The victim (daemon) and the neighbour (nobody) are
# two unprivileged users. The site's checkpoint root is of mode 1777, as
# a /lustre/ckpt; the victim's run "team" has a run directory of its own
# that its project group (users, of which the neighbour is a member
# here) may write, with the sticky bit: a setting the store accepts, and
# one where the kernel's fs.protected_symlinks, which covers only
# world-writable sticky directories, does not help.
#
# Before the run's first save the neighbour plants, under the recycled
# name that the store's writers claim (.@recycled.dpt-tmp.*), a symbolic
# link to a file of its own and a hard link to another, and links
# events.jsonl to a third. Between two job steps it plants a link named
# for a step the run will save (to an empty directory of its own), one
# named for an old step (to a copy of a step of its own run, which
# retention would delete), and committed steps newer than the victim's,
# as a link and as a directory of its own (from a real run of its own:
# train_loop's state is a function of the step, so they would load
# "exact"). In the shared root it makes the directory of a second run
# name first, and links a third to a directory of its own. In two more
# runs it makes events.jsonl first: a file of its own, a FIFO.
#
# The checks: none of the neighbour's files changes or goes; the run
# commits through it all, loses only the step whose name a link holds,
# with a message that says so, and resumes from its own last committed
# step; `dptrain ckpt ls` lists only its own steps; the second and third
# run names are refused with what to do, and nothing is written there;
# no event goes to a file or FIFO of the neighbour's.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_prog setpriv sha256sum
victim=daemon
id -u "$victim" >/dev/null 2>&1 || skip_all "no user '$victim' to run the victim's jobs"
id -u nobody >/dev/null 2>&1 && getent group nogroup >/dev/null || skip_all "no user nobody or group nogroup"
team_gid=$(getent group users | cut -d: -f3)
[ -n "$team_gid" ] || skip_all "no group 'users' for the team's run directory"
require_built train tests/ckpt/train_loop
dptrain=$top_builddir/dptrain
umask 022

# The two users, each with a home in $work, the neighbour in the team's
# group; whatever they run is timed.
as_victim() {
	timed setpriv --reuid="$victim" --regid="$(id -g "$victim")" --init-groups env HOME="$vhome" "$@"
}
neighbour=(setpriv --reuid=nobody --regid=nogroup --groups="$team_gid")
as_neighbour() { timed "${neighbour[@]}" env HOME="$nb" "$@"; }
for f in "$train" "$top_builddir/coordinator/dptrain-coordinator" "$dptrain"; do
	as_victim test -x "$f" -a -r "$f" && as_neighbour test -x "$f" -a -r "$f" ||
		skip_all "$victim or nobody cannot run $f: the build tree must be readable by all"
done

cluster_up NODES=1 CPUS=4 GPUS=0
work_dir shared-root
plan 19

root=$work/ckpt
mkdir -m 1777 "$root"
vhome=$work/victim
nb=$work/nb
install -d -m 700 -o "$victim" -g "$(id -g "$victim")" "$vhome"
install -d -m 755 -o nobody -g nogroup "$nb"
# team_dir NAME: a run directory of the victim's in the shared root that
# its group may write (chgrp by root: the victim is in no such group on
# this machine).
team_dir() { install -d -m 1770 -o "$victim" -g "$team_gid" "$root/$1"; }
team=$root/team
team_dir team

# vsrun RUN [OPTION...] -- [TRAIN_LOOP OPTION...]: the victim's 2 ranks
# train RUN in the shared root; stdout and stderr in $out, status in $rc.
vsrun() {
	local run=$1 opts=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	rc=0
	out=$(as_victim srun --chdir="$vhome" -N 1 -n 2 --dp-train="$run" \
		--dp-ckpt="file://$root" --dp-backend=cpu "${opts[@]}" \
		"$train" --step-ms 10 "$@" 2>&1) || rc=$?
}
# Both ranks printed LINE (a grep pattern, anchored).
both() { [ "$(grep -c "^$1\$" <<<"$out")" = 2 ]; }
# The committed steps of URI, as its user sees them, on one line.
steps() {
	as_victim "$dptrain" ckpt ls "$1" 2>&1 |
		awk '$2 ~ /^[0-9]+$/ && $3 == "committed" { print $2 }' | xargs
}
# Everything of the neighbour's: each name's type, owner, mode, size and
# time, and each file's SHA-256.
nb_state() {
	(cd "$nb" && find . -printf '%y %u %m %s %T@ %p\n' | sort -k6 &&
		find . -type f -exec sha256sum {} + | sort -k2)
}

# The neighbour's own run, which it trains as any user would: steps 10
# to 60, kept, and opened to all so that the victim could read them.
out=$(as_neighbour srun --chdir="$nb" -N 1 -n 2 --dp-train=mine --dp-ckpt="file://$nb/ckpt" \
	--dp-backend=cpu --dp-keep=10 "$train" --steps 60 --every 10 --step-ms 1 2>&1)
both "finished step=60 rank=[01] committed" || bail_out "the neighbour's own run failed: $out"
as_neighbour chmod -R a+rX "$nb/ckpt"

# Bait: files of the neighbour's that the victim's processes could write,
# and empty directories they could fill.
for f in bait hardbait eventsbait; do
	echo "the neighbour's $f" | as_neighbour tee "$nb/$f" >/dev/null
	as_neighbour chmod 666 "$nb/$f"
done
as_neighbour mkdir -m 777 "$nb/loot" "$nb/old" "$nb/runloot"
as_neighbour cp "$nb/ckpt/mine/step-0000000010/"* "$nb/old/"

# 1-3. Before the run's first save: a recycled name as a symbolic link
# and as a hard link, and a linked events.jsonl.
as_neighbour ln -s "$nb/bait" "$team/.@recycled.dpt-tmp.00000000000000aa"
as_neighbour ln "$nb/hardbait" "$team/.@recycled.dpt-tmp.00000000000000bb"
as_neighbour ln -s "$nb/eventsbait" "$team/events.jsonl"
before=$(nb_state)
# Steps 2 to 8, 2 kept: retention recycles step 2's shards after the
# commit of 6, and the save of 8 claims recycled files.
vsrun team --dp-keep=2 -- --steps 8 --every 2
[ "$rc" = 0 ] && both "finished step=8 rank=[01] committed"
ok $? "the victim's run commits steps 2 to 8 among the planted names (exit $rc)" || diag "$out"
is "$(nb_state)" "$before" "none of the neighbour's files changed: no save wrote through a recycled name" ||
	diag "$(ls -la "$team")"
grep -q "cannot write the run's events to .*: cannot append to '$team/events.jsonl': it is a symbolic link" <<<"$out"
ok $? "the coordinator wrote no event through the linked events.jsonl, and said so" || diag "$out"

# 4-9. Between two job steps: links named for a step to come and for an
# old one, and the neighbour's committed steps 50 (a link) and 60 (a
# directory of its own).
as_neighbour ln -s "$nb/loot" "$team/step-0000000012"
as_neighbour ln -s "$nb/old" "$team/step-0000000003"
as_neighbour ln -s "$nb/ckpt/mine/step-0000000050" "$team/step-0000000050"
as_neighbour cp -r "$nb/ckpt/mine/step-0000000060" "$team/"
planted=$(find "$team" -user nobody -printf '%y %p\n' | sort)
before=$(nb_state)
# Saves every 2 steps through dpt_ckpt_step, which gives up a save that
# fails and trains on: step 12's, whose directory is the planted link.
vsrun team --dp-keep=2 --dp-ckpt-every=2steps -- --steps 16 --auto
both "resumed step=8 rank=[01] world=2 restart=0 exact"
ok $? "the run resumes from its own last committed step, 8, not the neighbour's 50 or 60" || diag "$out"
[ "$rc" = 0 ] && both "finished step=16 rank=[01] committed"
ok $? "it trains on to step 16 and commits it (exit $rc)" || diag "$out"
grep -q "checkpoint of step 12 failed on 2 of 2 ranks: .*'$team/step-0000000012': it is a symbolic link" <<<"$out"
ok $? "the save of step 12, whose name the neighbour's link holds, fails saying it is a symbolic link" ||
	diag "$out"
is "$(steps "file://$team")" "14 16" "dptrain ckpt ls lists the run's own committed steps, 2 kept"
is "$(nb_state)" "$before" "none of the neighbour's files changed or went (retention, recycling)" ||
	diag "$(ls -la "$team" "$nb/loot" "$nb/old")"
is "$(find "$team" -user nobody -printf '%y %p\n' | sort)" "$planted" "every name the neighbour planted is still there"

# 10-11. gc by the victim, then a third job step that only resumes.
before=$(nb_state)
out=$(as_victim "$dptrain" ckpt gc "file://$team" --age 0 2>&1)
rc=$?
[ "$rc" = 0 ] && [ "$(nb_state)" = "$before" ] && [ "$(steps "file://$team")" = "14 16" ]
ok $? "the victim's dptrain ckpt gc --age 0 leaves the neighbour's files and the run's steps (exit $rc)" ||
	diag "$out"
vsrun team --dp-keep=2 -- --steps 16
[ "$rc" = 0 ] && both "resumed step=16 rank=[01] world=2 restart=0 exact" &&
	both "finished step=16 rank=[01] committed"
ok $? "a third job step resumes from step 16, exact (exit $rc)" || diag "$out"

# 12-15. Run names in the shared root: a directory the neighbour made
# first, a link to one of its directories.
# refused RUN TEXT...: the victim's RUN fails, and its output holds each
# TEXT.
refused() {
	local run=$1 text
	shift
	vsrun "$run" -- --steps 2 --every 2
	[ "$rc" != 0 ] || return 1
	for text; do
		grep -qF "$text" <<<"$out" || return 1
	done
}
as_neighbour mkdir -m 777 "$root/taken"
as_neighbour ln -s "$nb/runloot" "$root/linked"
refused taken "'$root/taken': it belongs to user nobody (uid 65534)" \
	"another user made it first (use another name, or a directory of your own)"
ok $? "a run directory the neighbour made first is refused, saying whose it is and what to do (exit $rc)" ||
	diag "$out"
is "$(find "$root/taken" -mindepth 1)" "" "nothing was written in it"
refused linked "'$root/linked': it is a symbolic link in a directory that other users can write" \
	"(name the real directory)"
ok $? "a run name linked to the neighbour's directory is refused, saying what to do (exit $rc)" ||
	diag "$out"
is "$(find "$nb/runloot" -mindepth 1)" "" "nothing was written through the link"

# 16-19. events.jsonl made first by the neighbour in two more runs of the
# victim's: a file of its own, open to all; a FIFO, which nobody reads
# during the run's first job step (a coordinator that opened it to write
# would wait for a reader for good) and the neighbour holds open during
# the second.
team_dir team2
team_dir team3
as_neighbour touch "$root/team2/events.jsonl"
as_neighbour chmod 666 "$root/team2/events.jsonl"
as_neighbour mkfifo -m 666 "$root/team3/events.jsonl"
vsrun team2 --dp-keep=2 -- --steps 2 --every 2
[ "$rc" = 0 ] && both "finished step=2 rank=[01] committed" &&
	grep -q "run's events to .*: cannot append to '$root/team2/events.jsonl': it is no regular file of this user's" <<<"$out"
ok $? "a run whose events.jsonl the neighbour made first commits, and says why it writes no event" ||
	diag "$out"
is "$(stat -c %s "$root/team2/events.jsonl")" 0 "no event went to the neighbour's file"
vsrun team3 --dp-keep=2 -- --steps 2 --every 2
[ "$rc" = 0 ] && both "finished step=2 rank=[01] committed" &&
	grep -q "run's events to .*: cannot append to '$root/team3/events.jsonl': it is a FIFO" <<<"$out"
ok $? "a run whose events.jsonl is a FIFO commits, and says why it writes no event" || diag "$out"
timeout 60 "${neighbour[@]}" bash -c 'exec 3<>"$1" && : >"$2" && exec sleep 60' _ \
	"$root/team3/events.jsonl" "$nb/fifo-held" &
holder=$!
stop_holder() { kill "$holder" 2>/dev/null || true; }
dpt_exit_hooks+=(stop_holder)
wait_for 30 test -e "$nb/fifo-held" || bail_out "the neighbour could not hold its FIFO open"
vsrun team3 --dp-keep=2 -- --steps 4 --every 2
[ "$rc" = 0 ] && both "finished step=4 rank=[01] committed" &&
	grep -q "run's events to .*: cannot append to '$root/team3/events.jsonl': it is no regular file of this user's" <<<"$out" &&
	[ "$(timed dd if="$root/team3/events.jsonl" iflag=nonblock bs=64k count=1 2>/dev/null | wc -c)" = 0 ]
ok $? "with the neighbour holding the FIFO open, the run commits and no event goes through it" ||
	diag "$out"

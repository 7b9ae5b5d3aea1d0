#!/bin/bash
# Round trip of every dtype, byte-exact, across world sizes: saved by 4
# ranks, loaded by 3 and by 8; saved by 8, loaded by 4 and 3; saved by 3,
# loaded by 4. Each rank checks every byte of its boxes, the step, the
# sample cursor and the blobs it got.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"

plan 15
uri=file://$ckpt_dir/root
block=4096

roundtrip() { # SAVE_WORLD LOAD_WORLD RUN
	local sw=$1 lw=$2 run=$3
	local out=$ckpt_dir/$run
	ckpt_job "$sw" "$out.save" --block $block save "$uri/$run" 5 9
	ok $? "$sw ranks save steps 5 and 9 ($run)" || diag "$(cat "$out".save.*)"
	ckpt_job "$lw" "$out.load" --block $block load "$uri/$run"
	ok $? "$lw ranks load what $sw ranks saved" || diag "$(cat "$out".load.*)"
	is "$(ckpt_grep "$out.load" '^loaded' | grep -c "step=9 written_by=$sw .* cursor=9017 user=user-blob-9 .* ok$")" "$lw" \
		"every one of the $lw ranks got step 9, its cursor and blob, byte-exact"
}

# The runs are directories under one root; the worker's --run is "run",
# so each URI below is a root of its own.
roundtrip 4 3 a
roundtrip 4 8 b
roundtrip 8 4 c
roundtrip 8 3 d
roundtrip 3 4 e

#!/bin/bash
# Tensors in GPU memory, where a CUDA device exists (SKIP elsewhere):
# saved from device memory by 4 ranks and loaded resharded by 3 into
# device memory and by 8 into host memory; saved by 3 ranks with every
# other tensor on the device (host and device copies in one snapshot)
# and loaded by 4 into device memory; saved and loaded by one rank on the
# NCCL backend (whose collectives stage the commit's host buffers through
# device memory). Each rank copies its tensors back
# to the host and checks every byte, the step, the cursor and the blobs;
# `dptrain ckpt verify` checks every checksum of what the GPUs wrote.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"

probe=$("$ckpt_worker" --cuda-probe) || bail_out "ckpt_worker --cuda-probe failed: $probe"
case $probe in
cuda=none) skip_all "libdptrain is built without CUDA" ;;
"cuda=built devices=0"*) skip_all "no usable CUDA device (${probe#*error=})" ;;
esac

plan 20
diag "$probe"
uri=file://$ckpt_dir/root
block=4096

# SAVE_WORLD SAVE_PLACEMENT LOAD_WORLD LOAD_PLACEMENT RUN SCALE
roundtrip() {
	local sw=$1 sp=$2 lw=$3 lp=$4 run=$5 scale=$6
	local out=$ckpt_dir/$run
	ckpt_job "$sw" "$out.save" --block $block --scale "$scale" $sp save "$uri/$run" 5 9
	ok $? "$sw ranks save steps 5 and 9 ($run: ${sp:-host})" || diag "$(cat "$out".save.*)"
	ckpt_job "$lw" "$out.load" --block $block --scale "$scale" $lp load "$uri/$run"
	ok $? "$lw ranks load what $sw ranks saved (${lp:-host})" || diag "$(cat "$out".load.*)"
	is "$(ckpt_grep "$out.load" '^loaded' | grep -c "step=9 written_by=$sw .* cursor=9017 user=user-blob-9 .* ok$")" "$lw" \
		"every one of the $lw ranks got step 9, byte-exact"
	run_ok "dptrain ckpt verify passes ($run)" "$ckpt_tool" ckpt verify "$uri/$run/run"
}

roundtrip 4 --device 3 --device a 1
roundtrip 4 --device 8 "" b 3
roundtrip 3 --device-some 4 --device c 1
roundtrip 2 "" 3 --device-some d 5
ckpt_backend=nccl roundtrip 1 --device 1 --device e 1

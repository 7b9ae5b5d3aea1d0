#!/bin/bash
# Device-memory tensors where they cannot be copied: a libdptrain built
# without CUDA refuses them (DPT_ENOTSUP), a CUDA build without a usable
# GPU too (DPT_ECUDA), and host memory registered as device memory is
# refused where a GPU exists (DPT_EINVAL). The message names the tensor,
# nothing is written, and the same root then takes a save of host
# tensors as usual. Runs on every machine: the probe says which refusal
# to expect.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"

probe=$("$ckpt_worker" --cuda-probe) || bail_out "ckpt_worker --cuda-probe failed: $probe"
case $probe in
cuda=none)
	want=DPT_ENOTSUP why="libdptrain built without CUDA"
	cause="built without CUDA" ;;
"cuda=built devices=0"*)
	want=DPT_ECUDA why="no usable CUDA device"
	cause="no cuda device is usable here" ;;
*)
	want=DPT_EINVAL why="host memory registered as device memory"
	cause="cuda says .* is host memory" ;;
esac

plan 7
diag "$probe: expecting $want ($why)"

"$ckpt_worker" --solo --lie-device save "file://$root" 1 >"$out.dev" 2>&1
is $? 1 "a save of device tensors fails ($why)" || diag "$(cat "$out.dev")"
grep -q "^FAIL setup: $want " "$out.dev"
ok $? "the registration is refused with $want" || diag "$(cat "$out.dev")"
grep -q "checkpoint tensor 'emb' .*$cause" "$out.dev"
ok $? "the message names the tensor and the cause" || diag "$(cat "$out.dev")"
is "$(find "$root" -name 'step-*' 2>/dev/null | wc -l)" 0 "nothing is written"

"$ckpt_worker" --solo --block 4096 save "file://$root" 2 >"$out.host" 2>&1
ok $? "host tensors save in the same root" || diag "$(cat "$out.host")"
"$ckpt_worker" --solo --block 4096 load "file://$root" >"$out.load" 2>&1
ok $? "and load" || diag "$(cat "$out.load")"
grep -q '^loaded step=2 written_by=1 .* ok$' "$out.load"
ok $? "step 2 is the only step, byte-exact" || diag "$(cat "$out.load")"

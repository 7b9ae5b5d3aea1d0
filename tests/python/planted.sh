#!/bin/bash
# A checkpoint root that other users may write (issue 24): a manifest that
# names a tensor of 1 TiB to create, in a shard of a few KiB, is refused by
# dptrain.torch before it allocates anything, with an error that names the
# step and both sizes; an honest step loads. Without a cluster: a
# coordinator and two Python ranks on loopback (tests/ckpt/lib.sh).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_python torch
require_binding
. "$top_srcdir/tests/ckpt/lib.sh"
export DPTRAIN_CKPT_URI=file://$ckpt_dir/root DPTRAIN_RUN=planted
plan 5

job() { # NAME MODE: 2 ranks of planted.py MODE; their output in $out
	ckpt_python_job 2 "$ckpt_dir/$1" "$top_srcdir/tests/python/planted.py" "$2"
	out=$(cat "$ckpt_dir/$1".[01])
}

step=$ckpt_dir/root/planted/step-0000000002
job honest save
stored=$(cat "$step"/*.safetensors | wc -c)
is "$(grep '^rank=[01] loaded ' <<<"$out" | cut -d' ' -f2- | sort | uniq -c | sed 's/^ *//')" \
	"2 loaded 2 stored=$stored" \
	"an honest step loads on both ranks; stored_bytes is the size of its shards ($stored)" ||
	diag "$out"

# Another user's manifest: Adam's first exp_avg, which the load creates,
# becomes 2^38 float32 (1 TiB) in one chunk of a shard that says it is
# that large (blocks of 32 MiB, the most a reader stages: one checksum for
# each other chunk, 32768 for this one).
$py - "$step/manifest.json" <<'PY' || bail_out "cannot plant the manifest"
import json, os, sys
path = sys.argv[1]
m = json.load(open(path))
m["checksum"]["block_size"] = 2 ** 25
t = next(t for t in m["tensors"] if t["name"].endswith("exp_avg"))
begin = t["chunks"][0]["begin"]
t["shape"] = [2 ** 38]
t["chunks"] = [{"offset": [0], "shape": [2 ** 38], "file": 0, "begin": begin,
                "length": 2 ** 40, "xxh3": ["0" * 16] * 2 ** 15}]
for u in m["tensors"]:
    for c in u["chunks"]:
        if c["length"] <= 2 ** 25:
            c["xxh3"] = c["xxh3"][:1]
m["files"][0]["size"] = begin + 2 ** 40
with open(path + ".new", "w") as f:
    json.dump(m, f, sort_keys=True, separators=(",", ":"))
os.replace(path + ".new", path)
PY
job planted load
is "$(grep -c "^rank=[01] refused DPT_ECORRUPT: load of step 2 of 'file://$ckpt_dir/root/planted': " <<<"$out")" 2 \
	"the planted step is refused on both ranks, as damaged (DPT_ECORRUPT)" || diag "$out"
grep -Eq "its manifest describes 1099511[0-9]{6} bytes of tensors to create \(the largest 'opt\.state\.0\.exp_avg', float32 \[274877906944\]\), far more than the $stored bytes its shard files hold" <<<"$out"
ok $? "the error names the bytes, the tensor and the bytes of the shards" || diag "$out"
grep -q "load(state, step=1) loads the step before" <<<"$out"
ok $? "and says how to load the step before" || diag "$out"
maxrss=$(grep -o 'maxrss_mib=[0-9]*' <<<"$out" | cut -d= -f2 | sort -n | tail -1)
[ -n "$maxrss" ] && [ "$maxrss" -lt 2048 ]
ok $? "nothing of the 1 TiB was allocated (peak ${maxrss:-?} MiB)" || diag "$out"

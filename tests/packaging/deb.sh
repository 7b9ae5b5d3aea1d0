#!/bin/bash
# The Debian packages (debian/) as an admin uses them: built with
# dpkg-buildpackage from the distribution's files (make distdir, not this
# tree with its build outputs), checked by lintian, installed with dpkg -i,
# loaded by a real test cluster through the installed plugstack.conf.d
# snippet, used by srun --dp-train with the PyTorch example and the
# installed python3-dptrain (no PYTHONPATH, no DPTRAIN_LIBRARY), then
# removed (only conffiles stay) and purged (nothing stays).
#
# It changes the system while it runs: the packages are purged again by
# the teardown, however the test ends, so that later tests never find an
# installed libdptrain beside the build tree's. It refuses (SKIP) to run
# where any of the packages is installed already.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

[ "$(id -u)" = 0 ] || skip_all "needs root (dpkg -i, and the cluster)"
require_prog dpkg-buildpackage dpkg-checkbuilddeps dh dpkg-deb make
py=/usr/bin/python3
require_python_module $py torch
require_fmnist
[ -f "$top_builddir/Makefile" ] || skip_all "configure the tree first ($top_builddir/Makefile)"

pkgs=(slurm-spank-dptrain libdptrain0 libdptrain-dev python3-dptrain dptrain-tools)
pkg_present() { # PACKAGE: installed, or removed with its conffiles left
	dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qv '^not-installed$'
}
for p in "${pkgs[@]}"; do
	pkg_present "$p" && skip_all "package $p is installed on this machine: the test would remove it"
done
# Slurm's own plugins say where Slurm looks for plugins on this system.
plugindir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins 2>/dev/null | grep -m1 '/auth_none\.so$')")
[ "$plugindir" != . ] || skip_all "slurm-wlm-basic-plugins is not installed"

purge_packages() {
	local p left=()
	for p in "${pkgs[@]}"; do pkg_present "$p" && left+=("$p"); done
	[ ${#left[@]} = 0 ] && return 0
	diag "purging ${left[*]}"
	dpkg --purge "${left[@]}" >/dev/null
}
dpt_exit_hooks+=(purge_packages)

dpt_scratch_dir dir deb
src=$dir/dptrain
# The parent make's jobserver is not ours: the sub-makes start afresh.
unset MAKEFLAGS MFLAGS MAKELEVEL
plan 21

# ---------------------------------------------------------------- build
run_ok "make distdir copies the distribution's files" \
	make -s -C "$top_builddir" distdir distdir="$src" || bail_out "no source tree to build from"
out=$(cd "$src" && dpkg-checkbuilddeps 2>&1)
ok $? "the build dependencies of debian/control are installed" || { diag "$out"; bail_out "install them (contrib/setup/install-deps.sh)"; }
t0=$SECONDS
(cd "$src" && DEB_BUILD_OPTIONS="parallel=2 nocheck" dpkg-buildpackage -us -uc -b) >"$dir/build.log" 2>&1
ok $? "dpkg-buildpackage -us -uc -b builds, in $((SECONDS - t0)) s" || {
	diag "$(tail -n 40 "$dir/build.log")"
	bail_out "no packages"
}
debs=()
for p in "${pkgs[@]}"; do debs+=("$(ls "$dir/${p}"_*.deb 2>/dev/null)"); done
got=$(for d in "${debs[@]}"; do [ -f "$d" ] && basename "$d" | cut -d_ -f1; done | tr '\n' ' ')
is "$got" "${pkgs[*]} " "one .deb for each of ${pkgs[*]}"

spank_deb=${debs[0]}
files=$(dpkg-deb -c "$spank_deb" | awk '{ print $6 }' | sed 's|^\.||')
grep -qx "$plugindir/dptrain.so" <<<"$files"
ok $? "the plugin is in Slurm's plugin directory $plugindir" || diag "$files"
is "$(dpkg-deb -I "$spank_deb" conffiles | sort | tr '\n' ' ')" \
	"/etc/slurm/dptrain.conf /etc/slurm/plugstack.conf.d/dptrain.conf " \
	"the two configuration files are conffiles"

if command -v lintian >/dev/null; then
	# Clean at every level that fails a package in Debian's archive and at
	# --pedantic; what remains is explained in debian/*.lintian-overrides.
	lintian --pedantic --fail-on error,warning,pedantic "$dir"/dptrain_*.changes \
		>"$dir/lintian.log" 2>&1
	ok $? "lintian --pedantic finds nothing" || diag "$(cat "$dir/lintian.log")"
else
	skip "lintian --pedantic finds nothing" "lintian is not installed"
fi

# ---------------------------------------------------------------- install
run_ok "dpkg -i installs the five packages" dpkg -i "${debs[@]}" ||
	bail_out "the packages do not install"
snippet=/etc/slurm/plugstack.conf.d/dptrain.conf
is "$(grep -v '^#' $snippet)" "required $plugindir/dptrain.so" \
	"$snippet loads the installed plugin"
# Installing must change no job: every setting of the conffile is a comment.
is "$(grep -v '^[[:space:]]*\(#\|$\)' /etc/slurm/dptrain.conf)" "" \
	"/etc/slurm/dptrain.conf sets nothing until the admin edits it"

cluster_up NODES=2 CPUS=4 GPUS=0 DPTRAIN_PLUGSTACK_INCLUDE=$snippet
# Nothing of the build tree: the installed module and library only.
unset PYTHONPATH DPTRAIN_LIBRARY LD_LIBRARY_PATH

# The coordinator of a step is the process that listens on the port in
# DPTRAIN_COORDINATOR: the plugin must have started the installed one.
out=$(srun_t -N1 -n1 --dp-train=pkg-coord bash -c '
	port=${DPTRAIN_COORDINATOR##*:}
	pid=$(ss -Hltnp "sport = :$port" | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2)
	readlink "/proc/$pid/exe"' 2>&1)
is "$out" /usr/bin/dptrain-coordinator "srun --dp-train starts the installed coordinator"

out=$(srun_t -N1 -n1 $py -c '
import dptrain
print(dptrain.__file__)
print([l.split()[-1] for l in open("/proc/self/maps") if "libdptrain" in l][0])' 2>&1)
[[ "$out" =~ ^/usr/lib/python3/dist-packages/dptrain/__init__.py$'\n'/usr/lib/x86_64-linux-gnu/libdptrain\.so\.0\.[0-9]+\.[0-9]+$ ]]
ok $? "python3 imports the installed dptrain, which loads the installed libdptrain" ||
	diag "$out"

ckpt=file://$dir/ckpt
script=$top_srcdir/contrib/examples/fmnist_dptrain.py
train() { # STEPS: the example on 2 ranks to STEPS, output in $out
	out=$(DPT_TIMEOUT=300 srun_t -N 2 -n 2 --dp-train=pkg --dp-ckpt="$ckpt" \
		$py "$script" --steps "$1" --log-every 10 2>&1)
}
train 20
ok $? "srun --dp-train trains Fashion-MNIST on 2 ranks to step 20" || diag "$out"
train 40
ok $? "a second run trains on to step 40" || diag "$out"
grep -q 'resumed at step 20 on 2 ranks' <<<"$out"
ok $? "it resumed from the checkpoint of step 20" || diag "$out"
out=$(/usr/bin/dptrain ckpt ls "$ckpt/pkg" 2>&1)
awk '$2 == 40 { found = 1 } END { exit !found }' <<<"$out"
ok $? "the installed dptrain command lists the checkpoint of step 40" || diag "$out"
cluster_down

# ---------------------------------------------------------------- remove, purge
# What the packages installed, before they go: every file but the conffiles
# must go with dpkg -r, and the conffiles with dpkg --purge.
conffiles=$(for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Conffiles}\n' "$p" | awk 'NF { print $1 }'
done | sort)
installed=$(for p in "${pkgs[@]}"; do dpkg -L "$p"; done | sort -u |
	while read -r f; do [ -d "$f" ] || echo "$f"; done)
installed=$(comm -23 <(echo "$installed") <(echo "$conffiles"))

run_ok "dpkg -r removes the five packages" dpkg -r "${pkgs[@]}"
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <<<"$installed")
# dh_python3 byte-compiles at install time: the .pyc must go too.
[ -e /usr/lib/python3/dist-packages/dptrain ] && left+=" /usr/lib/python3/dist-packages/dptrain"
is "$left" "" "dpkg -r leaves none of the $(wc -l <<<"$installed") files behind"
kept=$(while read -r f; do [ -e "$f" ] && echo "$f"; done <<<"$conffiles")
is "$kept" "$conffiles" "dpkg -r keeps the conffiles"
run_ok "dpkg --purge purges the five packages" dpkg --purge "${pkgs[@]}"
gone=1
for f in $conffiles; do [ -e "$f" ] && gone=0 && diag "still there: $f"; done
for p in "${pkgs[@]}"; do pkg_present "$p" && gone=0 && diag "still known to dpkg: $p"; done
ldconfig -p | grep -q libdptrain && gone=0 && diag "libdptrain still in ld.so.cache"
ok $((1 - gone)) "after purge no conffile, package or library cache entry is left"

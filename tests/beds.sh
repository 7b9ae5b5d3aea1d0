# tests/beds.sh: what the test beds' scripts share (tests/cluster/up and
# down, tests/s3/up and down), sourced after they set prog; tests/lib.sh
# sources it for the port lock.
#
# A bed's processes carry its mark, MARK=NAME=DIR, in their environment:
# down finds strays by it in /proc/PID/environ, never by a process name.
# shellcheck shell=bash

die() { echo "$prog: $*" >&2; exit 1; }
unavailable() { echo "$prog: $*" >&2; exit 77; } # exit status 77: SKIP
say() { echo "$prog: $*"; }
bed_t0=$(date +%s.%N)
elapsed() { awk -v a="$bed_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2fs", b - a }'; }

alive() { # PID: there, and not a zombie
	[ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
marked() { # PID: alive and carries $MARK
	[[ $1 =~ ^[0-9]+$ ]] && alive "$1" && grep -qzxF -- "$MARK" "/proc/$1/environ" 2>/dev/null
}
marked_pids() { # the processes that carry $MARK, but this one
	grep -lzxF -- "$MARK" /proc/[0-9]*/environ 2>/dev/null |
		awk -F/ -v self=$$ '$3 != self { print $3 }'
}

# ---------------------------------------------------------------- ports
# Several test beds start at once under `make -j check`, and others may
# run beside them: each picks its ports and binds them under one lock,
# taken on fd 9 and held until its daemons listen. fd 9 must not reach a
# daemon (start it with 9>&-), or it would hold the lock for as long as it
# lives. The file is opened read-only, without O_CREAT once it exists:
# then any user can lock it, whoever created it (protected_regular refuses
# O_CREAT on another user's file in /tmp, even to root).
#
# A restart on the same port holds the lock from the stop to the start
# (tests/lib.sh, s3_hold_port), so that no bed starting meanwhile picks the
# port left free: it hands the lock down on fd 9, with
# DPTRAIN_PORT_LOCK_HELD=1.
port_lock_file=${DPTRAIN_PORT_LOCK:-/tmp/dptrain-ports.lock}
port_lock() { # take the lock on fd 9, or find it held there; 1, saying why, if not
	if [ "${DPTRAIN_PORT_LOCK_HELD:-0}" = 1 ]; then
		[ /proc/self/fd/9 -ef "$port_lock_file" ] && flock -n 9 && return 0
		echo "${prog:+$prog: }DPTRAIN_PORT_LOCK_HELD=1, but fd 9 does not hold the port lock $port_lock_file" >&2
		return 1
	fi
	[ -e "$port_lock_file" ] || : >>"$port_lock_file" 2>/dev/null
	exec 9<"$port_lock_file" || { echo "${prog:+$prog: }cannot open the port lock $port_lock_file" >&2; return 1; }
	flock -w 120 9 || { echo "${prog:+$prog: }cannot take the port lock $port_lock_file" >&2; return 1; }
}
port_unlock() { exec 9>&-; }

# Under the lock. A port in TIME-WAIT is free: the daemons bind with
# SO_REUSEADDR. Ports are picked above the kernel's ephemeral ports
# (ip_local_port_range; 61000..65535 where it ends at 60999), so that no
# client socket can already hold one, and outside the 16384 ports below
# them, where task 0 of srun --dp-train picks MASTER_PORT seconds before
# its program binds it (spank/stepd.c): a bed starting in between could
# take it (CI, Nov 29 2026). Where fewer than 2000 ports lie above them,
# in 20000..32000.
ports_used=
ports_scan() { ports_used=$(ss -Htan exclude time-wait | awk '{ n = split($4, a, ":"); print a[n] }' | sort -un); }
range_free() { # BASE COUNT
	local p
	for ((p = $1; p < $1 + $2; p++)); do
		grep -qx "$p" <<<"$ports_used" && return 1
	done
	return 0
}
port_range() { # sets port_lo and port_hi, the range beds pick ports in
	local low high
	read -r low high </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || high=
	if [[ $high =~ ^[0-9]+$ ]] && [ "$high" -le 63535 ]; then
		port_lo=$((high + 1)) port_hi=65535
	else
		port_lo=20000 port_hi=32000
	fi
}
port_pick() { # COUNT: sets picked to the first of COUNT free ports; 1 when none
	local cand
	picked=
	port_range
	for _ in $(seq 1 200); do
		cand=$((port_lo + RANDOM % (port_hi - port_lo + 2 - $1)))
		if range_free "$cand" "$1"; then picked=$cand; return 0; fi
	done
	return 1
}

#!/bin/bash
# The code's style, checked (contrib/setup/check.sh runs it before the
# build): every tracked C file is as the repository's .clang-format writes
# it, and no C file calls a function the project bans: unbounded copies and
# formatting (strcpy, strcat, sprintf, ...), strtok's hidden state, and
# ato*'s silent failures. Run it from a git checkout; it prints each
# offence and exits 1 when there is one.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
git rev-parse --git-dir >/dev/null 2>&1 || {
	echo "style.sh: not a git checkout: nothing to check" >&2
	exit 0
}
mapfile -t files < <(git ls-files -- '*.c' '*.h')
bad=0

for f in "${files[@]}"; do
	if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "style.sh: $f is not formatted: clang-format -i $f"
		bad=1
	fi
done

banned='strcpy|strcat|strncpy|strncat|sprintf|vsprintf|gets|strtok|atoi|atol|atoll|atof|tmpnam|mktemp'
if git grep -n -E "(^|[^a-z_0-9.>])($banned)\(" -- '*.c' '*.h' |
	grep -v -E '^[^:]*:[0-9]+:\s*(\*|/\*|//)'; then
	echo "style.sh: banned functions above: use snprintf, memcpy of a" \
		"checked length, strtok_r, dpt__parse_long, mkstemp/mkdtemp"
	bad=1
fi
[ "$bad" = 0 ] && echo "style.sh: ${#files[@]} C files formatted, no banned function"
exit "$bad"

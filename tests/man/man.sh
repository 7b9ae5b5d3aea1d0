#!/bin/bash
# The installed manual pages stand alone: each renders without a warning
# from man and groff, and none sends its reader to a file of the source
# tree (doc/*.md, tests/, contrib/, worker/ ...), which an installed
# system does not have. Installed paths (/usr/share/doc/dptrain/...) are
# fine; everything they name must be installed too.
. "$top_srcdir/tests/lib.sh"
require_prog man groff

pages=()
for p in "$top_srcdir"/doc/man/*.[0-9]; do
	pages+=("$p")
done
[ ${#pages[@]} -gt 0 ] || bail_out "no manual page under $top_srcdir/doc/man"
plan $((2 * ${#pages[@]}))

# A path of the source tree: a top-level directory of the tree followed by
# "/", or a Markdown file. Escaped dashes and dots of roff (\- \&.) are
# read as written.
tree_path='(^|[^/[:alnum:]_.-])(doc|tests|contrib|worker|coordinator|spank|ckpt|storage|common|bench|include)/|\.md([^[:alnum:]]|$)'

for p in "${pages[@]}"; do
	name=$(basename "$p")
	err=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$p" 2>&1 >/dev/null)
	is "$err" "" "$name renders without warnings"
	hits=$(sed -e 's/\\-/-/g' -e 's/\\&//g' -e 's/\\f[BIRP]//g' "$p" | grep -nE "$tree_path")
	is "$hits" "" "$name names no file of the source tree"
done

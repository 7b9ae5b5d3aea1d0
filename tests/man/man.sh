#!/bin/bash
# The installed manual pages stand alone: each renders without a warning
# from man and groff, and none sends its reader to a file of the source
# tree (doc/*.md, tests/, contrib/, worker/ ...), which an installed
# system does not have. Installed paths (/usr/share/doc/dptrain/...) are
# fine; everything they name must be installed too. And the pages agree
# with the code's option tables: every admin key (common/settings.def and
# spank/settings.c) is in dptrain.conf(5), every --dp-* option
# (common/settings.def) in dptrain(8), and every coordinator option (the
# same rows) in dptrain-coordinator(1).
. "$top_srcdir/tests/lib.sh"
require_prog man groff

pages=()
for p in "$top_srcdir"/doc/man/*.[0-9]; do
	pages+=("$p")
done
[ ${#pages[@]} -gt 0 ] || bail_out "no manual page under $top_srcdir/doc/man"
plan $((2 * ${#pages[@]} + 3))

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

# missing PAGE NAME...: the names PAGE does not mention as written there
# (roff escapes its dashes: \-).
missing() {
	local page=$1 text n out=
	shift
	text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$top_srcdir/doc/man/$page")
	for n in "$@"; do
		grep -qF -- "$n" <<<"$text" || out="$out $n"
	done
	echo "${out# }"
}
# KEY("name", K_...): the settings' keys and the plugin's own.
mapfile -t keys < <(grep -ohE 'KEY\("[a-z_]+", K_' "$top_srcdir/common/settings.def" \
	"$top_srcdir/spank/settings.c" | cut -d'"' -f2)
# X(ID, OPTION, ENV, FLAG, ...) in common/settings.def: srun's options and
# the coordinator's, NULL where a setting has none.
names_h=$top_srcdir/common/settings.def
mapfile -t opts < <(x_rows "$names_h" | awk -F', ' '$2 != "NULL" { print $2 }')
mapfile -t copts < <(x_rows "$names_h" | awk -F', ' '$4 != "NULL" { print $4 }')
[ ${#keys[@]} -gt 20 ] && [ ${#opts[@]} -gt 10 ] && [ ${#copts[@]} -gt 15 ] ||
	bail_out "cannot read the option tables (${#keys[@]} keys, ${#opts[@]} options, ${#copts[@]} coordinator options)"
is "$(missing dptrain.conf.5 "${keys[@]/%/=}")" "" \
	"dptrain.conf(5) documents all ${#keys[@]} admin keys"
is "$(missing dptrain.8 "${opts[@]/#/--dp-}")" "" \
	"dptrain(8) documents all ${#opts[@]} --dp-* options"
is "$(missing dptrain-coordinator.1 "${copts[@]/#/--}")" "" \
	"dptrain-coordinator(1) documents all ${#copts[@]} options"

# Sourced by each test of this directory: runs the test of tests/python
# of the same name with the Python of the torch 2 venv that
# contrib/setup/install-deps.sh makes ($DPTRAIN_TORCH2, by default
# /opt/dptrain-torch2), so that every check made on Debian's torch 1.13 is
# made on torch 2 too. SKIP, with the reason, where that venv is missing.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
top_srcdir=${top_srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
export top_srcdir
name=$(basename "$0" .sh)
venv=${DPTRAIN_TORCH2:-/opt/dptrain-torch2}
version=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
case $version in
2.*) ;;
"")
	echo "1..0 # SKIP no torch in $venv/bin/python (contrib/setup/install-deps.sh makes that venv; DPTRAIN_TORCH2 names another)"
	exit 77 ;;
*)
	echo "1..0 # SKIP $venv has torch $version, not torch 2"
	exit 77 ;;
esac
echo "# tests/python/$name.sh with torch $version ($venv/bin/python)"
export DPT_PYTHON=$venv/bin/python DPT_TAP_NAME=torch2-$name
exec bash "$top_srcdir/tests/python/$name.sh"

#!/usr/bin/env bash
# As root: a fresh clone in a 0700 home (as /root is in containers) runs README command 1
# (`pip install . && mcp-memory demo`) and the README's test command on a few database tests, with
# a clean environment. The embedded server then runs as `pgserver` from mcp-memory's system folder
# (README, "Running as root"). Leaves nothing running; removes the clone and the demo's data.
#
#   scripts/check_root_home.sh [REPO] [TESTS...]    (default: this checkout, tests/test_core.py)
#
# PIP_CONFIG_FILE and TMPDIR are passed on when set (a package mirror; a private temporary folder).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
repo=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
shift || true
tests=("${@:-tests/test_core.py}")
home=$(mktemp -d /tmp/mcp-memory-home.XXXXXX)  # mode 0700, like /root
trap 'rm -rf "$home"' EXIT
git clone -q "$repo" "$home/clone"
stat -c '%A %U %n' "$home"

in_home() {
  env -i PATH=/usr/bin:/bin HOME="$home" MCP_MEMORY_EMBEDDED_AS_ROOT=1 \
    ${PIP_CONFIG_FILE:+PIP_CONFIG_FILE="$PIP_CONFIG_FILE"} ${TMPDIR:+TMPDIR="$TMPDIR"} \
    bash -c "cd \"$home/clone\" && $1"
}

echo "== README command 1"
in_home 'python3 -m venv .venv && . .venv/bin/activate && pip install -q . && mcp-memory demo'
in_home '. .venv/bin/activate && mcp-memory sessions | head -3 && mcp-memory db stop'
data=$(grep -l -x -F "$home/.local/share/mcp-memory/pg" /var/lib/mcp-memory/data/*/profile || true)
[ -n "$data" ] && rm -rf "$(dirname "$data")"

echo "== README test command on ${tests[*]}"
in_home "python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[dev]' && python -m pytest -q -p no:cacheprovider ${tests[*]}"
stat -c '%A %U %n' "$home"

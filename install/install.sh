#!/usr/bin/env bash
# Install mcp-memory on a Linux (or macOS) host of a team: an isolated environment (pipx, else a
# venv under ~/.local/share/mcp-memory/venv), `mcp-memory login` against the central database,
# registration with every agent found on PATH, and optionally the archiver service.
#
#   install/install.sh --dsn postgresql://host-a@db.example.internal/mcp_memory [--token-stdin] \
#                      [--pgbouncer] [--archiver] [--source PATH_OR_SPEC] [--no-agents] [--dry-run]
#
# The token (from `mcp-memory token create` on the admin's machine) is prompted for, or read from
# standard input with --token-stdin; it goes to the OS keyring, else a 0600 file (see install/README.md).
set -euo pipefail

DSN=""
TOKEN_STDIN=0
PGBOUNCER=0
ARCHIVER=0
AGENTS=1
DRY_RUN=0
SOURCE="mcp-memory"
VENV="${XDG_DATA_HOME:-$HOME/.local/share}/mcp-memory/venv"
BIN_DIR="$HOME/.local/bin"

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dsn) DSN="$2"; shift 2 ;;
        --token-stdin) TOKEN_STDIN=1; shift ;;
        --pgbouncer) PGBOUNCER=1; shift ;;
        --archiver) ARCHIVER=1; shift ;;
        --no-agents) AGENTS=0; shift ;;
        --source) SOURCE="$2"; shift 2 ;;
        --dry-run) DRY_RUN=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done

run() {  # print, and run unless --dry-run
    echo "+ $*"
    if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}

install_package() {
    if command -v pipx >/dev/null 2>&1; then
        run pipx install --force "$SOURCE"
        MCP="$(command -v mcp-memory || echo "$BIN_DIR/mcp-memory")"
        return
    fi
    command -v python3 >/dev/null 2>&1 || { echo "install.sh: python3 (≥ 3.11) is required" >&2; exit 1; }
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || { echo "install.sh: python3 ≥ 3.11 is required" >&2; exit 1; }
    run python3 -m venv "$VENV"
    run "$VENV/bin/python" -m pip install --quiet --upgrade pip
    run "$VENV/bin/python" -m pip install --quiet --upgrade "$SOURCE"
    run mkdir -p "$BIN_DIR"
    run ln -sf "$VENV/bin/mcp-memory" "$BIN_DIR/mcp-memory"
    MCP="$VENV/bin/mcp-memory"
}

do_login() {
    if [ -z "$DSN" ]; then
        echo "no --dsn: this host keeps the embedded database (single-user); run install.sh --dsn … to join a team"
        return
    fi
    local args=(login --dsn "$DSN")
    [ "$TOKEN_STDIN" = 1 ] && args+=(--token-stdin)
    [ "$PGBOUNCER" = 1 ] && args+=(--pgbouncer)
    run "$MCP" "${args[@]}"
}

register_agents() {
    [ "$AGENTS" = 1 ] || return 0
    local agent binary
    for agent in claude-code opencode codex gemini hermes; do
        case "$agent" in
            claude-code) binary=claude ;;
            *) binary="$agent" ;;
        esac
        if command -v "$binary" >/dev/null 2>&1; then
            run "$MCP" install "$agent" || echo "warning: could not register with $agent" >&2
        else
            echo "skip $agent: '$binary' not found on PATH"
        fi
    done
}

install_archiver() {
    [ "$ARCHIVER" = 1 ] || return 0
    local unit
    unit="$(dirname "$0")/mcp-memory-archive.service"
    if ! command -v systemctl >/dev/null 2>&1 || [ ! -f "$unit" ]; then
        echo "archiver: no systemd (or no $unit); run '$MCP archive --daemon' under your service manager"
        return 0
    fi
    run sudo install -m 0644 "$unit" /etc/systemd/system/mcp-memory-archive.service
    echo "archiver: set User=, the DSN and --repo/--remote with 'sudo systemctl edit mcp-memory-archive',"
    echo "          then: sudo systemctl enable --now mcp-memory-archive"
}

install_package
do_login
register_agents
install_archiver
run "$MCP" doctor || echo "warning: 'mcp-memory doctor' reported problems (see above)" >&2
echo "done. Make sure $BIN_DIR is on PATH."

#!/usr/bin/env bash
# Install mcp-memory on a Linux (or macOS) host of a team: an isolated environment (pipx, else a
# venv under ~/.local/share/mcp-memory/venv), `mcp-memory login` against the central database,
# registration with every agent found on PATH, and optionally the archiver service.
#
#   install/install.sh --dsn postgresql://host-a@db.example.internal/mcp_memory [--token-stdin] \
#                      [--pgbouncer --direct-dsn postgresql://host-a@db:5432/mcp_memory] \
#                      [--archiver [--archive-remote URL]] [--source PATH_OR_SPEC | --no-install] \
#                      [--no-agents] [--dry-run]
#
# The token (from `mcp-memory token create` on the admin's machine) is prompted for, or read from
# standard input with --token-stdin; it goes to the OS keyring, else a 0600 file (see install/README.md).
# --pgbouncer: --dsn is PgBouncer's address (install/pgbouncer/README.md): each transaction proves the
# token ([database] gateway); --direct-dsn is the database itself, for live tail, leases and doctor.
# --archiver (systemd): the service user mcp-memory, the program in /opt/mcp-memory (linked from
# /usr/local/bin), /etc/mcp-memory/config.toml (DSN, [archive] repo and remote), the token in
# /etc/mcp-memory/archive.env (0640, group mcp-memory) and install/mcp-memory-archive.service.
# --no-install: mcp-memory is already installed and on PATH (an image, a package, a re-run after a
# new token); only the login, the agents, the archiver service and doctor.
set -euo pipefail

DSN=""
DIRECT_DSN=""
TOKEN_STDIN=0
PGBOUNCER=0
ARCHIVER=0
ARCHIVE_REMOTE=""
TOKEN=""
AGENTS=1
DRY_RUN=0
INSTALL=1
SOURCE="mcp-memory"
VENV="${XDG_DATA_HOME:-$HOME/.local/share}/mcp-memory/venv"
BIN_DIR="$HOME/.local/bin"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dsn) DSN="$2"; shift 2 ;;
        --token-stdin) TOKEN_STDIN=1; shift ;;
        --pgbouncer) PGBOUNCER=1; shift ;;
        --direct-dsn) DIRECT_DSN="$2"; shift 2 ;;
        --archiver) ARCHIVER=1; shift ;;
        --archive-remote) ARCHIVE_REMOTE="$2"; shift 2 ;;
        --no-agents) AGENTS=0; shift ;;
        --source) SOURCE="$2"; shift 2 ;;
        --no-install) INSTALL=0; shift ;;
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
    if [ "$INSTALL" = 0 ]; then
        MCP="$(command -v mcp-memory)" || { echo "install.sh: --no-install, but no mcp-memory on PATH" >&2; exit 1; }
        return
    fi
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
    if [ "$ARCHIVER" = 1 ]; then  # the token is needed twice: for this user's login and the service's
        read_token
        args+=(--token-stdin)
        [ "$PGBOUNCER" = 1 ] && args+=(--pgbouncer)
        [ -n "$DIRECT_DSN" ] && args+=(--direct-dsn "$DIRECT_DSN")
        echo "+ $MCP ${args[*]} (the token from above)"
        [ "$DRY_RUN" = 1 ] || printf '%s\n' "$TOKEN" | "$MCP" "${args[@]}"
        return
    fi
    [ "$TOKEN_STDIN" = 1 ] && args+=(--token-stdin)
    [ "$PGBOUNCER" = 1 ] && args+=(--pgbouncer)
    [ -n "$DIRECT_DSN" ] && args+=(--direct-dsn "$DIRECT_DSN")
    run "$MCP" "${args[@]}"
}

read_token() {
    [ "$DRY_RUN" = 0 ] || { TOKEN="<token>"; return; }
    if [ "$TOKEN_STDIN" = 1 ]; then
        IFS= read -r TOKEN || true
    else
        IFS= read -rsp "token (from \`mcp-memory token create --archiver\`): " TOKEN; echo
    fi
    [ -n "$TOKEN" ] || { echo "install.sh: no token given" >&2; exit 1; }
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

SERVICE_USER=mcp-memory
SERVICE_HOME=/var/lib/mcp-memory
SERVICE_VENV=/opt/mcp-memory

write_root_file() {  # path mode content: written through sudo, never shown (it may hold the token)
    echo "+ write $1 (mode $2, owner root:$SERVICE_USER)"
    [ "$DRY_RUN" = 1 ] || printf '%s\n' "$3" | sudo install -m "$2" -o root -g "$SERVICE_USER" /dev/stdin "$1"
}

archiver_config() {  # /etc/mcp-memory/config.toml; values quoted as TOML strings (JSON's are valid TOML)
    python3 - "$DSN" "$SERVICE_HOME/archive" "$ARCHIVE_REMOTE" "$PGBOUNCER" "$DIRECT_DSN" <<'PY'
import json, sys
dsn, repo, remote, pgbouncer, direct = sys.argv[1:6]
print("# mcp-memory archiver (install/README.md, section 5); the token is in /etc/mcp-memory/archive.env")
print(f"[database]\ndsn = {json.dumps(dsn)}")
if pgbouncer == "1":  # behind the tier (section 6): the lease and LISTEN go straight to PostgreSQL
    print("pgbouncer = true\ngateway = true")
if direct:
    print(f"direct_dsn = {json.dumps(direct)}")
print(f"\n[archive]\nrepo = {json.dumps(repo)}")
print(f"remote = {json.dumps(remote)}" if remote else "# remote = \"git@git.example.internal:team/mcp-memory-archive.git\"")
PY
}

install_archiver() {
    [ "$ARCHIVER" = 1 ] || return 0
    local unit
    unit="$(dirname "$0")/mcp-memory-archive.service"
    if ! command -v systemctl >/dev/null 2>&1 || [ ! -f "$unit" ]; then
        echo "archiver: no systemd (or no $unit); run '$MCP archive --daemon' under your service manager"
        return 0
    fi
    [ -n "$DSN" ] || { echo "install.sh: --archiver needs --dsn (the archiver token's DSN)" >&2; exit 2; }
    if ! id "$SERVICE_USER" >/dev/null 2>&1; then
        run sudo useradd --system --home-dir "$SERVICE_HOME" --create-home --shell /usr/sbin/nologin "$SERVICE_USER"
    fi
    # the program where the service user may run it (a home folder is often private)
    run sudo python3 -m venv "$SERVICE_VENV"
    run sudo "$SERVICE_VENV/bin/python" -m pip install --quiet --upgrade "$SOURCE"
    run sudo ln -sf "$SERVICE_VENV/bin/mcp-memory" /usr/local/bin/mcp-memory
    run sudo install -d -m 0750 -o root -g "$SERVICE_USER" /etc/mcp-memory
    write_root_file /etc/mcp-memory/config.toml 0640 "$(archiver_config)"
    write_root_file /etc/mcp-memory/archive.env 0640 "MCP_MEMORY_PASSWORD=$TOKEN"
    run sudo install -m 0644 "$unit" /etc/systemd/system/mcp-memory-archive.service
    run sudo systemctl daemon-reload
    [ -n "$ARCHIVE_REMOTE" ] || echo "archiver: set [archive] remote in /etc/mcp-memory/config.toml to push the archive"
    echo "archiver: git credentials for the remote go to $SERVICE_HOME (e.g. $SERVICE_HOME/.ssh), owned by $SERVICE_USER;"
    echo "          then: sudo systemctl enable --now mcp-memory-archive"
}

install_package
do_login
register_agents
install_archiver
run "$MCP" doctor || echo "warning: 'mcp-memory doctor' reported problems (see above)" >&2
echo "done. Make sure $BIN_DIR is on PATH."

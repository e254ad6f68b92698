"""The set-up half of the team drill (scripts/ops/team_drill.py), in the order of install/README.md:
the central database and owner (sections 1-2), the tokens (3), the PgBouncer tier
(install/pgbouncer/README.md), the hosts (4 and 6, through install.sh), the archiver and its standby
(5, without systemd: `archive --daemon` under the drill as the service manager) and serve-http (7)."""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import urllib.request
from pathlib import Path
from typing import Any

from psycopg import sql
from team_tier import REPO, DrillFailed, Team, check, free_port

INSTALL = REPO / "install"
PROJECT = "web"
HOSTS = ("host_a", "host_b")
ARCHIVERS = ("archiver", "standby")


class TeamSetup:
    """What the set-up made: the admin's environment, the tokens as printed, the PgBouncer port."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.n = team.names
        self.admin: dict[str, str] = {}
        self.tokens: dict[str, dict[str, Any]] = {}
        self.bouncer_port = 0
        self.http_port = 0
        self.remote = team.work / "archive-remote.git"

    # -- sections 1 and 2 ------------------------------------------------------------------------
    def database(self, dbname: str) -> None:
        """Section 1 for one database (also what a restore target needs): owner, schema rights, vector."""
        t = self.team
        t.sql(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(dbname), sql.Identifier(self.n.owner)))
        t.databases.append(dbname)
        t.sql(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(self.n.owner)), dbname=dbname)
        t.sql("REVOKE CREATE ON SCHEMA public FROM PUBLIC", dbname=dbname)
        if t.sql("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):  # optional, says the guide
            t.sql("CREATE EXTENSION IF NOT EXISTS vector", dbname=dbname)

    def central(self) -> dict[str, Any]:
        t = self.team
        t.secret["owner"] = secrets.token_urlsafe(24)
        t.sql(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE PASSWORD {}").format(
            sql.Identifier(self.n.owner), sql.Literal(t.secret["owner"])))
        self.database(self.n.db)
        self.admin = t.env("admin", MCP_MEMORY_DSN=t.direct(self.n.owner), MCP_MEMORY_PASSWORD=t.secret["owner"])
        t.cli(self.admin, "db", "migrate")
        status = t.cli_json(self.admin, "db", "status", "--json")
        return {"schema_version": status.get("current") or status.get("schema_version") or status}

    # -- section 3 -------------------------------------------------------------------------------
    def create_tokens(self) -> dict[str, Any]:
        t, n = self.team, self.n
        for name in HOSTS:
            self.tokens[name] = t.cli_json(self.admin, "token", "create", "--name", getattr(n, name),
                                           "--project", PROJECT, "--json")
        self.tokens["archiver"] = t.cli_json(self.admin, "token", "create", "--name", n.archiver, "--archiver",
                                             "--json")
        self.tokens["reviewer"] = t.cli_json(self.admin, "token", "create", "--name", n.reviewer, "--project",
                                             PROJECT, "--read-only", "--json")
        self.tokens["rest_gw"] = t.cli_json(self.admin, "token", "gateway", "--name", n.rest_gw, "--json")
        listed = t.cli_json(self.admin, "token", "list", "--json")["tokens"]
        roles = sorted(str(r.get("role") or r.get("name")) for r in listed)
        for key in (*HOSTS, "archiver", "reviewer"):
            check(self.tokens[key]["role"] in roles, f"token list lacks {self.tokens[key]['role']}: {roles}")
            check(self.tokens[key]["dsn"] == t.direct(self.tokens[key]["role"]),
                  f"printed DSN {self.tokens[key]['dsn']} is not the guide's form {t.direct(self.tokens[key]['role'])}")
        return {"tokens": roles}

    # -- install/pgbouncer/README.md -------------------------------------------------------------
    def pgbouncer(self, binary: str) -> dict[str, Any]:
        t, n = self.team, self.n
        pool = t.cli_json(self.admin, "token", "gateway", "--name", n.pool, "--json")  # step 1
        # step 2, as a superuser; the lookup login's name carries the drill's suffix (roles are the cluster's)
        t.sql((INSTALL / "pgbouncer" / "auth_query.sql").read_text().replace("mcp_pgbouncer", n.lookup),
              dbname=n.db)
        t.secret["lookup"] = secrets.token_urlsafe(24)
        t.sql(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(n.lookup), sql.Literal(t.secret["lookup"])))
        folder = t.work / "pgbouncer"
        folder.mkdir(mode=0o755)
        userlist = folder / "userlist.txt"  # step 3: both passwords, readable by PgBouncer only
        userlist.write_text(f'"{n.lookup}" "{t.secret["lookup"]}"\n"{pool["role"]}" "{pool["password"]}"\n')
        userlist.chmod(0o600)
        self.bouncer_port = free_port()
        ini = folder / "pgbouncer.ini"
        ini.write_text(self.edited_ini(userlist, pool["role"]))
        args = [binary, str(ini)]
        if os.geteuid() == 0:  # PgBouncer does not run as root
            owner = pwd.getpwnam("postgres")
            for path in (folder, userlist, ini):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            args[1:1] = ["-u", "postgres"]
        t.start("pgbouncer", args)
        t.wait_port("pgbouncer", self.bouncer_port)
        return {"port": self.bouncer_port, "gateway": pool["role"]}

    def edited_ini(self, userlist: Path, pool: str) -> str:
        """The shipped pgbouncer.ini with the operator's edits: `host=`, the addresses and files, and a
        max_client_conn this drill's file descriptor limit can hold."""
        target = self.team.target
        text = (INSTALL / "pgbouncer" / "pgbouncer.ini").read_text()
        edits = {r"^mcp_memory = .*$": f"{self.n.db} = host={target.get('host') or '127.0.0.1'} "
                                         f"port={target.get('port') or 5432} dbname={self.n.db} user={pool}",
                 r"^listen_addr = .*$": "listen_addr = 127.0.0.1",
                 r"^listen_port = .*$": f"listen_port = {self.bouncer_port}\nunix_socket_dir =",
                 r"^auth_file = .*$": f"auth_file = {userlist}",
                 r"^auth_user = .*$": f"auth_user = {self.n.lookup}",
                 r"^max_client_conn = .*$": "max_client_conn = 200"}
        for pattern, line in edits.items():
            text, count = re.subn(pattern, line, text, flags=re.M)
            check(count == 1, f"install/pgbouncer/pgbouncer.ini has no line {pattern}")
        return text

    def pooled_dsn(self, role: str) -> str:
        return f"postgresql://{role}@127.0.0.1:{self.bouncer_port}/{self.n.db}"

    # -- sections 4 and 6: the hosts -------------------------------------------------------------
    def install_hosts(self) -> dict[str, Any]:
        t = self.team
        done = {}
        for name in HOSTS:
            token = self.tokens[name]
            out = t.run([str(INSTALL / "install.sh"), "--no-install", "--dsn", self.pooled_dsn(token["role"]),
                         "--pgbouncer", "--direct-dsn", token["dsn"], "--token-stdin", "--no-agents"],
                        env=t.env(name), stdin=token["token"] + "\n").stdout
            check(f"logged in as {token['role']}" in out, f"install.sh on {name} did not log in: {out[-600:]}")
            config = (t.home(name) / ".config" / "mcp-memory" / "config.toml").read_text()
            for key in ("pgbouncer = true", "gateway = true", f'direct_dsn = "{token["dsn"]}"'):
                check(key in config, f"{name}'s config.toml lacks {key}: {config}")
            done[name] = "logged in through the tier and directly"
        return done

    # -- section 5: the archiver and its standby -------------------------------------------------
    def archivers(self) -> dict[str, Any]:
        t = self.team
        t.run(["git", "init", "--bare", "-b", "main", str(self.remote)])
        for name in ARCHIVERS:
            self.write_archiver_files(name, self.tokens["archiver"]["token"])
        self.start_archiver("archiver")
        self.wait_archivers(leader=True, standbys=0)
        self.start_archiver("standby")
        state = self.wait_archivers(leader=True, standbys=1)
        return {"leader": state["active_archiver"]["worker"], "standbys": len(state["standbys"])}

    def write_archiver_files(self, name: str, token: str) -> None:
        """/etc/mcp-memory/config.toml and archive.env of the guide's table, in this host's folder."""
        etc = self.team.home(name) / "etc"
        etc.mkdir(mode=0o750, exist_ok=True)
        role = self.tokens["archiver"]["role"]
        (etc / "config.toml").write_text(
            f'[database]\ndsn = "{self.pooled_dsn(role)}"\npgbouncer = true\ngateway = true\n'
            f'direct_dsn = "{self.tokens["archiver"]["dsn"]}"\n\n'
            f'[archive]\nrepo = "{self.team.home(name) / "archive"}"\nremote = "{self.remote}"\n')
        env_file = etc / "archive.env"
        env_file.write_text(f"MCP_MEMORY_PASSWORD={token}\n")
        env_file.chmod(0o640)

    def archiver_env(self, name: str) -> dict[str, str]:
        """The unit's environment: MCP_MEMORY_CONFIG and the EnvironmentFile archive.env."""
        etc = self.team.home(name) / "etc"
        pairs = dict(line.split("=", 1) for line in (etc / "archive.env").read_text().splitlines() if "=" in line)
        return self.team.env(name, MCP_MEMORY_CONFIG=str(etc / "config.toml"), **pairs)

    def start_archiver(self, name: str) -> None:
        self.team.start(name, [self.team.program, "archive", "--daemon"], env=self.archiver_env(name))

    def archive_status(self) -> dict[str, Any]:
        return dict(self.team.cli_json(self.admin, "archive", "status", "--json"))

    def wait_archivers(self, *, leader: bool, standbys: int, seconds: float = 60) -> dict[str, Any]:
        def ready(state: dict[str, Any]) -> bool:
            return bool(state["active_archiver"]) == leader and len(state["standbys"]) >= standbys
        return self.wait_status(ready, f"an active archiver and {standbys} standby(s)", seconds)

    def wait_status(self, ready: Any, what: str, seconds: float = 90) -> dict[str, Any]:
        import time

        deadline = time.monotonic() + seconds
        state = self.archive_status()
        while not ready(state):
            for name in ARCHIVERS:
                proc = self.team.procs.get(name)
                check(proc is None or proc[0].poll() is None,
                      f"{name} exited ({proc and proc[0].returncode}): {self.team.log_tail(name)}")
            if time.monotonic() > deadline:
                raise DrillFailed(f"archive status never showed {what} in {seconds:.0f}s: {state}")
            time.sleep(0.5)
            state = self.archive_status()
        return state

    def remote_tags(self) -> set[str]:
        out = self.team.run(["git", "--git-dir", str(self.remote), "tag", "-l", "snapshot-*"]).stdout
        return set(out.split())

    # -- section 7: serve-http and the reviewer --------------------------------------------------
    def serve_http(self) -> dict[str, Any]:
        t = self.team
        gw = self.tokens["rest_gw"]
        self.http_port = free_port()
        env = t.env("rest", MCP_MEMORY_PASSWORD=gw["password"])
        t.start("serve-http", [t.program, "--dsn", gw["dsn"], "serve-http", "--host", "127.0.0.1",
                               "--port", str(self.http_port)], env=env)
        t.wait_port("serve-http", self.http_port, seconds=60)
        status, _ = self.rest("GET", "/healthz", None)
        check(status == 200, f"/healthz answered {status}")
        return {"port": self.http_port}

    def rest(self, method: str, path: str, token: str | None, body: bytes | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", method=method, data=body,
                                         headers={"Content-Type": "application/json",
                                                  **({"Authorization": f"Bearer {token}"} if token else {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def find_binary(name: str, pg_bin: Path | None) -> str | None:
    if pg_bin and (pg_bin / name).exists():
        return str(pg_bin / name)
    for candidate in (shutil.which(name), f"/usr/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None

"""The checks of the team drill (scripts/ops/team_drill.py) on the tier TeamSetup built: doctor, live
tail, exports, rotations, restore from the archive and the point-in-time restore checklist
(install/README.md, sections 3, 5, 9)."""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from typing import Any

import psycopg
from mcp_stdio import McpHost
from psycopg import sql
from team_setup import ARCHIVERS, HOSTS, PROJECT, TeamSetup
from team_tier import DrillFailed, check

RETRY_SECONDS = 90


def message(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text, "append_id": f"msg_{uuid.uuid4().hex}"}


def printed_token(text: str) -> str:
    """The token `token rotate` prints once, on its own line after 'shown once:'."""
    found = re.search(r"shown once:\s*\n\s*\n?\s*(\S+)", text)
    if not found:
        raise DrillFailed(f"token rotate printed no token: {text[:300]}")
    return found.group(1)


def eventually(what: str, attempt: Any, seconds: float = RETRY_SECONDS) -> Any:
    """attempt() until it returns without an error (a host's pool reconnecting after a restore)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return attempt()
        except (RuntimeError, TimeoutError, DrillFailed) as exc:
            if time.monotonic() > deadline:
                raise DrillFailed(f"{what} still failing after {seconds:.0f}s: {exc}") from exc
            time.sleep(1)


class TeamChecks:
    def __init__(self, setup: TeamSetup, *, pg_dump: str, pg_restore: str, grace: int) -> None:
        self.setup = setup
        self.team = setup.team
        self.n = setup.n
        self.pg_dump, self.pg_restore, self.grace = pg_dump, pg_restore, grace
        self.mcp: dict[str, McpHost] = {}
        self.sessions: dict[str, str] = {}
        self.early: list[int] = []

    def close(self) -> None:
        for host in self.mcp.values():
            host.close()
        self.mcp.clear()

    def host(self, name: str) -> McpHost:
        """The host's `mcp-memory serve`, as an agent runs it, kept running across the steps."""
        if name not in self.mcp:
            self.mcp[name] = McpHost(self.team.env(name.split("#")[0]),
                                     self.team.work / f"serve-{name.replace('#', '-')}.log")
        return self.mcp[name]

    # -- doctor ----------------------------------------------------------------------------------
    def doctor_everywhere(self) -> dict[str, Any]:
        envs = {**{h: self.team.env(h) for h in HOSTS}, **{a: self.setup.archiver_env(a) for a in ARCHIVERS}}
        seen, bad = {}, []
        for name, env in envs.items():
            done = self.team.cli(env, "doctor", "--json", ok=False)
            import json

            checks = json.loads(done.stdout)["checks"] if done.stdout.strip().startswith("{") else []
            failing = [f"{c['name']}: {c['detail']}" for c in checks if not c["ok"]]
            if done.returncode != 0 or failing or not checks:
                bad.append(f"{name} (exit {done.returncode}): {failing or done.stderr.strip()[-300:]}")
            seen[name] = f"{len(checks)} checks ok"
        check(not bad, "doctor not green: " + "; ".join(bad))
        return seen

    # -- live tail -------------------------------------------------------------------------------
    def live_tail(self) -> dict[str, Any]:
        a, b = self.host("host_a"), self.host("host_b")
        sid = a.call("create_session", {"project_id": PROJECT, "meta": {"title": "team drill, host A"}})["session_id"]
        self.sessions["host_a"] = sid
        a.call("append_message", {"session_id": sid, "message": message("user", "first turn from host A")})
        got: dict[str, Any] = {}

        def tail() -> None:
            got.update(b.call("read_session", {"session_id": sid, "after_seq": 1, "wait_seconds": 30}))
            got["at"] = time.monotonic()

        waiter = threading.Thread(target=tail)
        waiter.start()
        time.sleep(1.0)  # host B is waiting now
        sent = time.monotonic()
        seq = a.call("append_message", {"session_id": sid, "message": message("assistant", "second turn")})["seq"]
        waiter.join(timeout=40)
        check(got.get("messages"), f"host B's waiting read_session saw nothing: {got}")
        check([m["seq"] for m in got["messages"]] == [seq], f"host B saw seqs {[m['seq'] for m in got['messages']]}")
        woke = got["at"] - sent
        check(woke < 10, f"host B woke {woke:.1f}s after the append (a poll, not the tail)")
        sid_b = b.call("create_session", {"project_id": PROJECT, "meta": {"title": "team drill, host B"}})["session_id"]
        self.sessions["host_b"] = sid_b
        b.call("append_messages", {"session_id": sid_b, "messages": [message("user", "B one"),
                                                                     message("assistant", "B two")]})
        seen = a.call("read_session", {"session_id": sid_b})["messages"]
        check(len(seen) == 2, f"host A reads {len(seen)} of host B's 2 messages")
        return {"woke_after_seconds": round(woke, 3), "session_a": sid, "session_b": sid_b}

    # -- exports ---------------------------------------------------------------------------------
    def snapshot(self, host: str, session: str, note: str) -> int:
        return int(self.host(host).call("create_snapshot", {"session_id": session, "commit_msg": note})["snapshot_id"])

    def wait_exported(self, snapshot_ids: list[int], seconds: float = RETRY_SECONDS) -> dict[str, Any]:
        want = {f"snapshot-{i}" for i in snapshot_ids}
        deadline = time.monotonic() + seconds
        while not want <= self.setup.remote_tags():
            state = self.setup.archive_status()
            check(not state["failed"], f"export failed: {state['failed']}")
            if time.monotonic() > deadline:
                raise DrillFailed(f"{sorted(want - self.setup.remote_tags())} not in the archive after "
                                  f"{seconds:.0f}s: {state['jobs']}, oldest {state['oldest_pending']}")
            time.sleep(0.5)
        return self.setup.archive_status()

    def snapshots_exported(self) -> dict[str, Any]:
        ids = [self.snapshot(h, self.sessions[h], f"drill: {h}") for h in HOSTS]
        started = time.monotonic()
        state = self.wait_exported(ids)
        reviewer = self.setup.tokens["reviewer"]["token"]
        status, body = self.setup.rest("GET", f"/v1/sessions?project_id={PROJECT}", reviewer)
        check(status == 200, f"reviewer's GET /v1/sessions answered {status}: {body[:200]!r}")
        check(all(s.encode() in body for s in self.sessions.values()), "the reviewer does not see both sessions")
        status, body = self.setup.rest("POST", "/v1/sessions", reviewer, b'{"project_id": "web"}')
        check(status == 403, f"the read-only reviewer's POST /v1/sessions answered {status}")
        return {"snapshots": ids, "exported_within_seconds": round(time.monotonic() - started, 1),
                "jobs": state["jobs"], "reviewer": "reads both sessions, a write is 403"}

    # -- rotations (section 3; section 5 for the archiver) ---------------------------------------
    def rotate(self, name: str) -> str:
        out = self.team.cli(self.setup.admin, "token", "rotate", name, "--grace", f"{self.grace}s").stdout
        check("mcp-memory login" in out and "archive.env" in out, f"token rotate printed no steps: {out}")
        return printed_token(out)

    def rotate_host(self) -> dict[str, Any]:
        role = self.setup.tokens["host_a"]["role"]
        old = self.setup.tokens["host_a"]["token"]
        new = self.rotate(role)
        rotated_at = time.monotonic()
        # the printed step: `mcp-memory login` with the host's DSN as it is, the new token in
        self.team.cli(self.team.env("host_a"), "login", "--dsn", self.setup.pooled_dsn(role), "--token-stdin",
                      stdin=new + "\n")
        time.sleep(max(0.0, self.grace + 2 - (time.monotonic() - rotated_at)))  # the old token is gone now
        refused = self.refused(self.setup.pooled_dsn(role), old)
        check(refused, "the old token still logs in through PgBouncer after the grace")
        running = self.host("host_a")  # started before the rotation, never restarted
        eventually("host A's running server after the rotation", lambda: running.call(
            "append_message", {"session_id": self.sessions["host_a"], "message": message("user", "after rotation")}))
        fresh = self.host("host_a#2")  # an agent's next session: a new `mcp-memory serve`
        got: dict[str, Any] = {}
        sid = self.sessions["host_b"]
        waiter = threading.Thread(target=lambda: got.update(
            fresh.call("read_session", {"session_id": sid, "after_seq": 2, "wait_seconds": 30})))
        waiter.start()
        time.sleep(1.0)
        self.host("host_b").call("append_message", {"session_id": sid, "message": message("user", "B three")})
        waiter.join(timeout=40)
        check([m["seq"] for m in got.get("messages", [])] == [3], f"host A's live tail after rotation: {got}")
        self.setup.tokens["host_a"]["token"] = new
        return {"old_token": "refused after the grace", "running_server": "appends",
                "new_server": "live tail woke", "doctor": self.doctor_everywhere()["host_a"]}

    def refused(self, dsn: str, token: str) -> bool:
        try:
            with psycopg.connect(dsn, password=token, connect_timeout=10, prepare_threshold=None):
                return False
        except psycopg.OperationalError:
            return True

    def rotate_archiver(self) -> dict[str, Any]:
        role = self.setup.tokens["archiver"]["role"]
        new = self.rotate(role)
        rotated_at = time.monotonic()
        for name in ARCHIVERS:  # write the new token into archive.env and restart the service
            self.setup.write_archiver_files(name, new)
            self.team.stop(name)
            self.setup.start_archiver(name)
        self.setup.wait_archivers(leader=True, standbys=1)
        time.sleep(max(0.0, self.grace + 2 - (time.monotonic() - rotated_at)))
        self.setup.tokens["archiver"]["token"] = new
        sid = self.snapshot("host_b", self.sessions["host_b"], "drill: after the archiver's rotation")
        state = self.wait_exported([sid])
        state = self.setup.wait_archivers(leader=True, standbys=1)
        return {"snapshot_exported": sid, "leader": state["active_archiver"]["worker"],
                "standbys": len(state["standbys"]), "jobs": state["jobs"]}

    # -- restore from the archive (README, Git archive and restore) ------------------------------
    def authors(self, dbname: str) -> list[tuple[Any, ...]]:
        return self.team.sql("SELECT session_id, seq, append_id, written_by FROM messages "
                             "ORDER BY session_id, seq", dbname=dbname)

    def archive_everything(self) -> list[int]:
        ids = [self.snapshot(h, self.sessions[h], f"drill: {h} before restore") for h in HOSTS]
        self.wait_exported(ids)
        return ids

    def restore_from_archive(self) -> dict[str, Any]:
        self.archive_everything()
        self.setup.database(self.n.restored)
        target = self.team.direct(self.n.owner, self.n.restored)
        report = self.team.cli_json(self.setup.admin, "--dsn", target, "restore", "--from-archive",
                                    str(self.setup.remote), "--json")
        before, after = self.authors(self.n.db), self.authors(self.n.restored)
        check(len(before) == len(after), f"restored {len(after)} of {len(before)} messages")
        moved = [(b[0], b[1], f"{b[3]} -> {a[3]}") for b, a in zip(before, after, strict=True) if b != a]
        check(not moved, f"authors not kept for {len(moved)} of {len(before)} messages, e.g. {moved[:2]}")
        state = self.team.cli_json(self.setup.admin, "--dsn", target, "archive", "status", "--json")
        lag = state["not_archived"]
        check(lag["sessions"] == 0 and lag["lag_seconds"] == 0,
              f"the restored database reports work not archived: {lag} (jobs {state['jobs']})")
        return {"messages": len(after), "authors": sorted({str(r[3]) for r in after}),
                "not_archived": lag, "restore": {k: v for k, v in report.items() if k != "sessions"}}

    # -- point-in-time restore (section 9) --------------------------------------------------------
    def counts(self) -> dict[str, int]:
        rows = self.team.sql("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages), "
                             "(SELECT count(*) FROM snapshots)", dbname=self.n.db)[0]
        return dict(zip(("sessions", "messages", "snapshots"), map(int, rows), strict=True))

    def pitr(self) -> dict[str, Any]:
        """Section 9 up to step 3, then snapshots made before step 4: each must fail with [conflict]."""
        t, n = self.team, self.n
        dump = t.work / "target.dump"
        t.run([self.pg_dump, "-Fc", "-f", str(dump), "-d", t.superuser(n.db)])  # the target time
        at_target = self.counts()
        # after the target: host A two more turns, host B one and a new session, all exported
        a, b = self.host("host_a"), self.host("host_b")
        a.call("append_messages", {"session_id": self.sessions["host_a"],
                                   "messages": [message("user", "after target"), message("assistant", "lost")]})
        b.call("append_message", {"session_id": self.sessions["host_b"], "message": message("user", "after target")})
        late = b.call("create_session", {"project_id": PROJECT, "meta": {"title": "after the target"}})["session_id"]
        b.call("append_message", {"session_id": late, "message": message("user", "lost by the restore")})
        self.wait_exported([self.snapshot("host_a", self.sessions["host_a"], "drill: A after target"),
                            self.snapshot("host_b", self.sessions["host_b"], "drill: B after target"),
                            self.snapshot("host_b", late, "drill: after target, new session")])
        self.replace_database(dump)
        check(self.counts() == at_target, f"after the restore {self.counts()}, at the target {at_target}")
        t.cli(self.setup.admin, "db", "migrate")  # checklist 1
        listed = {r["role"] for r in t.cli_json(self.setup.admin, "token", "list", "--json")["tokens"]}  # 2
        check({self.setup.tokens[h]["role"] for h in HOSTS} <= listed, f"token list after the restore: {listed}")
        # 3: hosts need nothing. Host A writes again what it wrote after the target (two turns), so its
        # snapshot repeats the id, session and seq of the archive's tag; host B's (three turns) another seq
        eventually("host A's running server after the restore", lambda: a.call(
            "append_messages", {"session_id": self.sessions["host_a"],
                                "messages": [message("user", "after restore"), message("assistant", "again")]}))
        eventually("host B's running server after the restore", lambda: b.call(
            "append_messages", {"session_id": self.sessions["host_b"],
                                "messages": [message("user", "after restore"), message("assistant", "B again")]}))
        self.early = [self.snapshot("host_a", self.sessions["host_a"], "drill: A before the sequence step"),
                      self.snapshot("host_b", self.sessions["host_b"], "drill: B before the sequence step")]
        jobs = self.wait_jobs(self.early)
        wrong = {sid: job for sid, job in jobs.items() if job[0] != "failed" or "went back" not in (job[1] or "")}
        check(not wrong, "a snapshot made before the sequence step was not refused with [conflict] (the guide: "
              f"'the archiver does not skip it'): {wrong}; the archive's tags: {self.tag_subjects(self.early)}")
        return {"at_target": at_target, "refused": {k: v[1][:120] for k, v in jobs.items()}}

    def wait_jobs(self, snapshot_ids: list[int], seconds: float = 60) -> dict[int, tuple[str, str | None]]:
        """The export job of each snapshot once it is done or failed (as the superuser: observation)."""
        deadline = time.monotonic() + seconds
        while True:
            rows = self.team.sql("SELECT snapshot_id, status, last_error FROM export_jobs WHERE snapshot_id = ANY(%s)",
                                 (snapshot_ids,), dbname=self.n.db)
            jobs = {int(r[0]): (str(r[1]), r[2]) for r in rows}
            if all(jobs.get(i, ("",))[0] in ("done", "failed") for i in snapshot_ids) or time.monotonic() > deadline:
                return jobs
            time.sleep(0.5)

    def tag_subjects(self, snapshot_ids: list[int]) -> dict[int, str]:
        out = {}
        for i in snapshot_ids:
            done = subprocess.run(["git", "--git-dir", str(self.setup.remote), "tag", "-l", "--format=%(subject)",
                                   f"snapshot-{i}"], capture_output=True, text=True, timeout=30)
            out[i] = done.stdout.strip()
        return out

    def pitr_carries_on(self) -> dict[str, Any]:
        """Section 9, step 4: the sequence moved past the archive's tags, `archive retry --failed`, and
        the archive carries on: the refused snapshots and new ones exported, nothing failed."""
        t = self.team
        self.sequence_step()
        verify = t.cli(self.setup.archiver_env(self.leader()), "archive", "verify", ok=False)
        retried = t.cli(self.setup.admin, "archive", "retry", "--failed").stdout.strip()
        later = [self.snapshot("host_b", self.sessions["host_b"], "drill: B after the sequence step"),
                 self.snapshot("host_a#2", self.sessions["host_a"], "drill: A after the sequence step")]
        jobs = self.wait_jobs([*self.early, *later], seconds=90)
        state = self.setup.archive_status()
        not_done = {i: job for i, job in jobs.items() if job[0] != "done"}
        check(not not_done and not state["failed"],
              f"after `archive retry --failed` ({retried!r}) jobs not exported: {not_done}; failed: {state['failed']}")
        subjects = self.tag_subjects(later)
        check(all(subjects.values()), f"new snapshots not tagged in the archive: {subjects}")
        return {"retry": retried, "exported_after": later, "verify_exit": verify.returncode, "jobs": state["jobs"]}

    def leader(self) -> str:
        worker = str(self.setup.archive_status()["active_archiver"]["worker"])
        return "standby" if "standby" in worker else "archiver"

    def replace_database(self, dump: Any) -> None:
        """The replacement server: the database as it was at the target, in the old one's place."""
        t, n = self.team, self.n
        t.sql(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(n.db)))
        t.sql(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(n.db), sql.Identifier(n.owner)))
        t.run([self.pg_restore, "--exit-on-error", "-d", t.superuser(n.db), str(dump)])

    def sequence_step(self) -> None:
        """Section 9, step 4: the snapshot ids move past the archive's highest tag."""
        tags = [int(tag.split("-", 1)[1]) for tag in self.setup.remote_tags()]
        top = max(tags, default=1)
        with psycopg.connect(self.team.direct(self.n.owner), password=self.team.secret["owner"],
                             autocommit=True, connect_timeout=10) as conn:  # as the owner, as the guide's psql
            conn.execute("SELECT setval(pg_get_serial_sequence('snapshots', 'snapshot_id'), "
                         "greatest(%s, (SELECT coalesce(max(snapshot_id), 1) FROM snapshots)))", (top,))

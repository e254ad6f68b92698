"""Builds project_qa.json: long multi-session engineering conversations in mixed English and
Chinese, with dates, for scripts/bench/search_quality.py; written for this repository and generated
deterministically (seeded).

Each conversation is one team's project worked on with an agent over twelve sessions spread over
about five months. A session is English or Chinese (some English sessions carry Chinese lines and
the other way round); turns mention dates ("on 2025-03-14", "3月14日"). Storylines:

- single-hop: a fact stated once (a limit, an owner, a port), asked in other words;
- multi-hop: a component gets a code name in one session ("the invoice service is Ledgerly from
  now on"); a later session speaks only of the code name ("Ledgerly times out on PDF export").
  The question names the component; only the later turn answers (`answer_turns`), both are
  evidence;
- temporal: a recurring topic (the flaky checkout tests) comes back in three months with three
  different causes; the question is asked at a given time (`asked_at`) and names a relative period
  ("last month", "上个月", "last week", "上周"), so only the turn in that period answers;
- anchored: an event (the database migration) splits the history; a topic is discussed before and
  after it in the same words; "before the migration, how …" is answered by the turn before, "after
  the migration …" by the turn after.

Run: python scripts/bench/data/make_project_qa.py
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

SEED = 20261204
CONVERSATIONS = 16
SESSIONS = 12
TURNS = 24  # per session, user and assistant alternating

COMPONENTS = [  # (english, chinese)
    ("invoice service", "发票服务"), ("payment retry worker", "支付重试任务"), ("search indexer", "搜索索引器"),
    ("notification gateway", "通知网关"), ("image resizer", "图片缩放服务"), ("report exporter", "报表导出服务"),
    ("login proxy", "登录代理"), ("inventory sync job", "库存同步任务"),
]
CODE_NAMES = ["Ledgerly", "Hermes", "Kestrel", "Marlin", "Obsidian", "Quokka", "Tamarind", "Vesper", "Wren",
              "Zephyr", "Juniper", "Halcyon", "Basalt", "Cobalt", "Fennel", "Saffron"]
PROBLEMS = [  # (english, chinese)
    ("times out on every PDF export above 40 pages", "导出超过 40 页的 PDF 时每次都超时"),
    ("leaks memory until the pod is OOM-killed at 2 GB", "内存一直涨，到 2 GB 就被 OOM kill"),
    ("drops every message with a non-ASCII subject line", "遇到非 ASCII 标题的消息就直接丢弃"),
    ("double-charges when the bank answers after 30 seconds", "银行 30 秒后才响应时会重复扣款"),
    ("deadlocks on the nightly batch at 03:00", "每晚 03:00 的批处理会死锁"),
    ("returns stale prices for up to an hour", "返回的价格最多会滞后一个小时"),
]
FACTS = [  # (english statement, english question, chinese statement, chinese question, slot values)
    ("The staging database rotates its password every {v} days.", "How often is the staging DB password changed?",
     "预发布数据库的密码每 {v} 天轮换一次。", "预发布库的密码多久换一次？", ["7", "14", "30", "45"]),
    ("Uploads are capped at {v} MB per file by the edge proxy.", "What is the maximum size of an uploaded file?",
     "边缘代理把每个上传文件限制在 {v} MB。", "上传文件最大能有多大？", ["25", "50", "100", "250"]),
    ("{v} owns the on-call rotation for the billing alerts.", "Who is responsible for billing alert on-call?",
     "账单告警的值班轮换由 {v} 负责。", "账单告警谁来值班？", ["Amara", "Bogdan", "Chiara", "Dmitri"]),
    ("The metrics exporter listens on port {v} inside the cluster.", "Which port does the metrics exporter use?",
     "指标导出器在集群内监听 {v} 端口。", "指标导出器用的是哪个端口？", ["9102", "9310", "9464", "9797"]),
    ("Feature flags are cached for {v} seconds before a refresh.", "How long are feature flags kept before reloading?",
     "功能开关缓存 {v} 秒后才刷新。", "功能开关多久重新加载一次？", ["30", "60", "120", "300"]),
]
CAUSES = [  # causes of the recurring flaky tests: (english, chinese)
    ("a shared fixture reused the same order id", "共享 fixture 复用了同一个订单号"),
    ("the test clock crossed midnight in UTC", "测试时钟在 UTC 跨过了午夜"),
    ("a race between the cart cache and the stock reservation", "购物车缓存和库存预留之间有竞态"),
    ("the sandbox payment provider rate-limited us", "沙箱支付服务商对我们限流了"),
    ("a missing await in the coupon validator", "优惠券校验里少了一个 await"),
]
TOPICS = [  # (english, chinese) of the recurring topic
    ("flaky checkout tests", "结账测试不稳定"), ("slow nightly build", "夜间构建太慢"),
    ("failing contract tests", "契约测试失败"),
]
MIGRATIONS = [  # (english event, chinese event, english noun, chinese noun)
    ("We finished the migration from MySQL to PostgreSQL 16 tonight; MySQL is read-only now.",
     "今晚完成了从 MySQL 到 PostgreSQL 16 的迁移，MySQL 已经只读。", "migration", "迁移"),
]
BEFORE_AFTER = [  # (topic question en, zh, before en, before zh, after en, after zh)
    ("how did we store user sessions", "用户会话存在哪里",
     "User sessions are stored in Memcached with a 12 hour expiry.", "用户会话存放在 Memcached 里，12 小时过期。",
     "User sessions are stored in a PostgreSQL unlogged table now, expiry 24 hours.",
     "用户会话现在存放在 PostgreSQL 的 unlogged 表里，24 小时过期。"),
    ("how were backups taken", "备份是怎么做的",
     "Backups are taken with mysqldump at 01:00 and copied to the NAS.", "备份用 mysqldump 在 01:00 做，然后拷到 NAS。",
     "Backups are taken with pgBackRest every hour and shipped to object storage.",
     "备份用 pgBackRest 每小时做一次，推到对象存储。"),
    ("what did the full-text search run on", "全文搜索用的是什么",
     "Full-text search runs on the MySQL FULLTEXT index for now.", "全文搜索目前跑在 MySQL 的 FULLTEXT 索引上。",
     "Full-text search runs on tsvector columns with a GIN index now.",
     "全文搜索现在跑在 tsvector 列和 GIN 索引上。"),
]
FILLER = {
    "en": ["Can you look at the CI logs from this morning?", "The dashboard for {c} needs a latency panel.",
           "Let's rename the config key to something clearer.", "I merged the lint fixes into main.",
           "We should write a runbook for {c} before the holidays.", "The tests for {c} pass locally for me.",
           "Please bump the base image; it is two patch releases behind.", "Who reviews the {c} changes this week?",
           "The {t} came up again in standup, nobody had time to look.", "Our error budget is fine this sprint.",
           "Add a retry with jitter around the HTTP client.", "The database migration plan needs a rollback step.",
           "Sessions and backups are on the agenda for Thursday.", "Search results for admins look odd.",
           "Write down the port numbers in the wiki page.", "Upload errors went up after the proxy change."],
    "zh": ["帮我看一下今天早上的 CI 日志。", "{c}的监控面板需要加一个延迟图。", "把这个配置项改个更清楚的名字吧。",
           "lint 修复已经合并到 main 了。", "假期前给{c}写一份运维手册。", "{c}的测试在我本地是通过的。",
           "基础镜像落后两个补丁版本了，升级一下。", "这周谁来评审{c}的改动？", "站会上又提到了{t}，没人有空看。",
           "这个迭代的错误预算还够。", "给 HTTP 客户端加上带抖动的重试。", "数据库迁移方案里需要一个回滚步骤。",
           "周四讨论会话和备份的事情。", "管理员看到的搜索结果有点怪。", "把端口号记到 wiki 页面上。",
           "代理改动之后上传错误变多了。"],
}
REPLIES = {"en": ["Noted.", "Done, see the diff.", "I'll check and report back.", "Agreed, let's do that.",
                  "Here is a summary of the change.", "That matches what I saw in the logs."],
           "zh": ["收到。", "改好了，请看 diff。", "我查一下再回复。", "同意，就这么办。", "下面是改动的小结。",
                  "和我在日志里看到的一致。"]}


def stamp(day: datetime, turn: int) -> str:
    return (day + timedelta(minutes=3 * turn)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Conversation:
    """One project's history and its questions; `put` places a storyline turn in a session."""

    def __init__(self, index: int, rng: random.Random) -> None:
        self.cid = f"p{index:02d}"
        self.rng = rng
        self.main = "en" if index % 2 == 0 else "zh"
        start = datetime(2025, 1, 6, 9, 0, tzinfo=UTC) + timedelta(days=rng.randrange(0, 20))
        self.days, day = [], start
        for _ in range(SESSIONS):
            self.days.append(day)
            day += timedelta(days=rng.randrange(9, 16), hours=rng.randrange(0, 5))
        self.langs = [self.main if rng.random() < 0.65 else ("zh" if self.main == "en" else "en")
                      for _ in range(SESSIONS)]
        self.slots: list[dict[int, str]] = [{} for _ in range(SESSIONS)]
        self.questions: list[dict] = []

    def put(self, session: int, text_by_lang: tuple[str, str]) -> str:
        """Puts the storyline text (in the session's language) at a free user turn; returns its id."""
        free = [t for t in range(0, TURNS, 2) if t not in self.slots[session]]
        turn = self.rng.choice(free[1:-1] or free)
        self.slots[session][turn] = text_by_lang[0] if self.langs[session] == "en" else text_by_lang[1]
        return self.turn_id(session, turn)

    def turn_id(self, session: int, turn: int) -> str:
        return f"{self.cid}s{session + 1}t{turn + 1}"

    def ask(self, category: str, question: tuple[str, str], lang: str, answer: str, evidence: list[str],
            asked_at: datetime | None = None) -> None:
        q = {"id": f"{self.cid}q{len(self.questions) + 1}", "question": question[0] if lang == "en" else question[1],
             "project": f"proj-{self.cid}", "category": category, "conversation": self.cid,
             "answer_turns": [answer], "evidence_turns": evidence}
        if asked_at is not None:
            q["asked_at"] = asked_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.questions.append(q)

    def build(self) -> dict:
        sessions = []
        for s in range(SESSIONS):
            lang, turns = self.langs[s], []
            for t in range(TURNS):
                if t in self.slots[s]:
                    content = self.slots[s][t]
                elif t % 2:
                    content = self.rng.choice(REPLIES[lang])
                else:
                    other = self.rng.choice(("en", "zh")) if self.rng.random() < 0.15 else lang
                    comp = self.rng.choice(COMPONENTS)
                    content = self.rng.choice(FILLER[other]).format(
                        c=comp[0] if other == "en" else comp[1], t=self.rng.choice(TOPICS)[0 if other == "en" else 1])
                turns.append({"id": self.turn_id(s, t), "role": "assistant" if t % 2 else "user",
                              "content": content, "date": stamp(self.days[s], t)})
            sessions.append({"id": f"{self.cid}s{s + 1}", "title": f"{self.cid} session {s + 1}", "turns": turns})
        return {"id": self.cid, "project": f"proj-{self.cid}", "agent": "codex", "sessions": sessions}


def multi_hop(conv: Conversation, components: list[tuple[str, str]], names: list[str]) -> None:
    for (en, zh), name in zip(components, names, strict=True):
        problem = conv.rng.choice(PROBLEMS)
        first = conv.rng.randrange(0, 5)
        later = conv.rng.randrange(first + 2, SESSIONS)
        named = conv.put(first, (f"Let's call the new {en} {name} from now on, it replaces the old cron script.",
                                 f"新的{zh}以后就叫 {name}，用来替换原来的 cron 脚本。"))
        answer = conv.put(later, (f"{name} {problem[0]} since {conv.days[later].date().isoformat()}.",
                                  f"{name} 从 {conv.days[later].month}月{conv.days[later].day}日起{problem[1]}。"))
        conv.put(conv.rng.randrange(0, SESSIONS), (f"The {en} deploy pipeline is green again.",
                                                  f"{zh}的部署流水线又恢复正常了。"))
        lang = conv.rng.choice(("en", "zh"))
        conv.ask("multi-hop", (f"What problem did the {en} have?", f"{zh}出了什么问题？"), lang, answer, [answer, named])


def single_hop(conv: Conversation, facts: list[tuple]) -> None:
    for en, q_en, zh, q_zh, values in facts:
        value = conv.rng.choice(values)
        answer = conv.put(conv.rng.randrange(0, SESSIONS), (en.format(v=value), zh.format(v=value)))
        conv.ask("single-hop", (q_en, q_zh), conv.rng.choice(("en", "zh")), answer, [answer])


def temporal(conv: Conversation, topic: tuple[str, str]) -> None:
    """Three mentions of one topic in three different months; questions name last month / last week."""
    causes = conv.rng.sample(CAUSES, 3)
    chosen = sorted(conv.rng.sample(range(SESSIONS), 3))
    while len({conv.days[s].month for s in chosen}) < 3 or any(b - a < 3 for a, b in pairwise(chosen)):
        chosen = sorted(conv.rng.sample(range(SESSIONS), 3))
    ids = [conv.put(s, (f"The {topic[0]} again: this time {c[0]}.", f"{topic[1]}又出现了：这次是因为{c[1]}。"))
           for s, c in zip(chosen, causes, strict=True)]
    target = conv.rng.randrange(0, 3)
    day = conv.days[chosen[target]]
    next_month = (day.replace(day=1) + timedelta(days=32)).replace(day=conv.rng.randrange(3, 25))
    conv.ask("temporal", (f"What caused the {topic[0]} last month?", f"上个月{topic[1]}是什么原因？"),
             conv.rng.choice(("en", "zh")), ids[target], [ids[target]], asked_at=next_month)
    target = conv.rng.randrange(0, 3)
    day = conv.days[chosen[target]]
    next_week = day + timedelta(days=7 - day.weekday() + conv.rng.randrange(0, 5))
    conv.ask("temporal", (f"What was wrong with the {topic[0]} last week?", f"上周{topic[1]}是怎么回事？"),
             conv.rng.choice(("en", "zh")), ids[target], [ids[target]], asked_at=next_week)


def anchored(conv: Conversation, pairs: list[tuple]) -> None:
    event_en, event_zh, noun_en, noun_zh = MIGRATIONS[0]
    event = conv.rng.randrange(4, SESSIONS - 4)
    event_id = conv.put(event, (event_en, event_zh))
    for n, (q_en, q_zh, before_en, before_zh, after_en, after_zh) in enumerate(pairs):
        before = conv.put(conv.rng.randrange(0, event), (before_en, before_zh))
        after = conv.put(conv.rng.randrange(event + 1, SESSIONS), (after_en, after_zh))
        lang = conv.rng.choice(("en", "zh"))
        if n % 2 == 0:
            conv.ask("anchored", (f"Before the {noun_en}, {q_en}?", f"{noun_zh}之前，{q_zh}？"), lang, before,
                     [before, event_id])
        else:
            conv.ask("anchored", (f"After the {noun_en}, {q_en}?", f"{noun_zh}之后，{q_zh}？"), lang, after,
                     [after, event_id])


def build() -> dict:
    rng = random.Random(SEED)
    conversations, questions = [], []
    for index in range(CONVERSATIONS):
        conv = Conversation(index, rng)
        multi_hop(conv, rng.sample(COMPONENTS, 2), rng.sample(CODE_NAMES, 2))
        single_hop(conv, rng.sample(FACTS, 3))
        temporal(conv, rng.choice(TOPICS))
        anchored(conv, rng.sample(BEFORE_AFTER, 2))
        conversations.append(conv.build())
        questions.extend(conv.questions)
    return {"name": "project_qa", "version": 1,
            "description": "Engineering projects over five months, mixed English/Chinese sessions with dates: "
                           "single-hop, multi-hop (code names), temporal (last month / last week, asked_at) and "
                           "anchored (before / after the migration) questions. Generated by make_project_qa.py.",
            "conversations": conversations, "questions": questions}


if __name__ == "__main__":
    out = Path(__file__).with_name("project_qa.json")
    out.write_text(json.dumps(build(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")

"""The built-in secret patterns (redact before anything is stored).

Each rule names what it finds (`[REDACTED:<name>]`). A rule whose regex has a group named `secret`
replaces only that group, so the context a reader needs survives: `password=[REDACTED:password]`,
`postgresql://app:[REDACTED:url_password]@db/x`, `Authorization: Bearer [REDACTED:authorization]`.

Sources for the formats: the providers' own documentation of key prefixes (AWS IAM unique-id
prefixes, GitHub's 2021 token format, GitLab token prefixes, Slack token types, Stripe key prefixes,
Google API keys, RFC 7519 for JWTs, RFC 7468 for PEM, the Telegram Bot API's `<bot id>:<secret>`
tokens, Azure connection strings' `AccountKey=`/`SharedAccessKey=`), and the manuals of the tools
that take a password on their command line or in a file (curl's `-u user:password`, the MySQL and
MariaDB clients' `-pPASSWORD`, netrc's `machine … login … password …`). Unquoted values are matched
without quotes, backslashes or braces, quoted ones up to their closing quote, so a replacement
inside a JSON-encoded string (tool_call arguments) keeps the JSON valid.

Every rule costs time linear in the text, whatever the text (a message is attacker-chosen): no
quantifier over overlapping classes is nested in another, repetitions that may scan far are
possessive (`*+`, `++`: a failed match is never retried with a shorter run) or bounded, and a rule
that must look far ahead (a private key's END line) consumes what it scanned instead of scanning it
again from the next start. tests/unit/test_redaction_timing.py times each rule on adversarial 1 MiB texts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .. import linear_re


@dataclass(frozen=True)
class Rule:
    name: str
    regex: re.Pattern[str]
    # assignment-style rules judge the value, because code assigns variables, not secrets
    check_value: bool = False
    # lower-case substrings of which every match holds one: the regex runs only on text that
    # contains one of them (an `in` test is far cheaper than a regex over every string)
    needles: tuple[str, ...] = ()
    # a regex over the lower-cased text that every match holds (its key word): the rule's regex is
    # then tried only after the key that holds the anchor (security/redact.py, Redactor._matches)
    anchor: re.Pattern[str] | None = None
    # with an anchor: the key around it (`db_password`, `githubToken`) must name a secret (SECRET_KEY)
    # and the regex, matched where the key ends, holds the assignment and the value
    keyed: bool = False

    def may_match(self, lowered: str) -> bool:
        return not self.needles or any(needle in lowered for needle in self.needles)


def _rule(name: str, pattern: str, *, flags: int = 0, check_value: bool = False) -> Rule:
    return Rule(name, linear_re.compile(pattern, flags), check_value)


_B = r"(?<![A-Za-z0-9_\-])"  # a token starts here (not inside a longer word)
_E = r"(?![A-Za-z0-9_\-])"  # and ends here
# one character of an assignment value: no whitespace, quotes, backslashes, brackets or separators,
# and no `&` that starts the next query-string parameter (`token=…&scope=read`)
_VALUE = r"""(?:[^\s"'`\\,;(){}\[\]<>|&]|&(?![A-Za-z_][A-Za-z0-9_.\-]{0,64}+=))"""
_KEY_WORDS = (
    r"passwd|password|passphrase|pass|pwd|secret|secret[_-]?key|client[_-]?secret|api[_-]?key|apikey|"
    r"access[_-]?key|account[_-]?key|storage[_-]?key|shared[_-]?access[_-]?key|master[_-]?key|signing[_-]?key|"
    r"encryption[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|"
    r"session[_-]?token|security[_-]?token|token|credentials?"
)
# a key ending in a key word: `db_password`, `DB.PASSWORD`, and camelCase `dbPassword`,
# `SecretAccessKey`, `githubToken` (the word starts after a separator or with a capital). One way
# to read any key: the prefix is one run that backtracks at most once per character, where a
# repetition of segments (`(?:[A-Za-z0-9]+[_.\-]|…)*`) read `aB_aB_aB_…` in 2^n ways.
SECRET_KEY = linear_re.compile(rf"(?:[A-Za-z0-9_.\-]*(?:[_.\-]|(?<=[A-Za-z0-9])(?=[A-Z])))?"
                        rf"(?i:{_KEY_WORDS}|pgpassword|mysql_pwd)")
KEY_CHARS = "A-Za-z0-9_.\\-"  # what a key is made of (the run around an anchor, Redactor._matches)
# a quoted value runs to its closing quote (a passphrase has spaces; escaped quotes are part of it, as
# in JSON text); an unquoted one to a separator
# (a quote followed by a space or `,:}])` closes the string that holds the assignment: `"token=", "a": …`)
# (an unescaped `"` ends any quoted value: in JSON text a `'…'` value never runs into the next string)
_QUOTED = r"""(?P<quote>["'`])(?![\s,;:}\])])(?P<qsecret>(?:\\[^\n]|(?!(?P=quote))[^\\\n"]){1,4096}+)(?P=quote)"""
# (all of it, or none: `token = cache.get(key)` is a call, not a shorter value)
# (an unquoted value is read whole, at most 4 KiB, and a call's `(` after it is captured rather than
# failing the match, so a text of `token=token=…(` is read once, not once per key word)
_ASSIGNED = rf"(?:{_QUOTED}|(?P<secret>{_VALUE}{{1,4096}}+)(?P<call>\()?)"
# one command-line argument: quoted, or up to a blank (not a pipe or `&&` that starts the next command,
# nor a `$VAR` or `<password>` placeholder)
_ARG = r"""(?:(?P<quote>["'])(?P<qsecret>[^"'$<\n][^"'\n]{0,199}+)(?P=quote)|(?P<secret>[^\s"'\\|;&$<][^\s"'\\]{0,200}+))"""

BUILTIN: tuple[Rule, ...] = (
    # the body may sit in escaped text (`\\n`, `\\\\n` in code); a header with no key body after it (a
    # placeholder, prose about the format) is left alone
    # (the body runs to its END line or, without one, as far as key characters go, in one
    # possessive pass: a lazy search for END from every header was quadratic on headers without END)
    _rule("private_key",
          r"-----BEGIN (?:(?!PRIVATE )[A-Z0-9]++ )*+PRIVATE KEY(?: BLOCK)?-----"
          r"(?=(?:[\s:=\-]|\\++[nr]){0,256}+(?:[A-Za-z0-9+/](?:[\s=]|\\++[nr]){0,64}+){24})"
          r"(?:(?!-----END )(?:[A-Za-z0-9+/=:\-\s]|\\++[nr]))*+"
          r"(?:-----END (?:(?!PRIVATE )[A-Z0-9]++ )*+PRIVATE KEY(?: BLOCK)?-----)?"),
    _rule("mcp_memory_token", _B + r"mmt\.[a-z][a-z0-9_\-]{0,62}\.[A-Za-z0-9_\-]{43}" + _E),
    _rule("aws_access_key",
          # (the boundary is checked after the prefix: a regex that starts with a literal is searched for
          # that literal, one that starts with a lookbehind is tried at every position, 25× slower)
          r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|ROA|PKA|SCA)(?<![A-Z0-9]....)[A-Z0-9]{16}(?![A-Z0-9])"),
    _rule("aws_secret_key",
          r"(?i:aws)[A-Za-z_\-.]{0,40}?(?i:secret)[A-Za-z_\-.]{0,40}+[\"']?\s*+[:=]\s*+[\"']?"
          r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
    _rule("github_token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
    _rule("gitlab_token",
          r"gl(?<![A-Za-z0-9_\-]..)(?:pat|dt|rt|ptt|cbt|soat|ft|imt|agent|oas)-[A-Za-z0-9_\-]{20,}+" + _E),
    _rule("anthropic_key", _B + r"sk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_\-]{20,}+" + _E),
    _rule("openai_key",
          _B + r"sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}+|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})" + _E),
    _rule("deepseek_key", _B + r"sk-[0-9a-f]{32}" + _E),
    _rule("api_key", _B + r"sk-(?=[A-Za-z_\-]*+[0-9])(?=[0-9_\-a-z]*+[A-Z])[A-Za-z0-9_\-]{24,}+" + _E),
    _rule("slack_token", _B + r"(?:xox[abposre]-[A-Za-z0-9\-]{10,}+|xapp-\d-[A-Z0-9]++-\d++-[a-f0-9]{16,}+)" + _E),
    _rule("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]{20,}+"),
    _rule("stripe_key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}+" + _E + r"|" + _B + r"whsec_[A-Za-z0-9]{24,}+"),
    _rule("google_api_key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
    _rule("google_oauth", _B + r"(?:GOCSPX-[A-Za-z0-9_\-]{28}|ya29\.[0-9A-Za-z_\-]{30,}+)" + _E),
    _rule("npm_token", _B + r"npm_[A-Za-z0-9]{36}" + _E),
    _rule("pypi_token", _B + r"pypi-AgE[A-Za-z0-9_\-]{50,}+" + _E),
    _rule("huggingface_token", _B + r"hf_[A-Za-z]{34}" + _E),
    _rule("sendgrid_key", _B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
    _rule("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,}+\.eyJ[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]{10,}+" + _E),
    _rule("url_password",
          r"(?i:[a-z][a-z0-9+.\-]{1,20})://[^\s:/@\"'\\]{0,100}:(?P<secret>[^\s/?\"'\\]{1,200})@(?=[A-Za-z0-9\[._\-])"),
    _rule("authorization",
          r"(?i:(?:proxy-)?authorization)[\"']?\s*+[:=]\s*+[\"']?(?:(?i:bearer|basic|token|digest|bot)\s++)?"
          r"(?P<secret>[A-Za-z0-9._~+/\-]{8,}+=*+)"),
    _rule("bearer_token", r"(?<![A-Za-z])(?i:bearer)\s++(?P<secret>[A-Za-z0-9._~+/\-]{20,}+=*+)"),
    _rule("telegram_bot_token", r"(?:(?<=bot)|(?<![A-Za-z0-9_:]))\d{8,10}:A[A-Za-z0-9_\-]{34}" + _E),
    # (the password is looked for in the 16 arguments after the command: an unbounded search from
    # every "curl" of a long line would take quadratic time)
    _rule("curl_password",
          r"\bcurl(?:[ \t]++[^\s|;&]++){0,16}?[ \t]++(?:-u[ \t]*+|--user[ \t=]++)[\"']?[^\s:\"'/]{0,200}+:(?P<secret>[^\s\"'@\\]{1,200})"),
    _rule("mysql_password",
          r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)(?:[ \t]++[^\s|;&]++){0,16}?[ \t]++-p(?:(?P<quote>[\"'])(?P<qsecret>[^\s\"'\\]{1,200}+)(?P=quote)|(?P<secret>[^\s\"'\\\-][^\s\"'\\]{0,200}+))"),
    _rule("netrc_password",
          r"\b(?:machine\s++\S++|default)(?:\s++(?:login|account|port)\s++\S++){0,8}+\s++password\s++(?P<secret>[^\s\"'\\]{1,200}+)",
          check_value=True),
    # libpq's key=value conninfo (`host=db user=app password=…`): the value is a literal, whatever it looks like
    _rule("dsn_password",
          r"(?<![A-Za-z0-9_])(?:host|hostaddr|port|dbname|user)=[^\s'\",;()\\]++(?:\s++[a-z_]++=[^\s'\",;()\\]++){0,16}?"
          r"\s++password=(?P<secret>[^\s'\",;()\\]{1,200}+)"),
    # sshpass's `-p PASSWORD`, Oracle's `sqlplus user/password@db` (the tools' manuals)
    _rule("sshpass_password",
          r"\bsshpass(?:[ \t]++[^\s|;&]++){0,8}?[ \t]++-p[ \t]*+(?:(?P<quote>[\"'])(?P<qsecret>[^\"'\n]{1,200}+)(?P=quote)"
          r"|(?P<secret>[^\s\"'\\]{1,200}+))"),
    _rule("sqlplus_password",
          r"\b(?:sqlplus|sqlldr|expdp|impdp|rman)(?:[ \t]++-[A-Za-z]++){0,4}+[ \t]++[\"']?[A-Za-z0-9_$#]{1,64}+/"
          r"(?P<secret>[^\s@\"'/\\]{1,200}+)(?=@|[\s\"']|$)"),
    # an Azure shared access signature's `sig=` (the signature is the credential), a Discord webhook's token
    _rule("azure_sas", r"[?&;]sig=(?P<secret>[A-Za-z0-9%+/=]{16,512}+)"),
    _rule("discord_webhook",
          r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{5,30}+/(?P<secret>[A-Za-z0-9_\-]{20,}+)"),
    # docker's config.json `"auth": "<base64 of user:password>"`; a Cookie header's value
    _rule("docker_auth", r"(?<![A-Za-z0-9_])\\?\"auth\\?\"\s*+:\s*+\\?\"(?P<secret>[A-Za-z0-9+/]{12,}+={0,2}+)\\?\""),
    _rule("cookie",
          r"(?<![A-Za-z0-9_\-])(?i:(?:set-)?cookie)[\"']?\s*+:[ \t]*+[A-Za-z0-9_.\-]{1,64}+="
          r"(?P<secret>[^\s;\"'\\,]{6,4096}+)"),
    # a ~/.pgpass line `host:port:database:user:password` (PostgreSQL's manual, "The Password File"),
    # where the text names the file or the line has port 5432 or a `*` field (_NEEDLES)
    _rule("pgpass_password",
          r"(?m:^[ \t]*+[^\s:#]{1,255}+:(?:\d{1,5}+|\*):[^\s:]{1,255}+:[^\s:]{1,255}+:(?P<secret>\S{1,1024}+)$)",
          check_value=True),
    # Docker personal access tokens, age secret keys (the age spec: Bech32, upper case)
    _rule("docker_pat", _B + r"dckr_pat_[A-Za-z0-9_\-]{20,}+" + _E),
    _rule("age_secret_key", _B + r"AGE-SECRET-KEY-1[0-9A-Z]{50,}+" + _E),
    # passwords on a command line: `docker login -p`, `redis-cli -a`, `htpasswd -b FILE USER PASSWORD`
    # (`-nb USER PASSWORD` has no file), kubeadm's bootstrap `--token abcdef.0123456789abcdef` and
    # `--certificate-key` (the tools' manuals); a search of at most 16 arguments after the command
    _rule("docker_password",
          r"\bdocker[ \t]++login(?:[ \t]++[^\s|;&]++){0,16}?[ \t]++(?:-p|--password)(?:[ \t]++|=)" + _ARG),
    _rule("redis_password",
          r"\bredis-cli(?:[ \t]++[^\s|;&]++){0,16}?[ \t]++(?:-a|--pass)(?:[ \t]++|=)" + _ARG),
    _rule("htpasswd_password",
          r"\bhtpasswd(?:[ \t]++-[A-Za-z]++){0,3}?[ \t]++-[A-Za-z]*?b[A-Za-z]*+(?:[ \t]++-[A-Za-z]++){0,3}+"
          r"(?:[ \t]++[^\s|;&\-][^\s|;&]*+){1,2}[ \t]++" + _ARG),
    _rule("kubeadm_token",
          r"(?<![A-Za-z0-9_\-])--(?:token|discovery-token|tls-bootstrap-token)(?:[ \t]++|=)"
          r"(?P<secret>[a-z0-9]{6}\.[a-z0-9]{16})(?![A-Za-z0-9_.\-])"
          r"|(?<![A-Za-z0-9_\-])--certificate-key(?:[ \t]++|=)(?P<qsecret>[0-9a-f]{64})(?![A-Za-z0-9_\-])"),
    # matched where a key that names a secret ends (Rule.keyed): `db_password = …`, `"apiKey": "…"`
    # (the value is on the key's line: after an empty `PASSWORD=` the next line is another setting)
    _rule("password", r"""["']?\s*+(?::=|=>|[:=])[ \t]*+""" + _ASSIGNED, check_value=True),
)

_NEEDLES: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",),
    "mcp_memory_token": ("mmt.",),
    "aws_access_key": ("akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "aroa", "apka",
                       "asca"),
    "aws_secret_key": ("aws",),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("gl",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "deepseek_key": ("sk-",),
    "api_key": ("sk-",),
    "slack_token": ("xox", "xapp-"),
    "slack_webhook": ("hooks.slack.com",),
    "stripe_key": ("_live_", "_test_", "whsec_"),
    "google_api_key": ("aiza",),
    "google_oauth": ("gocspx-", "ya29."),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-",),
    "huggingface_token": ("hf_",),
    "sendgrid_key": ("sg.",),
    "jwt": ("eyj",),
    "url_password": ("://",),
    "authorization": ("authorization",),
    "bearer_token": ("bearer",),
    "telegram_bot_token": (":a",),
    "curl_password": ("curl",),
    "mysql_password": ("mysql", "mariadb"),
    "netrc_password": ("password",),
    "dsn_password": ("password=",),
    "password": ("pass", "pwd", "secret", "key", "token", "credential"),
    "sshpass_password": ("sshpass",),
    "sqlplus_password": ("sqlplus", "sqlldr", "expdp", "impdp", "rman"),
    "azure_sas": ("sig=",),
    "discord_webhook": ("discord",),
    "docker_auth": ("auth",),
    "cookie": ("cookie",),
    # (a needle of ":" alone would send every JSON payload through every rule: a pgpass line is
    # caught where the text names the file, or on PostgreSQL's port or a wildcard field)
    "pgpass_password": ("pgpass", ":5432:", ":*:"),
    "docker_pat": ("dckr_pat_",),
    "age_secret_key": ("age-secret-key-1",),
    "docker_password": ("docker",),
    "redis_password": ("redis-cli",),
    "htpasswd_password": ("htpasswd",),
    "kubeadm_token": ("--token", "--discovery-token", "--tls-bootstrap-token", "--certificate-key"),
}
_ANCHORS = {"password": linear_re.compile(r"pass|pwd|secret|key|token|credential")}
BUILTIN = tuple(replace(rule, needles=_NEEDLES.get(rule.name, ()), anchor=_ANCHORS.get(rule.name),
                        keyed=rule.name in _ANCHORS) for rule in BUILTIN)

# Values that are obviously not secrets: placeholders, references, types and code.
_PLACEHOLDER = linear_re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}?.*     # $VAR, ${VAR}
      | %\(?[A-Za-z_]*\)?s                    # %(name)s, %s
      | \{\{?.*\}?\}                          # {name}, {{ template }}
      | <[^>]*>?                              # <password>
      | \*+ | x{3,} | X{3,} | \.{3,}           # *** xxx ...
      | \[REDACTED[^\]]*\]?                   # already redacted
      | (?i:your|my|example|sample|dummy|placeholder|changeme_here)[A-Za-z_\-]*  # (with digits: `MySecret99`)
    )$""",
    re.VERBOSE,
)
_WORDS = frozenset(
    ["none", "null", "nil", "true", "false", "str", "string", "bytes", "int", "bool", "text", "required", "optional", "hidden", "bearer", "basic", "token", "password", "passwd", "secret", "pass", "pwd", "credential", "credentials", "env", "environ", "getenv", "input", "prompt", "redacted", "masked", "undefined", "empty", "default"]
)
_PATH = linear_re.compile(r"^(?:\.{0,2}/|~/|[A-Za-z]:\\)|\.(?:json|ya?ml|txt|pem|key|env|toml|ini|conf|cfg)$")
_CODE = linear_re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(.*)?$")
# a reference in Rust, C or Go code (`token: &str`, `&mut self`, `*const u8`), not a literal
_REFERENCE = linear_re.compile(r"^(?:&(?:'[a-z_]++[ \t]*+)?(?:mut)?|\*(?:const|mut)?)[A-Za-z_\[]")
# a passphrase of capitalised words (`CorrectHorseBatteryStaple`): letters only, yet a secret
_PASSPHRASE = linear_re.compile(r"^(?:[A-Z][a-z]{2,12}+){3,8}+$")


_KEY_WORD = linear_re.compile(rf"(?i:{_KEY_WORDS})")
# a quoted value with spaces that names what it is about, or asks for it, is prose
_PROSE = linear_re.compile(rf"(?i:{_KEY_WORDS})|^(?i:your|enter|type|please|the|a|an|no|not|invalid|missing|wrong)\b")


def _names_a_secret(value: str) -> bool:
    """An identifier built on a key word (`token2`, `db_password`, `self.api_key`, `getSecret(`) names
    a secret; a word with a key word inside and digits around it (`S3cretPass99`, `Passw0rd2024`,
    `MySecret99`, `Secret39Pass`) is one: what is left without the key words has a digit and is
    at least 2 characters long."""
    if not _KEY_WORD.search(value):
        return False
    if any(ch in value for ch in "_.("):
        return True
    rest = _KEY_WORD.sub("", value)
    return len(rest) < 2 or not any(ch.isdigit() for ch in rest)


def plausible_assigned_secret(value: str, *, quoted: bool) -> bool:
    """Whether the value of `password=…`, `secret: …` looks like a secret rather than code or prose.

    Quoted values are literals: secret unless a placeholder or a type/keyword. Unquoted values are
    often identifiers (`password=password`, `token: str`, `token = token2`) or numbers (`max_token=4096`,
    `pass: 6379`): secret only when they carry a digit or a symbol, as real passwords and keys almost
    always do, and are not a short number or a name built on a key word.
    """
    if len(value) < 4 or _PLACEHOLDER.match(value) or value.lower() in _WORDS:
        return False
    if _PATH.search(value):
        return False  # where the secret is kept, not the secret
    if quoted:
        return " " not in value or not _PROSE.search(value)  # a passphrase, not a prompt or a message
    if value.isdigit():
        return len(value) >= 8  # ports, sizes and counts; a numeric password is rarely shorter
    if _REFERENCE.match(value):
        return False
    if _PASSPHRASE.match(value) and len(value) >= 12 and not _KEY_WORD.search(value):
        return True  # (a class name that holds a key word, `SecretManagerClient`, is code)
    if _CODE.match(value) and (not any(ch.isdigit() for ch in value) or _names_a_secret(value)):
        return False  # an identifier, attribute or call: code, not a literal
    return any(ch.isdigit() for ch in value) or any(ch in "!@#$%^&*+/=~-" for ch in value)

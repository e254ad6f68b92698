"""Write tests/redaction_corpus_2.json: fake secrets (random, never valid) in the many places a
session meets them — shell, .env, JSON, YAML, code, logs, URLs, CLI flags, HTTP headers, config files
of tools — and look-alikes that must stay untouched: code that handles credentials without holding
one, hashes, UUIDs, base64 data, timestamps, addresses, prose about passwords, and harmless
`key=value` settings. Seeded: the same file every run.

    python scripts/make_redaction_corpus.py
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "redaction_corpus_2.json"
rng = random.Random(26)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def password() -> str:
    """A password as people make them: a word, digits, maybe a symbol."""
    word = rng.choice(["Summer", "Quartz", "Falcon", "Hunter", "Orbit", "Maple", "Tiger", "Nimbus", "Secret",
                       "Pass", "Cobalt", "Delta"])
    return word + rand(rng.randint(2, 4), string.digits) + rng.choice(["", "!", "#", "$", "@", "%"])


def b64(n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def pem(kind: str) -> str:
    body = "\n".join(b64(48) for _ in range(rng.randint(3, 6)))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


SECRET_MAKERS = {
    "aws_access_key": lambda: rng.choice(["export AWS_ACCESS_KEY_ID={}", "aws_access_key_id = {}", '"AccessKeyId": "{}"',
                                          "key {} was leaked"]).format("AKIA" + rand(16, string.ascii_uppercase + string.digits)),
    "aws_secret_key": lambda: rng.choice(["aws_secret_access_key = {}", "AWS_SECRET_ACCESS_KEY={}"]).format(
        rand(40, ALNUM + "/+")),
    "github_token": lambda: rng.choice(["GITHUB_TOKEN={}", "git clone https://{}@github.com/o/r", "use {} for the API",
                                        "gh auth login --with-token <<< {}"]).format(
        rng.choice(["ghp_", "gho_", "ghs_"]) + rand(36)),
    "gitlab_token": lambda: "CI_JOB_TOKEN glpat-" + rand(20),
    "openai_key": lambda: rng.choice(["OPENAI_API_KEY={}", "client = OpenAI(api_key=\"{}\")"]).format(
        "sk-proj-" + rand(48, ALNUM + "-_")),
    "anthropic_key": lambda: "ANTHROPIC_API_KEY=sk-ant-api03-" + rand(90, ALNUM + "-_"),
    "deepseek_key": lambda: "export DEEPSEEK_API_KEY=sk-" + rand(32, "0123456789abcdef"),
    "slack": lambda: rng.choice([f"xoxb-{rand(11, string.digits)}-{rand(12, string.digits)}-{rand(24)}",
                                 f"https://hooks.slack.com/services/T{rand(8)}/B{rand(8)}/{rand(24)}"]),
    "stripe_key": lambda: "stripe.api_key = \"sk_live_" + rand(24) + "\"",
    "google_api_key": lambda: "key=AIza" + rand(35, ALNUM + "-_"),
    "npm_token": lambda: "//registry.npmjs.org/:_authToken=npm_" + rand(36),
    "jwt": lambda: "Authorization: Bearer eyJ" + rand(20, ALNUM) + ".eyJ" + rand(40) + "." + rand(43, ALNUM + "-_"),
    "private_key": lambda: pem(rng.choice(["", "RSA ", "EC ", "OPENSSH "])),
    "url_password": lambda: rng.choice(["postgresql://app:{}@db.internal:5432/prod", "redis://:{}@cache:6379/0",
                                        "amqp://guest:{}@mq/vhost", "https://deploy:{}@git.example.org/r.git"]).format(password()),
    "assignment": lambda: rng.choice(["password={}", "PASSWORD: {}", "db_password = \"{}\"", "DB_PASSWORD={}",
                                      "PGPASSWORD={} psql -h db -U app", "MYSQL_PWD={}", "secret: {}", "\"apiSecret\": \"{}\"",
                                      "client_secret={}", "passphrase: \"{}\"", "SMTP_PASS={}"]).format(password()),
    "camel_case_key": lambda: rng.choice(["dbPassword: {}", "githubToken = \"{}\"", "{{\"accessToken\": \"{}\"}}"]).format(
        rand(16, ALNUM + "-_")),
    "netrc_password": lambda: f"machine api.example.com login bob password {password()}",
    "curl_password": lambda: f"curl -u admin:{password()} https://ci.example.com/api",
    "mysql_password": lambda: f"mysql -h db -u root -p{password()} prod",
    "sshpass": lambda: f"sshpass -p '{password()}' ssh deploy@10.0.0.5",
    "sqlplus": lambda: f"sqlplus scott/{password()}@orcl",
    "azure_sas": lambda: "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&se=2025-01-01&sp=r&sig="
                         + rand(43, ALNUM + "%") + "%3D",
    "azure_key": lambda: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + b64(64) + ";EndpointSuffix=core.windows.net",
    "discord_webhook": lambda: f"https://discord.com/api/webhooks/{rand(18, string.digits)}/{rand(68, ALNUM + '-_')}",
    "docker_auth": lambda: '{"auths": {"registry.example.com": {"auth": "'
                           + base64.b64encode(f"ci:{password()}".encode()).decode() + '"}}}',
    "cookie": lambda: "Cookie: sessionid=" + rand(32, "0123456789abcdef") + "; csrftoken=" + rand(32),
    "pgpass": lambda: f"cat ~/.pgpass\ndb.internal:5432:prod:app:{password()}",
    "telegram_bot_token": lambda: f"https://api.telegram.org/bot{rand(10, string.digits)}:AA{rand(33, ALNUM + '-_')}/getMe",
    "dsn_password": lambda: f"host=db port=5432 user=app password={password()} dbname=prod",
    "authorization": lambda: "Authorization: Basic " + base64.b64encode(f"admin:{password()}".encode()).decode(),
    # values that hold a key word and digits: once taken for code
    "key_word_value": lambda: rng.choice(["password={}", "PGPASSWORD={}", "DB_PASSWORD={}", "secret: {}",
                                          "machine db login app password {}"]).format(
        rng.choice(["S3cret", "Passw0rd", "MySecret", "Secret", "Token", "Key"]) + rand(rng.randint(2, 4), string.digits)
        + rng.choice(["", "Pass", "!", "x"])),
}


def hexs(n: int) -> str:
    return rand(n, "0123456789abcdef")


BENIGN_MAKERS = {
    "code": lambda: rng.choice([
        "password = getpass.getpass(\"Password: \")", "token = request.headers.get(\"Authorization\")",
        "api_key = os.environ[\"API_KEY\"]", "secret = load_secret(path)", "if not password: raise ValueError",
        "def check_password(self, password: str) -> bool:", "self.token = token", "password=password,",
        "token: str | None = None", "const apiKey = process.env.API_KEY;", "password_hash = bcrypt.hash(password)",
        "max_tokens=4096", "token_count = len(tokens)", "key = cache_key(user_id)", "for key, value in items():",
        "secret_name = \"prod/db\"", "PASSWORD_MIN_LENGTH = 12", "tokenizer = AutoTokenizer.from_pretrained(name)",
        "session_token = create_token(user)", "passwd = pwd.getpwuid(os.getuid())", "keyring.get_password(\"svc\", user)",
        "export PGPASSWORD=$DB_PASSWORD", "password: ${DB_PASSWORD}", "token = token2", "api_key=self.api_key",
        "sshpass -p \"$SSH_PASS\" ssh host", "sqlplus / as sysdba", "Cookie: <your session cookie>",
        "curl -u \"$USER:$TOKEN\" https://api", "mysql -u root -p", "password: \"{{ vault_db_password }}\"",
    ]),
    "hash": lambda: rng.choice(["sha256:" + hexs(64), "commit " + hexs(40), "md5 " + hexs(32), "etag: \"" + hexs(32) + "\"",
                                "integrity sha512-" + b64(64)]),
    "uuid": lambda: rng.choice(["session {}", "\"id\": \"{}\"", "request-id: {}", "ses_{}"]).format(uuid.UUID(int=rng.getrandbits(128))),
    "base64": lambda: "data:image/png;base64," + b64(rng.randint(60, 120)),
    "timestamp": lambda: rng.choice(["2024-03-0{}T12:30:45Z", "at 10:20:3{} UTC", "took 00:01:2{}.5"]).format(rng.randint(1, 9)),
    "address": lambda: rng.choice(["fe80::1ff:fe23:4567:890a", "aa:bb:cc:dd:ee:ff", "10.0.0.5:5432",
                                   "https://example.com/path?sig=abc&x=1", "postgresql://db.internal:5432/prod",
                                   "ssh://git@github.com/o/r.git", "http://localhost:8765/healthz"]),
    "prose": lambda: rng.choice([
        "Reset your password from the settings page.", "The token expired; ask for a new one.",
        "Never commit secrets to the repository.", "Use a password manager and rotate API keys every 90 days.",
        "The password must be at least 12 characters.", "Set the secret in the CI settings, not in the YAML.",
        "My password is not working after the update.", "Store the key in the keyring, then restart.",
        "The private key goes in ~/.ssh/id_ed25519 with mode 0600.", "Which token does the CLI use?",
        "-----BEGIN PRIVATE KEY----- starts a PEM block; the END line closes it.",
    ]),
    "named_code": lambda: rng.choice([
        "{0}_password = get_secret(\"{0}\")", "{0}Token = await fetch{1}Token()", "if {0}_api_key is None:",
        "{0}.secret_key = settings.SECRET_KEY", "password: {0}_password", "const {0}Key = useKey(\"{0}\");",
        "token = {0}_token or default_token", "self.{0}_secret = None", "{0}_token_expiry = 3600",
        "--{0}-password-file /run/secrets/{0}", "key: {0}-{2}", "{1}Password string `json:\"{0}_password\"`",
    ]).format(rng.choice(["db", "redis", "smtp", "github", "stripe", "admin", "user", "cache", "s3", "ldap"])
              + rng.choice(["", "_main", "_backup", "2", "_ro"]),
              rng.choice(["Db", "Redis", "Smtp", "Github", "Admin"]), rand(6, string.ascii_lowercase)),
    "settings": lambda: rng.choice(["timeout=30", "retries: 5", "port = 5432", "log_level=debug", "max_tokens: 8192",
                                    "token_limit=100000", "key_size = 2048", "password_reset_ttl=3600",
                                    "secret_rotation_days: 90", "auth: oauth", "cookie_secure = true"]),
}


def b64s(text: str, *, url: bool = False) -> str:
    """`text` in base64 (URL-safe without padding, as in a JWT, when `url`)."""
    if url:
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    return base64.b64encode(text.encode()).decode()


def secret_line() -> str:
    """A line of a .env file, a config or a command that holds a secret (another maker's output)."""
    return SECRET_MAKERS[rng.choice(["github_token", "aws_secret_key", "assignment", "stripe_key", "openai_key",
                                     "url_password", "key_word_value", "slack"])]()


# secrets wrapped in base64: only decoding them finds the secret
WRAPPED_MAKERS = {
    "base64_shell": lambda: rng.choice(["echo {} | base64 -d > .env", "echo '{}' | base64 --decode | sh",
                                        "printf %s {} | base64 -d", "ENV_B64={}"]).format(b64s(secret_line())),
    "base64_k8s": lambda: rng.choice([
        "apiVersion: v1\nkind: Secret\ndata:\n  .env: {}\n",
        "kind: Secret\ndata:\n  config.yaml: {}",
        "data:\n  tls.key: {}",
        '{{"kind": "Secret", "data": {{"settings.json": "{}"}}}}',
    ]).format(b64s(rng.choice([secret_line(), pem(rng.choice(["", "RSA "])), f"db:\n  password: {password()}\n"]))),
    "base64_json": lambda: rng.choice(["x-config: {}", "state={}", "blob {} end"]).format(b64s(json.dumps(
        {"user": rand(6, string.ascii_lowercase), rng.choice(["password", "client_secret", "apiKey"]): password() + rand(4)}),
        url=rng.random() < 0.5)),
    "base64_twice": lambda: "cat creds.b64 # " + b64s(b64s(secret_line())),
}

WRAPPED_LOOK_ALIKES = {
    "base64_text": lambda: rng.choice(["echo {} | base64 -d", "data:\n  message: {}", "payload={}", "{}"]).format(b64s(rng.choice([
        "Hello, world! This is a test message.", "timeout=30\nretries=5\nlog_level=debug\n",
        "password = getpass.getpass()", "Reset your password from the settings page.", json.dumps({"user": "bob", "id": 42}),
        "max_tokens: 8192", "token_count = len(tokens)", "the secret is to keep going", f"build {rand(8)} at 10:20:30",
    ]), url=rng.random() < 0.3)),
    "base64_binary": lambda: rng.choice(["sha256-{}", "integrity: sha384-{}", "digest = \"{}\"", "key: {}",
                                         "data:image/jpeg;base64,{}", "nonce={}", "-----BEGIN CERTIFICATE-----\n{}"]).format(
        base64.b64encode(rng.randbytes(rng.choice([16, 32, 48, 64, 300]))).decode()),
    "base64_settings": lambda: "kind: ConfigMap\ndata:\n  LOG_LEVEL: {}\n  PORT: {}\n  FEATURE: {}".format(
        b64s(rng.choice(["debug", "info", "warning"])), b64s(str(rng.randint(1000, 9999))), b64s(rand(12, string.ascii_lowercase))),
}


def main() -> None:
    secrets = [{"kind": kind, "text": make()} for kind, make in SECRET_MAKERS.items() for _ in range(12)]
    benign = [{"kind": kind, "text": make()} for kind, make in BENIGN_MAKERS.items()
              for _ in range(90 if kind == "code" else 60)]
    rng.seed(2626)  # (a second seed for what came later: the items above stay as they were)
    secrets += [{"kind": kind, "text": make()} for kind, make in WRAPPED_MAKERS.items() for _ in range(12)]
    benign += [{"kind": kind, "text": make()} for kind, make in WRAPPED_LOOK_ALIKES.items() for _ in range(40)]
    seen: set[str] = set()
    benign = [b for b in benign if not (b["text"] in seen or seen.add(b["text"]))]
    corpus = {"about": "Generated by scripts/make_redaction_corpus.py (seeded): fake secrets in many settings "
                       "and look-alikes that must stay untouched. Measured by tests/integration/security/test_redaction.py.",
              "secrets": secrets, "benign": benign}
    OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    digest = hashlib.sha256(OUT.read_bytes()).hexdigest()[:12]
    print(f"{OUT}: {len(secrets)} secrets, {len(benign)} look-alikes ({digest})")


if __name__ == "__main__":
    main()

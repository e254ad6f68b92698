"""Builds memory_qa.json, the search-quality dataset of scripts/bench/search_quality.py.

Each topic is one session of a project: a few turns where something is discussed and decided (or
rejected, or later superseded), surrounded by filler turns and by other topics that share common
words. Questions are written in other words than the turns (paraphrases), in Chinese and English,
and name the turn ids that hold the answer. Run: python scripts/bench/data/make_memory_qa.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

# (project, lang, title, turns [(role, text)], decision or None, questions [(text, answer turn idxs, category)])
# decision: (type, summary, status, rationale, turn idx, supersedes topic key or None)
TOPICS = [
    ("shop", "zh", "订单模块架构评估", [
        ("user", "订单模块峰值 QPS 只有 200，要不要引入消息队列？"),
        ("assistant", "建议暂时不引入消息队列，优先优化数据库索引和接口缓存，运维成本更低。"),
        ("user", "好，那就先不上 MQ。")],
     ("architecture", "订单模块暂不引入消息队列", "rejected", "峰值 QPS 较低，消息队列增加运维复杂度", 1),
     [("订单模块要不要上消息队列", [0, 1], "zh-paraphrase"), ("以前讨论过订单用 MQ 吗", [0, 1, 2], "synonym"),
      ("what did we decide about a message queue for orders?", [0, 1, 2], "synonym"),
      ("被否决的方案：订单异步化", [1], "rejected"), ("订单高峰要怎么处理", [0, 1], "zh-2char")]),
    ("shop", "zh", "支付超时", [
        ("user", "支付接口的超时时间现在是多少？第三方偶尔要 20 秒才返回。"),
        ("assistant", "目前超时是 10 秒，建议改成 30 秒，并且重试三次，间隔指数退避。"),
        ("user", "同意，按 30 秒改。")],
     ("api", "支付接口超时设为 30 秒，重试三次", "accepted", "第三方网关偶尔 20 秒才返回", 1),
     [("支付调用多久算超时", [1], "zh-2char"), ("付款请求等待上限是多少秒", [1, 2], "zh-paraphrase"),
      ("payment gateway timeout value", [1], "en-cross"), ("重试几次", [1], "zh-2char"),
      ("第三方返回慢怎么办", [0, 1], "zh-paraphrase")]),
    ("shop", "en", "Cache layer", [
        ("user", "Should we put Redis in front of the product catalog to cut read latency?"),
        ("assistant", ("Redis would help, but the ops cost is high for a 3-person team; an in-process LRU cache "
                      "with a 60 s TTL gets most of the benefit.")),
        ("user", "Let's go with the in-process LRU then.")],
     ("architecture", "Product catalog uses an in-process LRU cache, not Redis", "accepted",
      "Redis ops cost too high for the team", 1),
     [("did we reject Redis for the catalog?", [1, 2], "rejected"), ("how long do catalog entries live in the cache", [1], "en-paraphrase"),
      ("why no redis", [1], "en-paraphrase"), ("商品目录缓存用什么", [1], "cross-lingual"),
      ("caching decision for products", [1, 2], "en-paraphrase")]),
    ("shop", "en", "Database choice", [
        ("user", "MongoDB or PostgreSQL for the order history service?"),
        ("assistant", "PostgreSQL: we need transactions across orders and payments, and JSONB covers the flexible fields."),
        ("user", "Agreed, Postgres it is.")],
     ("architecture", "Order history service uses PostgreSQL, not MongoDB", "accepted",
      "transactions across orders and payments; JSONB for flexible fields", 1),
     [("which database did we pick for order history", [1, 2], "en-paraphrase"), ("was mongo considered", [0, 1], "rejected"),
      ("why postgres over a document store", [1], "en-paraphrase"), ("订单历史用哪个数据库", [1], "cross-lingual")]),
    ("shop", "en", "Queue v1", [
        ("user", "For email notifications, do we use RabbitMQ?"),
        ("assistant", "Yes, RabbitMQ with one durable queue per notification type."),
        ("user", "ok")],
     ("architecture", "Notifications go through RabbitMQ", "superseded", "team already runs it", 1),
     [("what broker did we first choose for notifications", [1], "superseded"), ("rabbit for emails?", [0, 1], "en-paraphrase")]),
    ("shop", "en", "Queue v2", [
        ("user", "RabbitMQ keeps losing messages on failover. Switch notifications to Kafka?"),
        ("assistant", "Yes: Kafka with replication factor 3 replaces RabbitMQ for notifications; consumers commit offsets after sending."),
        ("user", "Do it.")],
     ("architecture", "Notifications move from RabbitMQ to Kafka", "accepted", "RabbitMQ lost messages on failover", 1, "Queue v1"),
     [("what replaced rabbit for notification delivery", [1], "superseded"), ("kafka replication factor", [1], "en-identifier"),
      ("why did we leave RabbitMQ", [0, 1], "superseded"), ("通知用什么中间件", [1], "cross-lingual"),
      ("when do consumers commit offsets", [1], "en-paraphrase")]),
    ("shop", "zh", "库存扣减", [
        ("user", "库存扣减放在下单时还是支付成功后？"),
        ("assistant", "下单时预占库存，15 分钟未支付自动释放；支付成功后再正式扣减。"),
        ("user", "可以，按预占方案。")],
     ("business", "下单预占库存，15 分钟未支付释放", "accepted", "避免超卖，同时不长期锁库存", 1),
     [("什么时候扣库存", [0, 1], "zh-2char"), ("没付款的订单库存多久放回去", [1], "zh-paraphrase"),
      ("怎么防止超卖", [1], "zh-paraphrase"), ("inventory reservation window", [1], "cross-lingual")]),
    ("shop", "zh", "接口限流", [
        ("user", "秒杀活动的接口要不要限流？"),
        ("assistant", "要，用令牌桶，每个用户每秒 5 次，全局每秒 2000 次，超出返回 429。"),
        ("user", "好的。")],
     ("api", "秒杀接口令牌桶限流：单用户 5 次/秒，全局 2000 次/秒", "accepted", "防止刷单和打垮下游", 1),
     [("秒杀的频率限制是多少", [1], "zh-paraphrase"), ("限流算法用的什么", [1], "zh-2char"),
      ("超过限制返回什么状态码", [1], "zh-paraphrase"), ("rate limit for flash sale", [1], "cross-lingual")]),
    ("shop", "en", "Auth tokens", [
        ("user", "JWT or opaque session tokens for the mobile app?"),
        ("assistant", ("Opaque tokens stored server-side: we must be able to revoke a stolen phone's session at once, "
                      "which JWTs make hard without a denylist.")),
        ("user", "Fine, no JWT.")],
     ("security", "Mobile app uses opaque server-side session tokens, not JWT", "accepted", "instant revocation", 1),
     [("why not json web tokens", [1, 2], "rejected"), ("how do we revoke a lost device's login", [1], "en-paraphrase"),
      ("mobile authentication approach", [0, 1], "en-paraphrase"), ("移动端登录令牌方案", [1], "cross-lingual")]),
    ("shop", "en", "Logging format", [
        ("user", "Our logs are free text and impossible to query. Structured logging?"),
        ("assistant", "Use JSON lines with trace_id, user_id and order_id fields via structlog; ship to Loki."),
        ("user", "Yes.")],
     ("process", "Services log JSON lines with trace_id/user_id/order_id via structlog", "accepted", "queryable logs", 1),
     [("which library for structured logs", [1], "en-paraphrase"), ("what fields go in every log line", [1], "en-paraphrase"),
      ("where are logs shipped", [1], "en-paraphrase"), ("trace_id in logs", [1], "en-identifier")]),
    ("shop", "zh", "数据库索引", [
        ("user", "订单列表页查询很慢，按用户和时间筛选要 3 秒。"),
        ("assistant", "在 orders 表上建 (user_id, created_at DESC) 复合索引，查询降到 20 毫秒。"),
        ("user", "效果很好。")],
     None,
     [("订单列表为什么慢", [0, 1], "zh-2char"), ("加了什么索引", [1], "zh-paraphrase"),
      ("按用户查订单的性能优化", [1], "zh-paraphrase"), ("composite index user_id created_at", [1], "en-identifier")]),
    ("shop", "zh", "前端框架", [
        ("user", "后台管理系统用 React 还是 Vue？"),
        ("assistant", "团队更熟 Vue，后台页面以表单为主，选 Vue 3 加 Element Plus。"),
        ("user", "那就 Vue。")],
     ("frontend", "后台管理系统使用 Vue 3 + Element Plus", "accepted", "团队熟悉，表单为主", 1),
     [("管理后台选了哪个前端框架", [1, 2], "zh-paraphrase"), ("为什么没用 React", [1], "rejected"),
      ("组件库用什么", [1], "zh-2char"), ("admin UI framework choice", [1], "cross-lingual")]),
    ("shop", "en", "Deploy strategy", [
        ("user", "Blue-green or rolling deploys for the API?"),
        ("assistant", "Rolling with maxUnavailable 0 and readiness probes; blue-green doubles the cluster cost."),
        ("user", "Rolling it is.")],
     ("ops", "API uses rolling deploys (maxUnavailable 0), not blue-green", "accepted", "blue-green doubles cost", 1),
     [("how do we roll out new API versions", [0, 1], "en-paraphrase"), ("was blue green rejected", [1, 2], "rejected"),
      ("maxUnavailable setting", [1], "en-identifier"), ("发布策略", [1], "cross-lingual")]),
    ("shop", "zh", "退款流程", [
        ("user", "退款要不要人工审核？"),
        ("assistant", "金额 500 元以下自动退款，超过 500 元进入人工审核队列，24 小时内处理。"),
        ("user", "OK。")],
     ("business", "500 元以下自动退款，以上人工审核", "accepted", "平衡效率和风险", 1),
     [("多少钱以上的退款要人审", [1], "zh-paraphrase"), ("退钱流程是怎样的", [0, 1], "zh-paraphrase"),
      ("审核时限", [1], "zh-2char"), ("refund approval threshold", [1], "cross-lingual")]),
    ("shop", "zh", "搜索引擎", [
        ("user", "商品搜索要不要上 Elasticsearch？"),
        ("assistant", "先不上。商品只有两万条，用 PostgreSQL 全文检索加拼音字段就够了。"),
        ("user", "同意，以后量大再说。")],
     ("architecture", "商品搜索暂不引入 Elasticsearch，用 PostgreSQL 全文检索", "rejected", "商品量小", 1),
     [("商品检索用 ES 吗", [0, 1], "synonym"), ("为什么没上搜索引擎", [1], "rejected"),
      ("拼音搜索怎么做", [1], "zh-2char"), ("did we decide against elasticsearch", [0, 1], "en-cross")]),
    ("shop", "en", "Image storage", [
        ("user", "Where should product images live? Right now they are in the database as blobs."),
        ("assistant", "Move them to S3 with CloudFront in front; store only the object key in the products table."),
        ("user", "Good.")],
     ("architecture", "Product images in S3 behind CloudFront; DB keeps only the key", "accepted", "DB bloat", 1),
     [("where do product pictures go", [0, 1], "en-paraphrase"), ("what do we keep in the products table for images", [1], "en-paraphrase"),
      ("CDN for images", [1], "en-paraphrase"), ("图片存储方案", [1], "cross-lingual")]),
    ("ml", "zh", "模型选型", [
        ("user", "客服机器人用哪个大模型？"),
        ("assistant", "先用 DeepSeek-V3，成本低，中文效果好；敏感问题转人工。"),
        ("user", "可以。")],
     ("model", "客服机器人使用 DeepSeek-V3，敏感问题转人工", "accepted", "成本低、中文好", 1),
     [("客服用的什么模型", [0, 1], "zh-2char"), ("机器人回答不了的敏感问题怎么办", [1], "zh-paraphrase"),
      ("why deepseek", [1], "en-cross"), ("大模型选型结论", [1, 2], "zh-paraphrase")]),
    ("ml", "zh", "向量库", [
        ("user", "知识库检索要不要单独部署向量数据库？"),
        ("assistant", "不单独部署，直接用 pgvector，文档只有十万段，HNSW 索引足够。"),
        ("user", "好，省一套运维。")],
     ("architecture", "知识库检索用 pgvector，不单独部署向量数据库", "rejected", "数据量小，省运维", 1),
     [("语义检索用什么存储", [0, 1], "zh-paraphrase"), ("向量索引类型", [1], "zh-2char"),
      ("did we reject a separate vector database", [0, 1], "en-cross"), ("Milvus 要不要上", [0, 1], "synonym")]),
    ("ml", "en", "Eval metrics", [
        ("user", "How do we measure the retrieval quality of the support bot?"),
        ("assistant", "Recall@5 and MRR on a labelled set of 300 real tickets, re-run on every prompt or index change."),
        ("user", "Add it to CI.")],
     ("process", "Retrieval quality = recall@5 and MRR on 300 labelled tickets, in CI", "accepted", None, 1),
     [("which metrics for search quality", [1], "en-paraphrase"), ("how many labelled tickets", [1], "en-paraphrase"),
      ("when is the retrieval eval run", [1, 2], "en-paraphrase"), ("召回率怎么评估", [1], "cross-lingual")]),
    ("ml", "en", "Prompt caching", [
        ("user", "Our LLM bill doubled. Can we cache prompts?"),
        ("assistant", ("Cache identical completions for 24 h keyed by a hash of model+prompt; put the system prompt first "
                      "so provider-side prefix caching applies.")),
        ("user", "Ship it.")],
     ("cost", "Cache completions 24 h by hash(model+prompt); system prompt first", "accepted", "bill doubled", 1),
     [("how to cut the llm spend", [0, 1], "en-paraphrase"), ("cache key for completions", [1], "en-paraphrase"),
      ("ttl of the completion cache", [1], "en-paraphrase"), ("大模型费用怎么降", [1], "cross-lingual")]),
    ("ml", "zh", "分词方案", [
        ("user", "中文搜索用 jieba 分词还是二元切分？"),
        ("assistant", "用单字加二元组切分，不依赖词典，两个字的词也能搜到；jieba 的新词识别不稳定。"),
        ("user", "同意二元。")],
     ("search", "中文检索用单字+二元组切分，不用 jieba", "accepted", "不依赖词典", 1),
     [("中文怎么切词", [0, 1], "zh-paraphrase"), ("结巴分词被否了吗", [1], "rejected"),
      ("两个字的词能搜到吗", [1], "zh-2char"), ("chinese tokenization approach", [1], "cross-lingual")]),
    ("infra", "en", "Backups", [
        ("user", "What is our Postgres backup policy?"),
        ("assistant", "pgBackRest full backup weekly, differential daily, WAL archiving continuous; restore tested monthly."),
        ("user", "And retention?"),
        ("assistant", "Keep 4 full backups, so about a month of point-in-time recovery.")],
     ("ops", "pgBackRest weekly full, daily diff, continuous WAL; keep 4 fulls", "accepted", None, 1),
     [("how often are full backups taken", [1], "en-paraphrase"), ("how far back can we restore", [3], "en-paraphrase"),
      ("backup tool", [1], "en-paraphrase"), ("数据库备份策略", [1, 3], "cross-lingual")]),
    ("infra", "en", "Kubernetes", [
        ("user", "Should we move the services to Kubernetes?"),
        ("assistant", "Not yet: 6 services run fine on two VMs with docker compose; k8s would need a dedicated person."),
        ("user", "Revisit next year.")],
     ("ops", "Stay on docker compose; no Kubernetes this year", "rejected", "too few services to justify it", 1),
     [("are we migrating to k8s", [0, 1], "rejected"), ("why compose instead of an orchestrator", [1], "en-paraphrase"),
      ("container orchestration decision", [0, 1], "en-paraphrase"), ("要不要上 K8s", [0, 1], "synonym")]),
    ("infra", "zh", "监控告警", [
        ("user", "线上报警太多，大家都开始忽略了。"),
        ("assistant", "只保留影响用户的告警：错误率超过 1% 或 P99 延迟超过 2 秒持续 5 分钟才打电话，其余发到群里。"),
        ("user", "好，先这样收敛。")],
     ("ops", "只对错误率>1% 或 P99>2s 持续 5 分钟电话告警", "accepted", "告警疲劳", 1),
     [("什么情况下会电话通知", [1], "zh-paraphrase"), ("报警太多怎么办", [0, 1], "zh-2char"),
      ("延迟阈值是多少", [1], "zh-2char"), ("alert paging rules", [1], "cross-lingual")]),
    ("infra", "zh", "机房迁移", [
        ("user", "要不要从自建机房迁到云上？"),
        ("assistant", "迁到阿里云，先迁无状态服务，数据库最后迁，用 DTS 做实时同步，停机窗口不超过 30 分钟。"),
        ("user", "同意。")],
     ("ops", "迁移到阿里云：先无状态服务，数据库最后用 DTS 同步", "accepted", None, 1),
     [("上云的顺序", [1], "zh-2char"), ("数据库怎么迁移", [1], "zh-paraphrase"),
      ("停机时间多长", [1], "zh-paraphrase"), ("cloud migration plan", [1], "cross-lingual")]),
    ("infra", "en", "Secrets", [
        ("user", "API keys are in .env files committed to the repo. What now?"),
        ("assistant", "Rotate every key today, move secrets to Vault, and add gitleaks to the pre-commit hook."),
        ("user", "On it.")],
     ("security", "Secrets live in Vault; gitleaks in pre-commit", "accepted", "keys were committed", 1),
     [("where do we keep credentials", [1], "en-paraphrase"), ("leaked keys in git", [0, 1], "en-paraphrase"),
      ("pre-commit secret scanning", [1], "en-paraphrase"), ("密钥管理", [1], "cross-lingual")]),
    ("infra", "en", "CI runner", [
        ("user", "GitHub Actions minutes are expensive. Self-hosted runners?"),
        ("assistant", "Yes, two self-hosted runners on spare VMs for the monorepo; keep hosted runners for forks."),
        ("user", "ok")],
     None,
     [("ci cost reduction", [0, 1], "en-paraphrase"), ("who runs pull requests from forks", [1], "en-paraphrase"),
      ("how many self hosted runners", [1], "en-paraphrase")]),
    ("shop", "zh", "优惠券", [
        ("user", "优惠券能不能叠加使用？"),
        ("assistant", "同一订单最多一张平台券加一张店铺券，不能两张平台券叠加。"),
        ("user", "明白。")],
     ("business", "每单最多一张平台券+一张店铺券", "accepted", None, 1),
     [("优惠可以一起用吗", [0, 1], "zh-2char"), ("一单能用几张券", [1], "zh-paraphrase"),
      ("coupon stacking rule", [1], "cross-lingual")]),
    ("shop", "zh", "短信服务", [
        ("user", "验证码短信用哪家？"),
        ("assistant", "主用阿里云短信，腾讯云做备用，发送失败自动切换；每个手机号每天最多 10 条。"),
        ("user", "好。")],
     ("vendor", "验证码短信主用阿里云，腾讯云备用", "accepted", None, 1),
     [("验证码发送渠道", [0, 1], "zh-2char"), ("短信失败了怎么办", [1], "zh-paraphrase"),
      ("一个号码一天能收几条", [1], "zh-paraphrase"), ("SMS provider fallback", [1], "cross-lingual")]),
    ("shop", "en", "API versioning", [
        ("user", "How do we version the public REST API?"),
        ("assistant", "Version in the URL path (/v1/, /v2/); keep the previous version for 12 months after a new one ships."),
        ("user", "Header versioning was rejected then?"),
        ("assistant", "Yes, headers are invisible in logs and caches, so we rejected it.")],
     ("api", "Public API versioned in the URL path; old versions kept 12 months", "accepted", None, 1),
     [("how long is an old api version supported", [1], "en-paraphrase"), ("why not version via headers", [3], "rejected"),
      ("api version scheme", [1], "en-paraphrase"), ("接口版本怎么管理", [1], "cross-lingual")]),
    ("shop", "en", "Timezones", [
        ("user", "Order timestamps are a mess across regions."),
        ("assistant", "Store everything as timestamptz in UTC; convert to the shop's local zone only in the UI."),
        ("user", "Agreed.")],
     ("data", "Timestamps stored in UTC (timestamptz), local time only in the UI", "accepted", None, 1),
     [("which time zone is stored in the database", [1], "en-paraphrase"), ("dates wrong for other regions", [0, 1], "en-paraphrase"),
      ("时区怎么处理", [1], "cross-lingual")]),
    ("ml", "zh", "标注平台", [
        ("user", "数据标注用 Label Studio 还是自己写？"),
        ("assistant", "用 Label Studio，自研至少两个人月；导出 JSON 直接进训练流水线。"),
        ("user", "行。")],
     ("tooling", "数据标注使用 Label Studio，不自研", "accepted", "自研成本两个人月", 1),
     [("打标工具用的什么", [0, 1], "zh-paraphrase"), ("为什么不自己开发标注系统", [1], "rejected"),
      ("labeling tool decision", [1], "cross-lingual")]),
    ("ml", "en", "GPU budget", [
        ("user", "Fine-tuning needs GPUs. Buy or rent?"),
        ("assistant", "Rent A100s by the hour; buying only pays off above 60 % utilisation, and we are at 15 %."),
        ("user", "Rent.")],
     ("cost", "Rent GPUs hourly instead of buying", "accepted", "utilisation only 15 %", 1),
     [("should we purchase graphics cards", [0, 1], "en-paraphrase"), ("utilisation threshold for buying hardware", [1], "en-paraphrase"),
      ("显卡买还是租", [1], "cross-lingual")]),
    ("infra", "zh", "日志保留", [
        ("user", "日志存多久？磁盘快满了。"),
        ("assistant", "应用日志保留 14 天，审计日志保留 180 天并归档到对象存储。"),
        ("user", "OK。")],
     ("ops", "应用日志 14 天，审计日志 180 天归档", "accepted", "磁盘空间", 1),
     [("审计记录保存多久", [1], "zh-paraphrase"), ("磁盘满了怎么办", [0, 1], "zh-2char"),
      ("log retention period", [1], "cross-lingual")]),
    ("infra", "zh", "域名证书", [
        ("user", "证书老是过期导致网站打不开。"),
        ("assistant", "全部改用 cert-manager 自动续期 Let's Encrypt 证书，过期前 30 天续签，并加到期监控。"),
        ("user", "好。")],
     ("ops", "证书用 cert-manager 自动续期", "accepted", None, 1),
     [("证书过期的问题怎么解决", [0, 1], "zh-2char"), ("提前多少天续签", [1], "zh-paraphrase"),
      ("TLS certificate renewal", [1], "cross-lingual")]),
    ("shop", "en", "Feature flags", [
        ("user", "We keep shipping half-done features behind if-statements. Use a flag service?"),
        ("assistant", "Use Unleash self-hosted; every flag gets an owner and an expiry date, and stale flags fail CI."),
        ("user", "Good idea.")],
     ("process", "Feature flags in self-hosted Unleash with owner and expiry", "accepted", None, 1),
     [("which feature toggle tool", [1], "en-paraphrase"), ("what happens to old flags", [1], "en-paraphrase"),
      ("功能开关", [1], "cross-lingual")]),
    ("shop", "zh", "会员等级", [
        ("user", "会员等级按消费金额还是积分算？"),
        ("assistant", "按近 12 个月消费金额算，每月 1 号重新计算等级，降级有 1 个月缓冲期。"),
        ("user", "可以。")],
     ("business", "会员等级按近 12 个月消费额，每月 1 日重算", "accepted", None, 1),
     [("等级怎么计算", [0, 1], "zh-2char"), ("多久重新评定一次会员级别", [1], "zh-paraphrase"),
      ("降级有没有缓冲", [1], "zh-2char")]),
    ("ml", "en", "Embedding model", [
        ("user", "Which embedding model for the knowledge base? It is half Chinese."),
        ("assistant", "bge-m3: multilingual, 1024 dimensions, runs on CPU for our volume."),
        ("user", "Take it.")],
     ("model", "Knowledge base embeddings use bge-m3", "accepted", "multilingual, CPU is enough", 1),
     [("which model creates the vectors", [0, 1], "en-paraphrase"), ("embedding dimension", [1], "en-paraphrase"),
      ("向量模型选的哪个", [1], "cross-lingual")]),
    ("infra", "en", "DNS outage", [
        ("user", "Yesterday's outage: DNS provider down for 2 hours."),
        ("assistant", "Add a secondary DNS provider (NS1 + Route 53) and lower TTLs to 300 s on critical records."),
        ("user", "Do it this week.")],
     ("ops", "Two DNS providers (NS1 + Route 53), TTL 300 s on critical records", "accepted", "2 h outage", 1),
     [("what did we change after the dns incident", [0, 1], "en-paraphrase"), ("ttl for important records", [1], "en-paraphrase"),
      ("域名解析故障", [0, 1], "cross-lingual")]),
    ("shop", "zh", "发票", [
        ("user", "电子发票什么时候开？"),
        ("assistant", "确认收货后 7 天自动开具，用户也可以在订单详情里手动申请。"),
        ("user", "好的。")],
     None,
     [("发票什么时候开具", [0, 1], "zh-paraphrase"), ("可以自己申请开票吗", [1], "zh-2char")]),
    ("shop", "zh", "消息推送", [
        ("user", "App 推送用极光还是个推？"),
        ("assistant", "先用厂商通道加极光兜底，个推的价格没有优势。"),
        ("user", "那个推就不考虑了。")],
     ("vendor", "推送用厂商通道+极光兜底，不用个推", "rejected", "个推价格无优势", 1),
     [("推送服务选型", [0, 1], "zh-paraphrase"), ("个推为什么没选", [1, 2], "rejected"),
      ("push notification vendor", [1], "cross-lingual")]),
]


# More questions per topic (other wording again), by topic title.
EXTRA = {
    "订单模块架构评估": [("订单量不大时需要异步队列吗", [1], "zh-paraphrase"), ("QPS 200 的结论", [0, 1], "zh-2char")],
    "支付超时": [("支付网关慢的处理方案", [0, 1], "zh-paraphrase"), ("how many retries for payment calls", [1], "en-cross"),
              ("超时改成多少了", [1, 2], "synonym")],
    "Cache layer": [("LRU TTL", [1], "en-identifier"), ("catalog read latency fix", [0, 1], "en-paraphrase")],
    "Database choice": [("jsonb flexible fields", [1], "en-identifier"), ("document database rejected", [1], "rejected")],
    "Queue v2": [("message loss on failover", [0, 1], "en-paraphrase"), ("kafka consumers offsets", [1], "en-identifier")],
    "库存扣减": [("预占多久失效", [1], "zh-2char"), ("付款成功之后做什么", [1], "zh-paraphrase")],
    "接口限流": [("令牌桶参数", [1], "zh-2char"), ("刷单防护", [1], "zh-paraphrase")],
    "Auth tokens": [("stolen phone session", [1], "en-paraphrase"), ("denylist for tokens", [1], "en-paraphrase")],
    "Logging format": [("loki", [1], "en-identifier"), ("free text logs problem", [0, 1], "en-paraphrase")],
    "数据库索引": [("查询三秒太慢", [0, 1], "zh-paraphrase"), ("索引之后多快", [1], "zh-2char")],
    "前端框架": [("Element Plus", [1], "en-identifier"), ("后台页面主要是什么类型", [1], "zh-paraphrase")],
    "Deploy strategy": [("readiness probes", [1], "en-identifier"), ("why not two clusters", [1], "rejected")],
    "退款流程": [("人工审核多久处理完", [1], "zh-paraphrase"), ("小额退款自动吗", [1], "zh-2char")],
    "搜索引擎": [("商品数量多少", [1], "zh-2char"), ("ES 以后再说", [1, 2], "synonym")],
    "Image storage": [("blobs in the database", [0, 1], "en-paraphrase"), ("cloudfront", [1], "en-identifier")],
    "模型选型": [("DeepSeek 成本", [1], "zh-2char"), ("转人工的条件", [1], "zh-paraphrase")],
    "向量库": [("HNSW", [1], "en-identifier"), ("vector database decision", [0, 1], "synonym")],
    "Eval metrics": [("mrr", [1], "en-identifier"), ("labelled set size", [1], "en-paraphrase")],
    "Prompt caching": [("prefix caching", [1], "en-paraphrase"), ("bill doubled", [0, 1], "en-paraphrase")],
    "分词方案": [("jieba 新词识别", [1], "zh-2char"), ("不依赖词典的切分", [1], "zh-paraphrase")],
    "Backups": [("WAL archiving", [1], "en-identifier"), ("restore tests", [1], "en-paraphrase"),
                ("retention of full backups", [2, 3], "en-paraphrase")],
    "Kubernetes": [("docker compose on two VMs", [1], "en-paraphrase"), ("revisit orchestration next year", [1, 2], "rejected")],
    "监控告警": [("告警疲劳", [0, 1], "zh-2char"), ("错误率阈值", [1], "zh-2char")],
    "机房迁移": [("DTS 同步", [1], "zh-2char"), ("先迁哪些服务", [1], "zh-paraphrase")],
    "Secrets": [("gitleaks", [1], "en-identifier"), ("rotate keys", [1], "en-paraphrase")],
    "CI runner": [("github actions minutes", [0, 1], "en-identifier"), ("spare VMs for CI", [1], "en-paraphrase")],
    "优惠券": [("两张平台券能叠加吗", [1], "zh-paraphrase"), ("店铺券", [1], "zh-2char")],
    "短信服务": [("备用短信通道", [1], "zh-2char"), ("阿里云短信", [1], "zh-paraphrase")],
    "API versioning": [("/v2/ path", [1], "en-identifier"), ("header versioning in caches", [3], "rejected")],
    "Timezones": [("timestamptz", [1], "en-identifier"), ("local time shown where", [1], "en-paraphrase")],
    "标注平台": [("人月成本", [1], "zh-2char"), ("标注结果导出格式", [1], "zh-paraphrase")],
    "GPU budget": [("A100 hourly", [1], "en-identifier"), ("rent vs buy decision", [0, 1], "en-paraphrase")],
    "日志保留": [("应用日志留几天", [1], "zh-paraphrase"), ("对象存储归档", [1], "zh-2char")],
    "域名证书": [("cert-manager", [1], "en-identifier"), ("网站打不开的原因", [0], "zh-paraphrase")],
    "Feature flags": [("unleash", [1], "en-identifier"), ("half-done features", [0, 1], "en-paraphrase")],
    "会员等级": [("积分还是金额", [0, 1], "zh-2char"), ("每月几号重算", [1], "zh-paraphrase")],
    "Embedding model": [("bge-m3", [1], "en-identifier"), ("1024 dimensions", [1], "en-paraphrase")],
    "DNS outage": [("route 53", [1], "en-identifier"), ("secondary dns", [1], "en-paraphrase")],
    "发票": [("确认收货后几天", [1], "zh-paraphrase"), ("电子发票", [0, 1], "zh-2char")],
    "消息推送": [("极光", [1, 2], "zh-2char"), ("厂商通道", [1], "zh-2char")],
}

# Distractor turns that share common words with the topics, in sessions of their own.
NOISE_ZH = ["订单详情页的按钮颜色改成蓝色。", "支付成功页面加一个返回首页的链接。", "这个接口的文档还没写。", "数据库连接池的日志太多了。",
            "下午讨论一下会员活动的文案。", "库存页面的导出按钮坏了。", "测试环境的短信发不出去，先跳过验证码。", "搜索框的提示文字改一下。",
            "超时的那个单测偶尔失败，先标记跳过。", "消息通知的图标换成新的。", "退款按钮放到订单详情里。", "告警群里的机器人名字改一下。",
            "发布前记得更新版本号。", "缓存的那个 PR 我明天看。", "模型的输出格式要统一成 JSON。", "证书的文档链接失效了。"]
NOISE_EN = ["The order page button should be blue.", "Add a back-to-home link on the payment success page.",
            "The API docs for this endpoint are missing.", "Database connection pool logs are too noisy.",
            "The cache PR is ready for review.", "Queue dashboard shows nothing, probably a permissions issue.",
            "Timeout in the flaky unit test again, marking it skipped.", "Deploy script prints a warning about versions.",
            "The token expiry message has a typo.", "Log level for the worker should be info.",
            "Backups dashboard link is broken.", "Who owns the GPU node labels?", "Image upload button misaligned on mobile.",
            "Kafka topic naming: use dots or dashes?", "The feature flag list page is slow.", "DNS docs need an update."]

FILLER_ZH = ["收到，我看一下。", "这个问题稍后再讨论。", "先把代码提交了。", "今天的例会改到下午三点。", "测试环境又挂了，重启一下。",
             "文档我更新了。", "谢谢，辛苦了。", "我再确认一下需求。"]
FILLER_EN = ["Thanks, looking into it.", "Let's discuss this later.", "Pushed the fix to the branch.", "Standup moved to 3 pm.",
             "Staging is down again, restarting.", "Updated the docs.", "Can you review my PR?", "I'll double-check the requirements."]
SYNONYMS = [["消息队列", "MQ", "message queue"], ["Elasticsearch", "ES", "搜索引擎"], ["Kubernetes", "K8s"],
            ["向量数据库", "Milvus", "vector database"], ["超时", "timeout"]]


def build() -> dict:
    rng = random.Random(7)
    conversations, questions = [], []
    day = 0
    keys: dict[str, str] = {}
    for n, topic in enumerate(TOPICS):
        project, lang, title, turns, decision, asked = topic
        conv_id = f"c{n + 1:02d}"
        fillers = FILLER_ZH if lang == "zh" else FILLER_EN
        day += rng.randint(1, 4)
        rows, ids = [], []
        lead = [(r, t) for r, t in [("user", rng.choice(fillers)), ("assistant", rng.choice(fillers))]]
        for i, (role, text) in enumerate(lead + turns + [("user", rng.choice(fillers))]):
            turn_id = f"{conv_id}t{i + 1}"
            rows.append({"id": turn_id, "role": role, "content": text,
                         "date": f"2025-{1 + (day // 28) % 12:02d}-{1 + day % 28:02d}T{9 + i // 6:02d}:{(i * 7) % 60:02d}:00Z"})
            ids.append(turn_id)
        offset = len(lead)
        session = {"id": f"{conv_id}s1", "title": title, "turns": rows, "decisions": []}
        if decision:
            kind, summary, status, why, at, *rest = decision
            dec = {"id": f"{conv_id}d1", "type": kind, "summary": summary, "status": status, "rationale": why,
                   "turn": ids[offset + at]}
            if rest:
                dec["supersedes"] = keys[rest[0]]
            session["decisions"].append(dec)
            keys[title] = dec["id"]
        conversations.append({"id": conv_id, "project": project, "agent": rng.choice(["claude-code", "opencode", "codex"]),
                              "sessions": [session]})
        for k, (text, answers, category) in enumerate(asked + EXTRA.get(title, [])):
            questions.append({"id": f"{conv_id}q{k + 1}", "question": text, "project": project, "category": category,
                              "answer_turns": [ids[offset + a] for a in answers]})
    for n, text in enumerate(NOISE_ZH + NOISE_EN):
        project = ["shop", "ml", "infra"][n % 3]
        day += 1
        rows = [{"id": f"n{n + 1:02d}t{i + 1}", "role": role, "content": content,
                 "date": f"2025-{1 + (day // 28) % 12:02d}-{1 + day % 28:02d}T1{i}:00:00Z"}
                for i, (role, content) in enumerate([("user", text), ("assistant", rng.choice(FILLER_ZH + FILLER_EN))])]
        conversations.append({"id": f"n{n + 1:02d}", "project": project, "agent": "claude-code",
                              "sessions": [{"id": f"n{n + 1:02d}s1", "title": "misc", "turns": rows, "decisions": []}]})
    return {"name": "memory-qa", "version": 1,
            "description": "Agent-memory questions over project sessions (zh/en, paraphrased, decisions).",
            "synonyms": SYNONYMS, "conversations": conversations, "questions": questions}


if __name__ == "__main__":
    data = build()
    out = Path(__file__).with_name("memory_qa.json")
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(data['conversations'])} conversations, {len(data['questions'])} questions")

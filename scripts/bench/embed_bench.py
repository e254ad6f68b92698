"""Embedding throughput of a local model (default use-multilingual-v3, CPU) on this machine.

Usage: python scripts/bench/embed_bench.py [--model NAME] [--texts 512] [--batch 32]

Embeds the turns of scripts/bench/data/memory_qa.json (repeated up to --texts) directly through the
provider, without a database: texts/s for the model alone, measured in this run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mcp_memory.embeddings.providers import DEFAULT_LOCAL_MODEL, SHIPPED_MODELS, LocalProvider

DATA = Path(__file__).with_name("data") / "memory_qa.json"


def texts(count: int) -> list[str]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    turns = [t["content"] for c in data["conversations"] for s in c["sessions"] for t in s["turns"]]
    return [turns[i % len(turns)] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL,
                        help=f"a shipped model ({', '.join(SHIPPED_MODELS)}) or a sentence-transformers directory")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    provider = LocalProvider(args.model)
    start = time.perf_counter()
    dim = provider.dim
    load_s = time.perf_counter() - start
    sample = texts(args.texts)
    start = time.perf_counter()
    for i in range(0, len(sample), args.batch):
        provider.embed(sample[i:i + args.batch])
    seconds = time.perf_counter() - start
    print(f"model {provider.name} dim {dim}: load {load_s:.2f} s; {len(sample)} texts in {seconds:.2f} s "
          f"= {len(sample) / seconds:.1f} texts/s (batch {args.batch})")


if __name__ == "__main__":
    main()

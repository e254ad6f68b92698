"""A crafted compressed session (a zstd bomb) is refused with a clear error, in bounded memory.

98 KB of zstd can inflate to gigabytes: the DeepSeek harness reader stops once the output passes
100 times the compressed size (at least 64 MiB), and `mcp-memory import` says why. Peak memory is
measured on the importing process itself (getrusage of a wrapper's only child).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from mcp_memory.agents.base import FormatError
from mcp_memory.agents.deepseek_harness import adapter

HEADER = {"type": "session", "version": 0, "id": "bomb", "createdAt": 1_700_000_000_000, "cwd": "/tmp"}
RSS_BOUND_KB = 300 * 1024


def _bomb(path: Path, inflated: int) -> Path:
    """A valid dsh log: the header frame, then one frame of `inflated` bytes of a single JSON line."""
    compressor = zstandard.ZstdCompressor(level=19)
    line = b'{"type": "user/message", "seq": 1, "data": {"text": "'
    with path.open("wb") as out:
        out.write(compressor.compress(json.dumps(HEADER).encode() + b"\n"))
        with compressor.stream_writer(out, closefd=False) as writer:
            writer.write(line)
            block = b"a" * (1024 * 1024)
            for _ in range(inflated // len(block)):
                writer.write(block)
            writer.write(b'"}}\n')
    return path


def test_inflate_refuses_past_the_ratio(tmp_path: Path) -> None:
    raw = _bomb(tmp_path / "session.jsonl.zstd", 8 * 1024 * 1024).read_bytes()
    with pytest.raises(FormatError, match=r"decompresses to more than 1048576 bytes .* decompression bomb"):
        adapter.inflate(raw, path=Path("x.zstd"), ratio=2, floor=1024 * 1024)
    assert len(adapter.inflate(raw, path=Path("x.zstd"), floor=16 * 1024 * 1024)) > 8 * 1024 * 1024


def test_a_corrupt_frame_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="not a readable zstd file"):
        adapter.inflate(b"\x28\xb5\x2f\xfd" + b"\xff" * 64, path=Path("x.zstd"))


def test_a_3_gib_bomb_is_refused_by_import_in_bounded_memory(tmp_path: Path, settings, profile) -> None:
    folder = tmp_path / "dsh" / "sessions" / "--tmp--" / "bomb"
    folder.mkdir(parents=True)
    bomb = _bomb(folder / "session.jsonl.zstd", 3 * 1024 ** 3)
    print(f"bomb: {bomb.stat().st_size} bytes of zstd for 3 GiB")
    assert bomb.stat().st_size < 200_000
    wrapper = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\n"
               "sys.stdout.write(str(done.returncode) + '\\n' + done.stderr)\n")
    result = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "mcp_memory", "import",
                             "deepseek-harness", str(bomb), "--project", "p"],
                            capture_output=True, text=True, timeout=300,
                            env={**profile, "MCP_MEMORY_DSN": settings.dsn})
    peak_kb, code, *stderr = result.stdout.splitlines()
    message = "\n".join(stderr)
    print(f"import: exit {code}, peak RSS {int(peak_kb) / 1024:.0f} MiB: {message}")
    assert code == "1" and "decompression bomb" in message and str(bomb) in message
    assert int(peak_kb) < RSS_BOUND_KB

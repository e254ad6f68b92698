"""Query translation between Chinese and English (search/crosslang.py), from the dictionary alone:
which words are looked up, in which direction, and what index terms a translation gives."""

from __future__ import annotations

import pytest

from mcp_memory.search import crosslang


def flat(text: str) -> set[str]:
    return {t for option in crosslang.translations(text) for t in option}


def test_english_words_find_their_chinese_headwords() -> None:
    found = crosslang.translations("What problem did the login proxy have?")
    assert [o for o in found if "登录" in o] and [o for o in found if "代理" in o]
    assert any("问题" in o for o in found)
    assert "付款" in flat("How do we retry payments?")  # stemmed as the index stems: payments → payment
    assert "重试" in flat("How do we retry payments?")
    assert "消息队列" in flat("should we add a message queue")  # two words, one gloss


def test_chinese_words_find_their_english_glosses() -> None:
    found = crosslang.translations("发票服务出了什么问题？")
    assert found[0][0] == "invoice" and "service" in found[1] and "problem" in found[2]
    assert not flat("什么") and not flat("我们的")  # function words are not translated


def test_stop_words_identifiers_and_other_scripts_give_nothing() -> None:
    assert crosslang.translations("the of and what did we") == []
    assert crosslang.translations("ERR_CONN_RESET 0x7f3a") == []
    assert crosslang.translations("") == []


def test_terms_are_the_index_terms_of_a_translation() -> None:
    assert crosslang.terms_of("登录") == ["登录"]
    assert crosslang.terms_of("消息队列") == ["消息", "息队", "队列"]
    assert crosslang.terms_of("log in") == ["log"]
    assert crosslang.terms_of("payments") == crosslang.terms_of("payment")


def test_sorted_lines_find_every_key_and_no_other(tmp_path) -> None:
    keys = sorted(["a", "ab", "abc", "b", "log", "log in", "login", "代理", "登录", "登录代理"], key=str.encode)
    path = tmp_path / "t.tsv"
    path.write_bytes(b"".join(f"{k}\t{k.upper()}|{len(k)}\n".encode() for k in keys))
    lines = crosslang.SortedLines(path)
    for key in keys:
        assert lines.get(key) == [key.upper(), str(len(key))]
    for missing in ("", "0", "aa", "abcd", "c", "log i", "zzz", "代", "登录代"):
        assert lines.get(missing) == []


def test_no_cache_folder_means_no_translation(tmp_path, monkeypatch, caplog) -> None:
    import platformdirs

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: str(blocker / "cache"))
    crosslang.lexicon.cache_clear()
    try:
        assert crosslang.translations("login proxy") == []
        assert "cross-language query translation is off" in caplog.text
    finally:
        monkeypatch.undo()
        crosslang.lexicon.cache_clear()
    assert crosslang.translations("login proxy")  # back with the real cache folder


def test_a_lookup_file_cut_short_is_refused_and_never_loops(tmp_path) -> None:
    rows = b"a\tA\nlog\tLOG\nz\tZ"  # the last line lost its newline (a copy cut short)
    path = tmp_path / "cut.tsv"
    path.write_bytes(rows)
    with pytest.raises(ValueError, match="damaged"):
        crosslang.SortedLines(path)
    (tmp_path / "empty.tsv").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        crosslang.SortedLines(tmp_path / "empty.tsv")
    # Whatever bytes a map holds, a lookup ends: a last line without newline, lines without a tab.
    for data in (rows, b"a\tA\nno tab here\nz", b"\n\n\n", b"zz\tZ\na\tA\nzz"):
        lines = object.__new__(crosslang.SortedLines)
        lines._map = data  # type: ignore[assignment]  # bytes search as a map does
        for key in ("", "a", "log", "m", "z", "zz", "zzz", "no tab here"):
            assert isinstance(lines.get(key), list)
    lines._map = rows  # type: ignore[assignment]
    assert lines.get("z") == ["Z"] and lines.get("log") == ["LOG"]


def test_damaged_lookup_files_are_built_again(tmp_path, monkeypatch, caplog) -> None:
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: str(tmp_path / "cache"))
    crosslang.lexicon.cache_clear()
    try:
        assert crosslang.translations("login proxy")  # built once
        folders = list((tmp_path / "cache").iterdir())
        zh = folders[0] / "zh.tsv"
        zh.write_bytes(zh.read_bytes()[:5000].rstrip(b"\n"))  # cut mid-line
        crosslang.lexicon.cache_clear()
        assert "代理" in flat("login proxy") and flat("发票")  # both directions again
        assert "lookup files are damaged, building them again" in caplog.text
        assert zh.read_bytes().endswith(b"\n") and zh.stat().st_size > 5000
    finally:
        monkeypatch.undo()
        crosslang.lexicon.cache_clear()

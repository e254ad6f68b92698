"""The one config-merge rule of the installers (agents/install_support.py), without any file format."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_memory.agents.install_support import SERVER_NAME, merge_server

ENTRY = {"command": "mcp-memory", "args": ["serve"], "env": {}}


def test_merge_adds_updates_keeps_others_and_removes() -> None:
    config = {"theme": "dark", "servers": {"other": {"command": "x"}}}
    assert merge_server(config, "servers", ENTRY, where=Path("c")) == "added"
    assert merge_server(config, "servers", ENTRY, where=Path("c")) is None  # already so: nothing to write
    assert merge_server(config, "servers", {**ENTRY, "args": ["serve", "-v"]}, where=Path("c")) == "updated"
    assert config["servers"]["other"] == {"command": "x"} and config["theme"] == "dark"
    assert merge_server(config, "servers", None, where=Path("c")) == "removed"
    assert merge_server(config, "servers", None, where=Path("c")) is None
    assert config == {"theme": "dark", "servers": {"other": {"command": "x"}}}


def test_an_emptied_table_goes_unless_kept_and_a_new_one_is_the_formats() -> None:
    config: dict = {}
    assert merge_server(config, "servers", ENTRY, where=Path("c"), new_table=lambda: {"made": True}) == "added"
    assert config == {"servers": {"made": True, SERVER_NAME: ENTRY}}
    del config["servers"]["made"]
    merge_server(config, "servers", None, where=Path("c"))
    assert config == {}
    kept = {"servers": {SERVER_NAME: ENTRY}}
    merge_server(kept, "servers", None, where=Path("c"), drop_empty=False)
    assert kept == {"servers": {}}


@pytest.mark.parametrize("value", [["a list"], "text", 3])
def test_a_server_table_of_another_type_is_refused_naming_the_file(value) -> None:
    config = {"servers": value}
    for entry in (ENTRY, None):
        with pytest.raises(ValueError, match=r"^settings\.json: servers is not a table of servers"):
            merge_server(config, "servers", entry, where=Path("settings.json"))
    assert config == {"servers": value}  # nothing changed

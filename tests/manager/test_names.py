"""Exposed tool names: sanitized, at most 64 characters, unique, deterministic, reversible."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.manager.names import MAX_NAME, Collision, NameTable, qualified_name, sanitize

API_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI and Anthropic accept

parts = st.text(max_size=80)  # arbitrary unicode, empty included
pairs = st.tuples(parts, parts)


def test_sanitize_replaces_every_other_character() -> None:
    assert sanitize("read_file-2") == "read_file-2"
    assert sanitize("a.b c/d") == "a_b_c_d"
    assert sanitize("héllo") == "h_llo"
    assert sanitize("日本") == "__"
    assert sanitize("") == "_"


def test_qualified_name_shapes() -> None:
    assert qualified_name("files", "read_file") == "mcp__files__read_file"
    assert qualified_name("my.server", "do it") == "mcp__my_server__do_it"
    assert qualified_name("files", "read_file", prefix="") == "files__read_file"
    assert qualified_name("files", "read_file", prefix="x.y") == "x_y__files__read_file"
    assert qualified_name("", "") == "mcp" + "__" + "_" + "__" + "_"


def test_exactly_64_characters_is_kept() -> None:
    tool = "t" * (MAX_NAME - len("mcp__s__"))
    name = qualified_name("s", tool)
    assert len(name) == MAX_NAME
    assert name == f"mcp__s__{tool}"


def test_long_name_is_a_prefix_and_a_hash() -> None:
    tool = "t" * (MAX_NAME - len("mcp__s__") + 1)
    name = qualified_name("s", tool)
    digest = hashlib.sha256(f"s\0{tool}".encode()).hexdigest()[:8]
    assert len(name) == MAX_NAME
    assert name == f"mcp__s__{tool}"[:55] + "_" + digest
    assert qualified_name("s", tool) == name  # deterministic


def test_long_names_sharing_a_prefix_stay_distinct() -> None:
    base = "x" * 70
    assert qualified_name("srv", base + "a") != qualified_name("srv", base + "b")
    # the hash covers the original parts, not the sanitized ones
    assert qualified_name("srv", base + ".") != qualified_name("srv", base + "_")


@given(parts, parts, st.sampled_from(["mcp", "", "hub", "ünï.code"]))
def test_qualified_name_is_always_valid(server: str, tool: str, prefix: str) -> None:
    assert API_NAME.match(qualified_name(server, tool, prefix))


def test_table_collision_gets_a_variant_and_is_recorded() -> None:
    table = NameTable()
    first = table.add("a.b", "x")
    second = table.add("a_b", "x")
    assert first == "mcp__a_b__x"
    assert second != first
    assert second.startswith("mcp__a_b__x_") and API_NAME.match(second)
    assert table.collisions == [Collision("mcp__a_b__x", ("a.b", "x"), ("a_b", "x"), second)]
    assert table.lookup(first) == ("a.b", "x")
    assert table.lookup(second) == ("a_b", "x")


def test_table_same_pair_twice_is_the_same_name() -> None:
    table = NameTable()
    assert table.add("s", "t") == table.add("s", "t") == "mcp__s__t"
    assert table.names() == ["mcp__s__t"]
    assert len(table) == 1 and "mcp__s__t" in table
    assert table.collisions == []


def test_table_collision_of_long_names() -> None:
    # Both tools sanitize to 80 underscores, but the hash is of the original names.
    table = NameTable()
    long_tool = "é" * 80
    a = table.add("s", long_tool)
    b = table.add("s", "ê" * 80)
    assert a != b and len(a) == len(b) == MAX_NAME
    assert table.collisions == []


def test_table_variant_taken_by_a_real_name_tries_again() -> None:
    table = NameTable()
    table.add("a.b", "x")
    variant = NameTable()
    variant.add("a.b", "x")
    predicted = variant.add("a_b", "x")  # what the colliding pair would get
    # Occupy the predicted variant with a real (server, tool) whose name is exactly it.
    server, tool = predicted.removeprefix("mcp__").split("__", 1)
    assert table.add(server, tool) == predicted
    third = table.add("a_b", "x")
    assert third not in (predicted, "mcp__a_b__x")
    assert API_NAME.match(third)
    assert table.lookup(third) == ("a_b", "x")


def test_table_reverse_map_and_drop_server() -> None:
    table = NameTable()
    table.add("one", "read")
    table.add("one", "write")
    table.add("two", "read")
    table.add("one.", "read")  # collides with nothing: mcp__one___read
    assert table.name_of("one", "read") == "mcp__one__read"
    assert table.name_of("three", "read") is None
    assert table.lookup("mcp__two__read") == ("two", "read")
    assert table.lookup("mcp__nope") is None
    table.drop_server("one")
    assert table.names() == ["mcp__two__read", "mcp__one___read"]
    assert table.lookup("mcp__one__read") is None
    assert table.name_of("one", "write") is None
    # the name is free again after the drop
    assert table.add("one", "read") == "mcp__one__read"


def test_drop_server_keeps_names_of_others_stable() -> None:
    table = NameTable()
    table.add("a.b", "x")
    second = table.add("a_b", "x")
    table.drop_server("a.b")
    # the later pair keeps its variant: a model may already have seen it
    assert table.name_of("a_b", "x") == second
    assert len(table.collisions) == 1
    table.drop_server("a_b")
    assert table.collisions == []
    assert table.names() == []


def test_table_without_prefix() -> None:
    table = NameTable(prefix="")
    assert table.add("files", "read") == "files__read"
    assert table.lookup("files__read") == ("files", "read")


@settings(max_examples=300)
@given(st.lists(pairs, max_size=40), st.sampled_from(["mcp", ""]))
def test_table_names_valid_unique_and_reversible(items: list[tuple[str, str]], prefix: str) -> None:
    table = NameTable(prefix)
    given_names = {pair: table.add(*pair) for pair in items}
    for pair, name in given_names.items():
        assert API_NAME.match(name), name
        assert table.lookup(name) == pair
        assert table.name_of(*pair) == name
        assert table.add(*pair) == name  # stable
    # distinct pairs never share a name
    assert len(set(given_names.values())) == len(given_names)
    assert sorted(table.names()) == sorted(given_names.values())


@given(st.lists(st.tuples(st.sampled_from(["a.b", "a_b", "a b", "a/b", "a-b"]),
                          st.sampled_from(["x", "x.", "x_", "é"])), max_size=20))
def test_table_many_collisions(items: list[tuple[str, str]]) -> None:
    table = NameTable()
    names = {pair: table.add(*pair) for pair in items}
    assert len(set(names.values())) == len(names)
    assert all(API_NAME.match(n) for n in names.values())
    for collision in table.collisions:
        assert collision.existing != collision.added
        assert table.lookup(collision.assigned) == collision.added

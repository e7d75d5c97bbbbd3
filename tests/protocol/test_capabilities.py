from __future__ import annotations

from mcpkit.protocol.capabilities import has_capability, has_extension, missing_capabilities


def test_missing_capabilities() -> None:
    declared = {"sampling": {"tools": {}}, "roots": {"listChanged": True}}
    assert missing_capabilities({"sampling": {}}, declared) == {}
    assert missing_capabilities({"sampling": {"tools": {}}}, declared) == {}
    assert missing_capabilities({"elicitation": {}}, declared) == {"elicitation": {}}
    assert missing_capabilities({"elicitation": {"url": {}}}, {"elicitation": {}}) == {
        "elicitation": {"url": {}}
    }
    assert missing_capabilities({"sampling": {"context": {}}}, declared) == {
        "sampling": {"context": {}}
    }
    assert missing_capabilities({"x": True}, {}) == {"x": {}}
    # a capability declared as a non-object is not declared
    assert missing_capabilities({"roots": {}}, {"roots": True}) == {"roots": {}}
    assert missing_capabilities({}, {}) == {}


def test_has_capability() -> None:
    declared = {"sampling": {"tools": {}}, "flag": True}
    assert has_capability(declared, "sampling")
    assert has_capability(declared, "sampling", "tools")
    assert not has_capability(declared, "sampling", "context")
    assert not has_capability(declared, "flag")
    assert not has_capability(None, "sampling")
    assert has_capability(None)


def test_has_extension() -> None:
    assert has_extension({"extensions": {"io.x/y": {}}}, "io.x/y")
    assert not has_extension({"extensions": {"io.x/y": True}}, "io.x/y")
    assert not has_extension({"extensions": []}, "io.x/y")
    assert not has_extension(None, "io.x/y")

from __future__ import annotations

from mcpkit.protocol import versions
from mcpkit.protocol.versions import Era


def test_version_lists() -> None:
    assert versions.LATEST_VERSION == "2026-07-28"
    assert versions.LATEST_LEGACY_VERSION == "2025-11-25"
    assert versions.ALL_VERSIONS[0] == versions.LATEST_VERSION
    assert set(versions.MODERN_VERSIONS).isdisjoint(versions.LEGACY_VERSIONS)
    assert list(versions.LEGACY_VERSIONS) == sorted(versions.LEGACY_VERSIONS, reverse=True)


def test_era_of() -> None:
    assert versions.era_of("2026-07-28") is Era.MODERN
    for v in versions.LEGACY_VERSIONS:
        assert versions.era_of(v) is Era.LEGACY
    assert versions.era_of("2099-01-01") is None
    assert versions.era_of("") is None


def test_negotiate_legacy_version() -> None:
    assert versions.negotiate_legacy_version("2025-03-26") == "2025-03-26"
    assert versions.negotiate_legacy_version("1999-01-01") == "2025-11-25"
    assert versions.negotiate_legacy_version("2026-07-28") == "2025-11-25"
    assert versions.negotiate_legacy_version("x", ("2024-11-05",)) == "2024-11-05"


def test_batches_and_header_rules() -> None:
    assert versions.allows_batches("2025-03-26")
    assert not versions.allows_batches("2025-06-18")
    assert not versions.allows_batches("2026-07-28")
    assert not versions.has_protocol_version_header("2024-11-05")
    assert not versions.has_protocol_version_header("2025-03-26")
    assert versions.has_protocol_version_header("2025-06-18")
    assert versions.has_protocol_version_header("2026-07-28")
    assert versions.DEFAULT_HTTP_LEGACY_VERSION == "2025-03-26"

"""Test helpers that ship with mcpkit: conformance fixtures and benchmark servers."""

"""Helpers shared by the test tiers: `from support import wait` (tests/ is on sys.path through its conftest)."""

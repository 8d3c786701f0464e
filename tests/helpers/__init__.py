"""Shared test helpers (model builders, audio makers)."""

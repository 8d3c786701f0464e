"""Engines: one backend per file, no Qt. See base.py for the contracts."""

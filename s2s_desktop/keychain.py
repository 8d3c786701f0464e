"""API keys for OpenAI-compatible servers live in the OS keychain (keyring), never in the
settings file. Where no keychain exists (a bare Linux box), S2S_API_KEY is the fallback."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from .errors import S2SError

SERVICE = "s2s-desktop"
ENV_KEY = "S2S_API_KEY"


def account(base_url: str) -> str:
    """One key per server: scheme://host:port, whatever path follows."""
    parts = urlsplit(base_url.strip())
    return f"{parts.scheme}://{parts.netloc}".lower()


def _keyring():
    try:
        import keyring
        from keyring.backends.fail import Keyring as NoKeyring
    except ImportError:
        return None
    return None if isinstance(keyring.get_keyring(), NoKeyring) else keyring


def store_api_key(base_url: str, key: str) -> None:
    ring = _keyring()
    if ring is None:
        raise S2SError("no OS keychain is available to keep the API key: set it in the "
                       f"{ENV_KEY} environment variable instead")
    try:
        if key:
            ring.set_password(SERVICE, account(base_url), key)
        else:
            try:
                ring.delete_password(SERVICE, account(base_url))
            except Exception:  # nothing stored: nothing to forget
                pass
    except Exception as exc:  # keyring backends raise their own errors
        raise S2SError(f"the OS keychain refused the API key ({type(exc).__name__})") from None


def load_api_key(base_url: str) -> str:
    ring = _keyring()
    if ring is not None and base_url:
        try:
            key = ring.get_password(SERVICE, account(base_url))
            if key:
                return key
        except Exception:  # a locked or broken keychain: fall back to the environment
            pass
    return os.environ.get(ENV_KEY, "")


def fill_api_keys(settings) -> None:
    """Give the openai backends their key for this launch (in memory only)."""
    for section in (settings.llm, settings.stt):
        if section.backend == "openai" and not getattr(section, "api_key", "") and \
                hasattr(section, "api_key"):
            section.api_key = load_api_key(section.base_url)


def load_secret(name: str) -> str:
    """A secret kept in the OS keychain under `name` (service "s2s-desktop"), e.g. an MCP
    server's token (`"env": {"TOKEN": "keychain:NAME"}` in mcp.json); "" when there is none.
    Store one with `keyring set s2s-desktop NAME`."""
    ring = _keyring()
    if ring is None:
        return ""
    try:
        return ring.get_password(SERVICE, name) or ""
    except Exception:  # a locked or broken keychain
        return ""

"""The global hotkey. The keyboard hook runs in a helper process (`listener.py`), never inside
the Qt process, where it is known to crash on macOS; `client.py` reads its events."""

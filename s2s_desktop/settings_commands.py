"""`s2s-desktop set KEY=VALUE…` and `s2s-desktop get [KEY]`: the running app's settings from the
command line (a desktop key bound to "speak faster").

`set` does what the Settings dialog's Apply does: the same checks refuse a bad key or value
(nothing is saved or changed then), the changed keys are saved onto the settings file, and the
running app takes them: live keys from the next question, model keys by reloading that stage.
"""

from __future__ import annotations

from typing import Any

from . import config
from .devices import detect_platform
from .errors import S2SError, SettingsError
from .launch import with_changes
from .ui.settings_checks import known_models, settings_problems

SECRET_SUFFIX = ".api_key"
SECRET_REFUSED = (
    "{key} is kept in the OS keychain, not taken from a command line (other programs see it, "
    "and the shell keeps it in its history): enter it in Settings → Server"
)


def setting_values(settings: config.Settings) -> dict[str, Any]:
    """Every dotted key and its value; an API key shows only whether one is set."""
    out: dict[str, Any] = {}
    for name, value in settings.to_dict().items():
        if name == "version":
            continue  # the file's format, not a setting
        items = value.items() if isinstance(value, dict) else [("", value)]
        for key, v in items:
            full = f"{name}.{key}" if key else name
            out[full] = ("(set)" if v else "") if full.endswith(SECRET_SUFFIX) else v
    return out


def pick(values: dict[str, Any], key: str) -> dict[str, Any]:
    """One key, or a whole section ("llm"); SettingsError for neither."""
    if key in values:
        return {key: values[key]}
    section = {k: v for k, v in values.items() if k.startswith(key + ".")}
    if not section:
        raise SettingsError(f"unknown setting '{key}'")
    return section


class SettingsCommands:
    """The `set` and `get` handlers of a DesktopApp's command server."""

    def __init__(self, app):
        self.app = app
        app.server.handlers.update(set=self._cmd_set, get=self._cmd_get)

    def _cmd_get(self, req: dict) -> dict:
        values = setting_values(self.app.settings)
        key = req.get("key") or ""
        try:
            return {"values": pick(values, key) if key else values}
        except SettingsError as exc:
            return {"ok": False, "error": str(exc)}

    def _cmd_set(self, req: dict) -> dict:
        changes = req.get("changes")
        if not isinstance(changes, dict) or not changes:
            return {"ok": False, "error": "set expects KEY=VALUE, e.g. tts.speed=1.2"}
        try:
            return self.apply(changes)
        except S2SError as exc:  # a bad key or value: nothing was saved or changed
            return {"ok": False, "error": str(exc)}

    def apply(self, changes: dict[str, Any]) -> dict:
        """Check, save and apply `changes` (dotted key → value) as Settings → Apply does."""
        app = self.app
        secret = next((k for k in changes if k.endswith(SECRET_SUFFIX)), None)
        if secret:
            raise SettingsError(SECRET_REFUSED.format(key=secret))
        old = app.settings
        new = with_changes(old, changes)  # unknown key, wrong type, out of range
        refusals, notes = settings_problems(new, old, detect_platform(), known_models(new))
        if refusals:
            raise SettingsError("; ".join(refusals))
        saved = with_changes(app.launch.base(), changes)
        try:
            config.save(saved)
        except OSError as exc:
            raise SettingsError(f"the settings could not be saved ({exc})") from None
        app.settings_saved(saved)
        reloading = app.apply_settings(new)
        changed = {k: [config.get_key(old, k), config.get_key(new, k)] for k in changes}
        return {"changed": changed, "reloading": reloading, "notes": notes}

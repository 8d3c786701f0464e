"""Settings and history in this OS's real per-user folders (CI runners are throwaway
machines): with no S2S_* override, a saved setting and a kept turn must land in
platformdirs' folders for the app and read back the same. The paths go to the job summary."""

from __future__ import annotations

import os
import sys

for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR", "S2S_LOG_DIR"):
    os.environ.pop(var, None)

import platformdirs  # noqa: E402

from s2s_desktop import config  # noqa: E402
from s2s_desktop.history import Exchange, History  # noqa: E402


def main() -> int:
    settings = config.Settings()
    settings.hotkey.combo = "ctrl+alt+k"
    saved = config.save(settings)
    loaded, warnings = config.load(saved)
    history = History()
    history.append(Exchange("What is the capital of France?", "Paris."))
    turns, problems = History().load()
    lines = [f"settings: {saved}", f"history: {history.path}", f"logs: {config.log_dir()}",
             f"cache: {config.cache_dir()}"]
    checks = {
        "settings in the OS's config folder": saved.parent
        == config.config_dir() == platformdirs.user_config_path(config.APP_NAME),
        "history in the OS's data folder": history.path.parent
        == platformdirs.user_data_path(config.APP_NAME),
        "the setting read back": loaded.hotkey.combo == "ctrl+alt+k" and not warnings,
        "the turn read back": bool(turns) and turns[-1].assistant == "Paris." and not problems,
    }
    lines += [f"{'ok' if ok else 'FAILED'}: {what}" for what, ok in checks.items()]
    print("\n".join(lines))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as f:
            f.write(f"### Settings and history paths ({sys.platform})\n\n"
                    + "\n".join(f"- `{x}`" for x in lines) + "\n\n")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

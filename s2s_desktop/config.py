"""Settings: a tree of dataclasses saved as versioned JSON, written atomically.

The CLI and the app take the same dotted keys (`--set llm.model=PATH`). Named profiles are
sets of such keys applied over the defaults (profiles.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import platformdirs

from .errors import SettingsError
from .states import STAGES

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
APP_NAME = "s2s-desktop"
DEVICES = ("auto", "cpu", "cuda", "mps", "mlx")
TTS_BITS = (0, 4, 6, 8, 16)  # MLX voice precision: 0 = as the repo is named, 16 = bf16
RETIRED = ("allow_pickle",)  # keys older versions saved: dropped without a warning
LIVE = "applies_live"  # field metadata: the next turn reads it, no model reloads for it


def applies_live(default: Any) -> Any:
    """A setting that applies to the next turn without reloading its stage's model."""
    return field(default=default, metadata={LIVE: True})


def default_hotkey() -> str:
    # not a combo desktops take for themselves (ui.hotkey_edit.TAKEN_COMBOS): ctrl+alt+space
    # opens openbox's menu, alt+space KRunner / window menus, cmd/win+space the launchers
    return "alt+space" if sys.platform == "darwin" else "ctrl+shift+space"


@dataclass
class AudioSettings:
    input_device: str = ""  # device name; "" = system default
    output_device: str = ""
    preroll_ms: int = 500  # kept from before the press so the first word is not cut
    # the microphone stays open between questions for that pre-roll; off: opened on press
    # (the desktop's "microphone in use" light is off at idle)
    keep_mic_open: bool = False
    max_record_s: float = 120.0
    min_press_ms: int = 150  # shorter presses are taps: ignored with a hint
    earcons: bool = True  # short sounds when listening starts / stops and when a turn fails
    earcon_volume: float = 0.5  # 0..1 of the sounds' full level


@dataclass
class HotkeySettings:
    combo: str = field(default_factory=default_hotkey)
    mode: str = "hold"  # hold | toggle
    debounce_ms: int = 30
    release_grace_ms: int = 50
    enabled: bool = True
    # a second key: what is said is typed into the focused app, not answered; "" = off
    dictation_combo: str = ""


@dataclass
class VADSettings:
    backend: str = "silero-onnx"  # silero-onnx (torch-free) | silero (torch) | none
    threshold: float = applies_live(0.5)
    min_speech_ms: int = applies_live(150)
    min_silence_ms: int = applies_live(300)
    pad_ms: int = applies_live(150)  # kept around each speech region
    device: str = ""


@dataclass
class STTSettings:
    backend: str = "faster-whisper"  # faster-whisper|transformers|mlx-whisper|parakeet-mlx|openai
    model: str = "Systran/faster-whisper-small"
    language: str = applies_live("")  # "" = detect
    # "languages I speak" ("en, de"): detection picks among them; the first is the usual one,
    # kept when detection is less sure than language_threshold (s2s_desktop/languages.py)
    languages: str = applies_live("")
    language_threshold: float = applies_live(0.5)
    device: str = ""  # "" = use the global device
    compute_type: str = "auto"
    beam_size: int = 1
    live: bool = applies_live(True)  # transcribe the growing recording while the key is held
    # encode short clips in a window their own size (at least 10 s), not Whisper's padded 30 s:
    # ~3x faster on CPU, and fewer word errors on spoken questions (docs/performance.md)
    short_window: bool = applies_live(True)
    base_url: str = ""  # openai backend
    api_key: str = ""  # openai backend, this launch only: kept in the OS keychain


@dataclass
class LLMSettings:
    backend: str = "llama-cpp"  # llama-cpp | transformers | mlx-lm | openai
    model: str = "bartowski/Qwen2.5-1.5B-Instruct-GGUF"
    model_file: str = "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf"  # file inside a repo/folder, if several
    device: str = ""
    system_prompt: str = applies_live(
        "You are a helpful voice assistant running on the user's computer. "
        "Answer in plain spoken sentences, briefly, without lists, markdown or emoji."
    )
    max_new_tokens: int = applies_live(200)
    temperature: float = applies_live(0.0)
    # > 1 makes tokens already in the prompt or reply less likely (llama-cpp, transformers,
    # mlx-lm); with the loop stop it keeps small models from going round in circles
    repeat_penalty: float = applies_live(1.1)
    history_turns: int = applies_live(8)  # earlier exchanges in the prompt (oldest go in blocks)
    context_tokens: int = 2048
    threads: int = 0  # 0 = choose from the CPU count
    # pause the LLM until TTS has made the first sound, so the first piece's synthesis has
    # the cores (open questions ~0.1 s sooner on 2 cores, docs/performance.md); the LLM
    # catches up while that first piece plays
    pause_for_first_audio: bool = applies_live(True)
    dtype: str = "auto"
    base_url: str = ""  # openai backend
    api_key: str = ""  # openai backend, this launch only: kept in the OS keychain
    trust_remote_code: bool = False
    compile: bool = False  # torch.compile the transformers model at load (slower load)


@dataclass
class TTSSettings:
    backend: str = "piper"  # piper | vits | kokoro | qwen3-tts | mlx-audio
    model: str = ""
    voice: str = ""
    device: str = ""
    speed: float = applies_live(1.0)
    # the voice's language: Kokoro and mlx-audio load their phonemizer and voice for it
    language: str = ""
    bits: int = 0  # MLX quantization of the voice model: 0 = bf16, or 4 / 6 / 8
    compile: bool = False  # torch.compile the torch voice model (vits, qwen3-tts) at load


@dataclass
class UISettings:
    show_conversation: bool = True
    start_at_login: bool = False
    history_enabled: bool = True
    unload_after_minutes: int = 0  # free the models after this long idle; 0 = never


@dataclass
class AssistantSettings:
    # the time, the date, timers, "say that again", "stop": answered on the device, not by
    # the LLM (phrases in resources/intents/en.json)
    local_commands: bool = True
    dictation_cleanup: bool = False  # the LLM fixes punctuation and drops filler words


@dataclass
class ListenSettings:
    # hands-free conversation: the microphone stays open, echo-cancelled, and a turn ends when
    # the speaker has finished (end-of-turn model + silence); needs the hands-free extra
    hands_free: bool = False  # start the app in it
    hands_free_timeout_s: float = 120.0  # nothing said this long: it turns itself off
    # advanced: false ends a turn on 1 s of silence alone (what HF speech-to-speech does),
    # without the end-of-turn model: slower answers, kept for comparison (scripts/hands_free_loop.py)
    turn_model: bool = True


CHECKING_CUES = ("phrase", "earcon")


@dataclass
class ToolsSettings:
    # offer tools to models that can call them (the catalog and `tools` say which can)
    enabled: bool = applies_live(True)
    # tool names switched off (Settings → Tools); --set tools.disabled=a,b
    disabled: list[str] = field(default_factory=list, metadata={LIVE: True})
    # writing tools (save a note, open an app, MCP tools not marked read-only) run unasked;
    # `run --allow-tools` sets it for one launch. Off: the user is asked each time.
    allow_writing: bool = applies_live(False)
    time_limit_s: float = applies_live(15.0)  # per call
    # what a tool turn gives as soon as the model begins a call: "phrase" ("Let me check.")
    # or "earcon" (a short sound; the phrase where audio.earcons is off)
    checking_cue: str = applies_live("phrase")


@dataclass
class Settings:
    version: int = SCHEMA_VERSION
    device: str = "auto"  # global device; a stage's own device wins over it
    audio: AudioSettings = field(default_factory=AudioSettings)
    hotkey: HotkeySettings = field(default_factory=HotkeySettings)
    vad: VADSettings = field(default_factory=VADSettings)
    stt: STTSettings = field(default_factory=STTSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    tts: TTSSettings = field(default_factory=TTSSettings)
    ui: UISettings = field(default_factory=UISettings)
    assistant: AssistantSettings = field(default_factory=AssistantSettings)
    listen: ListenSettings = field(default_factory=ListenSettings)
    tools: ToolsSettings = field(default_factory=ToolsSettings)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def copy(self) -> Settings:
        return from_dict(self.to_dict())


# ---------------------------------------------------------------- dict <-> dataclasses


def _coerce(value: Any, typ: Any, key: str) -> Any:
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{key}: expected true or false, got {value!r}")
    if typ in (int, float):
        if isinstance(value, bool):
            raise SettingsError(f"{key}: expected a number, got {value!r}")
        try:
            return typ(value) if typ is float else int(str(value), 10)
        except (TypeError, ValueError):
            raise SettingsError(f"{key}: expected {typ.__name__}, got {value!r}") from None
    if typ is str:
        return "" if value is None else str(value)
    if typ == list[str]:  # a JSON list, or "a,b" from --set
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise SettingsError(f"{key}: expected a list of names, got {value!r}")
        return [str(i).strip() for i in items if str(i).strip()]
    return value


def _fill(obj: Any, data: dict, prefix: str, strict: bool) -> None:
    hints = get_type_hints(type(obj))
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in hints:
            if full in RETIRED:
                continue
            if strict:
                raise SettingsError(f"unknown setting '{full}'")
            log.warning("ignoring unknown setting %s", full)
            continue
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise SettingsError(f"{full}: expected a section")
            _fill(current, value, full + ".", strict)
        else:
            setattr(obj, key, _coerce(value, hints[key], full))


def from_dict(data: dict, strict: bool = False) -> Settings:
    s = Settings()
    _fill(s, data, "", strict)
    validate(s)
    return s


def get_key(s: Settings, key: str) -> Any:
    obj: Any = s
    for part in key.split("."):
        if not hasattr(obj, part):
            raise SettingsError(f"unknown setting '{key}'")
        obj = getattr(obj, part)
    return obj


def set_key(s: Settings, key: str, value: Any) -> None:
    """Set a dotted key (`llm.model`) with type coercion from strings."""
    parts = key.split(".")
    obj: Any = s
    for part in parts[:-1]:
        if not hasattr(obj, part) or not dataclasses.is_dataclass(getattr(obj, part)):
            raise SettingsError(f"unknown setting '{key}'")
        obj = getattr(obj, part)
    hints = get_type_hints(type(obj))
    name = parts[-1]
    if name not in hints or dataclasses.is_dataclass(getattr(obj, name)):
        raise SettingsError(f"unknown setting '{key}'")
    setattr(obj, name, _coerce(value, hints[name], key))


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise SettingsError(f"--set expects KEY=VALUE, got '{pair}'")
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def apply_overrides(s: Settings, overrides: dict[str, Any]) -> Settings:
    for key, value in overrides.items():
        set_key(s, key, value)
    validate(s)
    return s


def validate(s: Settings) -> None:
    """Refuse values no stage could use, with the reason."""
    if s.device not in DEVICES:
        raise SettingsError(f"device: '{s.device}' is not one of {', '.join(DEVICES)}")
    for stage in STAGES:
        dev = getattr(s, stage).device
        base = dev.split(":")[0]
        if dev and base not in DEVICES:
            raise SettingsError(f"{stage}.device: '{dev}' is not one of {', '.join(DEVICES)}")
    if s.hotkey.mode not in ("hold", "toggle"):
        raise SettingsError(f"hotkey.mode: '{s.hotkey.mode}' must be hold or toggle")
    if not 0.0 < s.vad.threshold < 1.0:
        raise SettingsError("vad.threshold must be between 0 and 1")
    if not 0.0 <= s.stt.language_threshold <= 1.0:
        raise SettingsError("stt.language_threshold must be between 0 (always switch) and 1")
    if s.llm.max_new_tokens < 1:
        raise SettingsError("llm.max_new_tokens must be at least 1")
    if not 1.0 <= s.llm.repeat_penalty <= 2.0:
        raise SettingsError("llm.repeat_penalty must be between 1 (off) and 2")
    if s.llm.history_turns < 0:
        raise SettingsError("llm.history_turns cannot be negative")
    if s.ui.unload_after_minutes < 0:
        raise SettingsError("ui.unload_after_minutes must be 0 (never) or more")
    if not 0.0 <= s.audio.earcon_volume <= 1.0:
        raise SettingsError("audio.earcon_volume must be between 0 and 1")
    if s.audio.max_record_s <= 0:
        raise SettingsError("audio.max_record_s must be positive")
    if s.tools.checking_cue not in CHECKING_CUES:
        raise SettingsError(f"tools.checking_cue: '{s.tools.checking_cue}' must be "
                            f"{' or '.join(CHECKING_CUES)}")
    check_tts_bits(s.tts.bits)
    if not 0.25 <= s.tts.speed <= 4.0:
        raise SettingsError("tts.speed must be between 0.25 and 4")


def check_tts_bits(bits: int) -> None:
    if bits not in TTS_BITS:
        accepted = ", ".join(str(b) for b in TTS_BITS)
        raise SettingsError(
            f"tts.bits: {bits} is not one of {accepted} (0 = as the model is named, 16 = bf16)"
        )


def _reload_keys(section) -> dict:
    """The section's settings that its model is loaded with (those not `applies_live`)."""
    return {
        f.name: getattr(section, f.name)
        for f in dataclasses.fields(section)
        if not f.metadata.get(LIVE)
    }


def changed_stages(old: Settings, new: Settings) -> list[str]:
    """Stages whose engine must reload when settings go from `old` to `new`."""
    out = []
    for stage in STAGES:
        a, b = _reload_keys(getattr(old, stage)), _reload_keys(getattr(new, stage))
        if a != b or (old.device != new.device and not getattr(new, stage).device):
            out.append(stage)
    return out


# ---------------------------------------------------------------- files


def config_dir() -> Path:
    return Path(os.environ.get("S2S_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    return Path(os.environ.get("S2S_DATA_DIR") or platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    return Path(os.environ.get("S2S_CACHE_DIR") or platformdirs.user_cache_dir(APP_NAME))


def log_dir() -> Path:
    return Path(os.environ.get("S2S_LOG_DIR") or platformdirs.user_log_dir(APP_NAME))


def settings_path() -> Path:
    return config_dir() / "settings.json"


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same folder, fsync, then os.replace: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)  # private to the user
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save(s: Settings, path: Path | None = None) -> Path:
    path = path or settings_path()
    validate(s)
    data = s.to_dict()
    for section in ("llm", "stt"):  # API keys belong in the OS keychain, never in the file
        data[section]["api_key"] = ""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def _keep_aside(path: Path, why: str) -> Path:
    aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(path, aside)
    log.warning("settings file %s %s; kept as %s, using defaults", path, why, aside)
    return aside


def load(path: Path | None = None) -> tuple[Settings, list[str]]:
    """Load settings. Returns (settings, warnings); never raises for a bad file."""
    path = path or settings_path()
    warnings: list[str] = []
    if not path.exists():
        return Settings(), warnings
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        version = data.get("version", SCHEMA_VERSION)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            aside = _keep_aside(path, f"is from a newer version ({version})")
            warnings.append(
                f"Settings file is from a newer version of s2s-desktop; kept as {aside.name}, "
                "using defaults."
            )
            return Settings(), warnings
        data["version"] = SCHEMA_VERSION
        return from_dict(data), warnings
    except (OSError, ValueError, UnicodeDecodeError, SettingsError) as exc:
        try:
            aside = _keep_aside(path, f"is unreadable ({exc})")
            where = f"kept as {aside.name}"
        except OSError:
            where = "left in place"
        warnings.append(f"Settings file was unreadable ({exc}); {where}, using defaults.")
        return Settings(), warnings

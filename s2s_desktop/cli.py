"""`s2s-desktop`: the app (no arguments), `run` (WAV or text in → WAV out, headless), `bench`,
`models`, `cuda`, `devices`, `tools`, and the commands a running app accepts (toggle,
talk-start, talk-stop, quit, status, ask, stop, set, get, hands-free)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import sys

from . import __version__
from .errors import S2SError
from .profiles import PROFILES

APP_COMMANDS = ("toggle", "talk-start", "talk-stop", "quit", "status", "stop", "hands-free")
APP_COMMAND_HELP = {
    "toggle": "tell the running app to start listening, or to stop and send (bind this to a "
    "desktop shortcut on Wayland)",
    "talk-start": "tell the running app to start listening",
    "talk-stop": "tell the running app to stop listening and answer",
    "quit": "tell the running app to quit",
    "status": "print the running app's state, loaded models, hotkey and last turn",
    "stop": "tell the running app to stop speaking (the reply is kept as far as spoken)",
    "hands-free": "turn the running app's hands-free conversation on or off (no key: it "
    "listens, answers when you finish, and turns itself off after listen.hands_free_timeout_s)",
}
DESCRIPTION = """A private, local push-to-talk voice assistant.

With no command, starts the desktop app (a tray icon, or a small window where there is no
tray): hold the talk key, ask, let go. The commands below work headless or talk to the
running app."""
EPILOG = """examples:
  s2s-desktop                              start the app with the saved settings
  s2s-desktop --profile starter            this launch only: the small offline starter models
  s2s-desktop run -i question.wav          answer a recording; the reply goes to ./s2s-output
  s2s-desktop run --text "What time is it?"  answer a typed question the same way
  s2s-desktop ask "What time is it?"       ask the running app; it answers aloud
  s2s-desktop models list                  which models are installed and which are in use
  s2s-desktop toggle                       start/stop listening in the running app
  s2s-desktop hands-free on                talk without the key until you say nothing for a while
  s2s-desktop set tts.speed=1.3            the running app speaks faster (saved, as Settings… does)

Settings live in settings.json (Settings… in the app, or `s2s-desktop set`); --profile and
--set apply to one launch of the app and are never saved."""


class _Question(argparse.Action):
    """--input and --text append to one list, so a conversation keeps their order."""

    def __call__(self, parser, namespace, value, option_string=None):
        from .pipeline.runner import TypedQuestion

        questions = list(getattr(namespace, "questions", None) or [])
        questions.append(TypedQuestion(value) if option_string == "--text" else value)
        namespace.questions = questions


def _add_settings_options(p: argparse.ArgumentParser, top: bool = False) -> None:
    # On subcommands the defaults are suppressed, so options given before the subcommand stay.
    p.add_argument("--profile", default=None if top else argparse.SUPPRESS,
                   choices=tuple(PROFILES),
                   help="named settings for this launch: starter (small offline models from "
                        "pip packages) or auto (the recommended models for this computer)")
    p.add_argument("--set", dest="overrides", action="append",
                   default=[] if top else argparse.SUPPRESS, metavar="KEY=VALUE",
                   help="change one setting for this launch (repeatable), e.g. "
                        "--set llm.model=PATH or --set stt.language=de")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="s2s-desktop",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"s2s-desktop {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    _add_settings_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="answer recorded or typed questions headless: WAV out",
        description="Answer recorded or typed questions without a window or sound card: "
        "each --input or --text is one turn of one conversation, in order; the spoken replies "
        "are written as turn-N.wav.",
    )
    run.add_argument("--input", "-i", action=_Question, dest="questions", default=[],
                     help="a recording (WAV/FLAC/OGG); repeat for a conversation")
    run.add_argument("--text", "-t", action=_Question, dest="questions", metavar="TEXT",
                     help="a typed question; repeat, and mix with --input, in order")
    run.add_argument("--output-dir", "-o", default="s2s-output",
                     help="where turn-N.wav replies go (default: ./s2s-output)")
    run.add_argument("--json", action="store_true", help="one JSON object per turn")
    run.add_argument("--allow-tools", action="store_true",
                     help="let tools that change something (save a note, open an app, MCP "
                          "tools not marked read-only) run unasked; without it they are denied")
    _add_settings_options(run)

    bench = sub.add_parser(
        "bench",
        help="measure latency on spoken questions",
        description="Measure release-to-first-audio and each stage's time on spoken "
        "questions with the settings' models; prints medians and ranges.",
    )
    bench.add_argument("--runs", type=int, default=5,
                       help="how many times each question is asked (default: 5)")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--plot", metavar="FILE.png", help="also draw the timings into FILE.png")
    bench.add_argument("--questions", metavar="FILE", type=pathlib.Path,
                       help="ask these instead of the held-out set: one 'espeak voice | "
                            "question' a line (scripts/questions/reporting.txt)")
    _add_settings_options(bench)

    try:
        from .commands.models import add_models_parser
    except ImportError:
        add_models_parser = None
    if add_models_parser is not None:
        add_models_parser(sub)
    from .commands.cuda import add_cuda_parser
    from .commands.tools import add_tools_parser

    add_cuda_parser(sub)
    add_tools_parser(sub)

    dev = sub.add_parser(
        "devices",
        help="list compute and audio devices",
        description="List the compute devices (CPU, CUDA, MPS, MLX) each stage can use and "
        "the microphones and speakers PortAudio sees.",
    )
    dev.add_argument("--json", action="store_true", help="machine-readable output")
    _add_settings_options(dev)

    for name in APP_COMMANDS:
        p = sub.add_parser(name, help=APP_COMMAND_HELP[name],
                           description=APP_COMMAND_HELP[name][:1].upper()
                           + APP_COMMAND_HELP[name][1:] + ".")
        if name == "status":
            p.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "hands-free":
            p.add_argument("switch", choices=("on", "off"), help="on or off")
    set_ = sub.add_parser(
        "set", help="change settings of the running app and save them, as Settings… does",
        description="Change settings of the running app and save them, as Settings → Apply "
        "does: a live setting applies from the next question, a model setting reloads that "
        "model. A bad key or value changes nothing.",
        epilog="e.g. s2s-desktop set tts.speed=1.3   s2s-desktop set llm.max_new_tokens=120")
    set_.add_argument("changes", nargs="+", metavar="KEY=VALUE",
                      help="a setting and its new value (`s2s-desktop get` lists the keys)")
    set_.add_argument("--json", action="store_true", help="machine-readable output")
    get = sub.add_parser("get", help="print the running app's settings, or one of them",
                         description="Print the running app's settings (KEY = VALUE), a "
                         "section's (get llm) or one value alone (get tts.speed).")
    get.add_argument("key", nargs="?", metavar="KEY", help="a setting or a section, e.g. tts.speed")
    get.add_argument("--json", action="store_true", help="machine-readable output")
    ask = sub.add_parser("ask", help="send a typed question to the running app (it answers aloud)")
    ask.add_argument("text", metavar="TEXT", help='the question, e.g. "What time is it?"')
    ask.add_argument("--json", action="store_true", help="print the turn's JSON record")
    ask.add_argument("--no-wait", action="store_true", help="return once the app has the question")
    return parser


def _settings(args):
    from . import config
    from .launch import resolve_launch

    overrides = config.parse_overrides(getattr(args, "overrides", []) or [])
    launch = resolve_launch(getattr(args, "profile", None), overrides)
    settings, warnings = launch.settings, launch.warnings
    from .keychain import fill_api_keys

    fill_api_keys(settings)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return settings


LATENCY_PARTS = (("vad", "vad"), ("stt", "stt"), ("llm first token", "llm_first_token"),
                 ("tts first chunk", "tts_first_chunk"))


def _run_failed(args, error: str, code: int) -> int:
    """A run that answered nothing: the reason, as a JSON object with --json."""
    if args.json:
        print(json.dumps({"error": error}, ensure_ascii=False), flush=True)
    else:
        print(f"error: {error}", file=sys.stderr)
    return code


def cmd_run(args) -> int:
    from .pipeline.runner import run_files
    from .pipeline.turns import AnsweredBy
    from .states import TurnReason

    def show(rec: dict) -> None:  # FinishedTurn.to_dict() plus the reply's audio file
        if args.json:
            print(json.dumps(rec, ensure_ascii=False), flush=True)
            return
        t = rec["timings_ms"]
        print(f"[turn {rec['turn']}] {rec['input']}")
        print(f"  you:       {rec['transcript'] or '(nothing heard)'}")
        if rec["reason"] != TurnReason.OK:
            print(f"  ({rec['reason']}{': ' + rec['error'] if rec['error'] else ''})")
        if rec["reply"]:
            by = " (answered on this device)" if rec["answered_by"] == AnsweredBy.LOCAL else ""
            print(f"  assistant: {rec['reply']}{by}")
        for call in rec.get("tool_calls") or []:
            told = call.get("result", call.get("error", ""))
            print(f"  tool:      {call['name']}({json.dumps(call['arguments'])}) → "
                  f"{call['outcome']}: {told} ({call['ms']:.0f} ms)")
        if rec["audio"]:
            print(f"  audio:     {rec['audio']} ({rec['audio_seconds']} s)")
        if t.get("release_to_first_audio") is not None:
            # a typed turn has no vad/stt, a local answer no llm: say what there was
            parts = ", ".join(f"{name} {t[key]:.0f}" for name, key in LATENCY_PARTS
                              if t.get(key) is not None)
            print(f"  latency:   {t['release_to_first_audio']:.0f} ms to first audio ({parts})")
        sys.stdout.flush()

    if not args.questions:
        return _run_failed(args, 'give a question: --input QUESTION.wav or --text "What time '
                           'is it?"', 2)
    try:
        settings = _settings(args)
        settings.tools.allow_writing = settings.tools.allow_writing or args.allow_tools
        results = run_files(settings, args.questions, args.output_dir, on_turn=show)
    except S2SError as exc:
        return _run_failed(args, str(exc), 1)
    errors = [r for r in results if r["reason"] == TurnReason.ERROR]
    return 1 if errors and len(errors) == len(results) else 0


def cmd_bench(args) -> int:
    from .commands.bench import bench_command

    return bench_command(args, _settings(args))


def cmd_tools(args) -> int:
    from .commands.tools import tools_command

    return tools_command(args, _settings(args))


def cmd_devices(args) -> int:
    from .commands.devices import devices_command

    return devices_command(args.json, _settings(args))


def cmd_app_control(args) -> int:
    from .ipc import send_command

    payload = {"on": args.switch == "on"} if args.command == "hands-free" else None
    return send_command(args.command, json_output=getattr(args, "json", False), payload=payload)


def cmd_settings(args) -> int:
    from .ipc import send_settings

    if args.command == "get":
        return send_settings(None, key=args.key, json_output=args.json)
    bad = next((pair for pair in args.changes if "=" not in pair), None)
    if bad is not None:
        print(f"error: set expects KEY=VALUE, got '{bad}' (e.g. s2s-desktop set tts.speed=1.3)",
              file=sys.stderr)
        return 2
    from .config import parse_overrides

    return send_settings(parse_overrides(args.changes), json_output=args.json)


def cmd_ask(args) -> int:
    from .ipc import send_question

    return send_question(args.text, json_output=args.json, wait=not args.no_wait)


def cmd_app(args) -> int:
    from .app import run_app

    return run_app(args)


def setup_logging(verbose: bool, to_file: bool) -> None:
    level = logging.DEBUG if verbose else logging.INFO
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.DEBUG if verbose else logging.WARNING)  # the file gets INFO too
    handlers: list[logging.Handler] = [console]
    if to_file:
        from logging.handlers import RotatingFileHandler

        from .config import log_dir

        try:
            log_dir().mkdir(parents=True, exist_ok=True)
            handlers.append(RotatingFileHandler(log_dir() / "s2s-desktop.log",
                                                maxBytes=2_000_000, backupCount=3))
            handlers[-1].setLevel(logging.DEBUG if verbose else logging.INFO)
        except OSError:
            pass
    logging.basicConfig(level=level, handlers=handlers,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose, to_file=args.command is None)
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    handlers = {"run": cmd_run, "bench": cmd_bench, "devices": cmd_devices, "ask": cmd_ask,
                "tools": cmd_tools, None: cmd_app}
    if args.command == "models":
        from .commands.models import models_command

        handler = models_command
    elif args.command == "cuda":
        from .commands.cuda import cuda_command

        handler = cuda_command
    elif args.command in APP_COMMANDS:
        handler = cmd_app_control
    elif args.command in ("set", "get"):
        handler = cmd_settings
    else:
        handler = handlers[args.command]
    try:
        code = handler(args)
        sys.stdout.flush()  # here, so a reader that left (`| head`) is met below
        return code
    except BrokenPipeError:
        # the reader stopped reading (`| head -c 100`): what it wanted it has; end quietly,
        # and point stdout at nothing so the exit's own flush says nothing either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a program the pipe stopped would end
    except S2SError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # never a bare traceback for the user; details go to the log
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        print(f"error: unexpected {type(exc).__name__}: {exc} (run with -v for details)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

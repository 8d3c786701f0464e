"""The user's MCP servers through the official `mcp` SDK: one background thread runs an
asyncio loop with a client session per server (stdio or Streamable HTTP). Servers start in
the background, never delaying an answer; their tools join the ToolBox as they come. A server
that fails to start or dies is reported (`problems`) and started again on its next use."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from ..errors import BackendUnavailable
from ..keychain import load_secret
from .mcp_config import McpServerConfig
from .spec import Tool, ToolError, ToolSpec
from .toolbox import ToolBox

log = logging.getLogger(__name__)

START_TIMEOUT_S = 20.0
RETRY_GAP_S = 30.0  # a server that keeps failing is tried again at most this often per turn


@dataclass
class _Server:
    config: McpServerConfig
    session: object = None
    closing: asyncio.Event | None = None
    error: str = ""
    generation: int = 0  # which start this is: an old session's end leaves a new one be
    retried_at: float = 0.0  # time.monotonic() of the last retry_failed() start (0: none)
    ready: threading.Event = field(default_factory=threading.Event)
    tools: list[ToolSpec] = field(default_factory=list)


def _mcp():
    try:
        import mcp
        import mcp.client.streamable_http as http
        from mcp.client.stdio import stdio_client
    except ImportError as exc:
        raise BackendUnavailable("mcp", "mcp", "mcp") from exc
    # the SDK's 2.x name, then 1.x's
    http_client = getattr(http, "streamable_http_client", None) or http.streamablehttp_client
    return mcp, stdio_client, http_client


def _field(obj, *names):
    """The first of `names` obj has (the SDK's 2.x snake_case, then 1.x camelCase)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _result_text(result) -> str:
    parts = []
    for item in getattr(result, "content", None) or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'data')}]")
    structured = _field(result, "structured_content", "structuredContent")
    if not parts and structured is not None:
        parts.append(str(structured))
    return "\n".join(parts)


class McpServers:
    """The configured servers, their tools registered in `box` (source = server name)."""

    def __init__(self, configs: list[McpServerConfig], box: ToolBox):
        self.box = box
        self._servers = {c.name: _Server(c) for c in configs if not c.disabled}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        for c in configs:
            box.auto_approved |= {t for t in c.auto_approve}
        # a turn that lists the tools starts failed servers again (in the background)
        box.refresh = lambda: self.retry_failed(min_gap_s=RETRY_GAP_S)

    # -- lifecycle (any thread) -----------------------------------------------------------
    def start(self) -> None:
        """Start every enabled server in the background (returns at once)."""
        if not self._servers:
            return
        try:
            _mcp()
        except BackendUnavailable as exc:
            for server in self._servers.values():
                server.error = str(exc)
            return
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever,
                                                name="mcp-servers", daemon=True)
                self._thread.start()
        for server in self._servers.values():
            self._launch(server)

    def _launch(self, server: _Server) -> None:
        if server.closing is not None:  # the old session (if any) ends
            self._loop.call_soon_threadsafe(server.closing.set)
        server.ready.clear()
        server.session = None
        server.generation += 1
        asyncio.run_coroutine_threadsafe(self._serve(server, server.generation), self._loop)

    def wait_started(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until every server is up or failed (tests, `s2s-desktop tools`)."""
        until = time.monotonic() + timeout_s
        for server in self._servers.values():
            server.ready.wait(max(0.0, until - time.monotonic()))

    def retry_failed(self, wait_s: float = 0.0, min_gap_s: float = 0.0) -> list[str]:
        """Start again each server that failed to start or died (not one starting now, nor
        one retried less than `min_gap_s` ago); wait up to `wait_s` for them. Their names."""
        if self._loop is None:
            return []
        now = time.monotonic()
        with self._lock:  # the LLM stage and Settings may ask at once: one start each
            down = [s for s in self._servers.values() if s.ready.is_set() and s.session is None
                    and (not s.retried_at or now - s.retried_at >= min_gap_s)]
            for server in down:
                log.info("MCP server %s: starting it again (%s)", server.config.name,
                         server.error)
                server.retried_at = now
                self._launch(server)
        until = now + wait_s
        for server in down:
            server.ready.wait(max(0.0, until - time.monotonic()))
        return [s.config.name for s in down]

    def starting(self) -> bool:
        """A server is starting now (its tools may come)."""
        return any(not s.ready.is_set() for s in self._servers.values())

    def close(self) -> None:
        loop = self._loop
        if loop is None:
            return
        for server in self._servers.values():
            if server.closing is not None:
                loop.call_soon_threadsafe(server.closing.set)
        time.sleep(0.2)  # the sessions close their processes
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = None

    def problems(self) -> dict[str, str]:
        """{server: what went wrong} for servers that failed to start or died."""
        return {name: s.error for name, s in self._servers.items() if s.error}

    def status(self) -> list[dict]:
        return [{"server": name, "transport": s.config.transport,
                 "running": s.session is not None, "starting": not s.ready.is_set(),
                 "error": s.error,
                 "tools": [t.name for t in s.tools]} for name, s in self._servers.items()]

    # -- the loop's side --------------------------------------------------------------------
    async def _serve(self, server: _Server, generation: int) -> None:
        mcp, stdio_client, http_client = _mcp()
        cfg = server.config
        server.closing = closing = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                if cfg.transport == "http":
                    streams = await stack.enter_async_context(http_client(cfg.url))
                else:
                    params = mcp.StdioServerParameters(command=cfg.command, args=list(cfg.args),
                                                       env=server_env(cfg) or None)
                    streams = await stack.enter_async_context(stdio_client(params))
                read, write = streams[0], streams[1]  # 1.x's HTTP client adds a third
                session = await stack.enter_async_context(mcp.ClientSession(read, write))
                await asyncio.wait_for(session.initialize(), START_TIMEOUT_S)
                listed = await asyncio.wait_for(session.list_tools(), START_TIMEOUT_S)
                self._register(server, listed.tools)
                server.session, server.error, server.retried_at = session, "", 0.0
                server.ready.set()
                log.info("MCP server %s: %d tools", cfg.name, len(server.tools))
                await closing.wait()
        except BaseException as exc:  # an ExceptionGroup from the SDK's task group too
            if generation == server.generation and not isinstance(exc, asyncio.CancelledError):
                server.error = _why(cfg, exc)
                log.warning("MCP server %s failed: %s", cfg.name, server.error)
        finally:
            if generation == server.generation:
                server.session = None
                server.ready.set()

    def _register(self, server: _Server, tools) -> None:
        self.box.remove_source(server.config.name)
        server.tools = []
        for t in tools:
            hints = getattr(t, "annotations", None)
            spec = ToolSpec(t.name, t.description or t.name,
                            _field(t, "input_schema", "inputSchema")
                            or {"type": "object", "properties": {}},
                            read_only=bool(_field(hints, "read_only_hint", "readOnlyHint")),
                            source=server.config.name)
            server.tools.append(spec)
            self.box.add(Tool(spec, self._caller(server.config.name, t.name),
                              describe=lambda args, n=t.name: f"run {n} with {args}"))

    def _caller(self, server_name: str, tool_name: str):
        def run(args: dict, stop: threading.Event) -> str:
            return self.call(server_name, tool_name, args, stop)
        return run

    # -- calls (the LLM stage's thread) ---------------------------------------------------
    def call(self, server_name: str, tool_name: str, args: dict, stop: threading.Event) -> str:
        server = self._servers[server_name]
        if server.session is None:  # failed or died: started again now (unless it is starting)
            with self._lock:
                if server.ready.is_set() and server.session is None:
                    self._launch(server)
            server.ready.wait(START_TIMEOUT_S)
            if server.session is None:
                raise ToolError(f"the MCP server '{server_name}' is not running: "
                                f"{server.error or 'it did not start'}")
        future = asyncio.run_coroutine_threadsafe(
            server.session.call_tool(tool_name, args), self._loop)
        while True:
            try:
                result = future.result(timeout=0.05)
                break
            except TimeoutError:
                if stop.is_set():
                    future.cancel()  # the SDK tells the server the request is cancelled
                    raise ToolError("stopped") from None
            except Exception as exc:  # the server died or broke the protocol
                server.error = f"it stopped during {tool_name}: {exc}"
                server.session = None  # started again on the next use
                raise ToolError(f"the MCP server '{server_name}' failed during {tool_name} "
                                f"({exc}); it is started again on the next use") from exc
        text = _result_text(result)
        if _field(result, "is_error", "isError"):
            raise ToolError(text or f"{tool_name} failed")
        return text


KEYCHAIN = "keychain:"


def server_env(cfg: McpServerConfig) -> dict[str, str]:
    """The server's env, a "keychain:NAME" value read from the OS keychain (secrets stay out
    of mcp.json); a missing secret is an error naming how to store it."""
    env = {}
    for key, value in cfg.env.items():
        if value.startswith(KEYCHAIN):
            name = value[len(KEYCHAIN):]
            value = load_secret(name)
            if not value:
                raise RuntimeError(f"the secret '{name}' for {key} is not in the OS keychain: "
                                   f"store it with `keyring set s2s-desktop {name}`")
        env[key] = value
    return env


def _why(cfg: McpServerConfig, exc: BaseException) -> str:
    inner = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    if isinstance(inner, FileNotFoundError):
        return (f"its command '{cfg.command}' was not found: install it or fix "
                f"mcpServers.{cfg.name}.command in mcp.json")
    if isinstance(inner, TimeoutError):
        return f"it did not answer within {START_TIMEOUT_S:.0f} s"
    if "connection closed" in str(inner).lower() and cfg.transport != "http":
        command = " ".join([cfg.command, *cfg.args])
        return (f"it exited before answering (connection closed): run `{command}` in a "
                "terminal to see its error")
    return f"{type(inner).__name__}: {inner}" if str(inner) else type(inner).__name__

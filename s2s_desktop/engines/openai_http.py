"""HTTP plumbing shared by the OpenAI-compatible client backends (LLM and STT).

Standard library only (http.client), so the backends need no extra package. Requests go to
`base_url` alone: redirects are refused rather than followed, so an API key is only ever sent
to the host the user typed, and it never appears in a log line or an error message.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import S2SError, SettingsError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0  # first byte of the answer (a server may be loading its model)


class ServerError(S2SError):
    """An OpenAI-compatible server is down, refused the request, or answered with an error."""


@dataclass
class Endpoint:
    base_url: str  # as typed, for messages
    scheme: str
    host: str
    port: int
    path: str  # path prefix, e.g. "/v1"

    @property
    def is_loopback(self) -> bool:
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_base_url(base_url: str, key: str) -> Endpoint:
    if not base_url.strip():
        raise SettingsError(
            f"{key} is not set: give the server's address, "
            f"e.g. --set {key}=http://127.0.0.1:8080/v1"
        )
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{key} '{base_url}' is not an http:// or https:// address")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Endpoint(base_url.strip(), parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def plain_http_warning(endpoint: Endpoint, what: str) -> str | None:
    """A warning when text/audio would cross the network unencrypted."""
    if endpoint.scheme == "http" and not endpoint.is_loopback:
        return (
            f"{what} at {endpoint.base_url} is reached over plain http://: what you say "
            "travels unencrypted; use https:// for servers on other machines"
        )
    return None


def _ssl_context() -> ssl.SSLContext:
    try:  # the OS trust store, so corporate/self-managed CAs work like in the browser
        import truststore

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:
        return ssl.create_default_context()


class Request:
    """One POST whose response body can be read incrementally and aborted from any thread."""

    def __init__(self, endpoint: Endpoint, what: str, connect_timeout: float, read_timeout: float):
        self.endpoint, self.what = endpoint, what
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.conn: http.client.HTTPConnection | None = None
        self.response: http.client.HTTPResponse | None = None
        self._lock = threading.Lock()
        self._aborted = False

    def open(self, route: str, body: bytes | None, content_type: str, api_key: str = "",
             method: str = "POST"):
        ep = self.endpoint
        if ep.scheme == "https":
            conn = http.client.HTTPSConnection(
                ep.host, ep.port, timeout=self.connect_timeout, context=_ssl_context()
            )
        else:
            conn = http.client.HTTPConnection(ep.host, ep.port, timeout=self.connect_timeout)
        headers = {"Content-Type": content_type, "Accept": "application/json, text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        with self._lock:
            self.conn = conn
        try:
            conn.connect()  # bounded by connect_timeout
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if self._aborted:
                return None
            if isinstance(exc, ssl.SSLError):
                raise ServerError(
                    f"the {self.what} at {ep.base_url} failed the TLS check ({exc}): "
                    "check its certificate, or that the address really is https"
                ) from exc
            raise self._unreachable() from exc
        try:
            if self._aborted:
                return None
            conn.sock.settimeout(self.read_timeout)  # from here on: time to the first byte
            conn.request(method, ep.path + route, body=body, headers=headers)
            resp = conn.getresponse()
        except TimeoutError as exc:
            self.close()
            if self._aborted:
                return None
            raise ServerError(
                f"{self.what} at {ep.base_url} did not answer within {self.read_timeout:g} s: "
                "it may still be loading the model or be overloaded; try again"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if self._aborted:
                return None
            raise ServerError(
                f"the {self.what} at {ep.base_url} closed the connection "
                f"without answering ({exc}): check its log"
            ) from exc
        with self._lock:
            self.response = resp
        if resp.status >= 300:
            try:
                raise self._status_error(resp, route)
            finally:
                self.close()
        return resp

    def _unreachable(self) -> ServerError:
        return ServerError(
            f"cannot reach the {self.what} at {self.endpoint.base_url}: "
            "is it running? (check the address and port)"
        )

    def _status_error(self, resp: http.client.HTTPResponse, route: str) -> ServerError:
        detail = server_message(resp.read(4096))
        ep, status = self.endpoint.base_url, resp.status
        if 300 <= status < 400:
            where = resp.getheader("Location", "another address")
            return ServerError(
                f"{self.what} at {ep} redirects to {where}: not followed, so "
                "the API key stays with this host; set that address instead"
            )
        if status in (401, 403):
            return ServerError(
                f"{self.what} at {ep} refused the request ({status}: {detail}): "
                "check the API key in Settings"
            )
        if status == 404:
            if "model" in detail.lower():
                return ServerError(
                    f"{self.what} at {ep} has no such model ({detail}): "
                    "choose one the server lists at /v1/models"
                )
            return ServerError(
                f"{self.what} at {ep} has no {route} endpoint "
                "(404): check the address; it usually ends in /v1"
            )
        if status == 503:
            return ServerError(
                f"{self.what} at {ep} is busy or still loading (503: {detail}): "
                "try again in a moment"
            )
        return ServerError(f"{self.what} at {ep} answered {status}: {detail}")

    def readline(self) -> bytes:
        """Next line of the body; b"" at its end or once aborted."""
        try:
            return self.response.readline() if self.response else b""
        except TimeoutError as exc:
            if self._aborted:
                return b""
            raise ServerError(
                f"{self.what} at {self.endpoint.base_url} stopped sending for "
                f"{self.read_timeout:g} s: try again"
            ) from exc
        except (OSError, ValueError, AttributeError, http.client.HTTPException) as exc:
            if self._aborted:  # the socket was shut under us on purpose
                return b""
            raise ServerError(
                f"the connection to the {self.what} at "
                f"{self.endpoint.base_url} broke mid-reply: {exc}"
            ) from exc

    def abort(self) -> None:
        """Close the connection from any thread; a read blocked in recv returns at once."""
        self._aborted = True
        with self._lock:
            sock = self.conn.sock if self.conn else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @property
    def aborted(self) -> bool:
        return self._aborted

    def close(self) -> None:
        with self._lock:
            resp, conn = self.response, self.conn
        if resp is not None:
            try:
                resp.close()
            except OSError:
                pass
        if conn is not None:
            conn.close()


def abort_on(stop: threading.Event, request: Request) -> threading.Event:
    """Watch `stop` on a helper thread and abort `request` when it is set. Set the returned
    event when the request is over, to end the watcher."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(0.05):
                request.abort()
                return

    threading.Thread(target=watch, name="http-abort-watch", daemon=True).start()
    return done


def server_message(raw: bytes) -> str:
    """The human part of an error body: OpenAI's {"error": {"message"}} or FastAPI's detail."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:200] or "no details"
    for _ in range(4):  # unwrap {"detail": {"error": {"message": ...}}} and the like
        if not isinstance(data, dict):
            break
        inner = next((data[k] for k in ("message", "error", "detail") if k in data), None)
        if inner is None:
            break
        data = inner
    return str(data)[:200]


def list_models(base_url: str, api_key: str = "", key: str = "llm.base_url",
                timeout_s: float = 10.0) -> list[str]:
    """The model ids a server offers (GET /models): the settings dialog's connection test."""
    import json

    endpoint = parse_base_url(base_url, key)
    request = Request(endpoint, "server", connect_timeout=timeout_s, read_timeout=timeout_s)
    try:
        resp = request.open("/models", None, "application/json", api_key, method="GET")
        data = json.loads(resp.read() or b"{}")
    except (ValueError, OSError) as exc:
        raise ServerError(f"the server at {base_url} gave no model list ({exc})") from exc
    finally:
        request.close()
    models = data.get("data", []) if isinstance(data, dict) else []
    return [str(m.get("id")) for m in models if isinstance(m, dict) and m.get("id")]

"""TensorScale, the first ``MediaGenerationProvider`` (the seed fixes its wire contract).

JSON POST with ``Authorization: Bearer <key>`` to, under the HTTPS base URL:

- ``/v2/sensenova-u1.5/t2i``  ``{"prompt", "size", "seed"?}``
- ``/v2/sensenova-u1.5/edit`` the same plus ``"images": [data URI, ...]`` in order
- ``/v2/ltx-2.5/fast``        ``{"prompt", "size", "duration_seconds", "seed"?, "frames"?}``,
  frames ``{"index", "image", "strength": 1}`` at 0 and duration_seconds * 24.

A success is status 200 with ``Content-Type`` image/png (video/mp4) and a non-empty body
with that signature, at most the request's cap, framed by a Content-Length or chunked
encoding: a body that ends only when the connection closes is refused, since a provider dying
mid-body would read as its end (Python's ssl lets a TLS close without close_notify pass). The
client is the host's (no redirects followed, no proxy variables, no retries,
TOOLHOST_CA_BUNDLE's roots). Nothing the provider sends is kept for a message or detail:
only the status code and which check failed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
from collections.abc import Generator, Iterator
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from toolhost import Secret, ToolFailure
from toolhost_media.bounds import FRAMES_PER_SECOND
from toolhost_media.messages import (
    CONNECTION_LOST,
    INVALID_RESPONSE,
    PROVIDER_FAILED,
    PROVIDER_REJECTED,
    PROVIDER_TIMEOUT,
    PROVIDER_UNREACHABLE,
    STREAM_OVER_CAP,
)
from toolhost_media.provider import GenerationRequest, ImageRequest, ReferenceImage

__all__ = [
    "BASE_URL_SETTING",
    "DEFAULT_BASE_URL",
    "EDIT",
    "TEXT_TO_IMAGE",
    "TEXT_TO_VIDEO",
    "TensorScale",
    "base_url_problem",
    "key_problem",
    "signature_ok",
]

BASE_URL_SETTING: Final = "TENSORSCALE_BASE_URL"
#: TensorScale's public API origin, used when TENSORSCALE_BASE_URL is unset.
DEFAULT_BASE_URL: Final = "https://api.tensorscale.ai"

TEXT_TO_IMAGE: Final = "/v2/sensenova-u1.5/t2i"
EDIT: Final = "/v2/sensenova-u1.5/edit"
TEXT_TO_VIDEO: Final = "/v2/ltx-2.5/fast"

#: Enough leading bytes to judge either signature.
_SIGNATURE_BYTES = 12


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be TensorScale's base URL (one line for the operator), or None.

    HTTPS only (the key is a bearer token), a host, and nothing a request would drop or
    misread: no credentials, query or fragment. A path prefix (a gateway) is allowed.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
        httpx.URL(url)  # what the client will parse: a host it cannot use is refused here
    except (ValueError, httpx.InvalidURL):
        return f"{BASE_URL_SETTING} is not a URL"
    del port  # parsed only to refuse a malformed port
    if parts.scheme != "https":
        return f"{BASE_URL_SETTING} must be an https:// URL (the API key is sent with it)"
    if not parts.hostname:
        return f"{BASE_URL_SETTING} has no host"
    if parts.username is not None or parts.password is not None:
        return f"{BASE_URL_SETTING} must not hold credentials: set TENSORSCALE_API_KEY"
    # The raw marks, not the parsed parts: "https://host/?" has an empty query, yet a path
    # appended to it would land after the "?".
    if "?" in url or "#" in url:
        return f"{BASE_URL_SETTING} must not have a query or fragment"
    return None


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be sent as the bearer token (one line for the operator, which
    never holds the key or a character of it), or None. A header value is ASCII, and a CR or
    LF inside would end the header early: only printable ASCII goes on the wire."""
    if key.isascii() and key.isprintable():
        return None
    return ("TENSORSCALE_API_KEY holds a character an HTTP header cannot carry: it must be "
            "printable ASCII")


def signature_ok(media_type: str, head: bytes) -> bool:
    """Whether ``head`` (the first bytes) starts a PNG (image/png) or an MP4 (video/mp4)."""
    if media_type == "image/png":
        return head.startswith(b"\x89PNG\r\n\x1a\n")
    # ISO base media: a box size, then the first box's type, "ftyp".
    return len(head) >= 8 and head[4:8] == b"ftyp"


def _data_uri(reference: ReferenceImage) -> str:
    encoded = base64.b64encode(reference.content).decode("ascii")
    return f"data:{reference.media_type};base64,{encoded}"


def wire_request(request: GenerationRequest) -> tuple[str, dict[str, Any]]:
    """The endpoint path and JSON body for ``request`` (reference bytes as data URIs)."""
    body: dict[str, Any] = {"prompt": request.prompt, "size": request.size}
    if isinstance(request, ImageRequest):
        if request.seed is not None:
            body["seed"] = request.seed
        if not request.references:
            return TEXT_TO_IMAGE, body
        body["images"] = [_data_uri(r) for r in request.references]
        return EDIT, body
    body["duration_seconds"] = request.duration_seconds
    if request.seed is not None:
        body["seed"] = request.seed
    if request.references:
        indices = (0, request.duration_seconds * FRAMES_PER_SECOND)
        body["frames"] = [{"index": index, "image": _data_uri(reference), "strength": 1}
                          for index, reference in zip(indices, request.references, strict=False)]
    return TEXT_TO_VIDEO, body


def _encoded(request: GenerationRequest) -> tuple[str, _SentOnce]:
    """The endpoint path and the encoded JSON body. The data URIs die with this call, and the
    body's bytes once sent: neither outlives the request into the provider's wait."""
    path, body = wire_request(request)
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return path, _SentOnce(content)


class _SentOnce:
    """A request body httpx sends and then lets go of. Given bytes, httpx keeps them in the
    request, which the response holds: the references' bytes, 4/3 over, for the whole wait."""

    def __init__(self, content: bytes) -> None:
        self.length = len(content)
        self._content: bytes | None = content

    def __iter__(self) -> Iterator[bytes]:
        content, self._content = self._content, None
        if content is not None:
            yield content


def _status_failure(status: int) -> ToolFailure:
    detail = {"status": status}
    if status in (408, 504):  # the provider (or its gateway) gave up waiting on the work
        return ToolFailure(PROVIDER_TIMEOUT, detail=detail)
    if 400 <= status < 500:
        return ToolFailure(PROVIDER_REJECTED, detail=detail)
    if status >= 500:
        return ToolFailure(PROVIDER_FAILED, detail=detail)
    # 1xx/2xx other than 200, and a 3xx: a redirect is returned by the client, never followed.
    return ToolFailure(INVALID_RESPONSE, detail={**detail, "problem": "status"})


def _transport_failure(exc: httpx.TransportError) -> ToolFailure:
    """httpx's error as a code. Only a failure to connect is known to have sent nothing."""
    detail = {"error": type(exc).__name__}
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return ToolFailure(PROVIDER_UNREACHABLE, detail=detail, retryable=True)
    if isinstance(exc, httpx.TimeoutException):
        return ToolFailure(PROVIDER_TIMEOUT, detail=detail)
    return ToolFailure(CONNECTION_LOST, detail=detail)


class TensorScale:
    """The adapter. ``client`` is the host's sync httpx client (``Services.http``): the
    download runs on a thread of its own (``generate.save``), where the sync client reads the
    same bytes in ~0.6 of the async client's time on the event loop (bench/README, D321).
    This adapter owns the client from here and closes it in ``close``."""

    def __init__(self, client: httpx.Client, key: Secret, base_url: str) -> None:
        problem = key_problem(key.reveal()) or base_url_problem(base_url)
        if problem is not None:
            raise ValueError(problem)
        self._client = client
        self._key = key
        self._base_url = base_url.rstrip("/")
        self.expected_bytes: int | None = None
        # The connection's socket as soon as it is connected (the provider may work a
        # minute before it answers), a duplicate of its descriptor: TLS wraps the socket by
        # detaching it, and a shutdown through either descriptor ends the one connection.
        # Kept and let go under the lock, so ``interrupt`` never shuts a closed or reused
        # descriptor down.
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._interrupted = False

    def stream(self, request: GenerationRequest) -> Generator[bytes, None, None]:
        path, content = _encoded(request)
        headers = {
            "Authorization": f"Bearer {self._key.reveal()}",
            "Content-Type": "application/json",
            # Sized, not chunked, though the body is an iterable (_SentOnce).
            "Content-Length": str(content.length),
            "Accept": request.media_type,
            # A compressed answer would count its decoded bytes against the cap only late.
            "Accept-Encoding": "identity",
        }
        try:
            with self._client.stream("POST", self._base_url + path, content=content,
                                     headers=headers,
                                     extensions={"trace": self._connected}) as response:
                self._check_interrupted()
                declared = response.headers.get("content-length", "")
                self.expected_bytes = int(declared) if declared.isdigit() else None
                for chunk in _without(self._key.reveal().encode("utf-8"),
                                      _checked(response, request)):
                    self._check_interrupted()
                    yield chunk
                # An interrupted connection can also read as a clean end of the body.
                self._check_interrupted()
        except httpx.TransportError as exc:
            raise _transport_failure(exc) from None
        finally:
            with self._lock:
                sock, self._socket = self._socket, None
            if sock is not None:
                sock.close()

    def _check_interrupted(self) -> None:
        if self._interrupted:
            raise ToolFailure(CONNECTION_LOST, detail={"error": "interrupted"})

    def _connected(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace: the new connection's socket, kept (duplicated) for ``interrupt``
        from the moment TCP is up, so a TLS handshake that never ends is interrupted too."""
        if event != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        if not isinstance(sock, socket.socket):
            return
        kept = sock.dup()
        with self._lock:
            previous, self._socket = self._socket, kept
            if self._interrupted:
                _shut_down(kept)
        if previous is not None:
            previous.close()

    def interrupt(self) -> None:
        """From any thread: the stream under way stops now, failing. Its connection is shut
        down, so a read blocked on it (the TLS handshake, the answer awaited, its next bytes)
        returns at once; one still connecting (bounded by the client's connect timeout)
        fails once connected."""
        with self._lock:
            self._interrupted = True
            if self._socket is not None:
                _shut_down(self._socket)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TensorScale:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shut_down(sock: socket.socket) -> None:
    """Shut ``sock``'s connection down both ways (a read blocked on it returns)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _checked(response: httpx.Response, request: GenerationRequest) -> Iterator[bytes]:
    """The response's bytes once its status, type, length and signature pass, under the cap."""
    if response.status_code != 200:
        raise _status_failure(response.status_code)
    media_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != request.media_type:
        raise ToolFailure(INVALID_RESPONSE, detail={"status": 200, "problem": "content_type"})
    # Identity was asked for; a compressed answer is refused before a byte is decoded, so
    # no decompression bomb inflates in memory past the cap.
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ToolFailure(INVALID_RESPONSE, detail={"status": 200, "problem": "content_encoding"})
    if not _framed(response):
        raise ToolFailure(INVALID_RESPONSE, detail={"status": 200, "problem": "framing"})
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > request.cap:
        raise ToolFailure(STREAM_OVER_CAP, detail={"cap": request.cap, "declared": True})
    head: bytes | None = b""
    total = 0
    for chunk in response.iter_raw():  # the bytes as sent: nothing is decoded
        total += len(chunk)
        if total > request.cap:
            raise ToolFailure(STREAM_OVER_CAP, detail={"cap": request.cap})
        if head is not None:
            # Hold the first bytes back until the signature can be judged.
            head += chunk
            if len(head) < _SIGNATURE_BYTES:
                continue
            chunk, head = _judged(head, request.media_type), None
        yield chunk
    if head is not None:
        if not head:
            raise ToolFailure(INVALID_RESPONSE, detail={"status": 200, "problem": "empty"})
        yield _judged(head, request.media_type)


def _framed(response: httpx.Response) -> bool:
    """Whether the body's end is marked, so that a connection lost mid-body fails the read
    (h11 checks the length and the chunks) instead of reading as the end of the file."""
    if not response.http_version.startswith("HTTP/1"):
        return True  # HTTP/2 and later mark a stream's end themselves
    length: str = response.headers.get("content-length", "")
    coding: str = response.headers.get("transfer-encoding", "")
    return length.isdigit() or coding.strip().lower() == "chunked"


def _without(key: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks``, refused (INVALID_RESPONSE) the moment they hold the API key, also across
    two chunks: a provider that echoes the key into its 200 body would otherwise have it
    stored as an artifact, readable by the model and whoever gets the file."""
    overlap = len(key) - 1  # the most of the key one chunk can end with
    carry = b""
    for chunk in chunks:
        # The chunk itself, then only the seam with the previous one: a chunk (up to 1 MiB)
        # is never copied to be searched.
        if key and (key in chunk or key in carry + chunk[:overlap]):
            raise ToolFailure(INVALID_RESPONSE, detail={"status": 200, "problem": "credential"})
        carry = (carry + chunk[-overlap:])[-overlap:] if overlap > 0 else b""
        yield chunk


def _judged(head: bytes, media_type: str) -> bytes:
    if not signature_ok(media_type, head):
        raise ToolFailure(INVALID_RESPONSE, detail={"status": 200, "problem": "signature"})
    return head

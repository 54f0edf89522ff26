"""The tool body: check the arguments, read the references, stream one file into the run's
artifacts, and return its reference.

The download runs on a thread of its own with the sync client (D321), handing the checked
chunks to a writer thread that hashes and writes them while the next arrive, and the body
awaits it. Cancelling the call (its deadline, or its run's cancellation: the pipeline cancels
the task at its next ``await``) interrupts the provider, whose blocked read then returns at
once, and the body waits for the thread to stop. The file goes through the run's streaming
ArtifactWriter as MODEL_OUTPUT at EXTERNAL_UNTRUSTED under a name the platform chooses; it is
committed only after the provider's stream ended whole and every byte was written, so a
failed, oversized, cancelled or timed-out stream publishes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from toolhost import (
    MAX_ATTACHED_BYTES,
    ArtifactOrigin,
    ArtifactRef,
    ArtifactStream,
    ArtifactTooLarge,
    Services,
    ToolCallable,
    ToolExecutionContext,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
)
from toolhost_media.background import BackgroundWrite
from toolhost_media.bounds import (
    IMAGE_REFERENCE_LIMIT,
    IMAGE_REFERENCE_TOTAL,
    IMAGE_REFERENCES,
    MAX_PROMPT,
    VIDEO_REFERENCE_LIMIT,
    VIDEO_REFERENCES,
    is_blank,
)
from toolhost_media.messages import (
    BLANK_PROMPT,
    DUPLICATE_REFERENCE,
    NOT_CONFIGURED,
    PROMPT_TOO_LONG,
    STREAM_OVER_CAP,
    TOO_MANY_REFERENCES,
)
from toolhost_media.provider import (
    GenerationRequest,
    ImageRequest,
    MediaGenerationProvider,
    VideoRequest,
)
from toolhost_media.references import read_references, repeated_at
from toolhost_media.tensorscale import (
    BASE_URL_SETTING,
    DEFAULT_BASE_URL,
    TensorScale,
    base_url_problem,
    key_problem,
)

__all__ = ["CREDENTIAL", "builder", "configuration_problem", "save"]

#: The credential reference: TENSORSCALE_API_KEY.
CREDENTIAL = "tensorscale"

_EXTENSION = {"image/png": "png", "video/mp4": "mp4"}


def configuration_problem(services: Services) -> str | None:
    """Why this host cannot call TensorScale (one line for the operator), or None."""
    key = services.secret(CREDENTIAL)
    if key is None:
        return "TENSORSCALE_API_KEY is not set"
    return key_problem(key.reveal()) or base_url_problem(_base_url(services))


def _base_url(services: Services) -> str:
    return (services.settings.get(BASE_URL_SETTING) or "").strip() or DEFAULT_BASE_URL


def builder(spec: ToolSpec) -> Callable[[Services], ToolCallable]:
    """``Tool.build`` for ``spec``: the body, bound to the host's services."""
    kind = spec.name.partition(".")[0]

    def build(services: Services) -> ToolCallable:
        problem = configuration_problem(services)

        def provider() -> MediaGenerationProvider:
            key = services.secret(CREDENTIAL)
            assert key is not None  # configuration_problem said so
            # One client per call, closed with the call: it holds the call's connection.
            client = services.http(timeout=float(spec.timeout_s))
            # A cancelled call cannot interrupt a connect under way (there is no socket to
            # shut down yet): its thread outlives the call by this much at most.
            client.timeout = httpx.Timeout(float(spec.timeout_s), connect=CONNECT_TIMEOUT_S)
            return TensorScale(client, key, _base_url(services))

        async def generate(arguments: Mapping[str, Any],
                           context: ToolExecutionContext) -> ToolOutput:
            prompt: str = arguments["prompt"]
            if is_blank(prompt):
                raise ToolFailure(BLANK_PROMPT)
            if len(prompt) > MAX_PROMPT:
                raise ToolFailure(PROMPT_TOO_LONG)
            ids: list[str] = list(arguments.get("reference_image_ids") or ())
            if len(ids) > (IMAGE_REFERENCES if kind == "image" else VIDEO_REFERENCES):
                raise ToolFailure(TOO_MANY_REFERENCES)
            if kind == "image" and (repeated := repeated_at(ids)) is not None:
                # An edit gains nothing from an image given twice, only its bytes read and
                # sent twice. A video's first and last frame may be one image (a loop).
                raise ToolFailure(DUPLICATE_REFERENCE, detail={"position": repeated})
            if problem is not None:
                raise ToolFailure(NOT_CONFIGURED, detail={"problem": problem})
            request: GenerationRequest
            if kind == "image":
                references = await read_references(
                    ids, context, services.artifacts,
                    each=IMAGE_REFERENCE_LIMIT, total=IMAGE_REFERENCE_TOTAL)
                request = ImageRequest(prompt=prompt, size=arguments["size"],
                                       seed=_integer(arguments.get("seed")),
                                       references=references)
            else:
                references = await read_references(
                    ids, context, services.artifacts,
                    each=VIDEO_REFERENCE_LIMIT, total=VIDEO_REFERENCES * VIDEO_REFERENCE_LIMIT)
                request = VideoRequest(prompt=prompt, size=arguments["size"],
                                       duration_seconds=int(arguments["duration_seconds"]),
                                       seed=_integer(arguments.get("seed")),
                                       references=references)
            stamp = services.clock.now().strftime("%Y%m%d-%H%M%S")
            name = f"{kind}-{stamp}.{_EXTENSION[request.media_type]}"
            ref = await save(provider(), request, context, name)
            return ToolOutput(
                structured={"artifact": ref.to_json(),
                            "attached": ref.byte_count <= MAX_ATTACHED_BYTES},
                content=f"Generated {json.dumps(ref.name)} ({ref.byte_count} bytes, "
                        f"{ref.media_type}). {ref.attachment_note()}",
            )

        return generate

    return build


#: How long a cancelled call waits for its download's thread, interrupted, to stop: at once
#: unless it is still connecting (then it fails when connected or at the connect timeout).
#: Below the pipeline's grace for a cancelled body (1 s), which then stops driving it.
STOPPING_S = 0.5
#: The provider's TCP connect, at most (the rest of a call is bounded by its timeout_s).
CONNECT_TIMEOUT_S = 15.0


async def save(provider: MediaGenerationProvider, request: GenerationRequest,
               context: ToolExecutionContext, name: str) -> ArtifactRef:
    """Stream the provider's file into the run's artifacts; committed only when it is whole."""
    with provider, context.artifacts.stream(
        origin=ArtifactOrigin.MODEL_OUTPUT, name=name, media_type=request.media_type,
        trust=Trust.EXTERNAL_UNTRUSTED, max_bytes=request.cap,
    ) as out:
        try:
            await _on_own_thread(functools.partial(_download, provider, request, context, out),
                                 interrupt=provider.interrupt)
        except ArtifactTooLarge:  # the provider caps first; this is the backstop
            raise ToolFailure(STREAM_OVER_CAP, detail={"cap": request.cap}) from None
        # Cancelled from another thread while the last bytes arrived: the pipeline has
        # already ended the call, so leaving uncommitted is what publishes nothing.
        if context.cancellation.cancelled:
            raise asyncio.CancelledError
        return out.commit()


def _download(provider: MediaGenerationProvider, request: GenerationRequest,
              context: ToolExecutionContext, out: ArtifactStream) -> None:
    """The thread's loop: each checked chunk handed to the writer thread, which hashes and
    writes it while the next arrive (``background``)."""
    received = 0
    with BackgroundWrite(out) as writer, contextlib.closing(provider.stream(request)) as chunks:
        for chunk in chunks:
            writer.write(chunk)
            received += len(chunk)
            _report(context, received, provider.expected_bytes)
        writer.finish()


async def _on_own_thread(work: Callable[[], None], *, interrupt: Callable[[], None]) -> None:
    """``work()`` on a thread of its own, awaited. When the awaiting task is cancelled:
    ``interrupt()``, wait up to ``STOPPING_S`` for the thread to stop, and re-raise."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    # Its failure is the awaiting task's, or, once that was cancelled, the interrupted read's:
    # marked seen whichever way the task leaves (the pipeline may stop driving it).
    done.add_done_callback(_seen)

    def settle(failure: BaseException | None) -> None:
        if done.done():
            return
        if failure is None:
            done.set_result(None)
        else:
            done.set_exception(failure)

    def run() -> None:
        failure: BaseException | None = None
        try:
            work()
        except BaseException as exc:  # handed to the awaiting task
            failure = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, failure)

    # The caller's context (its trace, its log fields) goes with the work.
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name="toolhost-media-download",
                     daemon=True).start()
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        interrupt()
        await asyncio.wait((done,), timeout=STOPPING_S)
        raise


def _seen(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _report(context: ToolExecutionContext, received: int, expected: int | None) -> None:
    """The bytes received so far, out of the declared size while it holds (the host sends
    at most ten updates a second, to whoever asked)."""
    total = expected if expected is not None and received <= expected else None
    context.progress(received, total, "bytes received")


def _integer(value: Any) -> int | None:
    # JSON Schema's "integer" admits 7.0; the wire gets 7, as the provider's contract says.
    return None if value is None else int(value)

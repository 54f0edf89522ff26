"""A person asks for a picture: the agent calls image.generate, the person approves the
(possibly charged) generation in the client, and the picture comes back as a file the client
reads, byte for byte what the provider sent."""

from __future__ import annotations

from pathlib import Path

from .fake_services import PNG, TENSORSCALE_KEY, FakeTensorScale
from .journey_support import (
    Deployment,
    Person,
    Transport,
    artifact_uri,
    meta,
    ok,
    one_link,
    read_resource_bytes,
    resource_uris,
    run,
)

PROMPT = "A lighthouse at dusk, watercolour"


def test_a_generated_image_reaches_the_client_as_a_file(
        tmp_path: Path, transport: Transport, fake_tensorscale: FakeTensorScale) -> None:
    deployment = Deployment(tmp_path, plugins="toolhost-media", **fake_tensorscale.settings())
    person = Person()

    async def journey() -> None:
        async with deployment.session(transport, person=person) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert "image.generate" in listed

            generated = await client.call_tool("image.generate", {"prompt": PROMPT})
            image = ok(generated)["artifact"]
            assert (image["media_type"], image["byte_count"]) == ("image/png", len(PNG))
            assert meta(generated, "status") == "succeeded"

            link = one_link(generated)
            assert link.type == "resource_link"
            assert link.uri == artifact_uri(image["id"])
            assert (link.name, link.mime_type, link.size) == (
                image["name"], "image/png", len(PNG))

            content, mime_type = await read_resource_bytes(client, link.uri)
            assert content == PNG  # exactly what the provider sent
            assert mime_type == "image/png"
            assert await resource_uris(client) == [link.uri]

    run(journey)
    assert person.approved_tools() == ["image.generate"]  # each generation may be charged
    (request,) = fake_tensorscale.generations()
    assert PROMPT in request.body.decode()
    assert TENSORSCALE_KEY not in deployment.stderr()

"""greet.hello: the smallest plugin that passes toolhost-conformance."""

from toolhost import (
    Domain,
    Idempotency,
    Kind,
    Risk,
    SideEffect,
    Source,
    TargetKind,
    Tool,
    ToolFailure,
    ToolOutput,
    ToolSpec,
    Trust,
    hookimpl,
)

BLANK_NAME = "tool.invalid_arguments.blank_name"

SPEC = ToolSpec(
    name="greet.hello",
    version="1.0.0",
    description="Greet someone by name.",
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 64}},
        "required": ["name"],
        "additionalProperties": False,  # closed at every object level
    },
    output_schema={
        "type": "object",
        "properties": {"greeting": {"type": "string"}},
        "required": ["greeting"],
        "additionalProperties": False,
    },
    kind=Kind.CAPABILITY,
    source=Source.BUILTIN,
    target_kind=TargetKind.IN_PROCESS,
    server_id=None,
    side_effect=SideEffect.NONE,
    risk=Risk.LOW,
    idempotency=Idempotency.READ_ONLY,
    output_trust=Trust.INTERNAL_TOOL,
    required_scopes=(),
    timeout_s=2,
    maximum_output_bytes=4096,
    allow_parallel=True,  # only READ_ONLY tools may run in parallel
    deprecated=False,
)


def build(services):
    def hello(arguments, context):
        name = arguments["name"].strip()
        if not name:
            raise ToolFailure(BLANK_NAME, detail={"length": len(arguments["name"])})
        return ToolOutput(structured={"greeting": f"Hello, {name}!"}, content=f"Hello, {name}!")

    return hello


@hookimpl
def toolhost_domains():
    return [Domain("greet", "Greetings.")]


@hookimpl
def toolhost_tools(settings):
    return [Tool(spec=SPEC, build=build, reason_codes=(BLANK_NAME,))]


@hookimpl
def toolhost_messages():
    # Static: the reason code carries the diagnosis, the message the remedy, never the input.
    return {BLANK_NAME: "The name is blank. Provide a name with at least one letter."}

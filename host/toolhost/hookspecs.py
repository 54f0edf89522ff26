"""The plugin contract: every hook a toolhost plugin may implement.

A plugin is a module (or object) named by an entry point in the ``toolhost.plugins`` group. The
host loads each entry point on its own and calls each plugin's hooks one plugin at a time, so a
failure is attributed to the distribution that caused it. A hookimpl whose name matches no
hookspec is an error at startup (``PluginManager.check_pending``), not silence.

Plugin API 1.9. Hooks are called once per process start, in this order: ``toolhost_settings``
(optional), ``toolhost_domains``, ``toolhost_tools``. Registration (the seven ordered refusals,
then the reasons check) runs over the union of what they return before any tool is built. ``toolhost_readiness`` is optional and
is called by ``toolhost check`` only.

Version notes: 1.0 removed ``toolhost_messages``. A reason code is declared once, with its
static message, on the tool that raises it (``Tool(..., reasons=(Reason(code, message),))``);
a plugin that still implements the hook is refused at startup with that remedy. 1.1 added
``toolhost_readiness``, optional (a plugin that does not implement it is ready): every 1.0
plugin is a 1.1 plugin unchanged. 1.2 added, without changing a hook:
``Services.data_dir_of(distribution)`` and ``Settings.plugin_data_dir(distribution)`` (another
distribution's directory, for a public read API it offers; a console script's own directory),
``ArtifactRef.to_json()`` and ``ArtifactRef.json_schema()`` (a ref in a tool's result), and the
host reasons ``tool.timeout.deadline_may_have_taken_effect`` and
``tool.upstream_unavailable.artifact_store[_may_have_taken_effect]``. 1.3 added, without
changing a hook: ``Tool(user_words=UserWords(prompt, arguments))`` (arguments that must be the
person's own words: the host asks the person for them where the run has no user turn), and the
host reasons ``tool.timeout.run_deadline_passed``, ``tool.permission_denied.needs_user`` and
``tool.permission_denied.user_declined``. 1.4 added the optional hook ``toolhost_settings``
(the plugin's settings, as ``SettingSpec``: what ``toolhost.toml``, ``toolhost config`` and
``toolhost plugins`` show). 1.4 also added, without changing a hook:
``ToolExecutionContext.progress(done, total=None, message=None)`` (how far a call has got,
rate-limited by the host and sent only to whoever asked: an MCP client's progress token, a
terminal) and ``ProgressLine`` (one updating terminal line, for a plugin's console script).
1.5 added, without changing a hook: ``tool(name, version, ...)``, a ``Tool`` from a typed
function (its input schema from the signature, with the constraint markers ``MinLen``,
``MaxLen``, ``Range``, ``Pattern`` and ``Doc``; its description from the docstring; the safety
fields required keywords), and bodies by reference (``Tool(spec, call="package.module:name")``,
``build="package.module:factory"``), imported when the host first builds the tool, and
``Reason.from_table(MESSAGES, *codes)``, the one way a plugin declares its reasons (one table of
messages, each tool taking its codes), and ``ToolSpec.builtin(name, version, ...)``, a spec
written by hand with the fields every in-process tool shares filled as ``tool`` fills them,
and ``provenance_of(chunks)``, whose bytes a read returned, judged on the descriptor it read.
Every 1.4 plugin is a 1.5 plugin unchanged. 1.6 added, without changing a hook:
``MAX_ATTACHED_BYTES`` (the largest file a client fetches whole from a reply) and
``ArtifactRef.attachment_note()`` (what a tool's text says of a file it stored for the
person: attached, or too large to attach and how to get it). Every 1.5 plugin is a 1.6 plugin
unchanged. 1.7 added, without changing a hook: ``Tool(always_requires_approval=True)`` (and
the same keyword of ``tool``): every call waits for a person's approval, whatever the
operator's policy loosened. Every 1.6 plugin is a 1.7 plugin unchanged. 1.8 added, without
changing a hook: ``stoppable(command, stopped)``, for a plugin's own console script: Ctrl-C,
SIGTERM and SIGHUP stop the command where it stands, so what it was doing is undone as
Ctrl-C's KeyboardInterrupt undoes it, it prints one line and exits 128 + the signal's number
as the host's commands do. Every 1.7 plugin is a 1.8 plugin unchanged. 1.9 added, without
changing a hook: ``make_private_dirs(path)``, how a plugin's own console script makes its
directory under the data directory: each directory it makes is 0700, as the host's are, so
the first command of a fresh data directory does not leave it readable by others, and
``Tool(describe=...)`` (and the same keyword of ``tool``): ``describe(arguments, services,
principal_id) -> lines``, or a reference to it, says from the plugin's own data what a paused
call will do, and ``toolhost show``, the MCP approval question and the inbox show those lines
beside the arguments; ``escaped(text)``, the host's one rule for text that does not print;
``not_utf8(value)``, its check that a command-line value is UTF-8 text; ``stoppable``'s
``prog=``, with standard output answered as the host's commands answer theirs (D532); and
``file_name_problem(name)`` with ``MAX_FILE_NAME_BYTES``, the host's one rule for a file name a
person is handed, which the inbox's download applies too. Every
1.8 plugin is a 1.9 plugin unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from toolhost._model.setting_spec import SettingSpec
    from toolhost._model.settings import Settings
    from toolhost._model.spec import Domain, Tool

PROJECT_NAME = "toolhost"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -------------------------------------------------------------------------------------------
# Registration hooks
# -------------------------------------------------------------------------------------------


@hookspec
def toolhost_domains() -> list[Domain]:  # type: ignore[empty-body]
    """Declare the domains this plugin owns.

    Called once at startup, before ``toolhost_tools``. Every tool the plugin returns must live
    in one of these domains (registration step 3), a domain has exactly one owning
    distribution, and ``mcp`` and ``device`` are reserved (step 2).

    :return: the plugin's domains; an empty list if it owns none.
    """


@hookspec
def toolhost_tools(settings: Settings) -> list[Tool]:  # type: ignore[empty-body]
    """Return the tools this plugin registers under these settings.

    Called once at startup, after ``toolhost_domains``. Conditional tools decide here: with
    their flag or credential absent, return nothing for them. Must be pure apart from reading
    ``settings``: no I/O, nothing built — ``Tool.build`` runs only after registration passed.
    Each ``Tool`` declares its reasons (``Reason.from_table(MESSAGES, *codes)``): the host
    assembles the model-facing message table from them. ``toolhost.tool`` makes a Tool from a
    typed function.

    :param settings: the host settings (environment flags, data directory, secrets).
    :return: one ``Tool`` per registered (name, version), historical versions included.
    """


@hookspec
def toolhost_settings() -> list[SettingSpec]:  # type: ignore[empty-body]
    """Declare the settings this plugin reads from ``Settings``.

    Optional (plugin API 1.4). Called once at startup, before ``toolhost_tools``, with nothing:
    a declaration is static. What it declares is what ``toolhost config``, ``toolhost config
    --help`` and ``toolhost plugins`` show, and the keys the plugin's ``[plugins.<distribution>]``
    table of ``toolhost.toml`` may hold (any other key there refuses the start). A setting
    whose ``activates`` names tools tells the operator which setting registers them.

    :return: one ``SettingSpec`` per environment name the plugin reads.
    """


# -------------------------------------------------------------------------------------------
# Operator hooks
# -------------------------------------------------------------------------------------------


@hookspec
def toolhost_readiness(settings: Settings) -> list[str]:  # type: ignore[empty-body]
    """Say what keeps this plugin's registered tools from working on this machine.

    Optional. Called by ``toolhost check`` only, never at startup nor before a call, so it may
    do I/O (probe a binary, try a namespace). A tool that is not ready stays registered and
    fails closed, each call with a static reason of its own; this hook is how the operator
    learns why before a model does. Example: toolhost-sandbox reports that no working
    bubblewrap isolation exists.

    :param settings: the host settings, as ``toolhost_tools`` saw them.
    :return: one line per problem, each naming the tool and what to do; empty when ready.
    """

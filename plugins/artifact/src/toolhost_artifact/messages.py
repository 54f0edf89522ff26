"""The reasons artifact.export may end with, each with its static model-facing message.

Messages carry the remedy and never the input. What neither version declares: a path the
workspace handle refuses (``WorkspaceEscape``, which the body never catches: pipeline step 9
turns it into the host's one validation failure, the same shape the workspace tools give), and
a workspace the filesystem cannot serve (``WorkspaceUnavailable``, the host's own retryable
failure). Both are the host's codes, and a plugin may not declare them.
"""

from __future__ import annotations

from toolhost import Reason, SchemaRule

__all__ = [
    "BOTH_PATH_AND_CONTENT",
    "CONTENT_TOO_LONG",
    "INVALID_NAME",
    "MESSAGES",
    "NAME_NOT_TEXT",
    "NAME_WITH_PATH",
    "NOT_A_FILE",
    "NO_PATH_OR_CONTENT",
    "NO_SUCH_PATH",
    "TOO_LARGE",
    "UNSAFE_FILE_NAME",
    "V1_REASONS",
    "V2_REASONS",
]

#: NOT_FOUND ("the target, not the tool"). This code and the next are this plugin's own, not
#: the workspace tools' look-alikes: registration gives a code one message across every
#: installed plugin, and a code two distributions share would tie their releases together.
NO_SUCH_PATH = "tool.not_found.no_such_file"
#: A directory.
NOT_A_FILE = "tool.invalid_arguments.is_directory"
#: Past ``export_file.EXPORT_CEILING`` (64 MiB, as the message states). INVALID_ARGUMENTS, not
#: OUTPUT_TOO_LARGE: the path named a file this tool does not export, and the tool's own output
#: (a reference) is small; OUTPUT_TOO_LARGE is the host's hard ceiling on results.
TOO_LARGE = "tool.invalid_arguments.file_too_large"
#: A workspace file whose own name breaks the one name rule (``names``): a path export hands
#: the person the file under its name, so ``.bashrc`` or ``report\u202efdp.exe`` (shown as
#: ``reportexe.pdf``) is refused there as the content export refuses it as ``name``.
UNSAFE_FILE_NAME = "tool.invalid_arguments.unsafe_file_name"
# 2.0.0 only: the arguments' shape beyond what JSON Schema says (see export_v2).
BOTH_PATH_AND_CONTENT = "tool.invalid_arguments.both_path_and_content"
NO_PATH_OR_CONTENT = "tool.invalid_arguments.no_path_or_content"
NAME_WITH_PATH = "tool.invalid_arguments.name_with_path"
CONTENT_TOO_LONG = "tool.invalid_arguments.content_too_long"
INVALID_NAME = "tool.invalid_arguments.invalid_name"
NAME_NOT_TEXT = "tool.invalid_arguments.name_not_text"

MESSAGES: dict[str, str] = {
    NO_SUCH_PATH: "No file at that path in the workspace.",
    NOT_A_FILE: "That path is a directory. Export one file at a time.",
    TOO_LARGE: "That file is larger than the 64 MiB an export may hold.",
    UNSAFE_FILE_NAME: "That file's name cannot be handed over as it is: it starts or ends "
    "with a dot, ends with a space, has two spaces in a row, is a device name such as CON or "
    "NUL, or holds a control, format or separator character, a space other than the plain "
    "one, or one of <>:\"|?*. Copy it to a plain name such as report.txt and export that.",
    BOTH_PATH_AND_CONTENT: "Give either path (a workspace file) or content (text to save), "
    "not both.",
    NO_PATH_OR_CONTENT: "Give path (a workspace file) or content (text to save).",
    NAME_WITH_PATH: "name only names content. An exported file keeps its own name; omit name.",
    CONTENT_TOO_LONG: "content is longer than 1 MiB (1048576 bytes of UTF-8). Export less "
    "text, or write it to a workspace file and export that by path.",
    INVALID_NAME: "name must be a bare file name such as report.txt: no / or \\, no control "
    "characters, no <>:\"|?*, no space but the plain one, no two spaces in a row, not starting "
    "with a dot, not ending with a dot or space, not a device name such as CON or NUL, at most "
    "255 bytes.",
    NAME_NOT_TEXT: "content is saved as text, so name needs a text extension such as .txt, "
    ".md, .csv, .json or .html.",
}


V1_REASONS = Reason.from_table(MESSAGES, NO_SUCH_PATH, NOT_A_FILE, TOO_LARGE, UNSAFE_FILE_NAME)

#: 2.0.0 declares 1.0.0's and its own. Over-long content and a name the schema's rules refuse
#: fail at step 4 with these codes rather than the host's generic schema failure; the body
#: checks the same rules again (bytes, not characters; the whole name rule) with the same codes.
V2_REASONS = (
    *V1_REASONS,
    *Reason.from_table(
        MESSAGES, BOTH_PATH_AND_CONTENT, NO_PATH_OR_CONTENT, NAME_WITH_PATH, CONTENT_TOO_LONG,
        INVALID_NAME, NAME_NOT_TEXT,
        schema_rules={
            CONTENT_TOO_LONG: [SchemaRule("/content", "maxLength")],
            INVALID_NAME: [SchemaRule("/name", "minLength"), SchemaRule("/name", "maxLength"),
                           SchemaRule("/name", "pattern")],
        },
    ),
)

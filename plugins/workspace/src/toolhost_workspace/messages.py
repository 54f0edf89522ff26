"""The reasons of the three workspace tools, each with its static model-facing message: the
specification's four exactly as its "Failures" list prints them. A workspace the filesystem
cannot serve (``WorkspaceUnavailable``) is the host's failure, not one of these: the tools let
it pass, like a rejected path, and every tool that touches a workspace ends the same way.

Messages carry the remedy and never the input: not_a_directory names the sibling tool to use
instead; not_a_file names none, because the default agent is not offered workspace.list_files
(list_files.py says why) and naming a tool the model was not given costs it a refused call.
"""

from __future__ import annotations

from toolhost import Reason

__all__ = [
    "LIST_FILES_REASONS",
    "MESSAGES",
    "NOT_A_DIRECTORY",
    "NOT_A_FILE",
    "NOT_TEXT",
    "NO_SUCH_PATH",
    "READ_TEXT_REASONS",
    "WRITE_TEXT_REASONS",
]

#: NOT_FOUND ("the target, not the tool"), not retryable: the workspace does not change
#: between a call and its retry unless another call wrote to it.
NO_SUCH_PATH = "tool.not_found.no_such_path"
#: A NUL byte, or bytes that do not decode as strict UTF-8 (one message for both: the model
#: cannot act differently on the difference).
NOT_TEXT = "tool.invalid_arguments.not_text"
NOT_A_FILE = "tool.invalid_arguments.not_a_file"
NOT_A_DIRECTORY = "tool.invalid_arguments.not_a_directory"

MESSAGES: dict[str, str] = {
    NO_SUCH_PATH: "No such path in the workspace.",
    NOT_TEXT: "Not a UTF-8 text file. This tool reads text only.",
    NOT_A_FILE: "That path is a directory.",
    NOT_A_DIRECTORY: "That path is a file. Use workspace.read_text.",
}


#: What each tool may end with, beyond the host's own failures. A path the WorkspaceHandle
#: rejects is one of those: it raises WorkspaceEscape, which the tools never catch, and
#: pipeline step 9 turns it into the host's validation failure, one shape and one message
#: across all three tools, so no tool declares it.
READ_TEXT_REASONS = Reason.from_table(MESSAGES, NO_SUCH_PATH, NOT_TEXT, NOT_A_FILE)
WRITE_TEXT_REASONS = Reason.from_table(MESSAGES, NO_SUCH_PATH, NOT_A_FILE)
LIST_FILES_REASONS = Reason.from_table(MESSAGES, NO_SUCH_PATH, NOT_A_DIRECTORY)

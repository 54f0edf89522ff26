"""The 2.0.0 file name rule: the name text the model wrote is saved under.

The rule itself is the host's (``toolhost.file_name_problem``, D93, D361): the inbox's
download applies the same one to every name it hands over, so a second copy here would
sooner or later let through a name the other refuses. What is this plugin's own is how much
of it the input schema can say.

The input schema says as much of the rule as JSON Schema can (``PATTERN``, and the length in
characters); ``problem`` is the whole rule, and the body applies it whatever the schema let
through (``$`` in a pattern also matches before a final newline).
"""

from __future__ import annotations

from toolhost import MAX_FILE_NAME_BYTES, file_name_problem

__all__ = ["MAX_NAME_BYTES", "PATTERN", "problem"]

#: A file name's limit in bytes on the common filesystems (NAME_MAX), the schema's maxLength.
MAX_NAME_BYTES = MAX_FILE_NAME_BYTES

#: The part of the rule a JSON Schema pattern can carry: no leading dot, no slash or
#: backslash, no C0, DEL or C1 control. The same in ECMA 262 and Python's ``re``.
PATTERN = r"^[^./\\\x00-\x1f\x7f-\x9f][^/\\\x00-\x1f\x7f-\x9f]*$"

#: Why ``name`` breaks the rule (operator detail, never shown to the model), or None.
problem = file_name_problem

"""Lazy tool bodies: ``Tool(spec, call="package.module:function")`` and ``build="...:factory"``
(and ``describe="...:function"``, what an approval shows a call will do).

A reference is a string the plugin writes instead of a function, so that loading the plugin
(which ``toolhost check`` does for every plugin) imports the spec and not the body. Its module
is located when the ``Tool`` is made (``importlib.util.find_spec``): the module itself is not
run, but locating ``package.sub.module`` imports ``package`` and ``package.sub`` (their
``__init__`` runs then), so keep those light. A module that does not exist fails in
``toolhost_tools``, naming the reference. The module is imported, and the attribute looked up,
when the host first builds the tool (before its first call); a missing attribute fails there,
again naming the reference.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolhost._model.errors import ToolhostError

if TYPE_CHECKING:
    from toolhost._model.context import Services, ToolCallable, ToolExecutionContext

__all__ = ["BuildReference", "CallReference", "DescribeReference", "Reference",
           "UnresolvedReference"]

# Matched whole (fullmatch): ``$`` would also accept a trailing newline.
_SHAPE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class UnresolvedReference(ToolhostError, ImportError):
    """A ``call=``/``build=``/``describe=`` reference that names no module or no attribute of it."""


class Reference:
    """``"package.module:attribute"``, checked for shape and module now, imported on first use."""

    __slots__ = ("_target", "text")

    def __init__(self, text: str) -> None:
        if not _SHAPE.fullmatch(text):
            raise ValueError(
                f"{text!r} is not a reference: write 'package.module:function' (a dotted module, "
                "a colon, the name in it)")
        module = text.partition(":")[0]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as exc:
            raise UnresolvedReference(f"{text!r} does not resolve: {exc}") from exc
        if found is None:
            raise UnresolvedReference(f"{text!r} does not resolve: no module named {module!r}")
        self.text = text
        self._target: Any = None

    def resolve(self) -> Any:
        """The object named, imported on the first call and kept."""
        if self._target is None:
            module_name, _, path = self.text.partition(":")
            target: Any = importlib.import_module(module_name)
            for name in path.split("."):
                try:
                    target = getattr(target, name)
                except AttributeError:
                    raise UnresolvedReference(
                        f"{self.text!r} does not resolve: {module_name!r} has no {path!r}"
                    ) from None
            if not callable(target):
                raise UnresolvedReference(f"{self.text!r} does not resolve to a callable")
            self._target = target
        return self._target

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"

    # A reference is its text: ``tool.call == "package.module:name"`` reads as it was written.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other == self.text
        return isinstance(other, Reference) and type(other) is type(self) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class CallReference(Reference):
    """A body by reference: ``Tool.callable_for`` hands the host the imported function itself
    (so an ``async def`` body is still seen as async); calling this proxies to it."""

    __slots__ = ()

    def __call__(self, arguments: Mapping[str, Any], context: ToolExecutionContext) -> Any:
        return self.resolve()(arguments, context)


class BuildReference(Reference):
    """A factory by reference: ``build(services) -> body``, imported at the first build."""

    __slots__ = ()

    def __call__(self, services: Services) -> ToolCallable:
        body: ToolCallable = self.resolve()(services)
        return body


class DescribeReference(Reference):
    """A describer by reference: ``describe(arguments, services, principal_id) -> lines``,
    imported when an approval is first shown (never at load: ``toolhost check`` runs none)."""

    __slots__ = ()

    def __call__(self, arguments: Mapping[str, Any], services: Services,
                 principal_id: str) -> Sequence[str]:
        lines: Sequence[str] = self.resolve()(arguments, services, principal_id)
        return lines

"""The one cattrs converter: ToolSpec and friends to and from JSON-ready data.

Enums become their values, tuples become lists; schemas pass through as the plain JSON they
already are. Imported lazily by the commands that print JSON, never at startup.
"""

from __future__ import annotations

from typing import Any

import cattrs

from toolhost._model.spec import ToolSpec

__all__ = ["converter", "spec_from_json", "spec_to_json"]

converter = cattrs.Converter()


def spec_to_json(spec: ToolSpec) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(spec)
    data["input_schema"] = dict(spec.input_schema)
    data["output_schema"] = dict(spec.output_schema)
    return data


def spec_from_json(data: dict[str, Any]) -> ToolSpec:
    return converter.structure(data, ToolSpec)

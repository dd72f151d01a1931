"""MVU's schema: generated from `stat_data` and its `$meta` annotations, and the metadata cleaned out after.

Rules: MagVarUpdate src/function/schema.ts (semantics file §8): `generateSchema` :25-200 (arrays:
`$arrayMeta` elements and the `$__META_EXTENSIBLE__$` marker; objects: `extensible` from the old schema,
`$meta.extensible`/`recursiveExtensible` or the parent's recursive flag; `required` = parent not extensible,
forced by `$meta.required`, an old schema's value winning; `$meta.template` kept or inherited),
`getSchemaForPath` :209-239, `reconcileAndApplySchema` :245-283 (root flags `strictSet`, `strictTemplate`,
`concatTemplateArray` kept, then copied from `stat_data.$meta`), `cleanUpMetadata`.

A schema node is a dict: `{"type": "object", "properties": {key: node + "required"}, "extensible",
"recursiveExtensible", "template"?}`, `{"type": "array", "elementType", "extensible", "recursiveExtensible",
"template"?}`, or `{"type": "string"|"number"|"boolean"|"any"}`.
"""

from __future__ import annotations

import re
from typing import Any

from tavern_tui.mvu.jsutil import clone, lodash_has, to_path

__all__ = ["EXTENSIBLE_MARKER", "ROOT_FLAGS", "clean_up_metadata", "generate_schema", "reconcile_schema",
           "schema_for_path"]

EXTENSIBLE_MARKER = "$__META_EXTENSIBLE__$"
ROOT_FLAGS = ("strictTemplate", "strictSet", "concatTemplateArray")


def _is_array_meta(item: Any) -> bool:
    return isinstance(item, dict) and "$arrayMeta" in item and "$meta" in item and item["$arrayMeta"] is True


def generate_schema(data: Any, old: dict[str, Any] | None = None, parent_recursive: bool = False) -> dict[str, Any]:
    """`generateSchema(data, old, parentRecursiveExtensible)`. Mutates `data` as MVU does (removes `$meta`,
    `$arrayMeta` elements and the marker): pass a clone."""
    if isinstance(data, list):
        return _array_schema(data, old, parent_recursive)
    if isinstance(data, dict):
        return _object_schema(data, old, parent_recursive)
    if isinstance(data, bool):
        return {"type": "boolean"}
    if isinstance(data, (int, float)):
        return {"type": "number"}
    if isinstance(data, str):
        return {"type": "string"}
    return {"type": "any"}


def _array_schema(data: list[Any], old: dict[str, Any] | None, parent_recursive: bool) -> dict[str, Any]:
    """An array's node: the old node's flags and template, then the `$arrayMeta` element and the marker."""
    extensible = False
    recursive = parent_recursive
    old_element: dict[str, Any] | None = None
    template: Any = None
    has_template = False
    if old and old.get("type") == "array":
        extensible = old.get("extensible") is True
        recursive = old.get("recursiveExtensible") is True or parent_recursive
        old_element = old.get("elementType")
        if "template" in old:
            template, has_template = old["template"], True
    meta_at = next((i for i, item in enumerate(data) if _is_array_meta(item)), -1)
    if meta_at != -1:
        meta = data[meta_at]["$meta"] if isinstance(data[meta_at]["$meta"], dict) else {}
        if meta.get("extensible") is not None:
            extensible = meta["extensible"]
        if meta.get("template") is not None:
            template, has_template = meta["template"], True
        del data[meta_at]
    if EXTENSIBLE_MARKER in data:
        extensible = True
        data.remove(EXTENSIBLE_MARKER)
    node: dict[str, Any] = {
        "type": "array", "extensible": bool(extensible) or parent_recursive, "recursiveExtensible": recursive,
        "elementType": generate_schema(data[0], old_element, recursive) if data else {"type": "any"}}
    if has_template:
        node["template"] = template
    return node


def _object_schema(data: dict[str, Any], old: dict[str, Any] | None, parent_recursive: bool) -> dict[str, Any]:
    """An object's node: flags from the old node and `$meta`, each property marked required or not."""
    old_extensible = False
    old_recursive = parent_recursive
    old_properties: dict[str, Any] | None = None
    if old and old.get("type") == "object":
        old_extensible = old.get("extensible") is True
        old_recursive = old.get("recursiveExtensible") is True or parent_recursive
        old_properties = old.get("properties")
    meta = data.get("$meta") if isinstance(data.get("$meta"), dict) else None
    node: dict[str, Any] = {"type": "object", "properties": {},
            "extensible": old_extensible or bool(meta and (meta.get("extensible") is True
                                                            or meta.get("recursiveExtensible") is True))
            or parent_recursive,
            "recursiveExtensible": old_recursive or bool(meta and meta.get("recursiveExtensible") is True)}
    if meta is not None and meta.get("template") is not None:
        node["template"] = meta["template"]
    elif old and old.get("type") == "object" and old.get("template"):
        node["template"] = old["template"]
    if "$meta" in data:
        del data["$meta"]
    for key in list(data):
        old_child = (old_properties or {}).get(key)
        child_recursive = node["extensible"] is not False and node["recursiveExtensible"]
        child = generate_schema(data[key], old_child, bool(child_recursive))
        required = not node["extensible"]
        if meta is not None and isinstance(meta.get("required"), list) and key in meta["required"]:
            required = True
        if isinstance(old_child, dict) and old_child.get("required") is False:
            required = False
        elif isinstance(old_child, dict) and old_child.get("required") is True:
            required = True
        node["properties"][key] = {**child, "required": required}
    return node


def schema_for_path(schema: dict[str, Any] | None, path: str) -> dict[str, Any] | None:
    """`getSchemaForPath`: the node for a data path; numeric segments step into `elementType`."""
    if not path or not schema:
        return schema or None
    node: dict[str, Any] | None = schema
    for segment in to_path(path):
        if not node:
            return None
        if re.fullmatch(r"\d+", segment):
            if node.get("type") != "array":
                return None
            node = node.get("elementType")
        elif node.get("type") == "object" and (node.get("properties") or {}).get(segment):
            node = node["properties"][segment]
        else:
            return None
    return node


def reconcile_schema(record: dict[str, Any]) -> None:
    """`reconcileAndApplySchema`: regenerate `record["schema"]` from a clone of `stat_data`, inheriting the old
    schema; keep the root flags, then take those `stat_data.$meta` sets."""
    stat = record.get("stat_data")
    old = record.get("schema")
    new = generate_schema(clone(stat), old)
    if new.get("type") != "object":
        return
    for flag in ROOT_FLAGS:
        if isinstance(old, dict) and old.get(flag) is not None:
            new[flag] = old[flag]
    for flag in ROOT_FLAGS:
        if lodash_has(stat, ["$meta", flag]):
            new[flag] = stat["$meta"][flag]
    record["schema"] = new


def clean_up_metadata(data: Any) -> None:
    """`cleanUpMetadata` in place: markers and `$arrayMeta` elements leave arrays, `$meta` leaves objects."""
    if isinstance(data, list):
        i = len(data)
        while i:
            i -= 1
            if data[i] == EXTENSIBLE_MARKER or _is_array_meta(data[i]):
                del data[i]
            else:
                clean_up_metadata(data[i])
    elif isinstance(data, dict):
        data.pop("$meta", None)
        for value in data.values():
            clean_up_metadata(value)

"""JSON Schema validators that retrieve nothing: every `$ref` must resolve within the schema.

jsonschema's default registry fetches a `$ref` to `http://` or `file://` when a call is validated.
A tool's schemas are checked here instead when the tool is built: each reference is resolved
against the schema itself (its `$defs`, anchors and embedded `$id`s) by a registry that has no
way to retrieve, and one that does not resolve is an error then, never a fetch later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import jsonschema
import jsonschema.protocols
import referencing
import referencing.exceptions
import referencing.jsonschema


def unresolved_ref(schema: Mapping[str, Any]) -> str | None:
    """The first `$ref` of a (valid) schema that does not resolve within it, described; or None."""
    ref = _registry(schema)[1]
    if ref is None:
        return None
    return (
        f"$ref {ref!r} does not resolve within the schema: only references inside it "
        "(#/$defs/..., anchors, embedded $id) are followed; nothing is fetched"
    )


def local_validator(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """A Draft 2020-12 validator of `schema` that never retrieves a reference.

    Raises:
        ValueError: a `$ref` does not resolve within the schema (`unresolved_ref` says which,
            for an error message).
    """
    registry, ref = _registry(schema)
    if ref is not None:
        raise ValueError(f"$ref {ref!r} does not resolve within the schema")
    return cast(
        "jsonschema.protocols.Validator", jsonschema.Draft202012Validator(dict(schema), registry=registry)
    )


def _registry(schema: Mapping[str, Any]) -> tuple[referencing.Registry[Any], str | None]:
    """The schema's own registry, and the first reference it does not resolve (None: all do)."""
    resource: referencing.Resource[Any] = referencing.Resource.from_contents(
        dict(schema), default_specification=referencing.jsonschema.DRAFT202012
    )
    root = resource.id() or ""
    # Registry() has no retrieve: looking up a URI it does not hold raises, it fetches nothing.
    registry = referencing.Registry[Any]().with_resource(root, resource).crawl()
    # Each subschema with the resolver of its base URI (an embedded `$id` moves it).
    pending = [(resource, registry.resolver(root))]
    while pending:
        here, resolver = pending.pop()
        contents: object = here.contents
        for keyword in ("$ref", "$dynamicRef"):
            ref = cast(dict[str, object], contents).get(keyword) if isinstance(contents, dict) else None
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except referencing.exceptions.Unresolvable:
                    return registry, ref
        pending += [(sub, resolver.in_subresource(sub)) for sub in here.subresources()]
    return registry, None

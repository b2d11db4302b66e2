"""JSON schemas for kubeconform, generated offline from a running API server's OpenAPI v2.

kubeconform normally downloads schemas from GitHub, which is out of reach here. Instead,
each definition carrying `x-kubernetes-group-version-kind` becomes one standalone file
holding the definition plus every definition it references (under `definitions`, so the
`#/definitions/...` refs of the OpenAPI document resolve unchanged). CRDs served by the
API server are included.

The transformations follow what openapi2jsonschema does for kubernetes-json-schema:
- strict: objects with `properties` reject unknown fields (additionalProperties: false);
- every typed value may also be null (manifests often carry `field: null`);
- int-or-string and Quantity accept both numbers and strings, as the API server does.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

# kubeconform fills this in per resource: core v1 -> v1/v1/configmap.json,
# apps/v1 -> apps/v1/deployment.json, cowork.test/v1 -> cowork.test/v1/widget.json.
SCHEMA_TEMPLATE = "{{ .Group }}/{{ .ResourceAPIVersion }}/{{ .ResourceKind }}.json"

Schema = dict[str, Any]


def _transform(node: Schema) -> Schema:
    """One schema, with its subschemas (and only those: a `properties` map is field names,
    not a schema, even when a field is called `type` or `format`)."""
    out: Schema = dict(node)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _transform(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = _transform(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [_transform(s) for s in out[key]]
    if out.get("format") == "int-or-string" or out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        return out | {"oneOf": [{"type": ["string", "null"]}, {"type": "integer"}]}
    if "properties" in out and "additionalProperties" not in out:
        if not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            found.add(ref.removeprefix("#/definitions/"))
        for v in node.values():
            found |= _refs(v)
    elif isinstance(node, list):
        for v in node:
            found |= _refs(v)
    return found


def _reachable(name: str, defs: dict[str, Schema]) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n not in seen and n in defs:
            seen.add(n)
            todo.extend(_refs(defs[n]))
    return seen


def convert(openapi: Schema) -> dict[str, Schema]:
    """Map relative file path (per SCHEMA_TEMPLATE) -> standalone JSON schema."""
    defs: dict[str, Schema] = {n: _transform(d) for n, d in openapi["definitions"].items()}
    # Quantity is a string in OpenAPI, yet `cpu: 1` is valid: the server accepts numbers.
    for n in defs:
        if n.endswith("pkg.api.resource.Quantity"):
            defs[n] = {"oneOf": [{"type": ["string", "null"]}, {"type": "number"}]}
    files: dict[str, Schema] = {}
    for name, raw in openapi["definitions"].items():
        for gvk in raw.get("x-kubernetes-group-version-kind", []):
            group = gvk["group"] or gvk["version"]  # core: kubeconform's .Group is "v1"
            path = f"{group}/{gvk['version']}/{gvk['kind'].lower()}.json"
            doc: Schema = {"$schema": "http://json-schema.org/draft-07/schema#"} | defs[name]
            doc["definitions"] = {n: defs[n] for n in sorted(_reachable(name, defs))}
            files[path] = doc
    return files


def fetch_openapi(api_url: str, tls: ssl.SSLContext) -> Schema:
    with urllib.request.urlopen(f"{api_url}/openapi/v2", timeout=60, context=tls) as r:
        data: Schema = json.load(r)
    return data


def generate(api_url: str, tls: ssl.SSLContext, out: Path) -> int:
    """Write the schemas under `out`; returns how many files were written."""
    files = convert(fetch_openapi(api_url, tls))
    for rel, doc in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    return len(files)

"""Regenerate draft2020-12.json from the JSON-Schema-Test-Suite (run by hand, not by pytest).

    pip download --no-deps --no-binary :all: jsonschema==4.23.0 -d /tmp/jss
    tar xzf /tmp/jss/jsonschema-4.23.0.tar.gz -C /tmp/jss
    python tests/data/jsonschema_suite/vendor.py /tmp/jss/jsonschema-4.23.0/json

Every group of tests/draft2020-12/*.json, plus the optional ECMA-262 groups whose patterns use
Unicode property escapes, compacted into one file. ``needs_remote`` marks the groups that need a
document from the suite's remotes/ folder: it is decided by jsonschema itself (not by evalkit),
validating every case with a registry that serves remotes/ and records what it was asked for.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import referencing
import referencing.jsonschema
from jsonschema import Draft202012Validator, validators

REMOTE = "http://localhost:1234/"


def needs_remote(schema: object, tests: list[dict[str, object]], remotes: Path) -> bool:
    asked: list[str] = []

    def retrieve(uri: str) -> referencing.Resource[object]:
        asked.append(uri)
        contents = json.loads((remotes / uri.removeprefix(REMOTE)).read_text(encoding="utf-8"))
        return referencing.jsonschema.DRAFT202012.create_resource(contents)

    cls = validators.validator_for(schema, default=Draft202012Validator)
    for test in tests:
        try:
            cls(schema, registry=referencing.Registry(retrieve=retrieve)).is_valid(test["data"])
        except Exception:  # only what was asked for matters here
            continue
    return bool(asked)


def main(suite: Path) -> None:
    root = suite / "tests" / "draft2020-12"
    files = sorted(p.name for p in root.glob("*.json"))
    groups = []
    for name in [*files, "optional/ecmascript-regex.json"]:
        for group in json.loads((root / name).read_text(encoding="utf-8")):
            if name.startswith("optional/") and "\\p{" not in json.dumps(group["schema"]):
                continue
            groups.append(
                {
                    "file": name,
                    "description": group["description"],
                    "schema": group["schema"],
                    "tests": [{k: t[k] for k in ("description", "data", "valid")} for t in group["tests"]],
                    "needs_remote": needs_remote(group["schema"], group["tests"], suite / "remotes"),
                }
            )
    document = {
        "source": "JSON-Schema-Test-Suite, tests/draft2020-12, as shipped in the jsonschema 4.23.0 sdist",
        "license": (suite / "LICENSE").read_text(encoding="utf-8"),
        "groups": groups,
    }
    out = Path(__file__).with_name("draft2020-12.json")
    out.write_text(json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{out}: {len(groups)} groups, {sum(len(g['tests']) for g in groups)} cases, {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""The YAML reader under both of ruamel.yaml's parsers: libyaml's C parser (ruamel.yaml.clib,
installed on CPython only) and the pure-Python one every other install uses."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["libyaml", "pure"])
def yaml_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which parser the reader uses: "pure" hides the C parser as an install without
    ruamel.yaml.clib lacks it (ruamel.yaml picks its parser from ``ruamel.yaml.main.CParser``)."""
    import ruamel.yaml.main

    if request.param == "pure":
        monkeypatch.setattr(ruamel.yaml.main, "CParser", None)
    elif ruamel.yaml.main.CParser is None:
        pytest.fail("ruamel.yaml.clib is not installed: the C parser cannot be tested")
    return str(request.param)

"""Plugins through entry points (README "Plugins"): a real plugin package, pip-installed into a
temporary venv, gives evalkit an assertion type, a provider adapter and a retriever kind; a
plugin that raises on import breaks only the files that use it; ``evalkit --version --verbose``
lists what is installed.

The in-process tests install the same plugin modules as a distribution folder on ``sys.path``
(``*.dist-info`` with its ``entry_points.txt``, as pip writes them): importlib.metadata finds
it exactly as it finds an installed package, and the registries are restored afterwards. The
venv test is the whole way a user goes: a pyproject.toml, pip, a console run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.conftest import REPO, write

# the demo plugin: one assertion type, one provider adapter, one retriever kind
DEMO_MODULE = '''
"""A demo evalkit plugin."""

from evalkit.records import Completion, Ranking, ServingRecord, Usage


def shouting(response, context):
    """The response's letters are all capitals."""
    letters = [c for c in response if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        return True
    return {"pass": False, "score": 0.0, "reason": "not shouted"}


def _check_value(value):
    if value is not True:
        raise ValueError(f"shouting takes true, got {value!r}")


shouting.check_value = _check_value


class EchoProvider:
    """Answers with its prefix and the prompt."""

    adapter = "echo"

    def __init__(self, instance_id, prefix):
        self.instance_id = instance_id
        self.prefix = prefix

    @classmethod
    def from_config(cls, options):
        if "prefix" not in options:
            raise ValueError("the echo adapter needs prefix:")
        return cls(options["id"], options["prefix"])

    async def complete(self, request):
        text = self.prefix + request.messages[-1].content
        if "explode" in text:
            raise RuntimeError("the echo exploded")
        return Completion(text=text, serving=ServingRecord(self.instance_id, request.model, "echo-1"), usage=Usage(2, 3))

    async def aclose(self):
        return None


class KeywordRetriever:
    """Ranks its configured documents by the words they share with the question."""

    def __init__(self, retriever_id, documents):
        self.id = retriever_id
        self.documents = documents

    @classmethod
    def from_config(cls, options):
        return cls(options["id"], dict(options["documents"]))

    async def search(self, question, limit):
        if "explode" in question:
            raise KeyError("no index")
        words = set(question.lower().split())
        shared = {doc: len(words & set(text.lower().split())) for doc, text in self.documents.items()}
        ranked = sorted((doc for doc, n in shared.items() if n), key=lambda doc: (-shared[doc], doc))
        return Ranking(tuple(ranked[:limit]), {"pipeline": "keyword-v1"})

    async def aclose(self):
        return None


class NoFactory:
    """A class without from_config."""
'''
DEMO_ENTRY_POINTS = {
    "evalkit.assertions": {"shouting": "evalkit_demo_plugin:shouting"},
    "evalkit.providers": {"echo": "evalkit_demo_plugin:EchoProvider"},
    "evalkit.retrievers": {"keyword": "evalkit_demo_plugin:KeywordRetriever"},
}
BROKEN_MODULE = 'raise RuntimeError("broken on purpose")\n'
BROKEN_ENTRY_POINTS = {
    "evalkit.assertions": {"exploding": "evalkit_broken_plugin:check"},
    "evalkit.providers": {"brokenllm": "evalkit_broken_plugin:Provider"},
}


class PluginSite:
    """A folder on ``sys.path`` holding plugin distributions as pip installs them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.modules: list[str] = []

    def add(
        self,
        name: str,
        modules: Mapping[str, str],
        entry_points: Mapping[str, Mapping[str, str]],
        version: str = "0.1.0",
    ) -> None:
        for module, source in modules.items():
            (self.folder / f"{module}.py").write_text(source, encoding="utf-8")
            self.modules.append(module)
        info = self.folder / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
        (info / "entry_points.txt").write_text(entry_points_txt(entry_points), encoding="utf-8")

    def demo(self) -> PluginSite:
        self.add("evalkit-demo-plugin", {"evalkit_demo_plugin": DEMO_MODULE}, DEMO_ENTRY_POINTS)
        return self

    def broken(self) -> PluginSite:
        self.add("evalkit-broken-plugin", {"evalkit_broken_plugin": BROKEN_MODULE}, BROKEN_ENTRY_POINTS, "0.2.0")
        return self


def entry_points_txt(entry_points: Mapping[str, Mapping[str, str]]) -> str:
    return "".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in found.items()) + "\n"
        for group, found in entry_points.items()
    )


def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginSite]:
    """A PluginSite on sys.path for one test; entry points re-read, registries restored after."""
    from evalkit import plugins
    from evalkit.assertions import registry as assertions
    from evalkit.providers import registry as providers
    from evalkit.retrieval import registry as retrievers

    assertions.types()  # the built-in families registered before the snapshot
    registries: tuple[dict[str, Any], ...] = (assertions._TYPES, providers._ADAPTERS, retrievers._KINDS)
    saved = [dict(registered) for registered in registries]
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    plugins.installed.cache_clear()
    site = PluginSite(folder)
    try:
        yield site
    finally:
        plugins.installed.cache_clear()
        for registered, before in zip(registries, saved, strict=True):
            registered.clear()
            registered.update(before)
        assertions._NEGATIONS.clear()
        for module in site.modules:
            sys.modules.pop(module, None)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginSite]:
    yield from plugin_site(tmp_path, monkeypatch)


SHOUT_SET = """
id: plugin.shout
name: Shout
prompts:
  - id: loud
    prompt: HELLO THERE
    assertions: [{shouting: true}, {contains: "SAYS: HELLO"}]
  - id: quiet
    prompt: hello there
    assertions: [{shouting: true}]
  - id: quiet-negated
    prompt: hello again
    assertions: [{not_shouting: true}]
"""
QUESTIONS = """
id: plugin.questions
name: Keyword questions
questions:
  - {id: q-cats, question: do cats purr, form: match, expected: [doc-cats]}
  - {id: q-dogs, question: why do dogs bark, form: match, expected: [doc-dogs]}
  - {id: q-fish, question: fish swim, form: gap, expected: [doc-fish]}
"""
CONFIG = """
providers:
  - id: shouter
    adapter: echo
    model: echo-model
    prefix: "SAYS: "
retrievers:
  - id: kw
    kind: keyword
    documents: {doc-cats: cats purr and sleep, doc-dogs: dogs bark loudly, doc-fish: goldfish}
    provenance: {corpus_revision: demo-1}
"""
BROKEN_SET = """
id: plugin.broken
name: Uses the broken plugin
prompts:
  - id: a
    prompt: hi
    assertions:
      - exploding: 1
"""


def write_project(folder: Path) -> None:
    write(folder / "evalkit.yaml", CONFIG)
    write(folder / "sets" / "shout.yaml", SHOUT_SET)
    write(folder / "questions.yaml", QUESTIONS)
    write(folder / "broken" / "broken.yaml", BROKEN_SET)


def check_shout_run(document: dict[str, Any]) -> None:
    """The plugin's assertion decided each prompt, through the plugin's adapter."""
    items = {item["id"]: item for item in document["items"]}
    assert items["loud"]["passed"] is True
    assert items["loud"]["response"] == "SAYS: HELLO THERE"
    assert [a["type"] for a in items["loud"]["assertions"]] == ["shouting", "contains"]
    assert items["quiet"]["passed"] is False
    assert items["quiet"]["response"] == "SAYS: hello there"
    assert "not shouted" in items["quiet"]["reason"]
    assert items["quiet-negated"]["passed"] is True  # not_shouting comes for free
    assert document["provider"] == "shouter"
    assert document["pass_rate"] == pytest.approx(2 / 3)


def check_keyword_run(document: dict[str, Any]) -> None:
    """The plugin retriever ranked, and its returned provenance was merged with the declared one."""
    assert document["retriever"] == "kw"
    items = {item["id"]: item for item in document["items"]}
    assert items["q-cats"]["top1_hit"] is True
    assert items["q-dogs"]["top1_hit"] is True
    assert items["q-fish"]["top1_hit"] is False
    assert document["provenance"]["pipeline"] == "keyword-v1"
    assert document["provenance"]["corpus_revision"] == "demo-1"


# in-process: the same plugins on sys.path


def test_a_plugin_type_adapter_and_kind_work_in_process(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.demo()
    write_project(isolated)
    result = cli("run", "sets/shout.yaml", "--format", "json")
    assert result.exception is None, result.stderr
    check_shout_run(json.loads(result.stdout))
    assert result.exit_code == 0, result.stderr  # no gate asked for
    result = cli("retrieval", "questions.yaml", "--retriever", "kw", "--format", "json")
    assert result.exit_code == 0, result.stderr
    check_keyword_run(json.loads(result.stdout))


def test_a_plugin_that_fails_on_import_breaks_only_the_set_that_uses_it(
    site: PluginSite, isolated: Path, cli: Any
) -> None:
    site.demo().broken()
    write_project(isolated)
    result = cli("run", "broken/broken.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: broken/broken.yaml:7:9: prompts[0].assertions[0]: plugin 'exploding' (evalkit.assertions, from "
        "evalkit-broken-plugin 0.2.0, evalkit_broken_plugin:check) cannot be loaded: RuntimeError: broken on purpose"
    ]
    assert cli("run", "sets/shout.yaml", "--format", "json").exit_code == 0
    assert cli("validate", "sets/shout.yaml").exit_code == 0


def test_version_verbose_lists_built_ins_and_plugins(site: PluginSite, cli: Any) -> None:
    from evalkit._version import __version__

    site.demo().broken()
    result = cli("--version", "--verbose")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"evalkit, version {__version__}"
    assert lines[1] == "built in:"
    assert lines[2].startswith("  assertion types: contains, contains_all, ")
    assert lines[3:5] == [
        "  provider adapters: openai, anthropic, replay, local, http, python, command",
        "  retriever kinds: http, command, lexical",
    ]
    assert lines[5:] == [
        "plugins:",
        "  evalkit.assertions (assertion types):",
        "    exploding  evalkit-broken-plugin 0.2.0  FAILS TO LOAD: cannot be loaded: RuntimeError: broken on purpose",
        "    shouting  evalkit-demo-plugin 0.1.0",
        "  evalkit.providers (provider adapters):",
        "    brokenllm  evalkit-broken-plugin 0.2.0  FAILS TO LOAD: cannot be loaded: RuntimeError: broken on purpose",
        "    echo  evalkit-demo-plugin 0.1.0",
        "  evalkit.retrievers (retriever kinds):",
        "    keyword  evalkit-demo-plugin 0.1.0",
        "2 plugins cannot be loaded: a file that uses one is an error",
    ]
    assert cli("--verbose", "--version").stdout == result.stdout  # either order


def test_version_verbose_without_plugins_and_plain_version(cli: Any) -> None:
    from evalkit import plugins

    plugins.installed.cache_clear()
    result = cli("--version", "--verbose")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-4:] == [
        "plugins:",
        "  evalkit.assertions (assertion types): none",
        "  evalkit.providers (provider adapters): none",
        "  evalkit.retrievers (retriever kinds): none",
    ]
    plain = cli("--version")
    assert plain.exit_code == 0
    assert len(plain.stdout.splitlines()) == 1
    alone = cli("--verbose", "validate")
    assert alone.exit_code == 2
    assert alone.stderr.splitlines() == [
        "Error: --verbose goes with --version: evalkit --version --verbose (see evalkit --help)"
    ]


def test_a_plugin_shadowed_by_a_built_in_is_never_used(site: PluginSite, isolated: Path, cli: Any) -> None:
    site.add(
        "evalkit-shadow", {"evalkit_shadow": BROKEN_MODULE}, {"evalkit.assertions": {"contains": "evalkit_shadow:x"}}
    )
    write(isolated / "s.yaml", "id: s\nname: S\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: hi}]}\n")
    assert cli("validate", "s.yaml").exit_code == 0  # the built-in contains; the broken plugin never imported
    assert "evalkit_shadow" not in sys.modules
    verbose = cli("--version", "--verbose").stdout
    assert "    contains  evalkit-shadow 0.1.0  (not used: a built-in has this name)  FAILS TO LOAD" in verbose


# the whole way: a plugin package, pip, a temporary venv, evalkit run as a program


def pyproject(name: str, module: str, entry_points: Mapping[str, Mapping[str, str]]) -> str:
    groups = "".join(
        f'\n[project.entry-points."{group}"]\n' + "".join(f'{ep} = "{value}"\n' for ep, value in found.items())
        for group, found in entry_points.items()
    )
    return (
        textwrap.dedent(
            f"""
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "{name}"
        version = "0.1.0"
        requires-python = ">=3.11"
        """
        ).lstrip()
        + groups
        + f'\n[tool.hatch.build.targets.wheel]\npackages = ["{module}"]\n'
    )


def make_venv(folder: Path) -> Path:
    """A venv that sees evalkit and its dependencies (this venv's site-packages, added as a site
    directory so that its own .pth files, evalkit's editable install among them, apply), and
    pip and hatchling from there too: nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    python = folder / "bin" / "python"
    site_dir = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(site_dir) / "evalkit-dev.pth").write_text(f"import site; site.addsitedir({ours!r})\n", encoding="utf-8")
    return python


def pip_install(python: Path, package: Path) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    done = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation", "-q", str(package)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def write_package(folder: Path, name: str, module: str, source: str, entry_points: Mapping[str, Any]) -> Path:
    write(folder / "pyproject.toml", pyproject(name, module, entry_points))
    write(folder / module / "__init__.py", source)
    return folder


@pytest.mark.slow
def test_a_plugin_package_installed_with_pip_into_a_venv(tmp_path: Path, isolated: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(
        python,
        write_package(tmp_path / "demo", "evalkit-demo-plugin", "evalkit_demo_plugin", DEMO_MODULE, DEMO_ENTRY_POINTS),
    )
    pip_install(
        python,
        write_package(
            tmp_path / "bad", "evalkit-broken-plugin", "evalkit_broken_plugin", BROKEN_MODULE, BROKEN_ENTRY_POINTS
        ),
    )
    write_project(isolated)

    def evalkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-m", "evalkit", *args], cwd=isolated, capture_output=True, text=True, timeout=120, check=False
        )

    located = subprocess.run(
        [python, "-c", "import evalkit, evalkit_demo_plugin; print(evalkit.__file__, evalkit_demo_plugin.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert located[0] == str(REPO / "evalkit" / "__init__.py")
    assert located[1].startswith(str(tmp_path / "venv"))  # pip installed the plugin into the venv

    run = evalkit("run", "sets/shout.yaml", "--format", "json")
    assert run.returncode == 0, run.stderr
    check_shout_run(json.loads(run.stdout))

    retrieval = evalkit("retrieval", "questions.yaml", "--retriever", "kw", "--format", "json")
    assert retrieval.returncode == 0, retrieval.stderr
    check_keyword_run(json.loads(retrieval.stdout))

    version = evalkit("--version", "--verbose")
    assert version.returncode == 0, version.stderr
    for line in (
        "    shouting  evalkit-demo-plugin 0.1.0",
        "    echo  evalkit-demo-plugin 0.1.0",
        "    keyword  evalkit-demo-plugin 0.1.0",
        "    exploding  evalkit-broken-plugin 0.1.0  FAILS TO LOAD: cannot be loaded: RuntimeError: broken on purpose",
    ):
        assert line in version.stdout.splitlines(), version.stdout

    broken = evalkit("run", "broken/broken.yaml")
    assert broken.returncode == 2
    assert broken.stderr.splitlines() == [
        "Error: broken/broken.yaml:7:9: prompts[0].assertions[0]: plugin 'exploding' (evalkit.assertions, from "
        "evalkit-broken-plugin 0.1.0, evalkit_broken_plugin:check) cannot be loaded: RuntimeError: broken on purpose"
    ]
    assert evalkit("validate", "sets/shout.yaml", "questions.yaml").returncode == 0  # the others are unaffected


def test_validate_leaves_a_plugin_adapters_own_keys_alone(site: PluginSite, isolated: Path, cli: Any) -> None:
    """``path:`` on a plugin adapter is the plugin's (an index, a socket): validate does not
    read it as a replay answers file; on the replay adapter it still does."""
    site.demo()
    write_project(isolated)
    config = CONFIG.replace('    prefix: "SAYS: "\n', '    prefix: "SAYS: "\n    path: data/index.bin\n')
    write(isolated / "evalkit.yaml", config)
    result = cli("validate", "evalkit.yaml", "sets/shout.yaml")
    assert result.exit_code == 0, result.stderr
    replay = "  - {id: rec, adapter: replay, path: data/missing.jsonl}\nretrievers:"
    write(isolated / "evalkit.yaml", config.replace("retrievers:", replay, 1))
    result = cli("validate", "evalkit.yaml")
    assert result.exit_code == 2
    assert "replay answers file 'data/missing.jsonl' not found" in result.stderr


@dataclass(frozen=True, slots=True)
class Widget:
    """A record for the generic Registry: a name and the distribution that registered it."""

    name: str
    origin: str = "evalkit"
    size: int = 0


def test_a_registry_keeps_registration_order_and_looks_up_by_name() -> None:
    from evalkit.plugins import Registry

    registry: Registry[Widget] = Registry("widget", "evalkit.widgets")
    zebra, apple, mango = Widget("zebra"), Widget("apple"), Widget("mango")
    for widget in (zebra, apple, mango):
        assert registry.add(widget) is widget
    assert registry.names() == ["zebra", "apple", "mango"]  # registration order, not sorted
    assert registry.records() == [zebra, apple, mango]
    assert registry.get("apple") is apple
    assert registry.get("pear") is None
    assert "mango" in registry
    assert "pear" not in registry


def test_a_registry_refuses_a_name_registered_twice_naming_both_origins() -> None:
    from evalkit.plugins import Registry

    registry: Registry[Widget] = Registry("widget", "evalkit.widgets")
    first = registry.add(Widget("gear", size=1))
    with pytest.raises(ValueError, match=r"^widget 'gear' is registered twice \(evalkit and evalkit-gears 2\.0\)$"):
        registry.add(Widget("gear", origin="evalkit-gears 2.0", size=2))
    assert registry.get("gear") is first  # the first registration stands
    assert registry.names() == ["gear"]


def test_a_registry_lookup_runs_no_python_code() -> None:
    """The grader looks up every assertion of every answer: a lookup is the dict's own get."""
    from evalkit.plugins import Registry

    registry: Registry[Widget] = Registry("widget", "evalkit.widgets")
    registry.add(Widget("gear"))
    calls: list[str] = []

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        calls.append(frame.f_code.co_qualname)

    sys.setprofile(tracer)
    try:
        found, missing = registry.get("gear"), registry.get("cog")
    finally:
        sys.setprofile(None)
    assert (found, missing) == (Widget("gear"), None)
    python_calls = [name for name in calls if name != "test_a_registry_lookup_runs_no_python_code"]
    assert python_calls == []


def test_a_registry_registers_only_the_wanted_plugins_of_its_group(site: PluginSite) -> None:
    """``from_plugins`` goes through the shared entry-point loop for the registry's own group: a
    wanted name already registered is not loaded again, one no plugin provides is left alone."""
    from evalkit import plugins
    from evalkit.plugins import Registry

    site.demo().broken()
    registry: Registry[Widget] = Registry("provider adapter", plugins.PROVIDERS)
    loaded: list[tuple[str, str, str]] = []

    def register(name: str, obj: Any, origin: str) -> Widget:
        loaded.append((name, obj.__name__, origin))
        return registry.add(Widget(name, origin))

    errors = registry.from_plugins(["echo", "brokenllm", "keyword", "nowhere"], register)
    # keyword is a retriever kind (another group's), nowhere no plugin's
    assert loaded == [("echo", "EchoProvider", "evalkit-demo-plugin 0.1.0")]
    assert list(errors) == ["brokenllm"]
    assert "plugin 'brokenllm' (evalkit.providers, from evalkit-broken-plugin 0.2.0" in errors["brokenllm"]
    assert registry.names() == ["echo"]
    assert registry.from_plugins(["echo"], register) == {}
    assert len(loaded) == 1  # registered already: not loaded again


def test_assertion_plugins_go_through_the_shared_loop_keyed_by_the_names_a_set_uses(site: PluginSite) -> None:
    """``not_x`` asks for the plugin ``x``; each name the set used gets its plugin's error; a
    plugin named ``not_...`` is refused (negation is derived), naming its distribution."""
    from evalkit.assertions import registry

    site.demo().broken()
    site.add("evalkit-odd-plugin", {"evalkit_odd_plugin": "def check(response, context):\n    return True\n"},
             {"evalkit.assertions": {"not_rude": "evalkit_odd_plugin:check"}})  # fmt: skip
    errors = registry.from_plugins({"not_shouting", "exploding", "not_exploding", "not_rude", "not_nowhere"})
    broken = (
        "plugin 'exploding' (evalkit.assertions, from evalkit-broken-plugin 0.2.0, evalkit_broken_plugin:check) "
        "cannot be loaded: RuntimeError: broken on purpose"
    )
    assert errors == {
        "exploding": broken,
        "not_exploding": broken,
        "not_rude": "plugin 'not_rude' from evalkit-odd-plugin: assertion type 'not_rude': a name cannot start "
        "with 'not_' (negation is derived)",
    }
    assert list(errors) == sorted(errors)
    shouting = registry.get("not_shouting")
    assert shouting is not None
    assert shouting.negated
    assert shouting.origin == "evalkit-demo-plugin 0.1.0"

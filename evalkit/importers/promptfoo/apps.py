"""promptfoo providers that call the user's application, as evalkit's application adapters
(README "Coming from promptfoo" and "Testing your application"):

    file://x.py[:fn]     python: a generated wrapper next to the sets calls ``fn`` (default
                         call_api) with (prompt, options, context) unchanged and maps promptfoo's
                         ProviderResponse {output, error, tokenUsage, cost} to evalkit's answer
    exec: CMD            command: CMD {{ prompt }} (promptfoo passes the prompt as an argument)
    http, https, a URL   http: url, method, headers, body ({{var}} -> {{ vars.var }}), and a
                         dotted transformResponse (json.choices[0].message.content) as
                         response.output; any other transform is listed

A provider's ``config.tools`` (OpenAI form) become the sets' ``tools:``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.config import split_command
from evalkit.importers.promptfoo.report import ImportReport
from evalkit.importers.promptfoo.source import Loc, expand, file_reference, split_function

_DOTTED = re.compile(r"^\s*json((?:\.[A-Za-z_$][\w$]*|\[\d+\])+)\s*$")
_VAR = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_TEMPLATE_NAME = re.compile(r"\{\{\s*([A-Za-z_]\w*)")
_SECRET_HEADERS = frozenset(("authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"))
_REQUEST_NAMES = frozenset(("prompt", "messages", "system", "vars", "tools", "params", "set", "prompt_id"))
_HTTP_KEYS = frozenset(("url", "method", "headers", "body", "transformResponse", "tools"))


def is_application(ident: str) -> bool:
    return (
        ident.startswith("exec:")
        or ident in ("http", "https")
        or ident.startswith(("http://", "https://"))
        or (ident.startswith("file://") and split_function(file_reference(ident))[0].endswith(".py"))
    )


def application_entry(
    ident: str, options: Mapping[str, Any], loc: Loc, *, base: Path, out: Path, report: ImportReport
) -> dict[str, Any] | None:
    """The evalkit.yaml entry for one application provider (None: listed as not converted)."""
    config = options.get("config") or {}
    config = config if isinstance(config, Mapping) else {}
    read_tools(config, loc, report)
    if ident.startswith("exec:"):
        command = ident[len("exec:") :].strip()
        try:
            split = split_command(command)
        except ValueError as exc:
            split, why = [], f"evalkit cannot split its command ({exc}); fix its quoting"
        else:
            why = "it names no command"
        if not split:
            report.add("not_converted", loc, f"provider {ident}", why)
            return None
        report.add("note", "", "", "exec: evalkit runs the command in evalkit.yaml's folder, promptfoo in the config's "
                   "(check its paths), and passes the prompt only, promptfoo also its options and context as JSON "
                   "arguments")  # fmt: skip
        return {"id": "command", "adapter": "command", "command": f"{command} {{{{ prompt }}}}"}
    if ident.startswith("file://"):
        return _python(ident, config, loc, base=base, out=out, report=report)
    return _http(ident, config, loc, report)


def read_tools(config: Mapping[str, Any], loc: Loc, report: ImportReport) -> None:
    """A provider's ``config.tools`` as the sets' ``tools:`` (README "Tools and tool calls")."""
    tools = config.get("tools")
    if tools is None:
        return
    converted = []
    for tool in tools if isinstance(tools, list) else [None]:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            report.add("partly", loc.key_of("config", "tools"), "provider tools",
                       "only OpenAI function tools ({type: function, function: {name, parameters}}) convert")  # fmt: skip
            return
        converted.append({k: function[k] for k in ("name", "description", "parameters") if k in function})
    if report.tools and report.tools != converted:
        report.add("partly", loc.key_of("config", "tools"), "provider tools",
                   "the providers declare different tools; the sets carry the first provider's")  # fmt: skip
    report.tools = report.tools or converted


def _python(
    ident: str, config: Mapping[str, Any], loc: Loc, *, base: Path, out: Path, report: ImportReport
) -> dict[str, Any]:
    path, function = split_function(file_reference(ident))
    source = expand(base, path, loc)[0]  # it must exist, in a folder the import may read
    name = re.sub(r"[^a-z0-9]+", "_", f"{Path(path).stem} {function or ''}".lower()).strip("_") or "provider"
    wrapper, n = out / f"promptfoo_{name}.py", 2
    while wrapper in report.files:  # the same function with another config
        wrapper, n = out / f"promptfoo_{name}_{n}.py", n + 1
    target = Path(os.path.relpath(source.resolve(), out.resolve())).as_posix()
    options = {"config": {k: v for k, v in config.items() if k != "apiKey"}}
    if "apiKey" in config:
        report.add("partly", loc, f"provider {ident} apiKey",
                   "the key written in the config is not copied; read it from the environment in call_api")  # fmt: skip
    report.files[wrapper] = _WRAPPER.format(
        config=report.config,
        target=target,
        function=function or "call_api",
        options=repr(json.dumps(options, ensure_ascii=False, default=str)),
    )
    return {"id": name, "adapter": "python", "function": f"{wrapper.as_posix()}:answer"}


def _http(ident: str, config: Mapping[str, Any], loc: Loc, report: ImportReport) -> dict[str, Any] | None:
    from evalkit.importers.promptfoo.config import without_userinfo

    url = config.get("url") if ident in ("http", "https") else ident
    transform = config.get("transformResponse")
    match = _DOTTED.match(transform) if isinstance(transform, str) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or match is None:
        why = ("it names no http(s) url" if not isinstance(url, str) or not url.startswith(("http://", "https://"))
               else "its transformResponse is code" if transform else "it reads the whole response")  # fmt: skip
        report.add("not_converted", loc, f"provider {ident}",
                   f"{why}; evalkit's http adapter reads the output at a dotted path: give a transformResponse like "
                   "json.output, or write the entry yourself (adapter: http, response: {output: a.dotted.path})")  # fmt: skip
        return None
    clean = without_userinfo(url)
    if clean != url:
        report.add("partly", loc, f"provider {ident} url",
                   "its user:password@ is not copied; send the credentials in a header from an environment variable")  # fmt: skip
    path = re.sub(r"\[(\d+)\]", r".\1", match.group(1)).lstrip(".")
    entry: dict[str, Any] = {"id": re.sub(r"[^A-Za-z0-9_.-]+", "-", clean.partition("://")[2].partition("/")[0])
                             or "http", "adapter": "http", "url": clean}  # fmt: skip
    if isinstance(config.get("method"), str):
        entry["method"] = config["method"].upper()
    headers = _headers(config.get("headers"), ident, loc, report)
    if headers:
        entry["headers"] = headers
    if "body" in config:
        entry["body"] = _body(config["body"])
    entry["response"] = {"output": path}
    rest = sorted(set(config) - _HTTP_KEYS)
    if rest:
        report.add("partly", loc, f"provider {ident} config", f"not converted: {', '.join(rest)}")
    return entry


def _headers(headers: Any, ident: str, loc: Loc, report: ImportReport) -> dict[str, str]:
    """The headers evalkit can send: a template may read only ``env.NAME`` (as in promptfoo), and
    a credential written in the config is never copied (README "Coming from promptfoo")."""
    out: dict[str, str] = {}
    for name, value in headers.items() if isinstance(headers, Mapping) else ():
        text = str(value)
        names = set(_TEMPLATE_NAME.findall(text))
        if names - {"env"}:
            report.add("partly", loc, f"provider {ident} header {name}",
                       "evalkit's headers read only the environment ({{ env.NAME }}); not copied")  # fmt: skip
        elif str(name).lower() in _SECRET_HEADERS and not names:
            report.add("partly", loc, f"provider {ident} header {name}",
                       "a credential written in the config is not copied; send it as {{ env.NAME }}")  # fmt: skip
        else:
            out[str(name)] = text
    return out


def _body(body: Any) -> Any:
    """promptfoo renders the body with the test's vars by name; evalkit's body sees the request
    (README "Testing your application"), where they are ``vars.X``."""
    if isinstance(body, str):
        return _VAR.sub(lambda m: m.group(0) if m.group(1) in _REQUEST_NAMES else f"{{{{ vars.{m.group(1)} }}}}", body)
    if isinstance(body, list):
        return [_body(v) for v in body]
    if isinstance(body, Mapping):
        return {k: _body(v) for k, v in body.items()}
    return body


_WRAPPER = '''"""Generated by evalkit import promptfoo {config}: evalkit's python adapter calls answer(request),
which calls the promptfoo provider {target} ({function}) with (prompt, options, context)
unchanged, as promptfoo does, and maps its ProviderResponse to evalkit's answer (README "Coming
from promptfoo"). Re-run the import after changing the promptfoo config."""

import asyncio
import importlib.util
import inspect
import json
import sys
from pathlib import Path

_FILE = (Path(__file__).parent / {target!r}).resolve()
_OPTIONS = json.loads({options})
_FUNCTION = None


def _provider():
    global _FUNCTION
    if _FUNCTION is None:
        if str(_FILE.parent) not in sys.path:
            sys.path.insert(0, str(_FILE.parent))  # promptfoo imports the provider from its folder
        spec = importlib.util.spec_from_file_location("promptfoo_provider_" + _FILE.stem, _FILE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _FUNCTION = getattr(module, {function!r})
    return _FUNCTION


def answer(request):
    chat = request.get("system") is not None or len(request.get("messages") or []) > 1
    prompt = json.dumps(request["messages"]) if chat else request["prompt"]
    context = {{"vars": request.get("vars") or {{}}, "prompt": {{"raw": prompt, "label": request.get("prompt_id")}}}}
    result = _provider()(prompt, _OPTIONS, context)
    if inspect.isawaitable(result):
        result = asyncio.run(result)
    if not isinstance(result, dict):
        raise TypeError("call_api must return a dict with output or error")
    if result.get("error"):
        raise RuntimeError(str(result["error"]))
    out = {{"output": result.get("output")}}
    output = out["output"]
    if isinstance(output, dict) and "tool_calls" in output:
        out["tool_calls"], out["output"] = output["tool_calls"] or [], output.get("content") or ""
    elif isinstance(output, list) and output and all(isinstance(c, dict) for c in output):
        out["tool_calls"], out["output"] = output, ""
    elif output is None:
        out["output"] = ""
    elif not isinstance(output, str):
        out["output"] = json.dumps(output)
    usage = result.get("tokenUsage") or {{}}
    if "prompt" in usage or "completion" in usage:
        out["usage"] = {{"input_tokens": usage.get("prompt", 0), "output_tokens": usage.get("completion", 0)}}
    if isinstance(result.get("cost"), (int, float)):
        out["cost"] = result["cost"]
    return out
'''

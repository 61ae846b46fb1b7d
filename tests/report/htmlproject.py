"""A project with a history worth drawing, for the HTML report's tests: recorded answers replayed
through two instances, a baseline accepted, a regression, hostile text in answers, ids, reasons
and model names, and a retrieval run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# what an answer, id, reason or model name may carry
SCRIPT = "</script><img src=x onerror=\"document.title='owned'\">"
HOSTILE_ID = "evil-</td><script>document.title='owned'</script>"
TEMPLATE = "{{7*7}}"
BIDI = "abc\u202edcba\u2066x\u0007\u0000y"
HOSTILE_MODEL = "m<b>1</b>\u202e"

PROMPTS = ["p-ok-1", "p-ok-2", "p-flip", HOSTILE_ID, "p-template"]
# a reason quotes the assertion's value: this one fails on every answer, saying what it looked for
HOSTILE_NEEDLE = "<script>document.title='owned'</script>{{7*7}}\u202e"


def answers(flip_passes: bool) -> list[dict[str, str]]:
    return [
        {"id": "p-ok-1", "response": "alpha", "model": HOSTILE_MODEL},
        {"id": "p-ok-2", "response": f"alpha {BIDI}", "model": HOSTILE_MODEL},
        {"id": "p-flip", "response": "alpha" if flip_passes else "beta", "model": HOSTILE_MODEL},
        {"id": HOSTILE_ID, "response": f"alpha {SCRIPT}", "model": HOSTILE_MODEL},
        {"id": "p-template", "response": f"{TEMPLATE} beta", "model": HOSTILE_MODEL},
    ]


def write_answers(folder: Path, name: str, rows: list[dict[str, str]]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_project(folder: Path, cli: Any, *, runs: int = 3, privacy: str = "full") -> dict[str, Any]:
    """``runs`` runs on instance ``good`` (the first accepted as the baseline), then one on ``bad``
    that fails p-flip, then a regressing run on ``good``; plus a retrieval run. Returns the run ids."""
    write_answers(folder, "good.jsonl", answers(True))
    write_answers(folder, "bad.jsonl", answers(False))
    (folder / "evalkit.yaml").write_text(
        f"privacy: {privacy}\ndefault_provider: good\nbaselines: baselines\nproviders:\n"
        "  - {id: good, adapter: replay, path: good.jsonl}\n"
        "  - {id: bad, adapter: replay, path: bad.jsonl}\n",
        encoding="utf-8",
    )
    prompts = "\n".join(
        f"  - {{id: {json.dumps(p)}, prompt: 'Say alpha', assertions: [{{contains: alpha}}]}}" for p in PROMPTS
    )
    # written as a template that renders to the literal {{7*7}} (set files render their values)
    needle = json.dumps(HOSTILE_NEEDLE.replace(TEMPLATE, "{{ '" + TEMPLATE + "' }}"))
    prompts = prompts.replace(
        "p-template\", prompt: 'Say alpha', assertions: [{contains: alpha}]",
        f"p-template\", prompt: 'Say alpha', assertions: [{{contains: alpha}}, {{contains: {needle}}}]",
    )
    (folder / "set.yaml").write_text(f"id: html.demo\nname: HTML <demo>\nprompts:\n{prompts}\n", encoding="utf-8")
    made: list[str] = []

    def run(*args: str) -> str:
        result = cli("run", "set.yaml", "--format", "json", *args)
        assert result.exit_code in (0, 1), result.stderr
        run_id = str(json.loads(result.stdout)["run_id"])
        made.append(run_id)
        return run_id

    run()
    assert cli("baseline", "accept").exit_code == 0
    for _ in range(runs - 1):
        run()
    bad = run("--provider", "bad")
    write_answers(folder, "good.jsonl", answers(False))  # the good instance now fails p-flip: a regression
    regressed = run()
    (folder / "corpus.jsonl").write_text(
        '{"id": "d1", "text": "the forum is in may"}\n{"id": "d2", "text": "tickets cost ten euros"}\n',
        encoding="utf-8",
    )
    (folder / "q.yaml").write_text(
        "id: html.retrieval\nname: Retrieval demo\ncorpus: corpus.jsonl\nquestions:\n"
        "  - {id: q1, question: when is the forum, form: match, expected: [d1], hard_class: dates}\n"
        "  - {id: q2, question: how much are tickets, form: gap, expected: [d2], hard_class: prices}\n"
        "  - {id: q3, question: what does entry cost, form: gap, expected: [d2], hard_class: prices}\n",
        encoding="utf-8",
    )
    retrieval = cli("retrieval", "q.yaml", "--retriever", "lexical")
    assert retrieval.exit_code == 0, retrieval.stderr
    return {"runs": made, "bad": bad, "regressed": regressed}


SECRET_PROMPT = "Say yes about the secret plan"  # a prompt's text: kept at privacy redacted and full only
SECRET_ANSWER = "yes, the secret plan is ready"  # an answer's text, quoted by the reason of a failing exact


def make_small(folder: Path, cli: Any, *, privacy: str = "metadata") -> None:
    """A set of two prompts (``a`` passes, ``b`` fails) on instance ``rec``, one run accepted as
    the baseline: a second run gives the same answers (no regression, no prompt changed).
    Instance ``gone`` is a closed loopback port: every call errors, as against an endpoint that is down."""
    write_answers(folder, "answers.jsonl", [{"id": p, "response": SECRET_ANSWER, "model": "m1"} for p in ("a", "b")])
    (folder / "evalkit.yaml").write_text(
        f"privacy: {privacy}\ndefault_provider: rec\nbaselines: baselines\nproviders:\n"
        "  - {id: rec, adapter: replay, path: answers.jsonl}\n"
        '  - {id: gone, adapter: openai, base_url: "http://127.0.0.1:9/v1", model: m, max_retries: 0}\n',  # closed
        encoding="utf-8",
    )
    (folder / "set.yaml").write_text(
        f"id: small\nname: Small\nprompts:\n  - {{id: a, prompt: '{SECRET_PROMPT}', assertions: [{{contains: yes}}]}}\n"
        f"  - {{id: b, prompt: '{SECRET_PROMPT} b', assertions: [{{exact: 'no way'}}]}}\n",
        encoding="utf-8",
    )
    first = cli("run", "set.yaml")
    assert first.exit_code == 0, first.stderr
    if privacy != "none":  # a baseline file needs the prompts' outcomes
        assert cli("baseline", "accept").exit_code == 0

"""Templates written by ``evalkit init``: a config using the local model, two example sets (the
assertion vocabulary; templates, a data file and a conversation) and the baselines folder with
a note on how to fill it."""

from __future__ import annotations

import shutil
from pathlib import Path

from evalkit.config import CONFIG_NAME, LOCAL_MODEL_INSTALL, LOCAL_RUNTIME_INSTALL
from evalkit.errors import InputError
from evalkit.sets.validation import SCHEMA_FILES, schema_dir

CONFIG_TEMPLATE = """\
# yaml-language-server: $schema=.evalkit/schemas/config.schema.json
# evalkit project configuration. Paths are relative to this file.
db: .evalkit/evalkit.duckdb     # run history (DuckDB); --db / EVALKIT_DB override
sets: [sets]                    # folders searched when a set is named by id
privacy: metadata               # none | metadata | redacted | full
retention_days: 90              # evalkit prune deletes runs older than this
baselines: baselines            # accepted baselines, committed with the sets (evalkit baseline accept)
cache_ttl_days: 30              # cached answers older than this are not replayed
default_provider: local

providers:
  # A real LLM on your CPU, no key, no server: llama.cpp in-process on 127.0.0.1
  # (needs: LOCAL_INSTALL).
  - id: local
    adapter: local
    # model_path: models/your-model.gguf   # default: SmolLM2-135M-Instruct
    # threads: 4
    # n_ctx: 2048

  # OpenAI (the key is read from the environment, never written here):
  # - id: openai
  #   adapter: openai
  #   base_url: https://api.openai.com/v1
  #   model: gpt-4o-mini
  #   api_key_env: OPENAI_API_KEY
  #   cost: {input_per_mtok: 0.15, output_per_mtok: 0.60}
  #   max_concurrency: 8

  # Anthropic:
  # - id: claude
  #   adapter: anthropic
  #   base_url: https://api.anthropic.com/v1
  #   model: claude-3-5-haiku-latest
  #   api_key_env: ANTHROPIC_API_KEY

  # Any OpenAI-compatible server: vLLM, Ollama, llama.cpp's llama-server:
  # - id: vllm
  #   adapter: openai
  #   base_url: http://127.0.0.1:8000/v1     # Ollama: http://127.0.0.1:11434/v1, llama-server: http://127.0.0.1:8080/v1
  #   model: Qwen/Qwen2.5-0.5B-Instruct      # Ollama: qwen2.5:0.5b
  #   fallback: local                        # tried for a prompt when this instance fails

  # Grade pre-generated answers (JSONL lines {"id": ..., "response": ..., "model": ...}):
  # - id: recorded
  #   adapter: replay
  #   path: answers.jsonl

# The LLM judge of --grader decision:
# decision: {provider: openai}

# The judge of model-graded assertions (rubric, factuality; default: the decision judge). Give it
# an instance of its own (a model that differs from the one graded), with max_concurrency and cost:
# judge: {provider: openai}
#   then in a set:  - rubric: "Polite, and names the 30-day refund window"
#                   - {type: factuality, value: true, threshold: 0.75, provider: openai}  # true: the reference

# The embeddings instance of similar (an OpenAI-compatible /embeddings endpoint, or local):
# embeddings: {provider: openai}
#   then in a set:  - {type: similar, value: "Refunds are accepted within 30 days", min: 0.8}
""".replace("LOCAL_INSTALL", f"{LOCAL_RUNTIME_INSTALL} && {LOCAL_MODEL_INSTALL}")

EXAMPLE_SET = """\
# yaml-language-server: $schema=../.evalkit/schemas/prompt-set.schema.json
id: example.basics
name: Example prompts
description: A starting point; each prompt is graded by its assertions.
params: {temperature: 0, max_tokens: 128}   # room for a whole answer: a cut-off one fails
prompts:
  - id: capital-of-france
    prompt: What is the capital of France? Answer with the city name only.
    assertions:
      - icontains: paris                            # a substring, ignoring case
      - not_icontains: london                       # not_ negates any assertion type
      - word_count: {max: 12}                       # a short answer: {min: A}, {max: B} or both
  - id: two-plus-two
    prompt: What is 2 + 2? Answer with the number only.
    threshold: 0.75                                 # pass at a weighted score of 0.75, not only when all hold
    assertions:
      - {type: regex, value: '\\b4\\b', weight: 3}    # the long form: type, value, weight (default 1)
      - levenshtein: {value: "4", max: 2}           # the number alone, give or take 2 characters ("2 + 2 = 4"
                                                    # misses it, scores 3 of 4 and still passes)
      - {type: latency_ms, value: 30000, weight: 0} # weight 0: recorded, not counted
  - id: json-object
    system: You answer with JSON only, no other text.
    prompt: 'Repeat this JSON exactly: {"ok": true}'
    assertions:
      - starts_with: "{"
      - equals_json: {ok: true}                     # parsed: spacing and key order do not matter
"""

TEMPLATED_SET = """\
# yaml-language-server: $schema=../.evalkit/schemas/prompt-set.schema.json
id: example.templates
name: Templates, data files and a conversation
description: One prompt per row of capitals.csv, made from a template, and a conversation.
params: {temperature: 0, max_tokens: 64}
vars: {style: Answer with the city name only.}    # for every prompt: Jinja2 {{ ... }} in prompts and values
template:                                        # a prompt for every row of cases:, its columns as vars
  prompt: "What is the capital of {{ country }}? {{ style }}"
  assertions:
    - icontains: "{{ capital }}"
    - word_count: {max: 12}
cases: capitals.csv                              # a CSV with a header (or JSONL, or a YAML list); id: the prompt id
prompts:                                         # written prompts may stand beside the rows
  - id: remembers-a-name
    vars: {name: Ada}                            # a prompt's vars add to (and override) the set's
    messages:                                    # instead of prompt: a conversation, the last turn the user's
      - {role: user, content: "Hi, my name is {{ name }}."}
      - {role: assistant, content: "Nice to meet you, {{ name }}!"}
      - {role: user, content: "Please say my name back to me."}
    assertions:
      - contains: "{{ name }}"
"""

CAPITALS_CASES = """\
id,country,capital
capital-of-japan,Japan,Tokyo
capital-of-italy,Italy,Rome
capital-of-germany,Germany,Berlin
"""


BASELINES_NOTE = """\
# Accepted baselines

One JSON file per set (`<set id>.json`), written by `evalkit baseline accept`: for each scope
(provider instance, model alias, reported model, grader) the accepted run's pass rate, mean
score and per-prompt outcomes (ids only, never prompt or answer text).

`evalkit run --fail-on-regression` compares every run with its scope's entry here before it
looks at the database, so a fresh CI runner gates on what you committed.

To fill it:

    evalkit run sets/            # run the sets you want to gate on
    evalkit baseline accept      # the latest run of every scope (or name RUN_IDs)
    git add baselines/ && git commit -m "Accept evalkit baselines"

Refresh a baseline the same way in the pull request that changes the answers; the reviewer
sees the change of pass rate and the flipped prompts in the diff. `evalkit baseline show`
lists the entries.
"""


# the database and its write-ahead log (README "Commands", evalkit init): committed, a CI job would replay
# its cached answers instead of asking the endpoint
GITIGNORE_NOTE = "# evalkit's run history and completion cache: never commit them (CI would replay the cache)"
GITIGNORE_LINES = ("/.evalkit/*.duckdb", "/.evalkit/*.duckdb.wal")


def scaffold(root: Path, force: bool = False) -> list[tuple[Path, str]]:
    """Write the templates under ``root``; existing files are kept unless ``force``. Each path
    comes with what was done: ``wrote``, ``kept`` or ``extended`` (.gitignore).

    The JSON Schemas are copied to .evalkit/schemas/ so editors can check the files offline.
    Inside a folder of an existing project (an evalkit.yaml in an ancestor) nothing is written
    unless ``force``: a second project there would hide the first one's config from this folder.
    """
    above = project_above(root)
    if above is not None and not force:
        raise InputError(
            f"this folder is inside the evalkit project of {above}, so nothing was written: "
            f"work from {above.parent}, or pass --force to start a separate project here"
        )
    schemas = root / ".evalkit" / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    for name in SCHEMA_FILES.values():
        shutil.copyfile(schema_dir() / name, schemas / name)
    written = []
    for relative, text in (
        ("evalkit.yaml", CONFIG_TEMPLATE),
        ("sets/example.yaml", EXAMPLE_SET),
        ("sets/templated.yaml", TEMPLATED_SET),
        ("sets/capitals.csv", CAPITALS_CASES),
        ("baselines/README.md", BASELINES_NOTE),
    ):
        path = root / relative
        if path.exists() and not force:
            written.append((path, "kept"))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append((path, "wrote"))
    written.append((root / ".gitignore", ignore_database(root / ".gitignore")))
    return written


def ignore_database(path: Path) -> str:
    """Add the database's lines to the .gitignore at ``path`` (created if missing, the user's own
    lines kept); ``kept`` when they are all there already."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in GITIGNORE_LINES if line not in present]
    if not missing:
        return "kept"
    joint = "\n" if text and not text.endswith("\n") else ""
    path.write_text(text + joint + "\n".join([GITIGNORE_NOTE, *missing]) + "\n", encoding="utf-8")
    return "extended" if text else "wrote"


def project_above(root: Path) -> Path | None:
    """The evalkit.yaml of a project that ``root`` lies inside (in an ancestor, not ``root``)."""
    resolved = root.resolve()
    for folder in resolved.parents:
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None

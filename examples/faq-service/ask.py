"""The FAQ feature as a program (``adapter: command``): evalkit's request as JSON on stdin, the
answer as JSON on stdout."""

from __future__ import annotations

import json
import sys

from feature import Feature

if __name__ == "__main__":
    request = json.load(sys.stdin)
    print(json.dumps(Feature().answer(request["prompt"])))

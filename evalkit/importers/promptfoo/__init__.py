"""``evalkit import promptfoo``: a promptfoo config -> evalkit prompt sets (README "Coming from promptfoo").

One set per promptfoo prompt, each holding every test of the config (inline and from files,
defaultTest merged in, array vars expanded into every combination) rendered for that prompt as
promptfoo renders it: the prompt text (or conversation) and the assertion values are written
out, so the set means what the config meant without a template engine of its own. A test's id
comes from its description, else ``test-N`` (inline) or ``<file>-N`` (a file's rows), with
``-K`` per var combination. What is not converted is listed with its file:line and a hint, and
every file is loaded by evalkit's own set loader before the import reports success.
"""

from evalkit.importers.promptfoo.build import import_promptfoo

__all__ = ["import_promptfoo"]

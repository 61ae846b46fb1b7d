"""Converters from other evaluation tools' configurations into evalkit set files.

``promptfoo`` reads a promptfoo config (with its prompt, test and data files) and builds evalkit
prompt sets; ``jsregex`` translates JavaScript regular expressions into the ``regex`` module's
syntax with JavaScript's meaning; ``yamlout`` writes plain data as YAML with comments. Files are
read through ``evalkit.sets`` (positions for file:line) and every set written is checked by the
set loader first.
"""

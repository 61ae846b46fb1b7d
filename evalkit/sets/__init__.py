"""User YAML files -> validated records: prompt sets, question sets and evalkit.yaml.

ruamel.yaml (round-trip, for positions) and jsonschema are used only here and in the graders.
"""

from evalkit.sets.configfile import load_config
from evalkit.sets.discovery import load_set, resolve_sets, yaml_files

__all__ = ["load_config", "load_set", "resolve_sets", "yaml_files"]

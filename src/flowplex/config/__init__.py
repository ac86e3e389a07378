"""YAML -> validated specs: schema, include, subgraph expansion, paths, suggestions.

``load_yaml`` / ``load_yaml_file`` return a frozen ``GraphSpec`` that has passed every
configuration check (the plan included); ``json_schema`` describes the format for editors.
``Limits`` bounds what one load may cost (document size, alias expansion, nesting, includes,
expanded nodes).
"""

from ._limits import Limits as Limits
from ._load import load_yaml as load_yaml
from ._load import load_yaml_file as load_yaml_file
from ._schema import json_schema as json_schema

__all__ = ["Limits", "json_schema", "load_yaml", "load_yaml_file"]

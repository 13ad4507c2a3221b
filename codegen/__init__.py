"""mind's compiler: specs in, committed typed Python (and diagrams) out.

Run as ``python -m codegen`` (``make codegen``). Inputs and outputs (docs/ARCHITECTURE.md):

- ``specs/statecharts/<chart>.yaml`` (python-statemachine 3.2 YAML vocabulary)
  -> ``mind/generated/<chart>_chart.py`` (a typed ``StateChart`` subclass) and
  ``docs/diagrams/<chart>.mmd`` (Mermaid; ``<chart>.svg`` too with ``--diagrams``
  when Graphviz ``dot`` is installed).
- ``specs/schemas/<name>.schema.json`` -> ``mind/generated/<name>.py``
  (frozen msgspec Structs via datamodel-code-generator).

Every output is a pure function of the specs, the pinned tool versions and this
package, so running twice changes nothing and ``--check`` can diff a fresh
build against the committed files. This package never imports ``mind``
(docs/ARCHITECTURE.md).
"""

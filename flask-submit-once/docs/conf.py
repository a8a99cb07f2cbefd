"""Sphinx configuration: the narrative (pattern.md) and the API from the docstrings.

Build, warnings as errors (tests/test_docs.py does the same)::

    python -m sphinx -W --keep-going -b html flask-submit-once/docs build/docs
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from werkzeug.exceptions import HTTPException

import submit_once

project = "Flask-Submit-Once"
copyright = "the submit-once developers"
release = version = submit_once.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "myst_parser",
    "sphinxcontrib.mermaid",
]
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"Flask-Submit-Once {release}"

# Every reference must resolve: a typo in a docstring's :class:`...` fails the build.
nitpicky = True
nitpick_ignore = [
    # The type variables of the generic outcomes and callables (create returns a T,
    # Created[T] carries it): placeholders, with nothing to link to.
    ("py:class", "submit_once.runner.T"),
    ("py:obj", "submit_once.runner.T"),
    ("py:class", "submit_once.forms.T"),
    ("py:class", "submit_once.extension.T"),
    ("py:class", "T"),  # the same, where a signature could only be read as written
]

autodoc_member_order = "bysource"
add_module_names = False
python_use_unqualified_type_names = True
# String type aliases, so signatures name them instead of failing to evaluate them in a
# module that does not import what they stand for.
autodoc_type_aliases = {
    "RedisClient": "submit_once.tokens.RedisClient",
    "Sessions": "submit_once.runner.Sessions",
}

# GitHub-style anchors, so pattern.md's [what to copy](#what-to-copy) links resolve here too.
myst_heading_anchors = 3
# ```mermaid fences (as GitHub renders them) become diagrams.
myst_fence_as_directive = ["mermaid"]

# No network here or in CI, so intersphinx reads inventories kept in _inventories/: each
# lists only objects these docs link to, at the anchors the projects' own docs give them,
# and is rebuilt (and checked against the installed packages) by make_inventories.py.
intersphinx_mapping = {
    project_name: (url, f"_inventories/{project_name}.inv")
    for project_name, url in {
        "python": "https://docs.python.org/3/",
        "flask": "https://flask.palletsprojects.com/en/stable/",
        "werkzeug": "https://werkzeug.palletsprojects.com/en/stable/",
        "markupsafe": "https://markupsafe.palletsprojects.com/en/stable/",
        "redis": "https://redis.readthedocs.io/en/stable/",
        "sqlalchemy": "https://docs.sqlalchemy.org/en/20/",
        "pytest": "https://docs.pytest.org/en/stable/",
    }.items()
}

#: The modules the root re-exports from, where each name is documented.
_HOMES = ["submit_once.extension", "submit_once.forms", "submit_once.runner",
          "submit_once.tokens", "submit_once.signals"]


def _root_names(app: Sphinx, env: BuildEnvironment, node: pending_xref,
                contnode: nodes.TextElement) -> nodes.Element | None:
    """``submit_once.Name`` (how docstrings name what the root re-exports) resolves to
    the module ``Name`` is documented in."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("submit_once."):
        return None
    rest = target.removeprefix("submit_once.")
    domain = env.domains["py"]
    for home in _HOMES:
        found = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                                    f"{home}.{rest}", node, contnode)
        if found is not None:
            return found
    return None


def _signature(app: Sphinx, what: str, name: str, obj: Any, options: Any,
               signature: str | None, return_annotation: str | None
               ) -> tuple[str | None, str | None] | None:
    if isinstance(obj, type) and issubclass(obj, HTTPException):
        # Werkzeug's HTTPException.__init__ annotates with names it imports only for
        # type checkers; these are raised by the library, not built by the app.
        return "", None
    if signature is None:
        return None
    # autodoc_type_aliases names an alias only where it stands alone; inside a union
    # (Sessions | None) it shows its internal wrapper instead.
    signature = re.sub(r"TypeAliasForwardRef\('([\w.]+)'\)", r"\1", signature)
    # A dataclass field with a default_factory shows as "= <factory>", which Sphinx then
    # cannot parse; "..." is Python's own way to say "a default computed at call time".
    signature = signature.replace("= <factory>", "= ...")
    return signature, return_annotation


def setup(app: Sphinx) -> None:
    app.connect("missing-reference", _root_names)
    app.connect("autodoc-process-signature", _signature)

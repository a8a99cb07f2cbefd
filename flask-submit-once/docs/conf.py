"""Sphinx configuration: the narrative pages (Markdown) and the API from the docstrings.

Build, warnings as errors (tests/test_docs.py does the same)::

    python -m sphinx -W --keep-going -b html docs docs/_build
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.ext.intersphinx import missing_reference
from werkzeug.exceptions import HTTPException

import flask_submit_once

# autodoc reads the mixin's declared attributes off the mixin itself, which SQLAlchemy warns
# about (they are meant for the models that use it).
warnings.filterwarnings("ignore", "Unmanaged access of declarative attribute")

project = "Flask-Submit-Once"
copyright = "the submit-once developers"
release = version = flask_submit_once.__version__

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
    # Type variables and private aliases in signatures: placeholders, nothing to link to.
    ("py:class", "View"),
    ("py:class", "T"),
    ("py:class", "flask_submit_once._model.T"),
    ("py:class", "flask.typing.ResponseReturnValue"),
    ("py:class", "ResponseReturnValue"),
]
nitpick_ignore_regex = [
    # The private aliases a signature names (the parameter's text says what they take).
    (
        "py:class",
        r"(flask_submit_once\._\w+\.)?(Sessions|RedisClient|Fields|Message|Kind|Data|Then)",
    ),
]

autodoc_member_order = "bysource"
add_module_names = False
python_use_unqualified_type_names = True
autodoc_type_aliases = {
    "RedisClient": "flask_submit_once._tokens.RedisClient",
    "Sessions": "flask_submit_once._model.Sessions",
    "Fields": "flask_submit_once._form.Fields",
    "Message": "flask_submit_once._answers.Message",
    "Kind": "flask_submit_once._answers.Kind",
}

# GitHub-style anchors, so a page's [text](#a-heading) links resolve here too.
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


#: Names that signatures show as written (their annotations could not be evaluated), and
#: what they are.
_AS_WRITTEN = {"Session": "sqlalchemy.orm.Session"}


def _root_names(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Element | None:
    """``flask_submit_once._module.Name`` (where a signature's annotation finds a root
    name: its ``__module__``) resolves to ``flask_submit_once.Name``, where it is
    documented; a bare ``Session`` to SQLAlchemy's."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py":
        return None
    if target in _AS_WRITTEN:
        node["reftarget"] = _AS_WRITTEN[target]
        return missing_reference(app, env, node, contnode)
    found = re.fullmatch(r"flask_submit_once\._\w+\.(\w+(?:\.\w+)?)", target)
    if not found:
        return None
    return env.domains["py"].resolve_xref(
        env,
        node["refdoc"],
        app.builder,
        node["reftype"],
        f"flask_submit_once.{found.group(1)}",
        node,
        contnode,
    )


def _signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
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

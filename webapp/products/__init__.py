"""The catalogue: what the order form and the API sell, kept by operators.

rules.py  what a product must be before it is written (SKU, name, price, description)
cli.py    ``flask products list | add | price | off-sale | on-sale | import``
"""

from __future__ import annotations

from flask import Flask

__all__ = ["init_app"]


def init_app(app: Flask) -> None:
    """Register the ``flask products`` commands."""
    from .cli import products

    app.cli.add_command(products)

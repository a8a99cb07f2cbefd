"""The catalogue from the command line: what the order form and the API sell.

    flask --app webapp products list
    flask --app webapp products add SKU "NAME" PRICE [--description TEXT]
    flask --app webapp products import FILE.csv      header sku,name,price_eur[,description]
    flask --app webapp products price SKU PRICE
    flask --app webapp products off-sale SKU
    flask --app webapp products on-sale SKU

PRICE is in euros (``12.50``). Each command that changes a product takes ``--by
NAME`` and records it in ``products.changed_by`` (webapp/shop/operators.py). Products are
never deleted, since orders keep pointing at theirs: take one off sale instead.

When a change shows: an order is always priced and checked against the database, so
one placed after the command uses the new price, and a product off sale is refused
from then on (form and API). The order form's list of products is each web worker's
read of the catalogue, reused for ``CATALOGUE_CACHE_SECONDS`` (webapp/orders/catalogue.py):
it shows the change within that time, and every command says how long that is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from ..db import sessions
from ..shop.amounts import euros
from ..shop.models import Product
from ..shop.operators import by_option, record
from .rules import (
    BadProduct,
    check_description,
    check_name,
    check_price,
    check_sku,
    read_csv,
)

__all__ = ["products"]

products = AppGroup(
    "products",
    help="List the catalogue, add products, change prices, "
    "take products off sale or back on sale, import a CSV file.",
)


T = TypeVar("T")


class NotImported(click.ClickException):
    """A file that cannot be imported as it is: bad input, so a usage error (exit 2)."""

    exit_code = 2


def _checked(
    check: Callable[[str], T], param: str
) -> Callable[[click.Context, click.Parameter, str], T]:
    """A click callback that applies a :mod:`~webapp.products.rules` check: a bad value
    is a usage error (exit 2) that says what to give instead."""

    def callback(_context: click.Context, _param: click.Parameter, value: str) -> T:
        try:
            return check(value)
        except BadProduct as bad:
            raise click.BadParameter(str(bad), param_hint=param) from None

    return callback


SKU_ARGUMENT = click.argument("sku", callback=_checked(check_sku, "SKU"))
PRICE_ARGUMENT = click.argument("price", metavar="PRICE", callback=_checked(check_price, "PRICE"))


@products.command("list")
def list_products() -> None:
    """Every product in the order form's order: SKU, price, on sale or not, name, and
    who changed it last."""
    with sessions()() as db:
        rows = db.scalars(select(Product).order_by(Product.id)).all()
    if not rows:
        click.echo(
            "No products yet: add one with 'flask --app webapp products add SKU "
            "NAME PRICE', or import a CSV file ('products import --help')."
        )
        return
    click.echo(f"{'SKU':<32} {'price':>12}  {'sale':<8}  {'name':<40}  changed by")
    for product in rows:
        click.echo(
            f"{product.sku:<32} {euros(product.price_cents):>12}  "
            f"{'on sale' if product.active else 'off sale':<8}  {product.name:<40}  "
            f"{product.changed_by or '-'}"
        )


@products.command("add")
@SKU_ARGUMENT
@click.argument("name", callback=_checked(check_name, "NAME"))
@PRICE_ARGUMENT
@click.option(
    "--description",
    default="",
    callback=_checked(check_description, "--description"),
    help="A line or two for the order form and the API.",
)
@by_option
def add_product(sku: str, name: str, price: int, description: str, by: str) -> None:
    """Add a product, on sale at once: SKU (e.g. MUG-STONE), NAME, PRICE in euros."""
    with sessions()() as db, db.begin():
        added = db.scalar(
            pg_insert(Product)
            .values(
                sku=sku,
                name=name,
                price_cents=price,
                description=description,
                active=True,
                changed_by=by,
                changed_at=func.now(),
            )
            .on_conflict_do_nothing(index_elements=["sku"])
            .returning(Product.id)
        )
    if added is None:
        raise click.ClickException(
            f"A product has the SKU {sku} already: 'products price' "
            "changes its price, 'products import' the rest."
        )
    record("products add", by, sku=sku, price_cents=price)
    click.echo(
        f"Added {sku} ({name}) at {euros(price)}, on sale: the API sells it at once, "
        f"{_form_shows()}."
    )


@products.command("price")
@SKU_ARGUMENT
@PRICE_ARGUMENT
@by_option
def change_price(sku: str, price: int, by: str) -> None:
    """Set the price of the product with this SKU (in euros, e.g. 12.50)."""
    with sessions()() as db, db.begin():
        before = _locked(db, sku).price_cents
        _change(db, sku, by, price_cents=price)
    record("products price", by, sku=sku, price_cents=price, was_cents=before)
    click.echo(
        f"{sku} now costs {euros(price)} (was {euros(before)}): orders use it at once, "
        f"{_form_shows()}."
    )


@products.command("off-sale")
@SKU_ARGUMENT
@by_option
def off_sale(sku: str, by: str) -> None:
    """Stop selling the product with this SKU (its orders keep it)."""
    _set_on_sale(sku, False, by)


@products.command("on-sale")
@SKU_ARGUMENT
@by_option
def on_sale(sku: str, by: str) -> None:
    """Sell the product with this SKU again."""
    _set_on_sale(sku, True, by)


@products.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@by_option
def import_products(file: Path, by: str) -> None:
    """Add or update products from a CSV file, all or none.

    Its first line is the header sku,name,price_eur or sku,name,price_eur,description;
    then one product a line, price in euros (12.50). A SKU already in the catalogue is
    updated (name, price, and the description if the file has that column) and stays
    on sale or off sale as it was; a new one is added on sale. A bad line stops the
    import with its number, and nothing is written.
    """
    try:
        rows = read_csv(file)
    except BadProduct as bad:
        raise NotImported(f"{file}: {bad}. Nothing was imported.") from None
    with sessions()() as db, db.begin():
        existing = {
            sku: active
            for sku, active in db.execute(
                select(Product.sku, Product.active)
                .where(Product.sku.in_([r.sku for r in rows]))
                .with_for_update()
            )
        }
        # one statement a row: a file's rows differ in their columns
        for row in rows:
            values = {
                "name": row.name,
                "price_cents": row.price_cents,
                "changed_by": by,
                "changed_at": func.now(),
            }
            if row.description is not None:
                values["description"] = row.description
            db.execute(
                pg_insert(Product)
                .values(sku=row.sku, active=True, **values)
                .on_conflict_do_update(index_elements=["sku"], set_=values)
            )
    added, off = len(rows) - len(existing), sorted(s for s, on in existing.items() if not on)
    record("products import", by, file=file.name, added=added, updated=len(existing))
    said = f"Imported {file.name}: {added} added (on sale), {len(existing)} updated"
    if off:
        said += f" (still off sale: {', '.join(off)}; 'products on-sale SKU' sells one)"
    click.echo(f"{said}: orders use them at once, {_form_shows()}.")


def _set_on_sale(sku: str, active: bool, by: str) -> None:
    state = "on sale" if active else "off sale"
    with sessions()() as db, db.begin():
        product = _locked(db, sku)
        if product.active == active:
            click.echo(f"{sku} is {state} already; nothing changed.")
            return
        _change(db, sku, by, active=active)
    record(f"products {'on-sale' if active else 'off-sale'}", by, sku=sku)
    click.echo(
        f"{sku} is {state}: orders for it are {'accepted' if active else 'refused'} at "
        f"once, {_form_shows()}."
    )


def _locked(db: Session, sku: str) -> Product:
    product = db.scalar(select(Product).where(Product.sku == sku).with_for_update())
    if product is None:
        raise click.ClickException(f"No product has the SKU {sku} ('products list' shows them).")
    return product


def _change(db: Session, sku: str, by: str, **values: object) -> None:
    db.execute(
        update(Product)
        .where(Product.sku == sku)
        .values(**values, changed_by=by, changed_at=func.now())
    )


def _form_shows() -> str:
    """When the order form's list of products shows a change (see the module docstring)."""
    seconds = float(current_app.config.get("CATALOGUE_CACHE_SECONDS", 0))
    if not seconds:
        return "the order form at once"
    return f"the order form within {seconds:g} s (CATALOGUE_CACHE_SECONDS)"

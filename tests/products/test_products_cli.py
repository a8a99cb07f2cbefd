"""An operator stocks the shop from the command line (``flask --app webapp products …``):
what they add, reprice, take off sale or import is what the order form and the API sell,
a bad price or a bad line is refused with what to type and nothing written, and who did
it is recorded."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from tests.app.test_logs import json_lines
from tests.conftest import order_count
from tests.orders.test_orders import open_form, order_path, submit
from tests.support.api_client import ORDER, new_api_key, place
from webapp.cli import CATALOGUE
from webapp.shop.models import Product

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def demo_catalogue_afterwards(servers):
    """Every test here changes the catalogue the rest of the suite sells: put it back."""
    yield
    with servers.engine.begin() as conn:
        conn.execute(text("TRUNCATE orders RESTART IDENTITY CASCADE"))
        conn.execute(
            text("DELETE FROM products WHERE NOT (sku = ANY(:demo))"),
            {"demo": [item["sku"] for item in CATALOGUE]},
        )
        insert = pg_insert(Product).values([{**item, "active": True} for item in CATALOGUE])
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=["sku"],
                set_={
                    column: insert.excluded[column]
                    for column in ("name", "price_cents", "description", "active")
                }
                | {"changed_by": None, "changed_at": None},
            )
        )


@pytest.fixture
def run(app):
    """``flask --app webapp products <command> <args>`` in the app's process, as the
    operator ``ada``."""
    runner = app.test_cli_runner()

    def invoke(group: str, command: str, *args: str, by: str | None = "ada"):
        return runner.invoke(args=[group, command, *(["--by", by] if by else []), *args])

    return invoke


def product(servers, sku: str) -> tuple | None:
    with servers.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT name, price_cents, description, active, changed_by "
                "FROM products WHERE sku = :sku"
            ),
            {"sku": sku},
        ).first()
    return None if row is None else tuple(row)


def skus(servers) -> list[str]:
    with servers.engine.connect() as conn:
        return list(conn.scalars(text("SELECT sku FROM products ORDER BY id")))


def product_id(servers, sku: str) -> int:
    with servers.engine.connect() as conn:
        return conn.scalar(text("SELECT id FROM products WHERE sku = :sku"), {"sku": sku})


def test_a_product_added_is_listed_sold_on_the_form_and_through_the_api(run, client, servers):
    added = run(
        "products",
        "add",
        "TEA-ROOIBOS",
        "Rooibos, 100 g",
        "7,50",
        "--description",
        "Caffeine free.",
    )
    assert added.exit_code == 0, added.output
    assert (
        "Added TEA-ROOIBOS (Rooibos, 100 g) at €7.50, on sale: the API sells it at once, "
        "the order form at once." in added.stdout
        # testing: no cache
    )
    assert product(servers, "TEA-ROOIBOS") == ("Rooibos, 100 g", 750, "Caffeine free.", True, "ada")
    listed = run("products", "list", by=None).stdout
    assert listed.splitlines()[0].split() == ["SKU", "price", "sale", "name", "changed", "by"]
    assert ["TEA-ROOIBOS", "€7.50", "on", "sale", "Rooibos,", "100", "g", "ada"] in [
        line.split() for line in listed.splitlines()
    ]

    assert "€7.50 · Rooibos, 100 g" in client.get("/orders/new").text
    placed = submit(
        client, open_form(client), product=str(product_id(servers, "TEA-ROOIBOS")), quantity="2"
    )
    assert "€15.00" in client.get(order_path(placed)).text
    answer = place(client, new_api_key(servers), {**ORDER, "product": "TEA-ROOIBOS"})
    assert answer.status_code == 201 and answer.get_json()["total_cents"] == 1500


@pytest.mark.parametrize(
    ("typed", "cents"),
    [
        ("12.50", 1250),
        ("12,50", 1250),
        ("12", 1200),
        ("12.5", 1250),
        (".99", 99),
        (" 7.00 ", 700),
        ("0.01", 1),
        ("216917.54", 21691754),
    ],
)
def test_a_price_is_read_in_euros_by_the_shops_money_rule(run, servers, typed, cents):
    assert run("products", "price", "MUG-STONE", typed).exit_code == 0
    assert product(servers, "MUG-STONE")[1] == cents


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("12.505", "at most two decimals"),
        ("-1", "Enter an amount like 12.50."),
        ("1e3", "Enter an amount like 12.50."),
        ("12.5.0", "Enter an amount like 12.50."),
        ("€12", "Enter an amount like 12.50."),
        ("", "Enter an amount like 12.50."),
        ("0", "at least 0.01"),
        ("0.00", "at least 0.01"),
        # 99 of it must fit an order's INTEGER total
        ("216917.55", "at most 216917.54"),
        ("9" * 5000, "at most 216917.54"),
    ],
)
@pytest.mark.parametrize("command", ["add", "price"])
def test_a_bad_price_is_refused_with_what_to_type_exit_2_and_nothing_written(
    run, servers, command, typed, said
):
    args = ["NEW-SKU", "A new thing", typed] if command == "add" else ["MUG-STONE", typed]
    # "--": "-1" is a value, not an option
    result = run("products", command, "--", *args)
    assert result.exit_code == 2, result.output
    assert "Invalid value for PRICE" in result.stderr and said in result.stderr
    assert "Traceback" not in result.output
    assert product(servers, "NEW-SKU") is None
    assert product(servers, "MUG-STONE")[1:] == (
        1800,
        "Hand-glazed, 350 ml, dishwasher safe.",
        True,
        None,
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["add", "mug stone", "Mug", "1"], "Invalid value for SKU"),
        # "--": a value
        (["add", "--", "-MUG", "Mug", "1"], "Invalid value for SKU"),
        (["add", "M" * 33, "Mug", "1"], "Invalid value for SKU"),
        (["add", "NEW-SKU", " ", "1"], "Invalid value for NAME"),
        (["add", "NEW-SKU", "x" * 121, "1"], "Invalid value for NAME"),
        (["add", "NEW-SKU", "Mug\x00", "1"], "Invalid value for NAME"),
        (["add", "--description", "x" * 1001, "NEW-SKU", "Mug", "1"], "--description"),
    ],
)
def test_a_bad_sku_name_or_description_is_refused_with_exit_2(run, servers, args, said):
    result = run("products", *args)
    assert result.exit_code == 2 and said in result.stderr, result.output
    assert skus(servers) == [item["sku"] for item in CATALOGUE]


def test_adding_a_sku_that_exists_is_refused_and_says_what_changes_it(run, servers):
    result = run("products", "add", "MUG-STONE", "Another mug", "3")
    assert result.exit_code == 1 and "has the SKU MUG-STONE already" in result.output
    assert "'products price'" in result.output
    assert product(servers, "MUG-STONE")[:2] == ("Stoneware mug", 1800)


def test_a_new_price_is_what_the_next_order_pays(run, client, servers):
    changed = run("products", "price", "MUG-STONE", "19.90")
    assert changed.exit_code == 0, changed.output
    assert "MUG-STONE now costs €19.90 (was €18.00): orders use it at once" in changed.stdout
    assert product(servers, "MUG-STONE")[1:] == (
        1990,
        "Hand-glazed, 350 ml, dishwasher safe.",
        True,
        "ada",
    )
    placed = submit(client, open_form(client), product="1", quantity="2")
    assert "€39.80" in client.get(order_path(placed)).text


def test_a_product_off_sale_is_neither_offered_nor_sold_and_comes_back_on_sale(
    run, client, servers
):
    # a form opened while the mug was still on sale
    tokens = open_form(client)
    off = run("products", "off-sale", "MUG-STONE")
    assert off.exit_code == 0
    assert "MUG-STONE is off sale: orders for it are refused at once" in off.stdout
    assert "Stoneware mug" not in client.get("/orders/new").text
    refused = submit(client, tokens, product="1")
    assert refused.status_code == 422 and "Choose one of the products on sale." in refused.text
    assert order_count(servers) == 0
    key = new_api_key(servers)
    assert place(client, key).status_code == 422
    assert "off sale" in run("products", "list", by=None).stdout.split("MUG-STONE")[1]
    assert "off sale already; nothing changed" in run("products", "off-sale", "MUG-STONE").stdout

    on = run("products", "on-sale", "MUG-STONE", by="grace")
    assert on.exit_code == 0 and "MUG-STONE is on sale: orders for it are accepted" in on.stdout
    assert product(servers, "MUG-STONE")[3:] == (True, "grace")
    assert "Stoneware mug" in client.get("/orders/new").text
    assert place(client, key, key="order-2").status_code == 201


@pytest.mark.parametrize(
    "command", [["price", "NO-SUCH", "1"], ["off-sale", "NO-SUCH"], ["on-sale", "NO-SUCH"]]
)
def test_a_command_on_an_unknown_sku_says_so_and_where_to_look(run, command):
    result = run("products", *command)
    assert result.exit_code == 1
    assert "No product has the SKU NO-SUCH ('products list' shows them)." in result.output


def test_each_change_is_a_json_log_line_naming_the_operator(run):
    result = run("products", "price", "TEA-SENCHA", "13", by="Ada Lovelace")
    (line,) = [line for line in json_lines(result.stderr) if line.get("action")]
    assert line["action"] == "products price" and line["operator"] == "Ada Lovelace"
    assert (line["sku"], line["price_cents"], line["was_cents"]) == ("TEA-SENCHA", 1300, 1250)


def test_the_order_form_shows_a_change_within_catalogue_cache_seconds(make_app, servers):
    """The form's list is each worker's read, reused for CATALOGUE_CACHE_SECONDS: the
    command says so, and once that time has passed since the change the form shows it
    (waiting longer can only make that truer, so the test does not race the clock)."""
    app = make_app(CATALOGUE_CACHE_SECONDS=0.5)
    client = app.test_client()
    # read and kept
    assert "€18.00 · Stoneware mug" in client.get("/orders/new").text
    changed = app.test_cli_runner().invoke(args=["products", "price", "MUG-STONE", "21"])
    changed_at = time.monotonic()
    assert "the order form within 0.5 s (CATALOGUE_CACHE_SECONDS)." in changed.stdout
    time.sleep(max(0.0, changed_at + 0.5 - time.monotonic()))
    assert "€21.00 · Stoneware mug" in client.get("/orders/new").text


def write(tmp_path: Path, content: str | bytes, name: str = "catalogue.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def test_import_adds_new_skus_and_updates_known_ones_in_one_go(run, servers, tmp_path):
    assert run("products", "off-sale", "POT-CAST").exit_code == 0
    file = write(
        tmp_path,
        "\ufeffsku,name,price_eur,description\r\n"
        'MUG-STONE,Stoneware mug (blue),19.50,"Hand-glazed,\n350 ml."\r\n'
        "POT-CAST,Cast-iron teapot,60,\r\n"
        "\r\n"
        'TEA-ROOIBOS,"Rooibos, 100 g","7,50",Caffeine free.\r\n',
    )
    result = run("products", "import", str(file))
    assert result.exit_code == 0, result.output
    assert (
        "Imported catalogue.csv: 1 added (on sale), 2 updated (still off sale: POT-CAST;"
        in result.stdout
    )
    assert product(servers, "MUG-STONE") == (
        "Stoneware mug (blue)",
        1950,
        "Hand-glazed,\n350 ml.",
        True,
        "ada",
    )
    assert product(servers, "POT-CAST") == ("Cast-iron teapot", 6000, "", False, "ada")
    assert product(servers, "TEA-ROOIBOS") == ("Rooibos, 100 g", 750, "Caffeine free.", True, "ada")
    # not in the file: untouched
    assert product(servers, "SET-COASTER")[-1] is None


def test_import_without_a_description_column_keeps_the_descriptions(run, servers, tmp_path):
    file = write(tmp_path, "price_eur,sku,name\n18.50,MUG-STONE,Stoneware mug\n")
    assert run("products", "import", str(file)).exit_code == 0
    assert product(servers, "MUG-STONE")[1:3] == (1850, "Hand-glazed, 350 ml, dishwasher safe.")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (
            "sku,name,price_eur\nNEW-A,A,1\nNEW-B,B,12.505\n",
            "line 3: price_eur: '12.505' is not a price in euros: Use at most two decimals",
        ),
        (
            'sku,name,price_eur,description\nNEW-A,A,1,"two\nlines"\nNEW-B,B,0,\nNEW-C,C,1,\n',
            "line 4: price_eur: a price is at least 0.01",
        ),
        (
            'sku,name,price_eur,description\nNEW-A,A,1,"two\nlines"\nNEW B,B,1,\n',
            "line 4: sku: give 1 to 32",
        ),
        ('sku,name,price_eur\nNEW-A,"A\nA",1\n', "line 2: name: give 1 to 120 printable"),
        ("sku,name,price_eur\nNEW-A,A,1\nNEW-B,,1\n", "line 3: name: give 1 to 120"),
        ("sku,name,price_eur\nNEW-A,A,1\nNEW-A,A again,2\n", "line 3: sku NEW-A is on line 2 too"),
        ("sku,name,price_eur\nNEW-A,A,1,extra\n", "line 2: 4 fields, the header has 3"),
        ("sku,name,price\nNEW-A,A,1\n", "line 1: the header must be sku,name,price_eur"),
        (
            "",
            "line 1: the header must be sku,name,price_eur or sku,name,price_eur,description, "
            "not empty",
        ),
        ("sku,name,price_eur\n", "it has no products"),
        ('sku,name,price_eur\nNEW-A,"A,1\n', "line 2: unexpected end of data"),
        (b"sku,name,price_eur\nNEW-A,Caf\xe9,1\n", "not UTF-8 text"),
    ],
)
def test_a_bad_line_stops_the_import_with_its_number_and_nothing_is_written(
    run, servers, tmp_path, content, said
):
    result = run("products", "import", str(write(tmp_path, content)))
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.stderr.split()), result.stderr
    assert skus(servers) == [item["sku"] for item in CATALOGUE]


def test_import_of_a_file_that_is_not_there_says_so(run, tmp_path):
    result = run("products", "import", str(tmp_path / "missing.csv"))
    assert result.exit_code == 2 and "cannot read it" in result.stderr


def test_the_commands_run_as_documented_from_a_shell(servers, tmp_path):
    """``flask --app webapp products …`` in a process of its own, as an operator runs it."""
    env = {
        **os.environ,
        "APP_ENV": "testing",
        "SECRET_KEY": "test-secret",
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis.url,
        "SUDO_USER": "ops-ada",
    }

    def flask(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "flask", "--app", "webapp", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    file = write(tmp_path, "sku,name,price_eur\nTEA-ROOIBOS,Rooibos,7.50\n")
    imported = flask("products", "import", str(file))
    assert imported.returncode == 0, imported.stderr
    assert "1 added (on sale), 0 updated" in imported.stdout
    bad = flask("products", "add", "NEW-SKU", "New", "12.505")
    assert bad.returncode == 2 and "Use at most two decimals" in bad.stderr
    assert product(servers, "TEA-ROOIBOS") == ("Rooibos", 750, "", True, "ops-ada")
    assert product(servers, "NEW-SKU") is None

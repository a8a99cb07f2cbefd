"""What Debian's nginx with docs/nginx.conf writes to its logs while a customer places,
views and cancels an order, the app running and then stopped (the order's key, its private
link, was in access.log, in the request line and the Referer, and in the error log)."""

from __future__ import annotations

import json

from tests.support.nginx import Shopper, needs_nginx, nginx, production_gunicorn


@needs_nginx
def test_an_orders_key_and_the_referer_stay_out_of_nginxs_access_and_error_logs(servers, tmp_path):
    with (
        production_gunicorn(servers, TRUSTED_PROXIES="1") as live,
        nginx(tmp_path, live.port) as site,
    ):
        shopper = Shopper(site)
        placed = shopper.place_order()
        assert placed.status == 303, placed.body[:300]
        order = placed.headers["location"]
        key = order.rsplit("/", 1)[1]
        assert shopper.send("GET", order, referer="/orders/new").status == 200
        assert shopper.send("GET", "/static/app.css", referer=order).status == 200
        assert shopper.send("GET", f"{order}/cancel", referer=order).status == 200
        # The app stopped: now nginx itself has something to say about these requests.
        live.process.terminate()
        live.process.wait(10)
        assert shopper.send("GET", order, referer=order).status == 502
        assert (
            shopper.send(
                "POST", f"{order}/cancel", referer=f"{order}/cancel", form={"confirm": "yes"}
            ).status
            == 502
        )
    # Read once nginx has stopped: it writes a request's line after sending the answer.
    access, errors = site.log("access.log"), site.log("error.log")
    print(f"\naccess.log:\n{access}error.log:\n{errors}")
    for log in (access, errors):
        assert key not in log
        # no Referer
        assert shopper.origin not in log and "referrer" not in log
    lines = [json.loads(line) for line in access.splitlines()]
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("GET", "/orders/new", 200),
        ("POST", "/orders", 303),
        ("GET", "/orders/<key>", 200),
        ("GET", "/static/app.css", 200),
        ("GET", "/orders/<key>/cancel", 200),
        ("GET", "/orders/<key>", 502),
        ("POST", "/orders/<key>/cancel", 502),
    ]
    # what went wrong, said without the key
    assert lines[-1]["upstream_status"] == "502"

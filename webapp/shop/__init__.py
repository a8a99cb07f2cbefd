"""The order domain every channel shares: the web forms, the JSON API, the payment
webhooks, the refund worker and the operators' commands all go through it.

    models.py       every table, as SQLAlchemy 2.0 typed models (Alembic owns the schema)
    order_rules.py  the rules an order meets wherever it comes from; order numbers
    order_states.py the status transitions, one conditional UPDATE each
    order_money.py  where an order's money is: due, paid, being refunded, refunded
    placing.py      the one way an order is built from validated input
    lookup.py       an order found by the key in its link (a 404 otherwise)
    amounts.py      euros as people type and read them
    notices.py      one-time notices on an order's page
    operators.py    who ran an operator command, and the log line that says so

Nothing here registers a route or a command: the feature packages do.
"""

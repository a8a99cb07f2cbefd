"""Makes templates/ the package ``webapp.templates`` (see setup.py): it ships in the wheel and
create_app finds it through the installed package, editable or not."""

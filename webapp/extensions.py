"""The app's extension instances, created once and bound in create_app."""

from flask_wtf.csrf import CSRFProtect

from submit_once import FormTokens

csrf = CSRFProtect()
form_tokens = FormTokens()

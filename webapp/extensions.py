"""The app's extension instances, created once and bound in create_app."""

from flask_wtf.csrf import CSRFProtect

from flask_submit_once import SubmitOnce

csrf = CSRFProtect()
submit_once = SubmitOnce()

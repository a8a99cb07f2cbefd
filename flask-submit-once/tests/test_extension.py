"""FormTokens, the Flask extension: settings, the client it uses, the surface it offers."""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
from flask import Flask
from flask_wtf.csrf import CSRFProtect

import submit_once
from submit_once import FormTokens, FormTokensState, Unavailable
from tests_support import free_port

PACKAGE = Path(submit_once.__file__).parent


def make_app(redis_url: str, **config: object) -> Flask:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="s", REDIS_URL=redis_url, **config)
    return app


def close(app: Flask) -> None:
    FormTokens.state(app).store.client.close()


def test_importing_the_library_imports_no_app_around_it():
    check = ("import submit_once, submit_once.extension, submit_once.signals, sys; "
             "assert 'webapp' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", check], check=True)


def test_every_public_name_is_importable_from_the_root_and_no_private_type_shows():
    """What a user needs is in ``submit_once``; a signature names no ``_Private`` type."""
    for name in submit_once.__all__:
        assert hasattr(submit_once, name), name
    private = []
    for name in submit_once.__all__:
        thing = getattr(submit_once, name)
        functions = [thing] if inspect.isfunction(thing) else []
        if inspect.isclass(thing) and thing.__module__.startswith("submit_once"):
            functions = [member for member_name, member in vars(thing).items()
                         if inspect.isfunction(member)
                         and (member_name == "__init__" or not member_name.startswith("_"))]
        for function in functions:
            private += [f"{name}.{function.__name__}: {hint}"
                        for hint in function.__annotations__.values()
                        if re.search(r"(^|[^\w])_[A-Za-z]", str(hint))]
    assert private == []
    for exported in ("IssueLimit", "TooManyIssued", "TooManyFormsFromClient", "FormTokensState",
                     "Sessions", "RedisClient", "restore", "lock_key"):
        assert exported in submit_once.__all__


def test_the_smallest_copy_works_without_redis_urls(tmp_path, redis_url):
    """tokens.py, runner.py, extension.py, forms.py, history.py and signals.py, copied
    under another name: a plain redis:// URL works, and a Cluster URL says which file
    is missing."""
    package = tmp_path / "myapp" / "once"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    for name in ("tokens.py", "runner.py", "extension.py", "forms.py", "history.py",
                 "signals.py"):
        shutil.copy(PACKAGE / name, package / name)
    script = textwrap.dedent(f"""
        import sys
        import redis
        from flask import Flask
        from myapp.once.extension import FormTokens
        app = Flask("copy")
        app.config.update(SECRET_KEY="s", REDIS_URL={redis_url!r})
        tokens = FormTokens(app)
        with app.test_request_context("/"):
            token = tokens.issue("signup")
            assert redis.Redis.from_url({redis_url!r}).exists(tokens.store.key(
                token, session_id=tokens.session_id(), form="signup"))
        try:
            FormTokens(Flask("no-url"))
        except RuntimeError as error:
            assert "REDIS_URL" in str(error), error
        cluster = Flask("cluster")
        cluster.config["SUBMIT_ONCE_REDIS_URL"] = "redis+cluster://127.0.0.1:1"
        try:
            FormTokens(cluster)
        except RuntimeError as error:
            assert "redis_urls.py" in str(error), error
        else:
            raise AssertionError("a Cluster URL without redis_urls.py was accepted")
        assert not any(m.startswith(("submit_once", "webapp")) for m in sys.modules)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)


@pytest.mark.parametrize("form_tokens_first", [True, False])
def test_the_csrf_time_limit_is_the_token_ttl_when_nobody_set_it(redis_url, form_tokens_first):
    app = make_app(redis_url)
    extensions = [FormTokens(), CSRFProtect()]
    for extension in extensions if form_tokens_first else reversed(extensions):
        extension.init_app(app)
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 3600
    close(app)


def test_a_csrf_time_limit_the_app_set_is_kept_and_a_shorter_one_warned_about(redis_url):
    app = make_app(redis_url, SUBMIT_ONCE_TTL=7200, WTF_CSRF_TIME_LIMIT=600)
    with pytest.warns(UserWarning, match=r"WTF_CSRF_TIME_LIMIT \(600 s\) is shorter than "
                                         r"SUBMIT_ONCE_TTL \(7200 s\)"):
        FormTokens(app)
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 600
    close(app)
    unlimited = make_app(redis_url, SUBMIT_ONCE_TTL=7200, WTF_CSRF_TIME_LIMIT=None)
    FormTokens(unlimited)  # no limit at all: nothing to warn about (filterwarnings=error)
    assert unlimited.config["WTF_CSRF_TIME_LIMIT"] is None
    close(unlimited)


def test_a_ready_client_is_used_as_it_is(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    app = Flask(__name__)
    app.config["SECRET_KEY"] = "s"
    form_tokens = FormTokens(app, client=client)  # no URL needed
    with app.test_request_context("/"):
        assert form_tokens.redis is client and form_tokens.issue("signup")
    client.close()


def test_a_client_given_without_an_app_is_the_one_init_app_uses(redis_url):
    """FormTokens(client=...) then init_app(app): the client is not dropped."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    form_tokens = FormTokens(client=client)
    apps = [Flask("one"), Flask("two")]
    for app in apps:
        app.config["SECRET_KEY"] = "s"  # and no Redis URL at all
        form_tokens.init_app(app)
        assert FormTokens.state(app).store.client is client
    client.close()


def test_issuance_caps_are_on_by_default(redis_url):
    app = make_app(redis_url)
    FormTokens(app)
    state = FormTokens.state(app)
    assert isinstance(state, FormTokensState)
    assert (state.max_per_session, state.max_per_client_per_minute) == (200, 120)
    close(app)


def test_a_misconfigured_app_is_told_how_to_fix_it(redis_url):
    with Flask(__name__).app_context(), pytest.raises(RuntimeError, match="init_app"):
        FormTokens.state()
    with pytest.raises(RuntimeError, match="SUBMIT_ONCE_REDIS_URL"):
        FormTokens(Flask(__name__))


def test_redis_unreachable_at_issue_is_unavailable_with_the_cause():
    app = make_app(f"redis://127.0.0.1:{free_port()}/0")
    form_tokens = FormTokens(app)
    with app.test_request_context("/"), pytest.raises(Unavailable) as raised:
        form_tokens.issue("signup")
    assert isinstance(raised.value.__cause__, redis.ConnectionError)
    close(app)


def test_an_old_setting_name_is_refused_naming_the_new_one(redis_url):
    app = make_app(redis_url, SUBMIT_ONCE_WAIT=3)
    with pytest.raises(RuntimeError, match="SUBMIT_ONCE_WAIT was renamed: set "
                                           "SUBMIT_ONCE_WAIT_SECONDS instead"):
        FormTokens(app)

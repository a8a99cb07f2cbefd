"""The pattern package on its own: what a copier lifts out of this repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis
from flask import Flask
from flask_wtf.csrf import CSRFProtect

from dev.embedded import free_port
from submit_once import FormTokens, Unavailable

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_package_imports_nothing_of_the_shop():
    check = ("import submit_once, submit_once.extension, submit_once.signals, sys; "
             "assert 'webapp' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", check], check=True, cwd=ROOT)


def test_the_smallest_copy_works_without_redis_urls(tmp_path, servers):
    """tokens.py + runner.py + extension.py + signals.py, copied under another
    name: a plain redis:// URL works, and a Cluster URL says which file is missing."""
    package = tmp_path / "myapp" / "once"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    for name in ("tokens.py", "runner.py", "extension.py", "signals.py"):
        shutil.copy(ROOT / "submit_once" / name, package / name)
    script = textwrap.dedent(f"""
        import sys
        import redis
        from flask import Flask
        from myapp.once.extension import FormTokens
        app = Flask("copy")
        app.config.update(SECRET_KEY="s", REDIS_URL={servers.redis.url!r})
        tokens = FormTokens(app)
        with app.test_request_context("/"):
            token = tokens.issue("signup")
            assert redis.Redis.from_url({servers.redis.url!r}).exists(tokens.store.key(
                token, session_id=tokens.session_id(), form="signup"))
        try:
            FormTokens(Flask("no-url"))
        except RuntimeError as error:
            assert "REDIS_URL" in str(error), error
        cluster = Flask("cluster")
        cluster.config["FORM_TOKENS_REDIS_URL"] = "redis+cluster://127.0.0.1:1"
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
def test_the_csrf_time_limit_follows_the_token_ttl_whatever_the_order(servers,
                                                                    form_tokens_first):
    app = Flask(__name__)
    app.config.update(SECRET_KEY="s", REDIS_URL=servers.redis.url, FORM_TOKENS_TTL=7200)
    extensions = [FormTokens(), CSRFProtect()]
    for extension in extensions if form_tokens_first else reversed(extensions):
        extension.init_app(app)
    assert app.config["WTF_CSRF_TIME_LIMIT"] == 7200
    app.extensions["form_tokens"].store.client.close()


def test_a_ready_client_is_used_as_it_is(servers):
    client = redis.Redis.from_url(servers.redis.url, decode_responses=True)
    app = Flask(__name__)
    app.config["SECRET_KEY"] = "s"
    form_tokens = FormTokens(app, client=client)  # no URL needed
    with app.test_request_context("/"):
        assert form_tokens.redis is client and form_tokens.issue("signup")
    client.close()


def test_redis_unreachable_at_issue_is_unavailable_with_the_cause(servers):
    app = Flask(__name__)
    app.config.update(SECRET_KEY="s", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    form_tokens = FormTokens(app)
    with app.test_request_context("/"), pytest.raises(Unavailable) as raised:
        form_tokens.issue("signup")
    assert isinstance(raised.value.__cause__, redis.ConnectionError)
    app.extensions["form_tokens"].store.client.close()


def test_an_old_setting_name_is_refused_naming_the_new_one(servers):
    app = Flask(__name__)
    app.config.update(REDIS_URL=servers.redis.url, FORM_TOKENS_WAIT=3)
    with pytest.raises(RuntimeError, match="FORM_TOKENS_WAIT was renamed: set "
                                           "FORM_TOKENS_WAIT_SECONDS instead"):
        FormTokens(app)

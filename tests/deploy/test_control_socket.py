"""Two gunicorn instances on one machine, under one user: stopping one leaves the
other whole. gunicorn 25.1+ opens a control socket at one path per user
(~/.gunicorn/gunicorn.ctl), so by default the second took it over and stopping the
first deleted it. webapp.gunicorn_conf turns it off, or gives each instance its own
(GUNICORN_CONTROL_SOCKET)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.live import LiveServer, request


def production_settings(live: LiveServer) -> LiveServer:
    live.args[3:3] = ["-c", "python:webapp.gunicorn_conf"]
    return live


def gunicornc(socket: Path, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gunicorn.ctl.cli", "-s", str(socket), "-c", command, "-j"],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_by_default_no_instance_opens_the_shared_control_socket(servers, tmp_path):
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": ""}
    first = production_settings(LiveServer(servers, workers=1, **env))
    second = production_settings(LiveServer(servers, workers=1, **env))
    with second:
        with first:
            assert request(first.port, "GET", "/healthz").status == 200
        assert request(second.port, "GET", "/healthz").status == 200
        assert not (tmp_path / ".gunicorn").exists()


def test_each_instance_may_have_its_own_socket_and_stopping_one_leaves_the_others(
    servers, tmp_path
):
    sockets = [tmp_path / "shop-a.ctl", tmp_path / "shop-b.ctl"]
    first, second = (
        production_settings(
            LiveServer(servers, workers=1, HOME=str(tmp_path), GUNICORN_CONTROL_SOCKET=str(path))
        )
        for path in sockets
    )
    with second:
        with first:
            for path in sockets:
                assert gunicornc(path, "show workers").returncode == 0
        # the stopped instance took its own socket away
        assert not sockets[0].exists()
        answer = gunicornc(sockets[1], "show workers")
        assert answer.returncode == 0, answer.stdout + answer.stderr
        assert request(second.port, "GET", "/healthz").status == 200

"""The machine docs/DEPLOY.md's walk-through runs on, in a temporary folder.

Imported by tests/deploy/test_wheel.py: :class:`Machine` lays out a root folder that stands for
``/`` (a copy of Debian's /etc/nginx in it), maps the walk-through's absolute paths into it
and runs its shell blocks there in one bash. Run as a program, this file is the stand-in for
the commands that would change the real machine (``apt-get``, ``adduser``, ``sudo``,
``systemctl``, ``nginx``, ``certbot``): each is a small symlinked script that calls
``python deploy_machine.py <command> ...``. Services run as this test's user, not as
``User=``; PostgreSQL, Redis and the CA are the suite's or this file's. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: DEPLOY.md's section whose commands are run here.
WALKTHROUGH = "From an empty machine to a stocked shop"
#: The walk-through's absolute paths that live under the machine's root here.
ROOTED = re.compile(r"(?<![\w/.-])/(etc|srv|run|var)/")
STANDS_IN_FOR = ("apt-get", "adduser", "sudo", "systemctl", "nginx", "certbot")


def section_blocks(page: Path, heading: str) -> list[str]:
    """The ```sh blocks under ``## heading`` of ``page``, in order."""
    text = page.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)


def rooted(text: str, root: Path) -> str:
    """``text`` with /etc/, /srv/, /run/ and /var/ under ``root``."""
    return ROOTED.sub(lambda match: f"{root}/{match.group(1)}/", text)


class Machine:
    """A root folder standing for ``/``, the stand-ins on PATH, and the suite's servers."""

    def __init__(
        self, base: Path, *, ports: dict[str, int], postgres: dict[str, str], nginx: str
    ) -> None:
        self.root, self.bin = base / "machine", base / "stand-ins"
        self.config = base / "machine.json"
        for folder in ("etc/systemd/system", "run", "var/log/nginx", "var/lib/nginx", "srv"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        shutil.copytree("/etc/nginx", self.root / "etc/nginx", symlinks=True)
        self.bin.mkdir()
        for name in STANDS_IN_FOR:
            script = self.bin / name
            script.write_text(
                f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                f'{shlex.quote(__file__)} {name} "$@"\n'
            )
            script.chmod(0o755)
        self.config.write_text(
            json.dumps(
                {
                    "root": str(self.root),
                    "ports": ports,
                    "postgres": postgres,
                    "nginx": nginx,
                    "log": str(base / "commands.log"),
                }
            )
        )

    def run(self, script: str, cwd: Path, path: str) -> subprocess.CompletedProcess:
        """``script`` in one ``bash -euo pipefail``, its paths under the root."""
        env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{path}",
            "DEPLOY_MACHINE": str(self.config),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
            env.pop(name, None)
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", rooted(script, self.root)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )

    def commands(self) -> str:
        """What the stand-ins were asked to do, one line each."""
        log = Path(json.loads(self.config.read_text())["log"])
        return log.read_text() if log.exists() else ""

    def stop(self) -> None:
        """Stop every service the stand-ins started, nginx last."""
        pids = sorted((self.root / "run").glob("units/*.pid"))
        pids += [self.root / "run/nginx.pid"]
        for pid_file in pids:
            pid = pid_file.read_text().strip() if pid_file.exists() else ""
            if pid:
                stop_process(int(pid))


def stop_process(pid: int, timeout: float = 20) -> None:
    """SIGTERM, then SIGKILL after ``timeout``. The process is not this one's child, and
    whoever inherits orphans here may leave it a zombie: that counts as stopped."""

    def alive() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive():
        os.kill(pid, signal.SIGKILL)


# The stand-ins ---------------------------------------------------------------------------


def main(command: str, args: list[str]) -> int:
    config = json.loads(Path(os.environ["DEPLOY_MACHINE"]).read_text())
    with open(config["log"], "a") as log:
        log.write(shlex.join([command, *args]) + "\n")
    return {
        "apt-get": lambda c, a: 0,
        "adduser": lambda c, a: 0,
        "sudo": sudo,
        "systemctl": systemctl,
        "nginx": nginx_command,
        "certbot": certbot,
    }[command](config, args)


def sudo(config: dict, args: list[str]) -> int:
    """``sudo -u postgres CMD``: CMD as the suite's PostgreSQL superuser."""
    env = dict(os.environ)
    if args[:2] == ["-u", "postgres"]:
        pg = config["postgres"]
        env.update(
            PGHOST=pg["host"],
            PGPORT=pg["port"],
            PGUSER=pg["user"],
            # the suite's cluster asks for it (peer, on Debian)
            PGPASSWORD=pg["password"],
            PATH=f"{pg['bin']}{os.pathsep}{env['PATH']}",
        )
    if args[:1] == ["-u"]:
        args = args[2:]
    return subprocess.run(args, env=env).returncode


def systemctl(config: dict, args: list[str]) -> int:
    """daemon-reload; enable --now, start or restart units; reload or restart nginx."""
    action, *rest = args
    if action == "daemon-reload":
        return 0
    units = [unit for unit in rest if not unit.startswith("-")]
    for unit in units:
        if unit == "nginx":
            running = nginx_pid(config)
            if running and action == "reload":
                live_config(config)
                # nginx reads its files again
                os.kill(running, signal.SIGHUP)
            else:
                if running:
                    stop_process(running)
                start_nginx(config)
        elif action in ("enable", "start", "restart"):
            assert action != "enable" or "--now" in rest, "enable without --now starts nothing"
            start_unit(config, unit)
        else:
            raise SystemExit(f"systemctl {action}: not stood in for")
    return 0


def start_unit(config: dict, unit: str) -> None:
    """The unit's ExecStart in the background, with its EnvironmentFile and Environment
    (the ports the suite gave instead of 8000 and 9108), as systemd would."""
    root = Path(config["root"])
    settings = [
        line.split("=", 1)
        for line in (root / f"etc/systemd/system/{unit}.service").read_text().splitlines()
        if "=" in line
    ]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    for key, value in settings:
        if key == "EnvironmentFile":
            env.update(
                line.split("=", 1)
                for line in Path(value).read_text().splitlines()
                if "=" in line and not line.startswith("#")
            )
        elif key == "Environment":
            env.update([value.split("=", 1)])
        elif key == "RuntimeDirectory":
            (root / "run" / value).mkdir(exist_ok=True)
    command = shlex.split(dict(settings)["ExecStart"])
    if "gunicorn" in command[0]:
        env["BIND"] = f"127.0.0.1:{config['ports']['8000']}"
    if env.get("REFUND_MONITOR_BIND") == "9108":
        env["REFUND_MONITOR_BIND"] = str(config["ports"]["9108"])
    (root / "run/units").mkdir(exist_ok=True)
    with open(root / f"var/log/{unit}.log", "w") as output:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (root / f"run/units/{unit}.pid").write_text(str(process.pid))


def live_config(config: dict) -> Path:
    """The machine's /etc/nginx as nginx reads it here: paths under the root, the ports
    the suite gave, workers as this user, temp folders of its own, no dynamic modules (they
    load relative to nginx's prefix; the shop needs none)."""
    root = Path(config["root"])
    live = root / "run/nginx-live"
    shutil.rmtree(live, ignore_errors=True)
    shutil.copytree(root / "etc/nginx", live, symlinks=False)
    ports = config["ports"]
    temp = " ".join(
        f"{kind}_temp_path {root}/var/lib/nginx/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    for path in live.rglob("*.conf"):
        text = path.read_text().replace("include /etc/nginx/modules-enabled/*.conf;", "")
        text = rooted(text, root).replace(f"{root}/etc/nginx/", f"{live}/")
        for old, new in [
            ("listen 443 ssl;", f"listen 127.0.0.1:{ports['443']} ssl;"),
            ("listen 80;", f"listen 127.0.0.1:{ports['80']};"),
            ("server 127.0.0.1:8000;", f"server 127.0.0.1:{ports['8000']};"),
            ("server 127.0.0.1:9108;", f"server 127.0.0.1:{ports['9108']};"),
            ("user www-data;", "user root;" if os.geteuid() == 0 else ""),
            ("http {", f"http {{\n\t{temp}"),
        ]:
            text = text.replace(old, new)
        path.write_text(text)
    return live


def nginx_pid(config: dict) -> int | None:
    """The running nginx master's pid (``nginx -t`` leaves the file empty)."""
    pid_file = Path(config["root"]) / "run/nginx.pid"
    pid = pid_file.read_text().strip() if pid_file.exists() else ""
    return int(pid) if pid else None


def start_nginx(config: dict) -> None:
    """nginx as a daemon; nothing of it holds the caller's output open."""
    live, log = live_config(config), f"{config['root']}/var/log/nginx/error.log"
    with open(log, "a") as output:
        subprocess.run(
            [config["nginx"], "-p", f"{live}/", "-c", str(live / "nginx.conf"), "-e", log],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def nginx_command(config: dict, args: list[str]) -> int:
    """``nginx -t``: the real nginx checks the machine's configuration."""
    assert args == ["-t"], f"nginx {args}: not stood in for"
    live = live_config(config)
    return subprocess.run(
        [
            config["nginx"],
            "-t",
            "-p",
            f"{live}/",
            "-c",
            str(live / "nginx.conf"),
            "-e",
            f"{config['root']}/var/log/nginx/error.log",
        ]
    ).returncode


def certbot(config: dict, args: list[str]) -> int:
    """``certbot certonly --webroot -w DIR -d NAME ... --deploy-hook CMD`` with this file as
    the CA: it asks nginx's port 80 for the HTTP-01 challenge it put in DIR, as Let's
    Encrypt would, then issues a certificate of its own and runs the hook."""
    option = dict(zip(args, args[1:], strict=False))
    assert args[0] == "certonly" and "--webroot" in args, args
    webroot, name, hook = Path(option["-w"]), option["-d"], option["--deploy-hook"]
    token = secrets.token_urlsafe(16)
    challenge = webroot / ".well-known/acme-challenge" / token
    challenge.parent.mkdir(parents=True, exist_ok=True)
    challenge.write_text(f"{token}.thumbprint")
    asked = urllib.request.Request(
        f"http://127.0.0.1:{config['ports']['80']}/.well-known/acme-challenge/{token}",
        headers={"Host": name},
    )
    with urllib.request.urlopen(asked, timeout=10) as answer:
        assert answer.read().decode() == f"{token}.thumbprint", "challenge not served"
    challenge.unlink()
    live = Path(config["root"]) / "etc/letsencrypt/live" / name
    live.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "90",
            "-subj",
            f"/CN={name}",
            "-addext",
            f"subjectAltName=DNS:{name}",
            "-keyout",
            str(live / "privkey.pem"),
            "-out",
            str(live / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    shutil.copyfile(live / "cert.pem", live / "fullchain.pem")
    shutil.copyfile(live / "cert.pem", live / "chain.pem")
    return subprocess.run(["bash", "-c", hook]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

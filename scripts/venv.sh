# Sourced by scripts/run and scripts/test: make .venv (once) and install the
# project into it with the extras given as $1. Re-installs only when
# pyproject.toml or setup.py changed since the last install.
python3 -m venv --help >/dev/null 2>&1 || { echo "python3 with venv is required" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=".venv/.installed-$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)-$(echo "$1" | tr -c 'a-z' _)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$1"
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
export VIRTUAL_ENV="$PWD/.venv"

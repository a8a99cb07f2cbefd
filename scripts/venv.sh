# Sourced by scripts/run and scripts/test: make .venv (once) and install into it the
# library (flask-submit-once/, editable) and the shop with the extras given as $1.
# The shop depends on the library by name, and the library is not fetched from an index:
# installing it first (or in the same uv command) is what satisfies that. Re-installs
# only when a pyproject.toml or setup.py changed since the last install.
python3 -m venv --help >/dev/null 2>&1 || { echo "python3 with venv is required" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=".venv/.installed-$(cat pyproject.toml setup.py flask-submit-once/pyproject.toml | sha256sum | cut -c1-16)-$(echo "$1" | tr -c 'a-z' _)"
if [ ! -f "$stamp" ]; then
  # uv installs in seconds what pip takes minutes for; pip brings uv (and is the fallback
  # where uv cannot be had).
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
  if "${pip[@]}" uv && .venv/bin/uv pip install --quiet --python .venv/bin/python \
      -e './flask-submit-once[test,docs]' -e "$1"; then
    :
  else
    echo "uv could not install; pip does it (slower)" >&2
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -e './flask-submit-once[test,docs]'
    "${pip[@]}" -e "$1"
  fi
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
export VIRTUAL_ENV="$PWD/.venv"

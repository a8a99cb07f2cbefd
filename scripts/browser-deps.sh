# Sourced by scripts/test and scripts/screenshots: what the browser tests need
# beyond Python packages. Quick when already there.
#  - Chromium from Debian (Playwright cannot download its own build here), as root.
#  - axe-core from npm (package-lock.json), injected into pages by tests/browser.
# Without Chromium the browser tests fail with a message saying how to get it.
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Chromium for the browser tests (apt-get)..." >&2
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
      echo "warning: could not install Chromium; the browser tests will fail." >&2
  else
    echo "warning: no Chromium at ${CHROMIUM:-/usr/bin/chromium} and not root:" \
         "run 'apt-get install chromium' as root, or the browser tests will fail." >&2
  fi
fi
npm_stamp="node_modules/.installed-$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -f "$npm_stamp" ]; then
  if ! command -v npm >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm; } >/dev/null || true
  fi
  { npm ci --silent --no-audit --no-fund && touch "$npm_stamp"; } ||
    echo "warning: npm ci failed; the accessibility tests will fail." >&2
fi

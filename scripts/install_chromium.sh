#!/usr/bin/env bash
# Install Chromium and its driver through apt when they are missing (the web env: docs/web.md).
# Root only; otherwise print the command and carry on (the web env's browser tests are then skipped).
set -euo pipefail
if { command -v chromium || command -v chromium-browser; } >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing chromium + chromium-driver (apt) for the web env"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
else
  echo "note: chromium/chromedriver are missing and this is not root: the web env's browser tests are skipped;" \
       "install them with 'apt-get install -y chromium chromium-driver'"
fi

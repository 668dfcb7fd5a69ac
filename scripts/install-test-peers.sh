#!/usr/bin/env bash
# Install the Debian packages the test suite needs as real peers (the suite starts them itself):
# OpenSSH's sshd for the SFTP backend, PostgreSQL for Dagster's production storage (a throwaway
# cluster per test session, tests/peers/postgres.py; the package's own cluster is not used),
# systemd-analyze to verify the unit files in examples/systemd, and nginx to run
# examples/nginx/distributor-upload.conf in front of the upload server (tests/server/test_reverse_proxy.py;
# the package's own daemon is not used), and faketime/libfaketime to shift one process's wall clock
# (its monotonic clock untouched) in the lease tests (tests/reliability/test_skew.py), headless
# chromium to render the upload server's /docs with no network (tests/server/test_docs_offline.py),
# and zsh to try the zsh completion script (tests/cli/test_completion.py).
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v faketime >/dev/null 2>&1 || need+=(faketime)
compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null || need+=(libfaketime)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v zsh >/dev/null 2>&1 || need+=(zsh)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "installing test peers: ${need[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

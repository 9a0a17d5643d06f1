#!/usr/bin/env bash
# System packages the test suite needs (an sshd for the launcher's ssh tests). Idempotent and
# quick when everything is present; installs with apt-get when running as root, and otherwise
# names what is missing (an error only under CI=true, where every test must run).
set -euo pipefail
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system_deps: please install ${need[*]} (needs root and apt-get); the ssh tests skip until then" >&2
    # CI must run every test, so there a missing package is an error.
    [ "${CI:-}" = true ] && exit 1
    exit 0
fi
echo "system_deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

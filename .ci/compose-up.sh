#!/usr/bin/env bash
# Install the Docker Compose v2 CLI plugin if `docker compose` is missing.
# Debian bookworm ships only Compose v1; the v2 plugin is in trixie's docker-compose package,
# so fetch that one .deb with a throwaway apt state and unpack only the plugin binary.
set -euo pipefail
if docker compose version >/dev/null 2>&1; then docker compose version; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
echo "deb http://deb.debian.org/debian trixie main" > "$work/sources.list"
opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$work/lists" -o APT::Architecture=amd64 -o APT::Sandbox::User=root)
apt-get "${opts[@]}" update -qq
(cd "$work" && apt-get "${opts[@]}" download docker-compose)
dpkg -x "$work"/docker-compose_*.deb "$work/x"
install -D -m 0755 "$work/x/usr/libexec/docker/cli-plugins/docker-compose" /usr/local/lib/docker/cli-plugins/docker-compose
docker compose version

#!/usr/bin/env bash
# Bring up a real Docker engine for the tests, idempotently.
#
# - installs Debian's docker.io when dockerd is missing;
# - starts dockerd in the background only when no daemon answers;
# - waits until `docker info` works, then prints the engine version.
#
# The flags suit CI containers and small VMs: --iptables=false and --bridge=none
# because such hosts often lack the netfilter modules (tests run containers with
# network_mode "none"), --storage-driver=vfs because overlayfs on overlayfs fails.
# Override with CPVERIFY_DOCKERD_FLAGS; the daemon log goes to CPVERIFY_DOCKERD_LOG.
set -euo pipefail

log_file="${CPVERIFY_DOCKERD_LOG:-/tmp/cpverify-dockerd.log}"
flags="${CPVERIFY_DOCKERD_FLAGS:---iptables=false --bridge=none --storage-driver=vfs}"
wait_s="${CPVERIFY_DOCKERD_WAIT_S:-60}"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v dockerd >/dev/null 2>&1 && [ ! -x /usr/sbin/dockerd ]; then
    echo "docker-up: dockerd missing; installing Debian's docker.io" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io
fi
export PATH="$PATH:/usr/sbin:/sbin"

if docker info >/dev/null 2>&1; then
    echo "docker-up: a daemon already answers" >&2
else
    # A daemon that died uncleanly leaves its pid file, and a new one refuses to start.
    pid_file=/var/run/docker.pid
    if [ -f "$pid_file" ] && ! kill -0 "$(cat "$pid_file" 2>/dev/null)" 2>/dev/null; then
        as_root rm -f "$pid_file"
    fi
    echo "docker-up: starting dockerd $flags (log: $log_file)" >&2
    # setsid + nohup: the daemon must outlive this script and the shell that ran it.
    # shellcheck disable=SC2086
    as_root setsid nohup dockerd $flags >>"$log_file" 2>&1 </dev/null &
    for _ in $(seq 1 "$wait_s"); do
        if docker info >/dev/null 2>&1; then break; fi
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        echo "docker-up: dockerd did not answer within ${wait_s}s; last lines of $log_file:" >&2
        tail -n 30 "$log_file" >&2 || true
        exit 1
    fi
fi

docker version --format 'docker-up: engine {{.Server.Version}} (API {{.Server.APIVersion}}), client {{.Client.Version}}'

"""Planted secrets: one entry per secret, across every kind cpverify.redact knows, each with the line it
is found in and the way it reaches cpverify in the end-to-end test (tests/faults/test_secrets.py).

The values are made up, shaped like the real thing and unique enough that finding one anywhere
means it leaked. They are assembled from pieces so that no scanner mistakes this file for a leak.

`line`: the secret in context, as a log, a shell or a config shows it ({s} is the secret).
`bare`: the value alone, without any name, URL or header around it, must be recognised (its shape
says it is a secret); the others are given away by their context (a password is just a word).
`via`: how the end-to-end test plants it:
    env      cpverify's own environment (the workload must not even receive it)
    set      `--set env=NAME=VALUE` (the workload receives it: the user asked)
    config   `--config` [env] (the same)
    arg      a train argument (the workload receives it; Megatron prints its arguments)
    prompt   a prompt of the dataset (the workload echoes its first samples)
    output   printed by the workload itself, in writes split across lines
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Planted:
    kind: str
    value: str
    line: str
    via: str
    name: str = ""  # the variable or flag that carries it (env, set, config, arg)

    @property
    def bare(self) -> bool:
        """Is the value recognised alone, by its shape (a token), not by what surrounds it (a URL, a name)?"""
        return self.kind in SHAPED

    @property
    def ends_line(self) -> bool:
        """Is it an argument dump's row, whose value is the rest of its line?"""
        return bool(re.search(r" \.+ \{s\}$", self.line))

    @property
    def text(self) -> str:
        return self.line.format(s=self.value)


SHAPED = {"huggingface", "github", "github-fine-grained", "gitlab", "aws-access-key-id", "openai-anthropic", "stripe",
          "slack-token", "google-api-key", "pypi", "npm", "sendgrid", "jwt", "nvidia", "google-oauth", "groq", "databricks",
          "wandb", "private-key"}


def _pem(kind: str, body: list[str]) -> str:
    marker = "PRIV" + "ATE KEY"
    return "\n".join([f"-----BEGIN {kind}{marker}-----", *body, f"-----END {kind}{marker}-----"])


RSA_KEY = _pem("RSA ", ["MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2dP1cVeQWa9y1u7PmUz8iLNRqIe+",
                        "Zk7pQw1rX3d8VfE2oYtLsHc4nG6bJmA0uD5xW9vR2qK7eT1yN8gS3hF6jC4aB0lP",
                        "cQ9wE2rT5yU8iO1pA4sD7fG0hJ3kL6zX9cV2bN5mQ8wE1rT4yU7iO0pA3sD6fG9h",
                        "Yw=="])
OPENSSH_KEY = _pem("OPENSSH ", ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
                                "QyNTUxOQAAACBq7Xk3vQ2mN8pL4rT6wY9zC1dF5gH0jK2lM4nP7sR3uAAAAJgc0Xy1HNF8"])
EC_KEY = _pem("EC ", ["MHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49",
                      "AwEHoUQDQgAEPR3tU2PTm9J1hZg7v8xK3qL5nW0cY6fD4eB2aS9rT7uV1wX3yZ5b"])
PKCS8_KEY = _pem("", ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
                      "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu"])


def _jwt() -> str:
    return "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiJjcHZlcmlmeS1wbGFudGVkIn0" + "." \
        + "Qm9ndXNTaWduYXR1cmVGb3JUZXN0czEyMzQ1"


CORPUS: tuple[Planted, ...] = (
    # -- provider prefixes -----------------------------------------------------------------------
    Planted("huggingface", "hf_" + "Qx7bT2mN9pL4vR8sK1wZ3yC6dF0gH5jE2a", "export HF_TOKEN={s}", "env", "HF_TOKEN"),
    Planted("huggingface", "hf_" + "Zr4tY7uI0oP3aS6dF9gH2jK5lZ8xC1vB4n", "login with token {s} ok", "output"),
    Planted("github", "ghp_" + "4fG7hJ2kL9mN3bV6cX8zQ1wE5rT0yU2iO7pA", "GITHUB_TOKEN={s}", "env", "GITHUB_TOKEN"),
    Planted("github", "gho_" + "9kL2mN5bV8cX1zQ4wE7rT0yU3iO6pA9sD2fG", "oauth: {s}", "prompt"),
    Planted("github-fine-grained", "github_pat_" + "11AZXQ7YA0" + "k9Jm2Lp4Rt6Vx8Zb1Dc3Fe5Hg7Kj9Mn_" + "Pq2Rs4Tu6Vw8Xy0Za"
            "1Bc3De5Fg7Hi9Jk1Lm3No5Pq7Rs9Tu1Vw3Xy5Za7Bc9De1Fg3Hi5Jk7Lm", "git push https://{s}@github.com/x/y", "output"),
    Planted("gitlab", "glpat-" + "xT4vB8nM2kL6jH0gF3dS", "GITLAB_TOKEN={s}", "set", "GITLAB_TOKEN"),
    Planted("aws-access-key-id", "AKIA" + "QX7T2MN9PL4VR8SK", "aws_access_key_id = {s}", "output"),
    Planted("aws-access-key-id", "ASIA" + "ZR4TY7UI0OP3AS6D", "AccessKeyId: {s}", "prompt"),
    Planted("openai-anthropic", "sk-proj-" + "Tq8Wz3Xv6Bn9Mk2Lj5Hg8Fd1Sa4Qw7Er0Ty3Ui6Op9As", "OPENAI_API_KEY={s}", "env",
            "OPENAI_API_KEY"),
    Planted("openai-anthropic", "sk-ant-" + "api03-Jd8Kf2Lg6Mh0Nj4Pk8Ql2Rm6Sn0To4Up8Vq2Wr6Xs0Yt4Zu", "client = Anthropic({s})",
            "output"),
    Planted("stripe", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "charge with {s}", "output"),
    Planted("slack-token", "xoxb-" + "2481632641-1357913579-Hk3Jm5Np7Qr9St1Uv3Wx5Yz", "SLACK_BOT_TOKEN={s}", "env",
            "SLACK_BOT_TOKEN"),
    Planted("slack-token", "xapp-" + "1-A0KJ3SD8F2G-4567890123-ab12cd34ef56", "socket mode {s}", "output"),
    Planted("google-api-key", "AIza" + "SyD4kL8mN2pQ6rS0tU4vW8xY2zA6bC0dE4f", "maps?key={s}", "prompt"),
    Planted("pypi", "pypi-" + "AgEIcHlwaS5vcmcCJGY4ZTIzNjU3LWJlZjEtNDk3Ni1hZGQ3LTk0YjQ1MWIzMjI5Nw", "password = {s}",
            "output"),
    Planted("npm", "npm_" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5", "//registry.npmjs.org/:_authToken={s}", "output"),
    Planted("sendgrid", "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
            "mail via {s}", "output"),
    Planted("jwt", _jwt(), "session={s}; path=/", "output"),
    # NGC / build.nvidia.com keys are nvapi- and 64 characters; cpverify's own environment has one
    Planted("nvidia", "nvapi-" + "Rk3mZ8qT1vW6yB0dF4hJ7lN2pS5uX9aC" + "e-Gi_Km3Oq6Ts9Wv2Yz5Bd8Fh1Jl4Np7Rt",
            "export NVIDIA_API_KEY={s}", "env", "NVIDIA_API_KEY"),
    Planted("google-oauth", "ya29." + "a0AfB_byC7qW3eR5tY8uI1oP4aS6dF9gH2jK5lZ8xC1vB4nM7qW0eR3tY6uI9oP2aS5dF8gH",
            "refreshed the access token {s} (expires in 3599 s)", "output"),
    Planted("groq", "gsk_" + "Vn2Xb5Zd8Fg1Hj4Kl7Mn0Pq3WGdyb3FY" + "Rs6Tu9Vw2Xy5Za8Bc1De4F", "GROQ_API_KEY={s}", "set",
            "GROQ_API_KEY"),
    Planted("databricks", "dapi" + "f13ac4b49d1cb31f" + "69f678e39602e381-2", "DATABRICKS_TOKEN={s}", "config",
            "DATABRICKS_TOKEN"),
    Planted("wandb", "local-" + "87eLxjoRhY6u2ofg63NA" + "Jo7rVYHZo4NGACOvpSsF", "wandb: logging in to the server with {s}",
            "output"),
    Planted("wandb", "wandb_v1_" + "E7z65cs8PnYoE4OoqnlUlAB_fJS2hyx" + "PvtioeQ37gxopqxFPQFkSiyk7n4mxLtfB2Pa6tq",
            "wandb.login(host=\"https://wandb.corp.example.com\", key=\"{s}\")", "prompt"),
    # -- webhooks and URLs -------------------------------------------------------------------------
    Planted("slack-webhook", "T024" + "BE7LD/B01GQ3K7N8V/9XkR3tYq2WmZp8LvNc4Hb6Ds", "https://hooks.slack.com/services/{s}",
            "config", "ALERTS_URL"),
    Planted("discord-webhook", "112233" + "4455667788/aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "https://discord.com/api/webhooks/{s}",
            "output"),
    Planted("url-userinfo", "Pg-" + "planted-pw-7f3a91", "DATABASE_URL=postgres://trainer:{s}@db.corp.example.com:5432/runs",
            "env", "DATABASE_URL"),
    Planted("url-userinfo", "mirror-" + "pw-5be1c0",
            "HF_ENDPOINT=https://mirror-user:{s}@hf-mirror.corp.example.com/?token=hf-" + "mirror-token-83bd27", "env",
            "HF_ENDPOINT"),
    Planted("url-userinfo", "wandb-" + "host-pw-2c8e4d", "--wandb-host=https://me:{s}@wandb.corp.example.com", "arg",
            "--wandb-host"),
    Planted("url-userinfo", "redis-" + "pw-0d9f3b", "redis://:{s}@cache.internal:6379/0", "output"),
    Planted("url-userinfo", "ray-" + "dash-pw-6a2f81", "RAY_ADDRESS=http://admin:{s}@ray-head.corp.example.com:8265", "env",
            "RAY_ADDRESS"),
    Planted("url-userinfo", "p@ss-" + "word-71c2e9", "git clone https://ci:{s}@git.corp.example.com/team/slime.git",
            "output"),
    Planted("url-query", "hf-" + "mirror-token-83bd27",  # the same variable as above: a mirror with both
            "HF_ENDPOINT=https://mirror-user:mirror-" + "pw-5be1c0@hf-mirror.corp.example.com/?token={s}", "env",
            "HF_ENDPOINT"),
    Planted("url-query", "bX9" + "kQ2wE5rT8yU1iO4pA7sD0fG3hJ6kL9zX2cV5bN8mQ1w%3D",
            "GET https://bucket.s3.amazonaws.com/ckpt.pt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={s}&X-Amz-Expires=900",
            "output"),
    Planted("url-query", "IQoJb3JpZ2luX2VjE" + "Nr2Kp7Wq4Xz9Bm3Lv6Hj1Fd8Sg5Ta0Yc", "&X-Amz-Security-Token={s}&X-Amz-Date=20260821",
            "output"),
    Planted("url-query", "sv2Tq8" + "Wz3Xv6Bn9Mk2Lj5Hg8Fd1Sa4%3D", "https://acct.blob.core.windows.net/c/f?sp=r&sig={s}&se=2030",
            "prompt"),
    Planted("url-query", "ya29" + "-Gq8Wz3Xv6Bn9Mk2Lj5", "https://www.googleapis.com/drive/v3/files?access_token={s}", "output"),
    # -- Authorization headers ---------------------------------------------------------------------
    Planted("authorization-header", "planted" + "Bearer7d3f9a2c", "Authorization: Bearer {s}", "output"),
    Planted("authorization-header", "tok" + "en-planted-91c3e7", "RAY_JOB_HEADERS={{\"Authorization\": \"Token {s}\"}}",
            "env", "RAY_JOB_HEADERS"),
    Planted("authorization-header", "dXNlcjpw" + "bGFudGVkLXB3LTQ0", "curl -H 'Authorization: Basic {s}' https://x", "output"),
    Planted("bearer", "Bq7" + "Wz3Xv6Bn9Mk2Lj5Hg8", "headers={{'X': 1, 'auth': 'Bearer {s}'}}", "output"),
    # -- passwords on command lines -------------------------------------------------------------------
    Planted("command-password", "curl-" + "pw-8e1d0c", "curl -fsSL -u ci-bot:{s} https://artifacts.corp.example.com/x",
            "output"),
    Planted("command-password", "Reg1stry-" + "pw-3b9f", "docker login nvcr.io -u '$oauthtoken' -p {s}", "output"),
    Planted("command-password", "Reg1stry-" + "pw-long-5a0e", "podman login --username me --password={s} quay.io",
            "prompt"),
    Planted("command-password", "Sshp4ss-" + "7c2a91", "sshpass -p '{s}' ssh -p 22 trainer@gpu-node-17", "output"),
    Planted("command-password", "My5ql-" + "pw-4d8e", "mysql -h db -uroot -p{s} runs < schema.sql", "output"),
    Planted("command-password", "Red1s-" + "pw-9f3c", "redis-cli -h cache -a {s} ping", "output"),
    Planted("command-password", "0penssl-" + "pw-2e7b", "openssl rsa -in key.pem -passin pass:{s} -out plain.pem",
            "output"),
    Planted("command-password", "0123abcd" + "4567ef890123abcd4567ef89deadbeef", "wandb login --relogin {s}", "output"),
    # -- private keys, across lines ------------------------------------------------------------------
    Planted("private-key", RSA_KEY, "{s}", "output"),
    Planted("private-key", OPENSSH_KEY, "{s}", "output"),
    Planted("private-key", EC_KEY, "key = \"\"\"{s}\"\"\"", "prompt"),
    Planted("private-key", PKCS8_KEY.replace("\n", "\\n"), "{{\"private_key\": \"{s}\\n\"}}", "output"),
    # -- secrets only their name gives away ------------------------------------------------------------
    Planted("name", "planted-" + "pgpassword-5d21", "PGPASSWORD={s}", "env", "PGPASSWORD"),
    Planted("name", "planted-" + "dbpass-8c0e", "DB_PASS={s}", "set", "DB_PASS"),
    Planted("name", "0f9e8d7c" + "6b5a4f3e2d1c0b9a8f7e6d5c", "GITHUB_PAT={s}", "set", "GITHUB_PAT"),
    Planted("name", "planted-" + "service-creds-3a7b", "MY_SERVICE_CREDS={s}", "env", "MY_SERVICE_CREDS"),
    Planted("name", "https://" + "5f0e7b2a9c4d1e3f@o42.ingest.sentry.io/17", "SENTRY_DSN={s}", "env", "SENTRY_DSN"),
    Planted("name", "0123abcd" + "4567ef890123abcd4567ef890123abcd", "WANDB_API_KEY={s}", "env", "WANDB_API_KEY"),
    Planted("name", "plantedAws" + "Secret/7Yq2+Zk9Lm4Np8Rt1Vx6", "AWS_SECRET_ACCESS_KEY={s}", "env", "AWS_SECRET_ACCESS_KEY"),
    Planted("name", "wandb-flag-" + "value-5e9d2c7a1b", "--wandb-key {s}", "arg", "--wandb-key"),
    Planted("name", "planted-" + "sglang-flag-4b1d9e", "--sglang-api-key={s}", "arg", "--sglang-api-key"),
    Planted("name", "planted-" + "config-token-7e2f", "MY_API_TOKEN={s}", "config", "MY_API_TOKEN"),
    Planted("name", "planted-" + "client-secret-9a4c", '{{"client_id": "cpverify", "client_secret": "{s}"}}', "output"),
    Planted("name", "planted-" + "yaml-pw-1f6b", "  password: {s}", "output"),
    Planted("name", "planted-" + "x-api-key-2d8a", "X-Api-Key: {s}", "output"),
    Planted("name", "planted-" + "cookie-6c3e", "Cookie: {s}", "output"),
    Planted("name", "planted-" + "kwarg-key-4e7b", "wandb.login(key='{s}', relogin=True)", "output"),
    # Megatron's argument dump, as slime prints it (dots up to column 50), in Ray's coloured prefix
    Planted("name", "9f8e7d6c" + "5b4a39281706f5e4d3c2b1a0fedcba98", "  wandb_key ....................................... {s}",
            "output"),
    Planted("name", "Dump-" + "api-key-6e1f", "\x1b[36m(MegatronTrainRayActor pid=8312)\x1b[0m   sglang_api_key "
            ".................................. {s}", "output"),
    # a name in colour (a logger's, a shell prompt's) is still a name
    Planted("name", "Colour-" + "pw-0b5d2e", "\x1b[1;32mDB_PASSWORD\x1b[0m=\x1b[33m{s}\x1b[0m", "output"),
)

# What a redactor must leave alone: what makes a report useful (and what a greedy one would eat).
SURVIVORS = (
    "NCCL version 2.28.9+cuda12.9", "CUDA 12.9", "--lr 1e-6", "Timeout(ms)=600000", "2026-08-21 10:00:28",
    "12:58:32.712922209", "--input-key messages", "--label-key label", "--max-tokens-per-gpu 2048",
    "--fim-pad-token <pad>", "--calculate-per-token-loss", "--moe-token-dispatcher-type alltoall",
    "127.0.0.1", "/root/models/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "cudnn==9.10.2.21",
    "std::string", "c10::Error", "perf/tokens_per_gpu_per_sec", "'perf/actor_train_time': 1.0234567",
    "--rollout-batch-size 2", "torch 2.11.0+cu129", "pass_ratio=1.3",
    "commit 7ae557604adf67be50417f59c2c2f167def9a775", "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "Bearer tokens expire", "Basic configuration", "the token was rejected", "PWD=/opt/slime", "HF_HUB_OFFLINE=1",
    "torch.distributed.DistBackendError", "ProcessGroupNCCL.cpp:1970", "http://127.0.0.1:8265",
    "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct", "--ray-address http://HEAD:8265",
    # an argument dump's unset credential, and options that mean no password outside their command
    "  wandb_key ....................................... None", "docker run -p 8080:80 -u 1000:1000 slimerl/slime",
    "ssh -p 22 gpu-node-17", "mkdir -p /root/ckpt", "curl -fsSL -o model.bin https://huggingface.co/x",
    "echo \"$PW\" | docker login -u me --password-stdin nvcr.io", "mysql -u root -p runs",
    "waiting for the auth token... done", "so --wandb-key keeps its default", "local-rank 0",
    "\x1b[36m(MegatronTrainRayActor pid=8312)\x1b[0m   input_key ....................................... messages",
)


def by_via(via: str) -> list[Planted]:
    return [p for p in CORPUS if p.via == via]


def secret_values() -> list[str]:
    """Every planted value, and each line of the multi-line ones (a PEM body line alone is a leak too)."""
    values = []
    for planted in CORPUS:
        values.append(planted.value)
        values += [line for line in planted.value.replace("\\n", "\n").splitlines() if len(line) >= 8 and "-----" not in line]
    return values

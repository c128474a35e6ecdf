"""What a secret is, defined once, and how it is kept out of everything cpverify writes or prints.

verdict.md, verdict.json, env.json, commands.sh and the plots are pasted into public GitHub
issues; logs are written before anyone decides whether to share them. Two strengths of one
definition cover both:

* **credentials** go always, from everything: the raw logs as they stream to disk
  (LineScrubber), state.json, the terminal and every shareable file, whatever --no-redact says;
* **identity** (host names, IPs, the user name, home paths) is replaced in what is meant to be
  shared (Redactor with identity=True). The raw logs keep it: it is the evidence of which node failed.

This is the package's face: the rest of cpverify imports from `cpverify.redact` alone (its tests
also read the rules' parts in its modules). ARCHITECTURE.md names what each module holds and which
of them touch the world.
"""

from cpverify.redact.credentials import (
    contains_secret,
    follows_secret_flag,
    secret_arguments,
    secret_fragments,
)
from cpverify.redact.identity import Pseudonyms
from cpverify.redact.lines import BlockRedactor
from cpverify.redact.names import is_secret_name, literal_secret
from cpverify.redact.redactor import LineScrubber, Redactor, redact_json, redact_text, scrub_credentials
from cpverify.redact.terminal import print_json, redacted_terminal
from cpverify.redact.values import SECRET

__all__ = ["SECRET", "BlockRedactor", "LineScrubber", "Pseudonyms", "Redactor", "contains_secret", "follows_secret_flag",
           "is_secret_name", "literal_secret", "print_json", "redact_json", "redact_text", "redacted_terminal",
           "scrub_credentials", "secret_arguments", "secret_fragments"]

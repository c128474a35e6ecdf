"""Code that runs *inside* slime, loaded by dotted path from slime's own flags.

  --custom-megatron-init-path      cpverify.slime_hooks.layout.log_layout
  --custom-rm-path                 cpverify.slime_hooks.reward.length_reward
  --custom-generate-function-path  cpverify.slime_hooks.generate.generate_to_max_len   (profile `long`)

and two tools cpverify runs in slime's Python before any GPU is held (`python3 -m ...`):
  cpverify.slime_hooks.make_rollouts  the train-only profile's rollouts, with slime's own Sample
  cpverify.slime_hooks.deep_lint      slime's own parse_args() on every arm (cpverify.lint.deep)

slime imports these in its Ray actors, so cpverify must be importable there (installed in
the image, or on PYTHONPATH). Each module imports slime/Megatron/torch only inside its
functions: importing cpverify never needs a GPU stack.
"""

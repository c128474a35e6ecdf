# Stand-in package so `python -m compileall slime/backends/megatron_utils` has something to compile.

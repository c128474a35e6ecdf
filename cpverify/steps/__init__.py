"""The steps of `cpverify run` (cpverify.pipeline runs them in order): each a function of the run's
Context (its RunSpec, its run directory and record, the plan built once) that returns an exit code.

  context.py  the Context: the spec, the record, and what is derived from them once
  prepare.py  doctor, image, fetch, compileall
  lint.py     the static lint and slime's own parser on every arm
  arms.py     cp1, cp2: the rounds of the arms
  verdict.py  the verdict from every recorded round, and what a blocked run leaves
"""

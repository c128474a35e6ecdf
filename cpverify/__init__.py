"""cpverify: prove what context parallelism costs in slime, with a verdict you can paste."""

__version__ = "0.1.0"

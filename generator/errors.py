"""The one error type of the generator: bad input it refuses with exit status 2."""


class GeneratorError(Exception):
    """Bad table, bad template or bad configuration. The message names the place and the fix."""

"""specgen's generator: field table -> Jinja2 templates -> black -> generated/.

The pipeline, one module a step: ``config`` (read [tool.specgen]), ``table`` (load
and validate the table), ``render`` (Jinja2), ``emit`` (black, header stamp, write
or check). ``__main__`` is the command line.
"""

__version__ = "0.1.0"

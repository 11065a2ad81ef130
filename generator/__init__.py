"""specgen's generator: field tables -> Jinja2 templates -> black -> generated/. ``pipeline``
runs the steps, one module each; ``__main__`` is the command line."""

__version__ = "0.1.0"

"""specgen's generator: field tables -> Jinja2 templates -> black -> generated/.

The pipeline, one module a step: ``config`` (read [tool.specgen]), ``kinds`` (the kinds
module's declarations, read from its source), ``table`` (load and validate every table),
``evolution`` (the table lock: classify an edit, the history of breaks), ``render``
(Jinja2), ``emit`` (black, header stamp, write or check); ``pipeline`` runs them and
``__main__`` is the command line.
"""

__version__ = "0.1.0"

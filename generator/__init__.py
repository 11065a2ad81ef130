"""specgen's generator: field tables -> Jinja2 templates -> black -> generated/.

The pipeline, one module a step: ``config`` (read [tool.specgen]), ``kinds`` (the kinds
module's records, read from its source), ``table`` (load and validate every table, each
row's presence resolved), ``blocks`` (each row's freeze and rebuild code, decided),
``evolution`` (the table lock and its whole policy: classify an edit, the history of
breaks, one ``LockMode`` a run), ``render`` (Jinja2, once an output), ``emit`` (black, header stamp, write or check); ``pipeline`` runs them and
``__main__`` is the command line.
"""

__version__ = "0.1.0"

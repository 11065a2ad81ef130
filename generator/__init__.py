"""specgen's generator: field tables -> Jinja2 templates -> black -> generated/.

``pipeline`` runs the steps, one module each (config, kinds, table, blocks, evolution,
render, emit); ``__main__`` is the command line.
"""

__version__ = "0.1.0"

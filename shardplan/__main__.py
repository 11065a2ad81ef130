"""``python -m shardplan``: the ``shardplan`` command line (shardplan/cli.py)."""

from shardplan.cli import run

if __name__ == "__main__":
    run()

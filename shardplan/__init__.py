"""shardplan: the live sharding plan, its field table, and the codegen_meta.json artifact.

Importing this package is cheap: nothing here imports torch until it is used.
"""

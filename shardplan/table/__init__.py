"""The field tables and the classes they describe: pure data, no torch
(docs/contract.md §2, §2b, §3, §12)."""

"""The field table and the spec it describes: pure data, no torch (SPEC §2, §3, §11)."""

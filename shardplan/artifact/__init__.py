"""codegen_meta.json: the document (``meta``), its plan-level parts (``plan_meta``) and
how it is written (``atomic``). No torch."""

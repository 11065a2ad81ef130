"""Reading an artifact as a reviewer does: ``shardplan show`` (text and a page) and
``shardplan diff``. Data only, no torch: the artifact is read by ``load_meta`` and never
rebuilt."""

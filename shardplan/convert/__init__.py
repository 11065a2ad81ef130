"""Spec values <-> JSON values, one function per kind (``kinds``), over placements,
Targets and plain JSON data. ``placement_text`` and ``json_values`` import no torch."""

"""A small real model and its tensor-parallel plan, for the end-to-end demo and tests."""

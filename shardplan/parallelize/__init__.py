"""Torch integration: shard a model with torch's tensor-parallel styles from a plan."""

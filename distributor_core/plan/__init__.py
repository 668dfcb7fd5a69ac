"""Publish planning (pure apart from reads of the destination)."""

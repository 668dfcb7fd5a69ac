"""Execution: the destination lock, the intent journal, recovery and the write protocol."""

"""Sensors: ``watch_<pipeline>`` over a source backend, ``uploads_<pipeline>`` over the staging area."""

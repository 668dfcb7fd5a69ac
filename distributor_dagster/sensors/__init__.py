"""Sensors: ``watch_<pipeline>`` over a source backend, ``uploads_<pipeline>`` over the staging area.

Owns cursors and run requests; what a bundle is and whether it is valid is the core's.
"""

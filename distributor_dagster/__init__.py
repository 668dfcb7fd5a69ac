"""Dagster integration for distributor."""

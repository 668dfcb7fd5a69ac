"""Example dg project publishing bundles with distributor."""

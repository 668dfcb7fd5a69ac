"""The ``publish_<pipeline>`` job: discover → validate → plan/execute per destination → report."""

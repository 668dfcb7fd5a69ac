"""The code location of ``workspace.yaml``: ``defs`` built from ``$DISTRIBUTOR_CONFIG``.

    DISTRIBUTOR_CONFIG=examples/local-publish.yml dagster dev -w workspace.yaml
    DISTRIBUTOR_CONFIG=examples/local-publish.yml dagster job execute -m distributor_dagster.definitions -j ...

Optional variables: ``DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL`` (seconds),
``DISTRIBUTOR_DAGSTER_SENSOR_STATUS`` (``running`` or ``stopped``),
``DISTRIBUTOR_DAGSTER_NAME_PREFIX``, ``DISTRIBUTOR_DAGSTER_AUTOMATION`` (``sensors`` or ``eager``)
and ``DISTRIBUTOR_DAGSTER_BLOCKING_CHECKS``. A missing variable or file, or an invalid config, fails the
load with an error that names ``DISTRIBUTOR_CONFIG`` and carries the CLI's message.
"""

from distributor_dagster.location import definitions_from_environment

defs = definitions_from_environment()

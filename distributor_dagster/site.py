"""What every generated object of one code location shares: the loaded config, the options and
the generated names and asset specs. Built once per ``build_definitions`` call, at load time, without I/O."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from distributor_core.config import Config, Environment, Pipeline
from distributor_core.timefmt import Clock
from distributor_dagster.names import PipelineNames
from distributor_dagster.options import BuildOptions
from distributor_dagster.specs import PipelineSpecs


@dataclass(frozen=True)
class Site:
    config: Config
    options: BuildOptions
    names: tuple[PipelineNames, ...]
    specs: tuple[PipelineSpecs, ...]
    #: test seams: what stamps state times (default the system clock) and where secrets resolve from
    #: (default ``os.environ``, then ``secrets.directory``)
    clock: Clock | None = field(default=None, compare=False)
    environ: Mapping[str, str] | None = field(default=None, compare=False)
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # pipeline id -> position, for the lookups of a build (a site may have thousands of pipelines)
        object.__setattr__(self, "_index", {p.id: i for i, p in enumerate(self.config.pipelines)})

    def environment(self) -> Environment:
        """Secrets resolve at run time, never at load (interfaces §1.4)."""
        return Environment.from_config(self.config, self.environ)

    def pipeline(self, pipeline_id: str) -> Pipeline:
        return self.config.pipeline(pipeline_id)

    def pipeline_names(self, pipeline_id: str) -> PipelineNames:
        return self.names[self._index[pipeline_id]]

    def pipeline_specs(self, pipeline_id: str) -> PipelineSpecs:
        """The translated asset specs of a pipeline."""
        return self.specs[self._index[pipeline_id]]


def holder(job_name: str, run_id: str, step: str) -> str:
    """Who holds a destination lock, as ``distributor`` reports it when another writer waits."""
    return f"dagster {job_name} run {run_id} step {step} (pid {os.getpid()} on {socket.gethostname()})"


def pool_name(root_key: str) -> str:
    """The concurrency pool of a destination root (resolutions B1). Pool names may not contain
    whitespace, so whitespace in a root path is percent-encoded."""
    escaped = "".join(f"%{ord(ch):02X}" if ch.isspace() or ch == "%" else ch for ch in root_key)
    return f"distributor/{escaped}"

"""Whether an uploaded file's path fits the file systems it will be staged and published on
(issue 26, item 6).

The archive limits (``server.http.limits``) bound a bundle path on its own; the server then
stages it below ``<staging path>/.incoming/<random>/bundle/`` and ``<staging path>/<run id>/bundle/``,
and the publisher opens absolute paths below each destination root, plus a temporary
(``.distributor-tmp-<16 hex>``) or backup (``.distributor-bak-<16 hex>``) name in the output's
directory, plus a generated HTML page for a Markdown file. A path within every archive limit can
still make one of those absolute paths longer than the operating system allows, and the upload
would be accepted and then fail to publish. :class:`PathRoom` knows every prefix of one upload
pipeline and refuses such a path before anything of it is written.

Limits: ``PATH_MAX`` 4,096 bytes with its terminating NUL (4,095 bytes of path) and ``NAME_MAX``
255 bytes per name, as on Linux, for the staging directory, local destinations and SFTP
destinations (OpenSSH servers on POSIX systems); 1,024 bytes of object key for S3.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from distributor_core import paths as lp
from distributor_core.config import Pipeline
from distributor_core.jsonfmt import go_json_string
from distributor_core.plan.outputs import html_path, is_markdown
from distributor_core.staging import BUNDLE_DIR, INCOMING_DIR

#: longest path the kernel accepts (``PATH_MAX`` 4096 with its NUL)
PATH_MAX = 4095
#: longest file or directory name (``NAME_MAX``)
NAME_MAX = 255
#: longest S3 object key
S3_KEY_MAX = 1024
#: ``.distributor-tmp-<16 hex>`` and ``.distributor-bak-<16 hex>`` (resolutions A1, A2)
WORK_NAME = 33
#: ``<pipeline id>.<YYYYMMDDTHHMMSSZ>.<8 hex>`` beyond the pipeline id
RUN_ID_EXTRA = 26
#: ``.incoming/<32 hex>`` and ``.incoming/expired-<16 hex>`` (the longer)
INCOMING_NAME = len(INCOMING_DIR) + 1 + 32

_REMEDY = "shorten the path"
#: characters of a name quoted in a message
SHOWN = 100


def _size(text: str) -> int:
    return len(os.fsencode(text))


def _shown(name: str) -> str:
    return go_json_string(name if len(name) <= SHOWN else name[:SHOWN] + "...")


class _Target:
    """One destination: where its outputs start and which outputs a file becomes there."""

    def __init__(self, name: str, prefix: int, *, posix: bool, source: bool, html_mode: str | None) -> None:
        self.name = name
        #: bytes in front of an output path (``<root>/`` or ``<prefix>/``)
        self.prefix = prefix
        self.posix = posix
        self.source = source
        self.html_mode = html_mode

    def outputs(self, path: str) -> Iterable[tuple[str, str]]:
        """``(output path, what it is)`` for the file ``path``."""
        if self.source:
            yield path, "path"
        if self.html_mode is not None and is_markdown(path):
            yield html_path(path, self.html_mode), "HTML page"


class PathRoom:
    """The prefixes of one upload pipeline: its staging directory and each destination."""

    def __init__(self, staging_prefix: int, targets: list[_Target]) -> None:
        self.staging_prefix = staging_prefix
        self.targets = targets

    @classmethod
    def of(cls, pipeline: Pipeline, staging_path: str | os.PathLike[str]) -> PathRoom:
        staging = _size(os.fspath(staging_path))
        run_dir = max(INCOMING_NAME, len(pipeline.id) + RUN_ID_EXTRA)
        staging_prefix = staging + 1 + run_dir + 1 + len(BUNDLE_DIR) + 1
        targets = []
        for destination in pipeline.destinations:
            storage = destination.storage  # it says what precedes a path there, and whether it is a key
            targets.append(_Target(destination.id, _size(storage.path_prefix), posix=not storage.object_keys,
                                   source=destination.publish.source, html_mode=destination.markdown_mode))
        return cls(staging_prefix, targets)

    def problem(self, path: str) -> str | None:
        """Why the file ``path`` (a valid bundle path) cannot be staged or published, or None."""
        size = _size(path)
        staged = self.staging_prefix + size
        if staged > PATH_MAX:
            return (f"path would be staged on this server as a path of {staged} bytes; the limit is {PATH_MAX} "
                    f"(PATH_MAX); {_REMEDY}")
        for target in self.targets:
            for output, what in target.outputs(path):
                problem = self._output_problem(target, output, what)
                if problem:
                    return problem
        return None

    @staticmethod
    def _output_problem(target: _Target, output: str, what: str) -> str | None:
        where = f"destination {target.name}"
        output_size = _size(output)
        if not target.posix:
            key = target.prefix + output_size
            if key > S3_KEY_MAX:
                return (f"{what} would be an object key of {key} bytes in {where}; the limit is {S3_KEY_MAX}; "
                        f"{_REMEDY}")
            return None
        name = _size(lp.basename(output))
        if name > NAME_MAX:
            return (f"{what} {_shown(lp.basename(output))} in {where} would have a name of {name} bytes; the limit "
                    f"is {NAME_MAX} (NAME_MAX); {_REMEDY}")
        directory = _size(lp.parent(output))
        longest = max(output_size, directory + (1 if directory else 0) + WORK_NAME)
        published = target.prefix + longest
        if published > PATH_MAX:
            return (f"{what} would be published in {where} as a path of {published} bytes (with its temporary "
                    f"name); the limit is {PATH_MAX} (PATH_MAX); {_REMEDY}")
        return None

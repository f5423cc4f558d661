"""meshsim from Python: the same library and commands as the CLI, run in this process.

Every function takes the CLI's options as keyword arguments (``mesh="tp=8,dp=64"``,
``seq=8192``, ``tp_overlap="on"``; ``True`` for a flag; a stack, engine or traffic spec by name,
path or as the dict of its file) and returns the CLI's ``--json`` document
as a ``Result`` (a ``dict`` with ``to_dict()``; ``search`` and ``serve`` results also have
``records()``, flat rows that ``pandas.DataFrame`` takes as they are). A ``Cluster`` is loaded
once and lent to every ``train`` call on it, with the routes and collective prices each calling
thread has built, so a sweep pays the load once. The simulation releases the GIL: threads run
side by side.

Bad input raises ``InputError`` (the CLI's one-line message, with ``file`` and ``path``);
anything else ``InternalError``.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Iterable

from . import _meshsim

__all__ = ["Cluster", "InputError", "InternalError", "Result", "train", "search", "serve",
           "memory", "collective", "ops", "topo", "run", "version"]

version = _meshsim.version


class InputError(ValueError):
    """Bad input: ``message`` as the CLI prints it; ``file`` and ``path`` (JSON path or flag)."""

    def __init__(self, message: str, file: str | None = None, path: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.path = path


class InternalError(RuntimeError):
    """A failure that is not the input's (out of memory, an output that could not be written)."""


def _error_from(line: str, code: int) -> Exception:
    text = line.strip()
    if code == 2 and text.startswith("error: "):
        body = text[len("error: "):]
        where, sep, _ = body.partition(": ")
        if not sep:
            return InputError(body)
        if where.startswith("--") or ":" not in where:
            # A flag ("--mesh") or a file with no JSON path.
            return InputError(body, None if where.startswith("--") else where,
                              where if where.startswith("--") else None)
        file, _, path = where.partition(":")
        return InputError(body, file, path)
    return InternalError(text)


def _json_file(data: dict, prefix: str) -> str:
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    return path


class Cluster:
    """A cluster file (or the dict of one) loaded once, optionally rebuilt with ``nodes``."""

    def __init__(self, topology: str | os.PathLike | dict, nodes: int = 0):
        self._temp = None
        if isinstance(topology, dict):
            self._temp = _json_file(topology, "meshsim-cluster-")
            topology = self._temp
        self.path = os.fspath(topology)
        try:
            self._c = _meshsim.Cluster(self.path, int(nodes))
        except _meshsim.LoadError as e:
            raise _error_from("error: " + str(e), 2) from None
        self.nodes = int(nodes)

    @property
    def gpus(self) -> int:
        return self._c.gpus

    def _flags(self) -> list[str]:
        flags = ["--topology", self.path]
        if self.nodes:
            flags += ["--nodes", str(self.nodes)]
        return flags

    def __del__(self):
        if getattr(self, "_temp", None):
            try:
                os.unlink(self._temp)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"meshsim.Cluster({self.path!r}, nodes={self.nodes}) with {self.gpus} GPUs"


class Result(dict):
    """The command's --json document."""

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self))

    def records(self) -> list[dict]:
        """Flat rows (nested keys joined with '.'): one per ranked layout for a search, one per
        layout for ``serve(search=True)``, else the whole result as one row."""
        for key in ("candidates", "layouts", "results"):
            rows = self.get(key)
            if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
                return [_flatten(r) for r in rows]
        return [_flatten(self)]


def _flatten(d: dict, prefix: str = "") -> dict:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _model_flag(workload: str | os.PathLike | dict, temps: list[str]) -> str:
    if isinstance(workload, dict):
        path = _json_file(workload, "meshsim-model-")
        temps.append(path)
        return path
    return os.fspath(workload)


def _option_flags(options: dict, temps: list[str]) -> list[str]:
    flags: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, dict):
            # A stack, engine, traffic spec or calibration profile given as the dict of its file.
            path = _json_file(value, f"meshsim-{key}-")
            temps.append(path)
            flags += [flag, path]
        elif isinstance(value, (list, tuple)):
            flags += [flag, ",".join(str(v) for v in value)]
        else:
            flags += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return flags


def run(args: Iterable[str], cluster: Cluster | None = None) -> tuple[int, str, str]:
    """Runs ``meshsim ARGS...`` in this process: (exit code, stdout, stderr)."""
    return _meshsim.run([str(a) for a in args], cluster._c if cluster else None)


def _command(name: str, cluster: Cluster | None, workload, options: dict, lend: bool,
             quiet: bool = False) -> Result:
    temps: list[str] = []
    try:
        args = [name]
        if cluster is not None:
            if not isinstance(cluster, Cluster):
                cluster = Cluster(cluster)
            args += cluster._flags()
        if workload is not None:
            args += ["--workload", _model_flag(workload, temps)]
        args += _option_flags(options, temps) + ["--json"]
        if quiet:
            args.append("--quiet")
        code, out, err = run(args, cluster if lend else None)
    finally:
        for t in temps:
            os.unlink(t)
    # train's "does not fit" (exit 3) is a verdict: its document says fits: false.
    if code not in (0, 3):
        lines = [l for l in err.splitlines() if l.startswith(("error:", "internal error:"))]
        raise _error_from(lines[-1] if lines else err, code)
    return Result(json.loads(out))


def train(cluster, workload, **options) -> Result:
    """``meshsim train``: one training step of a layout (``mesh=...`` and the CLI's options)."""
    return _command("train", cluster, workload, options, lend=True, quiet=True)


def search(cluster, workload, **options) -> Result:
    """``meshsim search``: every valid layout of a job, ranked (``top=10`` and the CLI's options)."""
    return _command("search", cluster, workload, options, lend=False, quiet=True)


def serve(cluster, workload, **options) -> Result:
    """``meshsim serve``: a serving run (``rate=...``, ``engine=...``; ``search=True``)."""
    return _command("serve", cluster, workload, options, lend=False, quiet=True)


def memory(workload, cluster=None, **options) -> Result:
    """``meshsim memory``: memory per GPU by category (``gpu=`` or a cluster)."""
    return _command("memory", cluster, workload, options, lend=False)


def collective(cluster, **options) -> Result:
    """``meshsim collective``: one collective priced on the cluster (``op=``, ``gpus=``, ...)."""
    return _command("collective", cluster, None, options, lend=False)


def ops(workload, cluster=None, **options) -> Result:
    """``meshsim ops``: one layer's kernels (``tokens=``, ``gpu=`` or a cluster, ``tp=``, ...)."""
    return _command("ops", cluster, workload, options, lend=False)


def topo(cluster, **options) -> Result:
    """``meshsim topo``: counts, bandwidths, bisection, path classes."""
    return _command("topo", cluster, None, options, lend=False)

"""`ge.Session`: run compiled models on the simulated device, as GE's session runs graphs.

    from ge import RunConfig, Session
    session = Session(RunConfig(input_fusion_size=0))
    result = session.run("resnet50.om", {"input": images})
    result.outputs["output"], result.latency_us, result.profile.write("prof/")

A session keeps each model it has run loaded (its device memory layout, decoded
kernels and block timings), so running a model again costs only the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ge.om import Model, read
from ge.core.errors import InputError
from ge.sim.config import RunConfig
from ge.sim.profile import Profile
from ge.sim.runtime import Runtime


@dataclass(frozen=True)
class Result:
    """One run: the outputs by name (empty when timing only), the latency and the profile."""

    outputs: dict[str, np.ndarray]
    latency_us: float
    profile: Profile

    @property
    def throughput(self) -> float:
        """Samples per second at the model's batch."""
        return self.profile.throughput


class Session:
    """Runs `.om` models (or loaded `Model`s) with one `RunConfig`."""

    def __init__(self, config: RunConfig | None = None):
        self.config = config if config is not None else RunConfig()
        self._loaded: dict[object, tuple[object, Runtime]] = {}

    def runtime(self, model: Model | str | os.PathLike) -> Runtime:
        """The model loaded on the device (loaded once per session)."""
        if isinstance(model, Model):
            key: object = id(model)
        else:
            path = os.path.abspath(os.fspath(model))
            key = (path, os.stat(path).st_mtime_ns)
        if key not in self._loaded:
            loaded = model if isinstance(model, Model) else read(model)
            self._loaded[key] = (loaded, Runtime(loaded, self.config))  # the model is kept: its id stays its own
        return self._loaded[key][1]

    def run(
        self, model: Model | str | os.PathLike, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None = None
    ) -> Result:
        """Run `model` once on `inputs` (by input name, or a list in the model's input order)."""
        runtime = self.runtime(model)
        if inputs is not None and not isinstance(inputs, Mapping):
            names = [d.name for d in runtime.model.inputs]
            if isinstance(inputs, np.ndarray) or len(inputs) != len(names):
                raise InputError(f"the model takes {len(names)} inputs ({', '.join(names)}); give them by name or as a list of {len(names)}")
            inputs = dict(zip(names, inputs))
        out = runtime.run(inputs)
        return Result(out.outputs, out.profile.latency_us, out.profile)

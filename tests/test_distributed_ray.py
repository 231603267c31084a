"""The Ray backend on a local instance of 2 CPUs: the local pool's results, a dead
worker retried, a job that could not travel refused, and one message without Ray."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import ge
from ge import zoo
from ge.core.errors import OptionError
from ge.distributed import Backend, InProcess, backend
from ge.distributed.cluster import MISSING, RayBackend
from ge.models import MODELS_DIR
from ge.testing.jobs import die_once, square
from ge.zoo import Entry

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Shape:
    rows: int
    cols: int


def area(shape: Shape) -> int:
    return shape.rows * shape.cols


def refuse(x: int) -> int:
    if x == 2:
        raise OptionError(f"job {x} refused")
    return x


@pytest.fixture(scope="module")
def ray_backend() -> Iterator[Backend]:
    started = backend("ray", workers=2)
    yield started
    started.close()


def test_ray_gives_the_local_results_in_order(ray_backend: Backend) -> None:
    items = list(range(10))
    seen: list[int] = []
    assert ray_backend.map(square, items, on_done=lambda i, r: seen.append(i)) == backend("local", 2).map(square, items)
    assert sorted(seen) == items
    assert ray_backend.workers == 2
    shapes = [Shape(r, c) for r in (1, 3) for c in (2, 5)]
    assert ray_backend.map(area, shapes) == [area(s) for s in shapes]


def test_batches_keep_the_order(ray_backend: Backend) -> None:
    batched = RayBackend(batch=3)
    assert batched.map(square, list(range(7))) == [x * x for x in range(7)]
    batched.close()
    import ray

    assert ray.is_initialized(), "a backend that found Ray running leaves it running"


def test_a_dead_worker_is_retried(ray_backend: Backend, tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    assert ray_backend.map(die_once, [(marker, x) for x in range(6)]) == list(range(6))
    assert os.path.exists(marker)


def test_a_job_error_reaches_the_caller_as_raised(ray_backend: Backend) -> None:
    with pytest.raises(OptionError, match="job 2 refused"):
        ray_backend.map(refuse, list(range(4)))


def test_a_job_that_cannot_travel_is_refused(ray_backend: Backend) -> None:
    with pytest.raises(OptionError, match="module-level function.*lambda"):
        ray_backend.map(lambda x: x, [1])
    with pytest.raises(OptionError, match="job item 1 is a object, not plain data; items may be None, bool"):
        ray_backend.map(square, [1, object()])


def test_without_ray_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(OptionError, match=r"Ray is an optional extra: pip install '\.\[ray\]'") as caught:
        backend("ray")
    assert str(caught.value).endswith(MISSING)


def test_bad_addresses_are_refused() -> None:
    with pytest.raises(OptionError, match="neither 'auto' nor HOST:PORT"):
        backend("ray", address="head-node")
    with pytest.raises(OptionError, match="is for the ray backend"):
        backend("local", address="auto")


def test_a_zoo_on_ray_compiles_as_this_process_does(ray_backend: Backend, tmp_path: Path) -> None:
    entries = [Entry("tiny_resnet", str(MODELS_DIR / "tiny_resnet.onnx"), soc, "default", {}) for soc in ("Ascend310P3", "Ascend910B1")]
    on_ray = zoo.run(entries, tmp_path / "ray", ray_backend)
    here = zoo.run(entries, tmp_path / "here", InProcess())
    assert all(c.outcome.ok for c in on_ray)
    assert [(c.outcome.kernels, c.outcome.latency_us) for c in on_ray] == [(c.outcome.kernels, c.outcome.latency_us) for c in here]
    assert [ge.load_model(c.written).soc_version for c in on_ray if c.written is not None] == ["Ascend310P3", "Ascend910B1"]

"""The command-line options that choose where jobs run (`ge zoo`, `ge aoe`), defined
once: `--backend`, `--workers`, `--ray_address` (which implies `--backend=ray`)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ge.distributed import Backend


class BackendKind(str, Enum):
    local = "local"
    ray = "ray"


BackendOption = Annotated[
    BackendKind | None,
    typer.Option("--backend", help="Where the jobs run: local (a process pool on this machine's cores) or ray (default: local, ray with --ray_address).", show_default=False),
]
WorkersOption = Annotated[
    int | None,
    typer.Option("--workers", min=1, help="Jobs at once (default: one per core; on a Ray cluster, its CPUs).", show_default=False),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray_address", "--ray-address",
        help="An existing Ray cluster: auto (the one this machine joined) or HOST:PORT of its head; without it, --backend=ray starts a local instance.",
        show_default=False,
    ),
]


def runner(kind: BackendKind | None, workers: int | None, ray_address: str | None) -> Backend:
    """The backend the three options name (`ge.distributed` loads here, not for `ge --help`)."""
    from ge.distributed import backend

    chosen = kind.value if kind is not None else ("ray" if ray_address is not None else "local")
    return backend(chosen, workers=workers, address=ray_address)

"""The one check of a refused model: `load_onnx` raises one line of the expected
error class, holding every fragment the test names (plain text, not a pattern)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
import pytest

from ge.core.errors import GEError, ModelError
from ge.frontend.onnx_importer import load_onnx


def refused(
    model: onnx.ModelProto | Path | str,
    *fragments: str,
    error: type[GEError] = ModelError,
    input_shape: str | Mapping[str, Sequence[int]] | None = None,
) -> str:
    """The message of the import's refusal of `model`, after checking it is one line
    holding each of `fragments`."""
    with pytest.raises(error) as info:
        load_onnx(model, input_shape)
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message

"""Every precision_mode on ResNet-50 and the BERT-base encoder, against onnxruntime
in float32 (benchmarks/precision_accuracy.py computes the table in
benchmarks/README.md; this checks its thresholds).

- must_keep_origin_dtype computes in float32: within the reference interpreter's
  own 1e-4 of the output's scale (as tests/test_real_models.py), all 32 top-1
  classes, cosine similarity 1 to 7 digits.
- float16 modes: at least 30 of the 32 ResNet-50 top-1 classes agree, BERT's
  outputs keep a cosine similarity above 0.999.
- bfloat16 modes keep 8 significant bits, and this random-weight ResNet-50
  amplifies rounding layer after layer (`ge precision-report` shows it): 25 of 32
  agree there, so the bound is 20; BERT keeps its 0.999.
- the relative error stays within about three times what each mode gives.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from precision_accuracy import IMAGES, Row, bert_base, markdown, resnet50  # noqa: E402

pytestmark = pytest.mark.slow

EXACT = 1e-4
RESNET_LIMITS = {"float16": (0.1, 30), "bfloat16": (0.5, 20)}
"""Relative error and top-1 agreement (of 32) each kind of mode must keep."""
BERT_LIMITS = {"float16": (0.02, 0.999), "bfloat16": (0.1, 0.999)}
"""Relative error and cosine similarity."""


def _kind(row: Row) -> str:
    return "bfloat16" if "bf16" in row.mode else "float16"


def _check(rows: list[Row], passes) -> None:
    assert len(rows) == 10
    failures = [r.mode for r in rows if not passes(r)]
    assert not failures, f"{', '.join(failures)} out of bounds:\n{markdown(rows)}"


def test_resnet50_under_every_precision_mode() -> None:
    def passes(r: Row) -> bool:
        agree = int(r.agreement.split("/")[0])
        if r.mode == "must_keep_origin_dtype":
            return r.max_rel_error <= EXACT and agree == IMAGES
        error, least = RESNET_LIMITS[_kind(r)]
        return r.max_rel_error <= error and agree >= least

    _check(resnet50(), passes)


def test_bert_encoder_under_every_precision_mode() -> None:
    def passes(r: Row) -> bool:
        if r.mode == "must_keep_origin_dtype":
            return r.max_rel_error <= EXACT and float(r.agreement) >= 0.9999999
        error, cosine = BERT_LIMITS[_kind(r)]
        return r.max_rel_error <= error and float(r.agreement) > cosine

    _check(bert_base(), passes)

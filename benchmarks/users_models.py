"""Users' models (`ge.testing.user_models`): does each compile and run, how fast, how right.

    .venv/bin/python benchmarks/users_models.py [--soc Ascend910B1] [--only crnn_ocr lstm_vad] [--runs 20]

For each model: `ge.compile` with the default options for the SoC (its wall time),
the simulated latency of one `ge.Session` run, onnxruntime's CPU latency on the same
file and inputs (CPU provider, default graph optimisation, median of `--runs` runs
after one warm-up) and the largest difference from onnxruntime's outputs relative
to their scale. A model we refuse shows the one-line error a user would see. The
denominator is every model in the list, whatever works today.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

import ge
from ge.core.errors import GEError
from ge.testing.user_models import USER_MODELS, opset_of, user_model


def _onnxruntime(path: Path, feeds: dict[str, np.ndarray], runs: int) -> tuple[dict[str, np.ndarray], float]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(names, feeds)))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(names, feeds)
        times.append(time.perf_counter() - start)
    return outputs, statistics.median(times) * 1e3


def _error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    """The largest |got - want| over the outputs, relative to the output's largest magnitude
    (inf for a wrong shape or a non-finite value where onnxruntime's is finite)."""
    worst = 0.0
    for name, ref in want.items():
        ref64, got64 = np.asarray(ref, np.float64), np.asarray(got[name], np.float64)
        if ref64.shape != got64.shape or (np.isfinite(ref64) & ~np.isfinite(got64)).any():
            return float("inf")  # a wrong shape, or inf/NaN where onnxruntime has a number
        scale = max(float(np.max(np.abs(ref64), initial=0.0)), 1e-6)
        worst = max(worst, float(np.max(np.abs(got64 - ref64), initial=0.0)) / scale)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soc", default="Ascend910B1")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    names = args.only or list(USER_MODELS)
    print(f"\nusers' models on {args.soc} (default options), beside onnxruntime's CPU provider\n")
    print("| model | made by | opset | compile s | simulated µs | onnxruntime CPU ms | max rel. diff | status |")
    print("|---|---|---|---|---|---|---|---|")
    working = 0
    for name in names:
        spec = USER_MODELS[name]
        path, feeds = user_model(name)
        want, ort_ms = _onnxruntime(path, feeds, args.runs)
        row = [name, spec.tool, str(opset_of(path))]
        try:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = ge.compile(path, {"soc_version": args.soc})
                compile_s = time.perf_counter() - start
                with ge.Session() as session:
                    result = session.run(model, feeds)
        except GEError as error:
            message = " ".join(str(error).split())[:140].replace("|", "/")
            print("| " + " | ".join([*row, "-", "-", f"{ort_ms:.2f}", "-", f"refused: {message}"]) + " |")
            continue
        diff = _error(result.outputs, want)
        working += 1
        print("| " + " | ".join([*row, f"{compile_s:.1f}", f"{result.latency_us:.1f}", f"{ort_ms:.2f}", f"{diff:.2g}", "runs"]) + " |")
    print(f"\n{working} of {len(names)} models compile and run.")


if __name__ == "__main__":
    main()

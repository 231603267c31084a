"""Conformance on the core class of the ONNX backend node tests, beside onnxruntime.

    .venv/bin/python benchmarks/conformance.py [--route reference|compiled|both] [--jobs 2]
        [--only PATTERN ...] [--report DIR]

Runs every core-class case (`ge.testing.conformance`) through import + reference and
through compile + simulate, and onnxruntime (CPU provider, every graph optimisation
off) on the same cases, and prints the three figures over the same fixed
denominator. The full reports (per-op counts, every failure with its reason) are
written to `conformance_<route>.md` in `--report` (default: the current directory).
"""

from __future__ import annotations

import argparse
import fnmatch
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ge.testing import conformance
from ge.testing.conformance import NODE_DIR, Outcome, Route


def _ort(name: str) -> Outcome:
    """onnxruntime's outcome on one case, judged as ours are."""
    import onnx
    import onnxruntime as ort

    directory = NODE_DIR / name
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        model = onnx.load(str(directory / "model.onnx"))
        session = ort.InferenceSession(str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"])
        for data_set, feeds, expected in conformance.data_sets(directory, model.graph):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = session.run(list(expected), feeds)
            for (out, want), value in zip(expected.items(), got):
                reason = conformance.mismatch(out, value, want)
                if reason:
                    return Outcome(f"{data_set}: {reason}")
    except Exception as error:  # a refusal or a crash: a failure, as for us
        return Outcome(" ".join(str(error).split())[:200])
    return Outcome("")


def _ours(args: tuple[str, Route]) -> Outcome:
    import logging

    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return conformance.run_case(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", choices=["reference", "compiled", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="+", help="fnmatch patterns of case names (the figures then cover those only)")
    parser.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    parser.add_argument("--report", type=Path, default=Path("."))
    args = parser.parse_args()

    cases = conformance.all_cases()
    if args.only:
        cases = [c for c in cases if any(fnmatch.fnmatch(c.name, p) for p in args.only)]
    core = [c.name for c in cases if c.core]
    routes = {"reference": [Route.REFERENCE], "compiled": [Route.COMPILED], "both": list(Route)}[args.route]
    rows = []
    for route in routes:
        start = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            results = dict(zip(core, pool.map(_ours, [(n, route) for n in core], chunksize=8)))
        seconds = time.perf_counter() - start
        text = conformance.report(f"ONNX backend node tests: {route.value}", cases, results)
        args.report.mkdir(parents=True, exist_ok=True)
        out = args.report / f"conformance_{route.name.lower()}.md"
        out.write_text(text)
        fig = conformance.figures(cases, results)
        rows.append((route.value, *fig["core"], fig["core as fed"][0], seconds, out))
    if not args.no_ort:
        start = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            ort = dict(zip(core, pool.map(_ort, core, chunksize=8)))
        passed = sum(r.passed for r in ort.values())
        rows.append(("onnxruntime (CPU, no graph optimisation)", passed, len(core), passed, time.perf_counter() - start, None))
    print(f"\ncore class of onnx's node tests: {len(core)} cases\n")
    print("| route | passed | rate | as fed | seconds |\n|---|---|---|---|---|")
    for route, n, d, fed, seconds, _ in rows:
        print(f"| {route} | {n} / {d} | {n / max(d, 1):.1%} | {fed / max(d, 1):.1%} | {seconds:.0f} |")
    for *_, out in rows:
        if out is not None:
            print(f"report: {out}")


if __name__ == "__main__":
    main()

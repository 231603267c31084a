"""`ge-opt`: the pass-pipeline driver, xdsl-opt with this project's context.

It reads `.mlir` (our IR) or `.onnx` (imported by `ge.frontend.load_onnx`, with ATC's
`--input-shape`), runs a `-p` pipeline of the passes in `passes.registry`, and prints
IR that parses back to the same IR.

Weights stay out of the text: the module attribute `ascend_graph.weights` holds the
absolute path of the file they reload from (the `.onnx` model, or an `.npz`). A
pass that creates weights makes that file insufficient; then `-o out.mlir` also
writes every weight the module uses to `out.mlir.<hash>.npz`, named by the weights'
content, and points the attribute there: runs writing one output at once each
publish a matching pair. Without `-o` (or to `-`, a device or a FIFO) there is
nowhere to put them, and a warning says so. The weights an input came with are
taken to reload from its file (the importer stores only tensors it can reload; a
`.mlir` names its file), so only new handles count.

Errors are one line (see `ge.cli.errors`), and `-o` goes through
`ge.core.files.published`: a failed run leaves neither a partial `.mlir` nor an
`.npz` behind, and a device, FIFO or symlink is written through, not replaced.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import IO, NoReturn

from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.ir import Dialect
from xdsl.passes import ModulePass, PassPipelineCallbackType
from xdsl.targets import get_all_targets
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from dialects.ascend_graph import AscendGraph, WeightRefAttr
from dialects.ascend_kernel import AscendKernel
from ge.core import ir, weights
from ge.cli.errors import DEFAULT_LOG, LOG_LEVELS, configure_logging, log_level_in, reporting
from ge.core.errors import OptionError
from ge.core.files import decoded, published, regular_output
from passes import registry

DIALECTS: dict[str, Callable[[], Dialect]] = {
    "builtin": lambda: Builtin,
    "ascend_graph": lambda: AscendGraph,
    "ascend_kernel": lambda: AscendKernel,
}

log = logging.getLogger(__name__)


def weight_refs(module: ModuleOp) -> set[WeightRefAttr]:
    """Every weight handle the module's ops hold, in properties or attributes."""
    return {
        value
        for op in module.walk()
        for value in (*op.properties.values(), *op.attributes.values())
        if isinstance(value, WeightRefAttr)
    }


def _pipeline_error(spec: str, error: ArgSpecParseError) -> OptionError:
    """xDSL's message spans lines (location, text, caret, message); keep the ends."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    where = f" (at {lines[1]})" if len(lines) > 2 else ""
    return OptionError(f"-p '{spec}' is not a pass pipeline: {lines[-1]}{where}")


class GEOptMain(xDSLOptMain):
    """xdsl-opt with our dialects, our passes, an ONNX frontend and atomic output."""

    version_format = f"ge-opt {version('ascend-ge')} (xdsl {{xdsl_version}})"

    def __init__(self, args: Sequence[str] | None = None):
        self._input_refs: set[WeightRefAttr] = set()
        self._sidecars: list[weights.WeightStore] = []
        self._output: IO[str] | None = None
        super().__init__(description="Run ascend-ge pass pipelines on .mlir or .onnx input.", args=args)

    # ------------------------------------------------------------ registration

    def register_all_dialects(self) -> None:
        for name, factory in DIALECTS.items():
            self.ctx.register_dialect(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["onnx"] = self._import_onnx

    def register_all_passes(self) -> None:
        for name, factory in registry.available_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        self.available_targets["mlir"] = get_all_targets()["mlir"]

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--input-shape",
            "--input_shape",
            dest="input_shape",
            metavar="SHAPES",
            help="ONNX input only: input shapes in ATC syntax, e.g. 'input:1,3,224,224;mask:1,128'",
        )
        arg_parser.add_argument(
            "--load-pass-plugin",
            action="append",
            default=[],
            metavar="FILE.py|MODULE",
            help="import a module whose @register_pass passes become available to -p (repeatable)",
        )
        arg_parser.add_argument(
            "--log",
            choices=list(LOG_LEVELS),
            default=DEFAULT_LOG,
            help=f"log level, as ATC's --log; 'debug' also shows tracebacks (default: {DEFAULT_LOG})",
        )
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        arg_parser.error = _refuse  # type: ignore[method-assign]  (one line and exit 1, as every error)
        arg_parser.epilog = self._passes_help()

    def _passes_help(self) -> str:
        width = max(map(len, self.available_passes))
        lines = ["passes (-p 'name{option=value},name,...'):"]
        for name in self.available_passes:
            lines.append(f"  {name:<{width}}  {registry.describe(name)}")
            options = registry.options_of(name)
            if options:
                lines.append(f"  {'':<{width}}    options: {options}")
        lines += [
            "",
            "weights: the module attribute ascend_graph.weights names the .onnx or .npz file",
            "the weights reload from; with -o FILE, weights created by passes are saved to",
            "FILE.<content hash>.npz and the attribute points there.",
        ]
        return "\n".join(lines)

    def setup_pipeline(self) -> None:
        spec = self.args.passes
        try:
            names = [p.name for p in parse_pipeline(spec)]
        except ArgSpecParseError as e:
            raise _pipeline_error(spec, e) from e
        unknown = [n for n in names if n not in self.available_passes]
        if unknown:
            raise OptionError(
                f"unknown pass '{unknown[0]}' in -p; registered passes: {', '.join(self.available_passes)}"
            )
        try:
            super().setup_pipeline()
        except ValueError as e:
            raise OptionError(f"-p '{spec}': {e}") from e
        self.pipeline = dataclasses.replace(self.pipeline, callback=_naming_the_pass(self.pipeline.callback))

    # ------------------------------------------------------------------ input

    def _import_onnx(self, stream: IO[bytes]) -> ModuleOp:
        """The ONNX frontend needs the model's path: its weights reload from that file."""
        path = getattr(stream, "name", None)
        if not isinstance(path, str) or path == "<stdin>" or self.args.split_input_file:
            raise OptionError("ONNX input must be a file named on the command line, without --split-input-file")
        from ge.frontend import load_onnx

        module, store = load_onnx(path, input_shape=self.args.input_shape)
        weights.attach(module, store)
        return module

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        name = self.args.input_file
        extension = self.args.frontend or (os.path.splitext(name)[1].lstrip(".") if name else "mlir")
        if extension not in self.available_frontends:
            known = ", ".join(f".{e}" for e in self.available_frontends)
            raise OptionError(f"input '{name}': unknown format '.{extension}'; ge-opt reads {known} (or name one with --frontend)")
        return super().prepare_input()

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if file_extension != "onnx" and self.args.input_shape is not None:
            raise OptionError(f"--input-shape applies to ONNX input only, not to .{file_extension} input")
        if file_extension != "onnx":  # text xDSL's parser can take: UTF-8, nesting and constants bounded
            name = self.args.input_file or "<stdin>"
            data = chunk.read()
            ir.check_text(decoded(data, name, "input"), name)
            chunk = io.BytesIO(data)
        module = super().parse_chunk(chunk, file_extension, start_offset)
        self._input_refs = set() if module is None else weight_refs(module)
        return module

    # ----------------------------------------------------------------- output

    def prepare_output(self) -> IO[str]:
        return sys.stdout if self._output is None else self._output

    def output_resulting_program(self, prog: ModuleOp) -> str:
        self._place_new_weights(prog)
        # One final newline, as `ge.core.ir.to_text`: both write the same bytes for a module.
        return super().output_resulting_program(prog).rstrip("\n") + "\n"

    def _place_new_weights(self, module: ModuleOp) -> None:
        """Weights the input did not have cannot reload from its file: give them one."""
        refs = weight_refs(module)
        if refs <= self._input_refs:
            return
        created = len(refs - self._input_refs)
        output = self.args.output_file
        if not regular_output(output):
            log.warning(
                "%d weight(s) created by the passes are not saved; use -o FILE.mlir to save them beside it", created
            )
            return
        self._sidecars.append(weights.sidecar(module, output, refs))

    def run(self) -> None:
        """xDSL's run, then the weights and the output file, only if all went well."""
        output = self.args.output_file
        if output is None:
            super().run()
            return
        with published(output) as self._output:
            super().run()
            for store in self._sidecars:
                store.save(store.key)


def _refuse(message: str) -> NoReturn:
    raise OptionError(f"{message}; see 'ge-opt --help'")


def _naming_the_pass(callback: PassPipelineCallbackType | None) -> PassPipelineCallbackType:
    """xDSL's between-passes callback (it verifies the IR), with a verification error
    saying which pass left the IR broken."""

    def named(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
        try:
            if callback is not None:
                callback(previous, module, following)
        except VerifyException as e:
            where = f"after pass '{previous.name}'" if previous is not None else "in the input"
            raise VerifyException(f"{where}: {e}") from e

    return named


def _plugins_in(argv: Sequence[str]) -> list[str]:
    """`--load-pass-plugin` values, read before the parser is built: the parser's
    help and the pipeline check must already know the plug-ins' passes."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--load-pass-plugin", action="append", default=[])
    return early.parse_known_args(argv)[0].load_pass_plugin


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    level = log_level_in(args)
    configure_logging("ge-opt", level)
    with reporting("ge-opt", level):
        for plugin in _plugins_in(args):
            registry.load_plugin(plugin)
        GEOptMain(args).run()


if __name__ == "__main__":
    main()

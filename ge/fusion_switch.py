"""The fusion switch file (`--fusion_switch_file`): which fusion passes run.

Two formats, as in GE:
- JSON: `{"Switch": {"GraphFusion": {"<Pass>": "on"|"off", "ALL": "off"}, "UBFusion": {...}}}`.
  `"ALL"` sets every closable pass of that kind; a per-pass entry overrides it in
  either direction, whatever the order of the keys.
- the older lines `PassName:off` (or `:on`), one per line, `#` comments allowed.

Passes that GE forbids to close stay on whatever the file says. A name that is
neither one of our passes nor a known GE built-in is an error naming the key or
line; a known GE built-in that we do not implement (so a CANN user's file works
unchanged) is reported once as a warning and has no effect.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from ge.core.errors import OptionError
from ge.core.files import read_text
from passes.fusion import FUSION_PASSES, FusionKind, builtin_fusion_passes

log = logging.getLogger("ge")

GE_BUILTIN_NOT_IMPLEMENTED = frozenset(
    {
        "RequantFusionPass", "NotRequantFusionPass", "ConvConcatFusionPass", "ZConcatv2dFusionPass",
        "ZConcatExt2FusionPass", "TfMergeSubFusionPass", "PoolingFusionPass", "ZSplitVDFusionPass",
        "TransdataCastFusionPass", "TbePool2dQuantFusionPass", "TbeConvDequantVaddReluQuantFusionPass",
        "TbeConvTransdataFusion", "TbeEltwiseFusionPass", "TbeReduceElemwiseFusionPass",
        "TbeMultiOutputFusionPass", "TbeDxElemwisePass", "TbeConv2DBackpropElemwiseFusionPass",
    }
)
"""GE built-in pass names that appear in CANN switch files but have no counterpart here."""


@dataclass(frozen=True)
class FusionSwitches:
    """The on/off decisions of a switch file; without a file every pass is on."""

    all_off: frozenset[FusionKind] = frozenset()
    overrides: dict[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        cls = FUSION_PASSES[name]
        if not cls.closable:
            return True
        if name in self.overrides:
            return self.overrides[name]
        return cls.kind not in self.all_off


def closing(closed: list[str] | tuple[str, ...]) -> dict[str, object]:
    """A switch file's JSON that closes the passes `closed` (subgraph tuning's result)."""
    sections: dict[str, dict[str, str]] = {}
    for name in sorted(closed):
        sections.setdefault(FUSION_PASSES[name].kind.value, {})[name] = "off"
    return {"Switch": sections}


def load(path: str) -> FusionSwitches:
    """Read a switch file in either format; errors name the file and the key or line."""
    builtin_fusion_passes()  # the names are checked against every built-in pass
    text = read_text(path, "fusion_switch_file")
    if text.lstrip().startswith("{"):
        return _from_json(path, text)
    return _from_lines(path, text)


def _check(path: str, where: str, name: str, kind: FusionKind | None) -> bool:
    """True when `name` is one of ours (of `kind`, if given); False for a GE name we lack."""
    if name in FUSION_PASSES:
        actual = FUSION_PASSES[name].kind
        if kind is not None and actual is not kind:
            raise OptionError(f"fusion_switch_file '{path}': {where}: {name} is a {actual.value} pass, not {kind.value}")
        return True
    if name in GE_BUILTIN_NOT_IMPLEMENTED:
        log.warning("fusion_switch_file '%s': %s: %s is a GE pass not implemented here; ignored", path, where, name)
        return False
    known = ", ".join(sorted(FUSION_PASSES))
    raise OptionError(f"fusion_switch_file '{path}': {where}: unknown fusion pass '{name}'; known passes: {known}")


def _state(path: str, where: str, value: object) -> bool:
    if value not in ("on", "off"):
        raise OptionError(f"fusion_switch_file '{path}': {where}: value {value!r} must be \"on\" or \"off\"")
    return value == "on"


def _from_json(path: str, text: str) -> FusionSwitches:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"fusion_switch_file '{path}': line {e.lineno}: malformed JSON: {e.msg}") from e
    switch = doc.get("Switch") if isinstance(doc, dict) else None
    if not isinstance(switch, dict):
        raise OptionError(f"fusion_switch_file '{path}': the top level must be an object with a \"Switch\" object")
    all_off: set[FusionKind] = set()
    overrides: dict[str, bool] = {}
    for section, entries in switch.items():
        if section not in (k.value for k in FusionKind):
            raise OptionError(f"fusion_switch_file '{path}': key \"Switch.{section}\" must be GraphFusion or UBFusion")
        if not isinstance(entries, dict):
            raise OptionError(f"fusion_switch_file '{path}': \"Switch.{section}\" must be an object")
        kind = FusionKind(section)
        for name, value in entries.items():
            where = f"key \"Switch.{section}.{name}\""
            on = _state(path, where, value)
            if name == "ALL":
                if not on:
                    all_off.add(kind)
            elif _check(path, where, name, kind):
                overrides[name] = on
    return FusionSwitches(frozenset(all_off), overrides)


def _from_lines(path: str, text: str) -> FusionSwitches:
    overrides: dict[str, bool] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"line {number}"
        name, sep, value = (part.strip() for part in line.partition(":"))
        if not sep or not name:
            raise OptionError(f"fusion_switch_file '{path}': {where}: expected 'PassName:off' or 'PassName:on', got {raw.strip()!r}")
        on = _state(path, where, value)
        if _check(path, where, name, None):
            overrides[name] = on
    return FusionSwitches(overrides=overrides)

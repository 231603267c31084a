"""A run's profile: every task's times, per-op figures, and the files `ge run --profile` writes.

- `op_summary.csv`: a row per KERNEL and KERNEL_EX task (as msprof's op summary): op name, type,
  stream, block_dim, start and duration in cycles and microseconds (from its blocks'
  start: msprof's Task Duration), `wait_us` (the launch before it, its Task Wait Time), the block's
  cycles, waves, per-pipe busy ratios (each pipe's busy cycles over the block's),
  cube, vector and memory utilisation (cube blocks at one a cycle, vector cycles,
  GM bytes at the paths' peak rates or the chip's GM bandwidth, over the task's
  time and cores), `gm_bytes` (what it moved to and from GM) and `l2_bytes` (its
  reads the L2 cache served, `ge.sim.l2`; 0 with the run option l2_cache off), and
  the bound:
    cube / vector / memory  the busiest unit over the task's time (its blocks' span):
                            the cube (M), the vector unit (V), or data movement
                            (MTE1, MTE2, MTE3, FIX, or the chip's GM bandwidth);
    latency                 none is busy `timing.LATENCY_BOUND` of the time: it goes
                            on the pipes waiting on each other, on syncs;
  and the kernel's roofline (`Roofline`): `flops` (2 per cube MAC, 1 per vector
  element), `compulsory_bytes` (its arguments, each read or written once) and
  `compulsory_l2_bytes` (those of them in L2 when it started), `roofline_us` and
  `roofline_unit` (the time the busiest of cube, vector, GM bandwidth (`memory`)
  and L2 bandwidth (`l2`) needs at the chip's peak), and `x_bound`, its time over
  that (>= 1); `host_us`, in a dynamic-shape run (`ge.dynamic`), the host's tiling and
  launch of the op before it could start (0 when the task list is sunk to the device).
  An AI CPU task (KERNEL_EX) has core_type `AiCpu` (msprof's task type AI_CPU), no
  pipe figures, the bound `aicpu`, and its own time as its roofline: the AI CPU
  cost model is all the simulator knows of it. With mix_compile_mode, such a task
  runs on the host: core_type `Host`, bound `host`, its time the host's with the
  copies out and back.
- `roofline.png` (with matplotlib, the optional extra `plot`; else the log says it
  was skipped): every kernel's intensity and throughput under the chip's roofs
  (`ge.sim.roofline_chart`).
- `trace.json`: Chrome trace events (open in Perfetto or chrome://tracing): a
  "Host" process (model launch and synchronise), a "Streams" process with a track
  per stream (kernels, copies, events), and a process per core with its blocks;
  with the pipe level, each core also has a track per pipe with every instruction
  (a steady-state stretch of a loop as one span with its busy ratio). AI CPU tasks
  run on "AI CPU" cores, with their engine (DNN_VM_AICPU) in their arguments.
  Times are whole nanoseconds written as microseconds (`_ts_dur`): slices that
  follow each other on a track touch but never overlap, whatever reads them.

Several models run side by side (`ge.sim.chip`) write one op_summary.csv with a
`tenant` column first, and one trace.json with a process per model whose threads
are its host, streams and cores (named by their number on the chip).

Times are cycles of the AI core clock from the device's first task; microseconds
add the host's launch (`timing.MODEL_LAUNCH_US`) in the trace and the total latency.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from dialects.kernel_boundary import AICPU_ENGINE
from ge.om.tasks import AicpuTask
from ge.sim import roofline_chart, timing
from ge.sim.l2 import chip_l2_bytes_per_cycle
from ge.sim.program import AIV_MTE2, AIV_S, PIPE, SIM_PIPES
from ge.core.files import published
from ge.core.soc import SocProfile

log = logging.getLogger("ge")

AICPU_KIND = AicpuTask.KIND
RATIO_COLUMNS = {
    "M": "mac_ratio", "V": "vec_ratio", "S": "scalar_ratio", "MTE1": "mte1_ratio", "MTE2": "mte2_ratio", "MTE3": "mte3_ratio",
    "FIX": "fixpipe_ratio", AIV_MTE2: "aiv_mte2_ratio",
}
"""The per-pipe busy ratios, named as msprof names them (on parts with split cores
msprof tells the cube core's MTE2 from the vector core's: aic_ and aiv_mte2_ratio)."""
CSV_COLUMNS = (
    "op_name", "op_type", "kernel", "task_index", "stream", "core_type", "block_dim", "waves",
    "start_cycles", "duration_cycles", "start_us", "duration_us", "wait_us", "block_cycles",
    *RATIO_COLUMNS.values(), "cube_utilization", "vector_utilization", "memory_utilization", "gm_bytes", "l2_bytes",
    "bound", "flops", "compulsory_bytes", "compulsory_l2_bytes", "roofline_us", "roofline_unit", "x_bound", "host_us",
)  # fmt: skip


@dataclass(frozen=True)
class TaskRecord:
    """One task as it ran: cycles on the device's timeline."""

    index: int
    kind: str
    stream: int
    name: str
    start: float
    end: float
    op_type: str = ""
    kernel: str = ""
    core_type: str = ""
    block_dim: int = 0
    blocks: tuple[timing.Placed, ...] = ()
    block_timing: timing.BlockTiming | None = None
    stretch: float = 1.0
    nbytes: int = 0
    l2_hits: float = 0.0
    """Its GM reads the L2 cache served (`ge.sim.l2`)."""
    l2_resident: float = 0.0
    """The bytes of its inputs in L2 when it started."""
    wait: float = 0.0
    """Cycles between the stream reaching the task and its blocks starting: a kernel's
    launch by the task scheduler (`timing.KERNEL_LAUNCH_US`) and, where other streams'
    kernels hold the cores, the wait for them; msprof's Task Wait Time. Not in
    `duration` (msprof's Task Duration), which is the blocks' own time."""
    host_us: float = 0.0
    """A dynamic-shape run's host time for this task before its launch: tiling and launch
    (`timing.HOST_TILING_US`, `timing.HOST_LAUNCH_US`); 0 for a task list sunk to the device."""

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class OpRow:
    """A kernel task's figures (see the module docstring)."""

    record: TaskRecord
    waves: int
    block_cycles: float
    ratios: dict[str, float]
    cube: float
    vector: float
    memory: float
    gm_bytes: float
    l2_bytes: float
    bound: str
    roofline: Roofline


class TopOp(NamedTuple):
    """An op's kernel tasks summed (`Profile.top_ops`): time, launches, its last task's
    bound, GM bytes and L2 hits, and its time over its roofline bounds' (`over`)."""

    name: str
    op_type: str
    us: float
    launches: int
    bound: str
    gm_bytes: float
    l2_bytes: float
    over: float


@dataclass(frozen=True)
class Roofline:
    """The least time a kernel's work needs on this chip, whatever its tiling and pipes.

    - cube: its padded MACs (the cube blocks its mmads do, one a cycle per core at
      peak, which is how its tiling shapes them), over the AI cores of the run;
    - vector: its vector instructions at one 256-byte repeat a cycle per core (the
      unit's peak), over the run's cores of the kernel's kind;
    - memory: its compulsory GM bytes at the chip's GM bandwidth (which every core
      of the chip shares, a virtual instance's too). Compulsory: each input and
      weight read once, each output written once, i.e. the sizes of the task's
      arguments; but never more than the kernel moved, since some read only part
      of an argument (a Gather, the rows of its table it looks up);
    - l2: the compulsory bytes of its inputs that the L2 cache held when it started,
      at the chip's L2 bandwidth; they count towards this level, not GM's (each at
      most what the kernel moved through its level).
    The cores are those the run has of the kernel's kind (all the chip's, or a
    slice's with aicore_num or a virtual instance), not `block_dim`'s: the bound
    is what the hardware could do, the tiling being one way to fall short of it.
    The achieved time (the task's duration, from its blocks' start: its launch is
    the task's wait) over the bound is `ratio`, never below 1.
    """

    flops: float
    compulsory_bytes: float
    cycles: float
    unit: str
    compulsory_l2_bytes: float = 0.0

    @classmethod
    def of(cls, r: TaskRecord, t: timing.BlockTiming, cores: int, soc: SocProfile) -> Roofline:
        from_l2 = min(r.l2_resident, r.l2_hits)
        from_gm = min(float(r.nbytes) - r.l2_resident, r.block_dim * t.gm_bytes - r.l2_hits)
        needs = {
            "cube": r.block_dim * t.cube_blocks / cores,
            "vector": r.block_dim * t.vector_ideal / cores,
            "memory": from_gm / timing.chip_gm_bytes_per_cycle(soc),
            "l2": from_l2 / chip_l2_bytes_per_cycle(soc),
        }
        unit, cycles = max(needs.items(), key=lambda kv: kv[1])
        return cls(r.block_dim * t.ops, from_gm + from_l2, cycles, unit, from_l2)

    def ratio(self, duration: float) -> float:
        return duration / self.cycles if self.cycles > 0 else 1.0


@dataclass
class Profile:
    """Everything a run measured."""

    soc: SocProfile
    cores: dict[str, int]
    records: list[TaskRecord]
    batch: int
    pipes: bool = False
    """Whether the kernels' records carry per-instruction spans (`--profile-level=pipe`)."""
    l2_cache: bool = False
    """Whether the run simulated the L2 cache (the run option l2_cache)."""
    _rows: list[OpRow] | None = field(default=None, repr=False)

    # ----------------------------------------------------------------- totals

    @property
    def clock_mhz(self) -> float:
        return float(self.soc.clock_mhz)

    @property
    def device_cycles(self) -> float:
        """From the first task's start to the model's end."""
        return max((r.end for r in self.records), default=0.0)

    @property
    def device_us(self) -> float:
        return self.device_cycles / self.clock_mhz

    @property
    def latency_us(self) -> float:
        """Host launch, the device's task list, and the host seeing its end."""
        return timing.MODEL_LAUNCH_US + self.device_us + timing.HOST_SYNC_US

    @property
    def throughput(self) -> float:
        """Samples per second at the model's batch, one run after another."""
        return self.batch / (self.latency_us * 1e-6)

    def kernels(self) -> list[TaskRecord]:
        """The AI Core kernel tasks (KERNEL)."""
        return [r for r in self.records if r.kind == "KERNEL"]

    def aicpu_kernels(self) -> list[TaskRecord]:
        """The AI CPU kernel tasks (KERNEL_EX)."""
        return [r for r in self.records if r.kind == AICPU_KIND]

    def launches(self) -> list[TaskRecord]:
        """Every kernel task, AI Core or AI CPU, in the order they ran."""
        return [r for r in self.records if r.kind in ("KERNEL", AICPU_KIND)]

    def utilisation(self) -> dict[str, float]:
        """The chip's cube, vector, GM bandwidth and L2 bandwidth use over the device time (0 to 1)."""
        span = self.device_cycles
        if span <= 0:
            return {"cube": 0.0, "vector": 0.0, "memory": 0.0, "l2": 0.0}
        cube = vector = 0.0
        for r in self.kernels():
            assert r.block_timing is not None
            cube += r.block_dim * r.block_timing.cube_blocks
            vector += r.block_dim * r.block_timing.vector_cycles
        gm, l2 = self.traffic()
        vector_units = self.soc.vector_cores if self.soc.split_cores else self.soc.ai_cores
        return {
            "cube": cube / (self.soc.ai_cores * span),
            "vector": vector / (vector_units * span),
            "memory": gm / (timing.chip_gm_bytes_per_cycle(self.soc) * span),
            "l2": l2 / (chip_l2_bytes_per_cycle(self.soc) * span),
        }

    def traffic(self) -> tuple[float, float]:
        """(GM bytes, L2 hit bytes) the AI Core kernels moved: reads L2 served are not GM's."""
        gm = l2 = 0.0
        for r in self.kernels():
            assert r.block_timing is not None
            gm += r.block_dim * r.block_timing.gm_bytes - r.l2_hits
            l2 += r.l2_hits
        return gm, l2

    def compulsory_bytes(self) -> float:
        """The AI Core kernels' arguments, each read or written once (`Roofline`), summed."""
        return sum(row.roofline.compulsory_bytes for row in self.rows() if row.record.kind == "KERNEL")

    def cube_peak_fraction(self) -> float:
        """The cube work done over what the whole chip's cubes could do in the latency."""
        cycles = self.latency_us * self.clock_mhz
        done = sum(r.block_dim * r.block_timing.cube_blocks for r in self.kernels() if r.block_timing is not None)
        return done / (self.soc.ai_cores * cycles) if cycles > 0 else 0.0

    def cube_tflops(self) -> float:
        """Cube floating-point (or integer) operations per second over the latency, in T."""
        fp16 = self.soc.cube_shape("float16").macs
        done = sum(r.block_dim * r.block_timing.cube_blocks for r in self.kernels() if r.block_timing is not None)
        return 2 * done * fp16 / (self.latency_us * 1e-6) / 1e12

    # ----------------------------------------------------------------- per op

    def rows(self) -> list[OpRow]:
        if self._rows is None:
            self._rows = [self._aicpu_row(r) if r.kind == AICPU_KIND else self._row(r) for r in self.launches()]
        return self._rows

    @staticmethod
    def _aicpu_row(r: TaskRecord) -> OpRow:
        """An AI CPU task (or, mixed, the host's): no pipes, bound by its engine, its time its own bound."""
        ratios = dict.fromkeys(RATIO_COLUMNS.values(), 0.0)
        bound = "host" if r.core_type == timing.HOST else "aicpu"
        roofline = Roofline(0.0, float(r.nbytes), r.duration, bound)
        return OpRow(r, 1, r.duration, ratios, 0.0, 0.0, 0.0, float(r.nbytes), 0.0, bound, roofline)

    def _row(self, r: TaskRecord) -> OpRow:
        t = r.block_timing
        assert t is not None
        cores = self.cores.get(r.core_type) or self.cores["AiCore"]
        used = min(r.block_dim, cores)
        block = t.cycles * r.stretch
        ratios = {column: (t.busy[PIPE[p]] / block if block > 0 else 0.0) for p, column in RATIO_COLUMNS.items()}
        span = r.duration
        per_core = r.block_dim / (used * span) if span > 0 else 0.0
        gm_bytes = r.block_dim * t.gm_bytes - r.l2_hits
        chip = gm_bytes / (timing.chip_gm_bytes_per_cycle(self.soc) * span) if span > 0 else 0.0
        cube, vector = t.cube_blocks * per_core, t.vector_cycles * per_core
        memory = max(t.gm_ideal * per_core, chip)
        busy = {p: t.busy[i] * per_core for i, p in enumerate(SIM_PIPES)}
        pressure = {
            "cube": busy["M"],
            "vector": busy["V"],
            "memory": max(busy["MTE1"], busy["MTE2"], busy[AIV_MTE2], busy["MTE3"], busy["FIX"], chip),
        }
        kind, most = max(pressure.items(), key=lambda kv: kv[1])
        bound = kind if most >= timing.LATENCY_BOUND else "latency"
        roofline = Roofline.of(r, t, cores, self.soc)
        return OpRow(r, -(-r.block_dim // cores), block, ratios, cube, vector, memory, gm_bytes, r.l2_hits, bound, roofline)

    def top_ops(self, n: int = 10) -> list[TopOp]:
        """The ops taking the most time, most first."""
        total: dict[str, float] = defaultdict(float)
        least: dict[str, float] = defaultdict(float)
        launches: dict[str, int] = defaultdict(int)
        gm: dict[str, float] = defaultdict(float)
        l2: dict[str, float] = defaultdict(float)
        info: dict[str, tuple[str, str]] = {}
        for row in self.rows():
            r = row.record
            total[r.name] += r.duration / self.clock_mhz
            least[r.name] += row.roofline.cycles / self.clock_mhz
            launches[r.name] += 1
            gm[r.name] += row.gm_bytes
            l2[r.name] += row.l2_bytes
            info[r.name] = (r.op_type, row.bound)
        names = sorted(total, key=lambda k: (-total[k], k))[:n]
        return [TopOp(k, info[k][0], total[k], launches[k], info[k][1], gm[k], l2[k], _over(total[k], least[k])) for k in names]

    def roofline_ratio(self) -> float:
        """The kernels' time over their roofline bounds' (summed over every kernel task)."""
        rows = self.rows()
        return _over(sum(row.record.duration for row in rows), sum(row.roofline.cycles for row in rows))

    # ----------------------------------------------------------------- files

    def write(self, directory: str | os.PathLike) -> list[str]:
        """op_summary.csv, trace.json and (with matplotlib) roofline.png in `directory`
        (made if missing); returns their paths. Without matplotlib it logs that the
        chart was skipped."""
        os.makedirs(directory, exist_ok=True)
        csv_path = os.path.join(directory, "op_summary.csv")
        trace_path = os.path.join(directory, "trace.json")
        chart_path = os.path.join(directory, "roofline.png")
        self.write_csv(csv_path)
        with published(trace_path, what="trace") as f:
            json.dump(self.trace(), f, separators=(",", ":"))
        if not roofline_chart.write_chart(self, chart_path):
            log.warning("roofline.png skipped: matplotlib is not installed (pip install 'ascend-ge[plot]')")
            return [csv_path, trace_path]
        return [csv_path, trace_path, chart_path]

    def write_csv(self, path: str | os.PathLike) -> None:
        with published(path, what="op summary") as f:
            out = csv.writer(f)
            out.writerow(CSV_COLUMNS)
            out.writerows(self.csv_rows())

    def csv_rows(self) -> list[list[object]]:
        """The rows of op_summary.csv, in `CSV_COLUMNS` order."""
        clock = self.clock_mhz
        rows = []
        for row in self.rows():
            r = row.record
            rows.append([
                r.name, r.op_type, r.kernel, r.index, r.stream, r.core_type, r.block_dim, row.waves,
                _num(r.start), _num(r.duration), _num(r.start / clock), _num(r.duration / clock), _num(r.wait / clock), _num(row.block_cycles),
                *(_ratio(row.ratios[c]) for c in RATIO_COLUMNS.values()),
                _ratio(row.cube), _ratio(row.vector), _ratio(row.memory), int(row.gm_bytes), int(row.l2_bytes), row.bound,
                int(row.roofline.flops), int(row.roofline.compulsory_bytes), int(row.roofline.compulsory_l2_bytes),
                _num(row.roofline.cycles / clock),
                row.roofline.unit, _num(row.roofline.ratio(r.duration)), _num(r.host_us),
            ])  # fmt: skip
        return rows

    def trace(self, first_cores: Mapping[str, int] | None = None) -> dict:
        """The run as Chrome trace events (microseconds); cores are named from
        `first_cores` on (by kind: a virtual instance's slice of the chip)."""
        clock, base = self.clock_mhz, timing.MODEL_LAUNCH_US
        events: list[dict] = []

        def meta(pid: int, name: str, tid: int | None = None, thread: str | None = None) -> None:
            if tid is None:
                events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
                events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
            else:
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})

        def span(pid: int, tid: int, name: str, start_us: float, end_us: float, cat: str, args: dict | None = None) -> None:
            event = {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": cat, **_ts_dur(start_us, end_us)}
            if args:
                event["args"] = args
            events.append(event)

        meta(0, "Host")
        meta(0, "Host", 0, "host")
        span(0, 0, "model execute (launch)", 0.0, base, "host")
        span(0, 0, "synchronise", base + self.device_us, base + self.device_us + timing.HOST_SYNC_US, "host")
        meta(1, "Streams")
        for s in sorted({r.stream for r in self.records}):
            meta(1, "Streams", s, f"stream {s}")
        for r in self.records:
            args = {"task": r.index}
            if r.kind == "KERNEL":
                args.update(kernel=r.kernel, op_type=r.op_type, block_dim=r.block_dim)
            elif r.kind == AICPU_KIND:
                args.update(kernel=r.kernel, op_type=r.op_type, engine=AICPU_ENGINE)
            elif r.nbytes:
                args["bytes"] = r.nbytes
            span(1, r.stream, r.name, base + r.start / clock, base + r.end / clock, r.kind, args)
        pids = {"AiCore": 100, "VectorCore": 1000, "AiCpu": 2000, timing.HOST: 3000}
        titles = {"AiCore": "AI Core", "VectorCore": "Vector Core", "AiCpu": "AI CPU", timing.HOST: "Host CPU"}
        used = {(r.core_type, b.core) for r in self.launches() for b in r.blocks}
        first = first_cores or {}
        for kind, core in sorted(used):
            pid = pids[kind] + core
            meta(pid, f"{titles[kind]} {first.get(kind, 0) + core}")
            meta(pid, "", 0, "blocks")
            if self.pipes:
                for i, p in enumerate(SIM_PIPES):
                    if p != AIV_S:  # it issues, it runs nothing
                        meta(pid, "", i + 1, p)
        for r in self.launches():
            for n, b in enumerate(r.blocks):
                pid = pids[r.core_type] + b.core
                span(pid, 0, r.name, base + b.start / clock, base + b.end / clock, "block", {"kernel": r.kernel, "block": n, "phase": b.phase})
            if self.pipes and r.kind == "KERNEL":
                self._pipe_spans(r, pids[r.core_type], span)
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"soc": self.soc.name, "clock_mhz": clock}}

    def _pipe_spans(self, r: TaskRecord, pid_base: int, span) -> None:
        """Each block's instructions on its core's pipe tracks (phases placed where they ran)."""
        t = r.block_timing
        assert t is not None
        if t.spans is None:
            return
        clock, base = self.clock_mhz, timing.MODEL_LAUNCH_US
        bounds = []
        at = 0.0
        for cycles in t.phases:
            bounds.append((at, at + cycles))
            at += cycles
        phase_of = [_phase(s.start, bounds) for s in t.spans]
        for b in r.blocks:
            lo, _ = bounds[b.phase]
            stretch = (b.end - b.start) / (bounds[b.phase][1] - lo) if bounds[b.phase][1] > lo else 1.0
            for s, phase in zip(t.spans, phase_of):
                if phase != b.phase:
                    continue
                start, end = b.start + (s.start - lo) * stretch, b.start + (s.end - lo) * stretch
                args = {"busy": round(s.busy, 3)} if s.busy < 1.0 else None
                span(pid_base + b.core, s.pipe + 1, s.label, base + start / clock, base + end / clock, "pipe", args)

    # ---------------------------------------------------------------- summary

    def summary(self) -> dict[str, object]:
        """The figures `ge run` prints."""
        return {
            "soc": self.soc.name,
            "cores": dict(self.cores),
            "latency_us": self.latency_us,
            "device_us": self.device_us,
            "batch": self.batch,
            "throughput": self.throughput,
            "utilisation": self.utilisation(),
            "cube_peak_fraction": self.cube_peak_fraction(),
            "kernels": len(self.kernels()),
            "aicpu_kernels": len(self.aicpu_kernels()),
            "tasks": len(self.records),
            "roofline_ratio": self.roofline_ratio(),
            "gm_bytes": self.traffic()[0],
            "l2_bytes": self.traffic()[1],
        }


def tenant_trace(tenants: Sequence[tuple[str, Profile, Mapping[str, int]]]) -> dict:
    """Several runs on one chip as one Chrome trace: a process per run (named by
    `label`), its host, streams and cores as threads of it, so they show side by side."""
    events: list[dict] = []
    for n, (label, profile, first_cores) in enumerate(tenants):
        pid = n + 1
        own = profile.trace(first_cores)["traceEvents"]
        processes = {e["pid"]: e["args"]["name"] for e in own if e["ph"] == "M" and e["name"] == "process_name"}
        threads: dict[tuple[int, int], int] = {}
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for e in own:
            tid = threads.setdefault((e["pid"], e["tid"]), len(threads))
            if e["ph"] != "M":
                events.append({**e, "pid": pid, "tid": tid})
            elif e["name"] == "thread_name":
                name = f"{processes[e['pid']]}: {e['args']['name']}"
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
                events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    soc = tenants[0][1].soc if tenants else None
    other = {"soc": soc.name, "clock_mhz": float(soc.clock_mhz)} if soc is not None else {}
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def write_tenant_files(directory: str | os.PathLike, tenants: Sequence[tuple[str, Profile]], trace: dict) -> list[str]:
    """op_summary.csv of several runs on one chip (a `tenant` column first) and their
    trace.json in `directory` (made if missing); returns their paths."""
    os.makedirs(directory, exist_ok=True)
    csv_path = os.path.join(directory, "op_summary.csv")
    trace_path = os.path.join(directory, "trace.json")
    with published(csv_path, what="op summary") as f:
        out = csv.writer(f)
        out.writerow(("tenant", *CSV_COLUMNS))
        for label, profile in tenants:
            out.writerows([label, *row] for row in profile.csv_rows())
    with published(trace_path, what="trace") as f:
        json.dump(trace, f, separators=(",", ":"))
    return [csv_path, trace_path]


def _phase(start: float, bounds: list[tuple[float, float]]) -> int:
    for i, (lo, hi) in enumerate(bounds):
        if start < hi or i == len(bounds) - 1:
            return i
    return 0


def _ts_dur(start_us: float, end_us: float) -> dict[str, float]:
    """`ts` and `dur` (microseconds, as the Trace Event Format has them) from whole
    nanoseconds: start and end are each rounded once and `dur` is their difference,
    so slices that touch on a track still touch and never overlap. Perfetto's JSON
    importer reads `ts` and `dur` separately as `llround(value * 1000)` nanoseconds,
    which gives back exactly these integers; a decimal reader gets `ts + dur` exactly
    the rounded end. (`displayTimeUnit` only chooses how times are shown, by the format's
    definition; it does not change the unit of `ts`.)"""
    start = round(start_us * 1000)
    end = max(round(end_us * 1000), start)
    return {"ts": start / 1000, "dur": (end - start) / 1000}


def _over(time: float, bound: float) -> float:
    return time / bound if bound > 0 else 1.0


def _num(x: float) -> str:
    return f"{x:.3f}"


def _ratio(x: float) -> str:
    return f"{x:.4f}"

"""The offline-model contract: what a compile produces and the simulator runs.

`Model` and `TensorDesc` (`model.py`), the memory plan (`memory.py`) and the task
list (`tasks.py`), with `read`/`write` of the sealed `.om` file. The backend writes
these types and the simulator reads them; neither imports the other.
"""

from ge.om.memory import ALIGNMENT, REGION_ORDER, MemoryPlan, Placement, Region
from ge.om.model import FORMAT_VERSION, Model, OmError, TensorDesc, read, write
from ge.om.tasks import (
    TASK_KINDS,
    AicpuTask,
    Arg,
    DeviceCopyTask,
    Direction,
    EventRecordTask,
    EventWaitTask,
    KernelTask,
    LabelGotoTask,
    LabelSetTask,
    LabelSwitchTask,
    MemcpyTask,
    ModelEndGraphTask,
    StreamActiveTask,
    Task,
)

__all__ = [
    "ALIGNMENT", "FORMAT_VERSION", "REGION_ORDER", "TASK_KINDS", "AicpuTask", "Arg", "DeviceCopyTask", "Direction",
    "EventRecordTask", "EventWaitTask", "KernelTask", "LabelGotoTask", "LabelSetTask", "LabelSwitchTask", "MemcpyTask",
    "MemoryPlan", "Model", "ModelEndGraphTask", "OmError", "Placement", "Region", "StreamActiveTask", "Task", "TensorDesc", "read", "write",
]

"""The foundation under passes and engine alike: errors, dtypes, the weight store,
SoC profiles and the op information library (data files), the precision option
files, the IR context and the numpy reference interpreter.

Everything here imports only `dialects` and other `ge.core` modules, so a pass can
use any of it without pulling in the engine (pipeline, backend, simulator, CLI).
"""

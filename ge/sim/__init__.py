"""The AI Core simulator: instruction costs (`costs`), fitted to and checked against
the measured tables of `calibration_data/` (`calibration`); a `.om`'s kernels
decoded for timing (`program`); block, core and task timing (`timing`); the
numerics in device memory (`kernels`); the runtime that runs a model's task list
(`runtime`); several models side by side on slices of one chip, sharing its GM
bandwidth (`chip`); and what a run measured (`profile`).

The simulator reads kernels and SoC profiles only; it imports neither the passes nor
the frontend.
"""

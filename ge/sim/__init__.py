"""The AI Core simulator: instruction costs (`costs`), fitted to and checked against
the measured tables of `../shared/calibration/` (`calibration`).

The simulator reads kernels and SoC profiles only; it imports neither the passes nor
the frontend.
"""

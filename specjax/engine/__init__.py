"""The engine layer: grids on the device, the jitted sweep kernel and its plan, the sweep runner,
and validation and calibration against measurements."""

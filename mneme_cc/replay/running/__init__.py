"""Running: an instance put on the device (the only code that calls the CUDA
driver, one module per backend), restored, launched and timed.

    from mneme_cc.replay.running import Replayer
"""

from __future__ import annotations

__all__ = ["DeviceError", "DeviceState", "ExpectedOutput", "LaunchTimer", "Replayer"]

_HOME = {"DeviceError": "device", "DeviceState": "device_state", "ExpectedOutput": "expected",
         "LaunchTimer": "timer", "Replayer": "replayer"}


def __getattr__(name: str):
    # The CUDA bindings load only when a name that needs them is asked for.
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(name)

"""`copy_chunks`: a recorded region's chunks, copied to the device as they are read.

A region is not built in host memory first: each distinct chunk goes to the
device once, as the readers (`Region.placed_chunks`) hand it over, and a
chunk listed again (a buffer of zeros) is copied on the device from its
first place.
"""

from __future__ import annotations

import numpy as np

from mneme_cc.replay.running import device as dev


def copy_chunks(device: dev.Device, address: int, region) -> None:
    """Writes the chunks `region` lists (an epilogue's: its changes only) to
    the device memory at `address`, which holds `region.size` bytes."""
    for start, length, piece in region.placed_chunks():
        if isinstance(piece, int):  # listed before: copied from where it went
            device.copy_dtod(address + start, address + piece, length, "restoring memory")
        else:
            dev.copy_to_device(address + start, np.frombuffer(piece, np.uint8))

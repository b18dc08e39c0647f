"""`ExpectedOutput`: the recorded epilogue, as verification reads it.

Each region is read (and decompressed) once; a region's device copy, which
the comparer checks the replayed buffer against, is made on first use and
kept until the session closes. Where the session keeps a device copy of
the allocation's prologue, the expected copy is that copy with the
recorded changes written over it, so the prologue is not read again; an
allocation the kernel leaves alone is copied from itself as the session
restores it, before any launch.
"""

from __future__ import annotations

import numpy as np

from mneme_cc.replay.running import device as dev
from mneme_cc.replay.running.chunk_copies import copy_chunks


class ExpectedOutput:
    """Owned by DeviceState, which closes it."""

    def __init__(self, device: dev.Device):
        self.device = device
        self._host: dict[tuple[int, str, int], np.ndarray] = {}
        self._on_device: dict[int, int] = {}  # region address -> its device copy
        # Region address -> (a device copy of its prologue, its size): DeviceState's, not freed here.
        self.prologues: dict[int, tuple[int, int]] = {}

    def host(self, region) -> np.ndarray:
        """The region's recorded epilogue."""
        key = (region.kind, region.name, region.address)
        if key not in self._host:
            self._host[key] = region.read()
        return self._host[key]

    def on_device(self, region) -> int:
        """The address of a device copy of the region's recorded epilogue."""
        if region.address not in self._on_device:
            copy = self.device.alloc(max(region.size, 1), "allocating")
            prologue = self._prologue_copy(region)
            try:
                if prologue is None:
                    dev.copy_to_device(copy, self.host(region))
                else:
                    if region.size:
                        self.device.copy_dtod(copy, prologue, region.size,
                                              "copying the prologue")
                    copy_chunks(self.device, copy, region)
                # Compared on the session's stream, which does not wait for these copies.
                self.device.finish_copies("copying the recorded epilogue")
            except BaseException:
                self.device.free(copy)
                raise
            self._on_device[region.address] = copy
        return self._on_device[region.address]

    def keep_as_restored(self, region) -> None:
        """The device copy of an epilogue's allocation that lists no change,
        made from the allocation itself: only right after its prologue's
        restore, before any launch (DeviceState waits for the copies)."""
        if region.address in self._on_device or region.chunks:
            return
        copy = self.device.alloc(max(region.size, 1), "allocating")
        try:
            if region.size:
                self.device.copy_dtod(copy, region.address, region.size, "copying the prologue")
        except BaseException:
            self.device.free(copy)
            raise
        self._on_device[region.address] = copy

    def _prologue_copy(self, region) -> int | None:
        """Where the device holds the prologue of an epilogue's allocation of
        the same size, to write its changes over; None: read it from the database."""
        copy, size = self.prologues.get(region.address, (None, None))
        return copy if region.lists_changes and size == region.size else None

    def close(self) -> None:
        for copy in self._on_device.values():
            self.device.free(copy)
        self._on_device.clear()

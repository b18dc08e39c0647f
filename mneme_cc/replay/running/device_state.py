"""`DeviceState`: a recorded instance's memory on the device, for one session.

Opening it reserves the recorded VA window, maps the prologue's allocations
and copies their contents in, and keeps device copies of what a launch may
change: every allocation the kernel writes (from which verification's
expected copy is made, with the recorded changes), every global. `restore()`
queues their device-to-device restore before a launch, so each launch sees
the recorded input and restoring never waits on the host (timed launches
queue behind a gate). It also holds the recorded epilogue that verification
compares against. `close()` frees all of it, the window last.
"""

from __future__ import annotations

from mneme_cc.errors import RecordDBError
from mneme_cc.record.db import ALLOCATION, GLOBAL, Instance
from mneme_cc.replay.output import SavedRegion
from mneme_cc.replay.running import device as dev
from mneme_cc.replay.running.chunk_copies import copy_chunks
from mneme_cc.replay.running.expected import ExpectedOutput


class DeviceCopies:
    """Device copies of recorded regions, each kept with where it is restored
    to (an address or a global's name) and its size; freed together."""

    def __init__(self, device: dev.Device):
        self.device = device
        self.entries: list[tuple] = []  # (destination, copy, size)

    def add(self, destination, copy: int, size: int) -> None:
        """Takes ownership of `copy`."""
        self.entries.append((destination, copy, size))

    def close(self) -> None:
        for _, copy, _ in self.entries:
            self.device.free(copy)
        self.entries.clear()


class DeviceState:
    """Opened with the session, after its Device and before anything else
    takes device addresses; closed before the Device."""

    def __init__(self, device: dev.Device, instance: Instance):
        self.device, self.instance = device, instance
        w = instance.window
        self.window = dev.Window(device, w["base"], w["size"], w["granularity"])
        self.written = DeviceCopies(device)    # by address: the allocations the kernel writes
        self.globals = DeviceCopies(device)    # by name: every global of the prologue
        self.expected = ExpectedOutput(device)
        try:
            self._restore_prologue()
            device.finish_copies("restoring memory")
        except BaseException:
            self.close()
            raise

    def _restore_prologue(self) -> None:
        prologue, epilogue = self.instance.prologue, self.instance.epilogue
        for region in prologue.allocations:
            self.window.map(region.address, region.size)
            copy_chunks(self.device, region.address, region)
        for region in prologue.allocations:
            try:
                after = epilogue.region(region.address, region.kind, region.name)
            except KeyError:
                raise RecordDBError(f"{epilogue.path}: lacks the allocation at "
                                    f"{region.address:#x} its prologue has (the database is "
                                    "damaged)") from None
            if after.chunks:
                copy = self.device.alloc(region.size, "allocating a pristine copy")
                self.written.add(region.address, copy, region.size)
                self.device.copy_dtod(copy, region.address, region.size, "copying")
                self.expected.prologues[region.address] = (copy, region.size)
            else:  # left alone by the kernel: as restored now, it is its own epilogue
                self.expected.keep_as_restored(after)
        for g in prologue.globals:
            copy = self.device.alloc(max(g.size, 1), "allocating a global's copy")
            self.globals.add(g.name, copy, g.size)
            dev.copy_to_device(copy, g.read())

    @property
    def written_addresses(self) -> set[int]:
        return {address for address, _, _ in self.written.entries}

    def restore(self, globals_: dict[str, int]) -> None:
        """Queues the restore of the written allocations and of the globals the
        loaded module has (`globals_`: name -> its address in the module)."""
        for address, copy, size in self.written.entries:
            self.device.copy_dtod_async(address, copy, size, "restoring")
        for name, copy, size in self.globals.entries:
            if name in globals_ and size:
                self.device.copy_dtod_async(globals_[name], copy, size, "restoring")

    def put_back(self, region) -> None:
        """Writes the recorded bytes of an allocation the recording never wrote
        (an epilogue's region that lists no change) into it again: from
        verification's device copy, which holds them, not from the database."""
        if region.size:
            self.device.copy_dtod(region.address, self.expected.on_device(region), region.size,
                                  "restoring memory")
        self.device.finish_copies("restoring memory")  # before the stream's next launch

    def output_addresses(self, globals_: dict[str, int]) -> list[tuple]:
        """(region, where it is now) for each region the recorded epilogue
        covers: an allocation at its address, a global in the loaded module."""
        out = []
        for region in self.instance.epilogue.regions:
            if region.kind == ALLOCATION:
                out.append((region, region.address))
            elif region.kind == GLOBAL and region.name in globals_:
                out.append((region, globals_[region.name]))
        return out

    def output_regions(self, globals_: dict[str, int]) -> list[SavedRegion]:
        """The device state the recorded epilogue covers, read back now."""
        return [SavedRegion(region.kind, region.name, region.address,
                            dev.copy_from_device(address, region.size))
                for region, address in self.output_addresses(globals_)]

    def close(self) -> None:
        self.written.close()
        self.globals.close()
        self.expected.close()
        self.window.close()  # unmaps and frees what was mapped

"""The device layer of replay: the only code that calls the GPU's driver.

This backend is CUDA's, through cuda-bindings (the driver API). The rest of
mneme-cc reaches the GPU through the names below alone, so a HIP backend
(hip-python) is one more module that offers them:

- `Device`: one GPU's primary context and the stream replay works on, with
  what replay does there: device memory (alloc, free, copies, memset),
  modules (`load_module` gives a `Module`: its kernels and globals),
  launches, occupancy and a kernel's limits, events and the time between
  them, synchronisation, device attributes;
- `Window`: the recorded VA window, reserved at its recorded base before
  anything else takes device addresses, and mapped per recorded allocation;
- `LaunchGate`: holds the stream while timed launches are issued;
- `KernelParams`, `copy_to_device`, `copy_from_device`, `check`, `DeviceError`.

Calls that free or unload are unchecked: a session closes after a kernel
fault too, when the context refuses them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from mneme_cc.errors import MnemeError
from mneme_cc.replay.running.cuda_bindings import cuda_bindings


class DeviceError(MnemeError):
    """The GPU, its driver or the recorded window is not usable for replay.

    `code` is the driver's error name (CUDA_ERROR_...) when a call failed.
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


def _driver():
    return cuda_bindings("driver")


def check(result, what: str):
    """Unpacks a driver call's (error, values...) tuple; raises DeviceError on failure."""
    drv = _driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        code = name.decode() if name else str(err)
        raise DeviceError(f"{what}: {code}", code)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@dataclass
class Mapping:
    address: int
    size: int
    handle: object


class Device:
    """One GPU's primary context, made current for this thread, and the
    non-blocking stream that every asynchronous call below is issued on."""

    def __init__(self, ordinal: int = 0):
        drv = _driver()
        try:
            err, = drv.cuInit(0)
        except Exception:  # noqa: BLE001 - cuda-bindings raises when libcuda is absent
            raise DeviceError("no NVIDIA driver here (libcuda cannot be loaded): replay needs "
                              "an NVIDIA GPU") from None
        if err != drv.CUresult.CUDA_SUCCESS:
            raise DeviceError("no usable NVIDIA GPU: the CUDA driver did not initialise "
                              f"({err.name}); replay needs one")
        count = check(drv.cuDeviceGetCount(), "counting GPUs")
        if ordinal >= count:
            raise DeviceError(f"no GPU {ordinal}: this machine has {count}")
        self.ordinal = ordinal
        self.handle = check(drv.cuDeviceGet(ordinal), "opening the GPU")
        self.context = check(drv.cuDevicePrimaryCtxRetain(self.handle), "creating a context")
        check(drv.cuCtxSetCurrent(self.context), "activating the context")
        major = self.attribute("compute_capability_major", "reading the arch")
        minor = self.attribute("compute_capability_minor", "reading the arch")
        self.arch = f"sm_{major}{minor}"
        self.name = check(drv.cuDeviceGetName(256, self.handle), "naming the GPU")
        self.name = self.name.split(b"\0")[0].decode()
        self.stream = check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING),
                            "creating a stream")

    def close(self) -> None:
        drv = _driver()
        drv.cuStreamDestroy(self.stream)
        drv.cuDevicePrimaryCtxRelease(self.handle)

    def attribute(self, name: str, what: str) -> int:
        """A device attribute by its name in lower case ("l2_cache_size")."""
        drv = _driver()
        attr = getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name.upper()}")
        return int(check(drv.cuDeviceGetAttribute(attr, self.handle), what))

    # -- device memory (outside the window) --------------------------------

    def alloc(self, size: int, what: str) -> int:
        return int(check(_driver().cuMemAlloc(size), what))

    def free(self, address: int) -> None:
        _driver().cuMemFree(address)  # unchecked (see the module's docstring)

    def copy_dtod(self, destination: int, source: int, size: int, what: str) -> None:
        check(_driver().cuMemcpyDtoD(destination, source, size), what)

    def copy_dtod_async(self, destination: int, source: int, size: int, what: str) -> None:
        check(_driver().cuMemcpyDtoDAsync(destination, source, size, self.stream), what)

    def copy_to_device_async(self, address: int, data: np.ndarray, what: str) -> None:
        """Queues a copy of host memory on the stream, behind what is queued
        there; pageable memory is staged before this returns, so `data` may go."""
        if data.size:
            check(_driver().cuMemcpyHtoDAsync(address, data.ctypes.data, data.nbytes,
                                              self.stream), what)

    def memset_async(self, address: int, byte: int, size: int, what: str) -> None:
        check(_driver().cuMemsetD8Async(address, byte, size, self.stream), what)

    # -- code ----------------------------------------------------------------

    def load_module(self, image: bytes, what: str) -> Module:
        """Loads a cubin or fatbinary into the context."""
        return Module(check(_driver().cuModuleLoadData(image), what))

    def launch(self, function, grid, block, shared_bytes: int, params: int, *,
               cooperative: bool = False, what: str = "launching the kernel") -> None:
        """Queues a launch; `params` is the address of its void** parameters."""
        drv = _driver()
        if cooperative:
            result = drv.cuLaunchCooperativeKernel(function, *grid, *block, shared_bytes,
                                                   self.stream, params)
        else:
            result = drv.cuLaunchKernel(function, *grid, *block, shared_bytes, self.stream,
                                        params, 0)
        check(result, what)

    def allow_shared_memory(self, function, shared_bytes: int) -> None:
        """Lets the kernel take more dynamic shared memory than the default 48 KiB."""
        drv = _driver()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(drv.cuFuncSetAttribute(function, attr, shared_bytes), "allowing shared memory")

    def occupancy(self, function, threads: int, shared_bytes: int) -> int:
        """How many blocks of the kernel one multiprocessor holds at once."""
        return int(check(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(
            function, threads, shared_bytes), "computing occupancy"))

    def max_threads_per_block(self, function) -> int:
        """The largest block the compiled kernel can be launched with."""
        drv = _driver()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        return int(check(drv.cuFuncGetAttribute(attr, function), "reading the kernel's limits"))

    # -- ordering and time ---------------------------------------------------

    def synchronize(self, what: str) -> None:
        """Waits for everything queued on the stream; a kernel's fault surfaces here."""
        check(_driver().cuStreamSynchronize(self.stream), what)

    def finish_copies(self, what: str) -> None:
        """Waits for the synchronous-API copies (`copy_dtod`, `copy_to_device`):
        a device-to-device one returns before it is done, and the stream does
        not wait for them."""
        check(_driver().cuCtxSynchronize(), what)

    def create_event(self):
        return check(_driver().cuEventCreate(0), "creating an event")

    def destroy_event(self, event) -> None:
        _driver().cuEventDestroy(event)  # unchecked (see the module's docstring)

    def record_event(self, event, what: str) -> None:
        check(_driver().cuEventRecord(event, self.stream), what)

    def wait_event(self, event, what: str) -> None:
        check(_driver().cuEventSynchronize(event), what)

    def elapsed_ms(self, start, stop, what: str) -> float:
        return float(check(_driver().cuEventElapsedTime(start, stop), what))


class Module:
    """A module loaded into the context: its kernels and its globals."""

    def __init__(self, handle):
        self.handle = handle

    def function(self, name: str, what: str):
        return check(_driver().cuModuleGetFunction(self.handle, name.encode()), what)

    def global_address(self, name: str) -> int | None:
        """Where the module keeps the global `name`; None when it has none of that name."""
        drv = _driver()
        err, address, _ = drv.cuModuleGetGlobal(self.handle, name.encode())
        return int(address) if err == drv.CUresult.CUDA_SUCCESS else None

    def unload(self) -> None:
        _driver().cuModuleUnload(self.handle)  # unchecked: after a kernel fault it cannot succeed


class Window:
    """The recorded VA window, reserved at its recorded base, mapped per allocation."""

    def __init__(self, device: Device, base: int, size: int, granularity: int):
        drv = _driver()
        self.device, self.base, self.size = device, base, size
        prop = drv.CUmemAllocationProp()
        prop.type = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = device.ordinal
        self.prop = prop
        self.granule = check(drv.cuMemGetAllocationGranularity(
            prop, drv.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "reading the allocation granularity")
        if granularity % self.granule:
            raise DeviceError(f"the recording used {granularity}-byte granules; this GPU maps "
                              f"{self.granule}-byte ones")
        err, got = drv.cuMemAddressReserve(size, self.granule, base, 0)
        if err != drv.CUresult.CUDA_SUCCESS or int(got) != base:
            if err == drv.CUresult.CUDA_SUCCESS:
                drv.cuMemAddressFree(got, size)
            raise DeviceError(f"the recorded VA window [{base:#x}, {base + size:#x}) is not "
                              "available in this process (something else holds part of it)")
        self.mappings: list[Mapping] = []

    def map(self, address: int, size: int) -> None:
        """Backs [address, address + size) with device memory (whole granules)."""
        drv = _driver()
        start = address // self.granule * self.granule
        end = -(-(address + size) // self.granule) * self.granule
        for m in self.mappings:  # skip granules already mapped
            if m.address <= start < m.address + m.size:
                start = m.address + m.size
            if m.address < end <= m.address + m.size:
                end = m.address
        if start >= end:
            return
        handle = check(drv.cuMemCreate(end - start, self.prop, 0), "allocating device memory")
        check(drv.cuMemMap(start, end - start, 0, handle, 0), "mapping the window")
        access = drv.CUmemAccessDesc()
        access.location = self.prop.location
        access.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        check(drv.cuMemSetAccess(start, end - start, [access], 1), "mapping the window")
        self.mappings.append(Mapping(start, end - start, handle))

    def close(self) -> None:
        drv = _driver()
        for m in self.mappings:
            drv.cuMemUnmap(m.address, m.size)
            drv.cuMemRelease(m.handle)
        drv.cuMemAddressFree(self.base, self.size)


class LaunchGate:
    """Holds a stream until the host has issued what follows, then lets it go.

    Events around a launch on an idle stream also measure the host's launch
    call (microseconds, more than a small kernel runs). With the stream held
    at the gate while the start event, the launch and the stop event are
    issued, the interval between the events is the kernel's execution alone.
    Only for a single-threaded caller whose kernel is already loaded (a lazy
    module load may synchronise the context, which would wait on the gate):
    the replayer times after its verified first launch. The recorder, inside
    a multi-threaded application, uses a spin kernel instead.
    """

    def __init__(self):
        drv = _driver()
        self._word = int(check(drv.cuMemHostAlloc(4, drv.CU_MEMHOSTALLOC_DEVICEMAP),
                               "allocating the launch gate"))
        self._value = ctypes.c_uint32.from_address(self._word)
        self._value.value = 0
        self._device_word = check(drv.cuMemHostGetDevicePointer(self._word, 0),
                                  "mapping the launch gate")
        self._ticket = 0

    def hold(self, stream) -> None:
        drv = _driver()
        self._ticket = (self._ticket + 1) & 0xFFFFFFFF
        check(drv.cuStreamWaitValue32(stream, self._device_word, self._ticket,
                                      drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ),
              "holding the stream")

    def open(self) -> None:
        self._value.value = self._ticket

    def close(self) -> None:
        _driver().cuMemFreeHost(self._word)


def copy_to_device(address: int, data: np.ndarray, what: str = "restoring memory") -> None:
    drv = _driver()
    if data.size:
        check(drv.cuMemcpyHtoD(address, data.ctypes.data, data.nbytes), what)


def copy_from_device(address: int, size: int, what: str = "reading memory back") -> np.ndarray:
    drv = _driver()
    out = np.empty(size, np.uint8)
    if size:
        check(drv.cuMemcpyDtoH(out.ctypes.data, address, size), what)
    return out


class KernelParams:
    """The recorded parameter buffer as the void** cuLaunchKernel wants."""

    def __init__(self, args: bytes, params: list[dict[str, int]]):
        self._buffers = [ctypes.create_string_buffer(args[p["offset"]:p["offset"] + p["size"]],
                                                     max(p["size"], 1)) for p in params]
        self._pointers = (ctypes.c_void_p * max(len(params), 1))(
            *[ctypes.addressof(b) for b in self._buffers])

    @property
    def address(self) -> int:
        return ctypes.addressof(self._pointers)

"""The device layer of replay: a recorded instance's world on a real GPU.

Through cuda-bindings (the driver API): reserve the recorded VA window at
its recorded base before anything else, map physical memory for exactly the
recorded allocations, restore the prologue once and keep a pristine copy on
the device, then restore written allocations device-to-device before every
launch. Kept behind this one module so another backend is another module.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from mneme_cc.errors import MnemeError, ToolchainError


class DeviceError(MnemeError):
    """The GPU, its driver or the recorded window is not usable for replay.

    `code` is the driver's error name (CUDA_ERROR_...) when a call failed.
    """

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


def _driver():
    try:
        import cuda.bindings.driver as driver
    except ImportError:
        raise ToolchainError("replay needs cuda-bindings: pip install 'mneme-cc[cuda]'") from None
    return driver


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
    """One GPU's primary context, made current for this thread."""

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
        attr = drv.CUdevice_attribute
        major = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                               self.handle), "reading the arch")
        minor = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                               self.handle), "reading the arch")
        self.arch = f"sm_{major}{minor}"
        self.name = check(drv.cuDeviceGetName(256, self.handle), "naming the GPU")
        self.name = self.name.split(b"\0")[0].decode()
        self.stream = check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING),
                            "creating a stream")

    def close(self) -> None:
        drv = _driver()
        drv.cuStreamDestroy(self.stream)
        drv.cuDevicePrimaryCtxRelease(self.handle)


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


def copy_to_device(address: int, data: np.ndarray) -> None:
    drv = _driver()
    if data.size:
        check(drv.cuMemcpyHtoD(address, data.ctypes.data, data.nbytes), "restoring memory")


def copy_from_device(address: int, size: int) -> np.ndarray:
    drv = _driver()
    out = np.empty(size, np.uint8)
    if size:
        check(drv.cuMemcpyDtoH(out.ctypes.data, address, size), "reading memory back")
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

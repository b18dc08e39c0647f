"""What a search space may know of the GPU: its real limits, queried."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    arch: str                        # "sm_90"
    multiprocessors: int
    max_threads_per_block: int
    max_threads_per_multiprocessor: int
    max_blocks_per_multiprocessor: int
    max_registers_per_block: int
    max_shared_per_block_optin: int  # bytes, with the opt-in attribute
    warp_size: int = 32

    @classmethod
    def query(cls, ordinal: int = 0) -> DeviceProperties:
        """The properties of GPU `ordinal`, read from the driver."""
        from mneme_cc.replay import device as dev

        gpu = dev.Device(ordinal)
        try:
            drv = dev._driver()
            attr = drv.CUdevice_attribute

            def get(name: str) -> int:
                return int(dev.check(drv.cuDeviceGetAttribute(getattr(attr, name), gpu.handle),
                                     "reading the GPU's properties"))

            return cls(
                name=gpu.name, arch=gpu.arch,
                multiprocessors=get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                max_threads_per_block=get("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
                max_threads_per_multiprocessor=get(
                    "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
                max_blocks_per_multiprocessor=get(
                    "CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"),
                max_registers_per_block=get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
                max_shared_per_block_optin=get(
                    "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
                warp_size=get("CU_DEVICE_ATTRIBUTE_WARP_SIZE"))
        finally:
            gpu.close()

    def to_dict(self) -> dict:
        return asdict(self)

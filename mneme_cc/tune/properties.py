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
        """The properties of GPU `ordinal`, read through the device layer."""
        from mneme_cc.replay.running import device as dev

        gpu = dev.Device(ordinal)
        try:
            def get(name: str) -> int:
                return gpu.attribute(name, "reading the GPU's properties")

            return cls(
                name=gpu.name, arch=gpu.arch,
                multiprocessors=get("multiprocessor_count"),
                max_threads_per_block=get("max_threads_per_block"),
                max_threads_per_multiprocessor=get("max_threads_per_multiprocessor"),
                max_blocks_per_multiprocessor=get("max_blocks_per_multiprocessor"),
                max_registers_per_block=get("max_registers_per_block"),
                max_shared_per_block_optin=get("max_shared_memory_per_block_optin"),
                warp_size=get("warp_size"))
        finally:
            gpu.close()

    def to_dict(self) -> dict:
        return asdict(self)

"""Deploy: tuned kernels as deployable units (bundles), and the rules that
decide which launch of the application a unit serves.

    from mneme_cc.deploy import load_bundle
    bundle = load_bundle("tuned")
    entry, why = bundle.match(kernel, arch, ir_sha256, grid, block, shared_mem_bytes)
"""

from __future__ import annotations

__all__ = ["Bundle", "BundleEntry", "load_bundle", "write_bundle"]


def __getattr__(name: str):
    if name in __all__:
        from mneme_cc.deploy import bundle

        return getattr(bundle, name)
    raise AttributeError(name)

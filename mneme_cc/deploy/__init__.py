"""Deploy: tuned kernels as deployable units (bundles), the rules that decide
which launch of the application a unit serves, and running the application
with them served (`mneme run --tuned`).

    from mneme_cc.deploy import load_bundle, run_tuned, RunSettings
    bundle = load_bundle("tuned")
    entry, why = bundle.match(kernel, arch, ir_sha256, grid, block, shared_mem_bytes)
    report = run_tuned(RunSettings(Path("tuned")), ["./app", "64"])
"""

from __future__ import annotations

_EXPORTS = {
    "Bundle": "bundle", "BundleEntry": "bundle", "load_bundle": "bundle",
    "write_bundle": "bundle",
    "ServingTable": "serving", "write_table": "serving", "serve_shape": "serving",
    "KernelReport": "report", "RunReport": "report", "read_reports": "report",
    "format_report": "report",
    "RunSettings": "run", "run_tuned": "run",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"mneme_cc.deploy.{_EXPORTS[name]}"), name)
    raise AttributeError(name)

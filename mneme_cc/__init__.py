"""mneme-cc: record GPU kernel launches and replay them as experiments.

Kept import-light: the compiler drivers import this package on every
compile.
"""

from mneme_cc.errors import MnemeError

__all__ = ["MnemeError", "__version__"]

__version__ = "0.2.0"

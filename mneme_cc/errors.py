"""The exceptions mneme-cc raises.  Catch `MnemeError` for all of them."""


class MnemeError(Exception):
    """Root of every error mneme-cc reports to a user."""


class ToolchainError(MnemeError):
    """clang, the pass plugin or the CUDA toolkit is missing or mismatched."""


class UsageError(MnemeError):
    """A setting or argument the user gave is not valid."""


class BinaryFormatError(MnemeError):
    """A file is not a readable ELF object, or its embedded IR is corrupt."""


class RecordDBError(MnemeError):
    """A record database is missing, damaged, or of another format version."""

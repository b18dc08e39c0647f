"""`mneme-cc`: drop-in clang for C and CUDA (logic in mneme_cc.driver)."""

from mneme_cc.driver import run


def main() -> None:
    run("c", "mneme-cc")

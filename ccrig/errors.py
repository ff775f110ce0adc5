"""The two kinds of failure ccrig reports, and their exit codes.

InputError: the researcher's input is wrong (spec, arguments, missing file, missing privilege or kernel
feature found in preflight). Exit code 2, nothing was set up.
RunError: something failed while running. Exit code 1; teardown still ran and finished points are kept.
"""


class CcrigError(Exception):
    exit_code = 1


class InputError(CcrigError):
    exit_code = 2


class RunError(CcrigError):
    exit_code = 1


def field_error(path: str, value, accepted: str) -> InputError:
    """The one shape every input error takes: where, what was given, what would be accepted."""
    return InputError(f"{path}: got {value!r}; expected {accepted}")

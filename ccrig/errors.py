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


class PathError(RunError):
    """The emulated path, not the rig, kept a repetition from measuring: a flow's connection whose handshake the
    path's random loss kept from opening (at PER 0.4 the SYN and SYN-ACK both get through with probability 0.36,
    and iperf3 gives up after the kernel's retries). The repetition is spoiled, not failed: it runs again, as one
    whose fidelity was not ok does (experiments/run/reruns.py), and only a pair it keeps spoiling fails."""


def field_error(path: str, value, accepted: str) -> InputError:
    """The one shape every input error takes: where, what was given, what would be accepted."""
    return InputError(f"{path}: got {value!r}; expected {accepted}")

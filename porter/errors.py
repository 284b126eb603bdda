"""One exception type for every problem a user can cause.

The CLI turns a PorterError into one line on stderr and exit code 2, never a traceback.
Messages name the file, tensor, op or byte offset at fault.
"""


class PorterError(Exception):
    """A problem with the user's input or environment, reported as one line."""

    exit_code = 2

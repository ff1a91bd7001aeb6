"""The one exception type for bad user input.

Every problem with a factory, a graph file or a plan is raised as a
:class:`RematInputError` whose message is one line naming the file (and the
node, where one is at fault). The command line prints it and exits with code 2,
without a traceback.
"""


class RematInputError(Exception):
    """Bad input: one line naming the file and, where one is at fault, the node."""

    def __init__(self, msg: object = "") -> None:
        # one line whatever it quotes: a factory's or torch's own message may hold
        # newlines (torchvision's maxvit printed three lines after "error:")
        super().__init__(" ".join(str(msg).split()))


def quote_error(e: BaseException, with_type: bool = True) -> str:
    """Another exception as a :class:`RematInputError` quotes it: ``Type: first line``.

    Only the first line: what follows it is for a debugger, not for the user. A torch
    error raised in C++ carries the c10 frame dump (``Exception raised from ...
    frame #0: c10::Error::Error(...)``: a 1,465-character error line for an
    overflowing ``--batch``), a fake-tensor failure the traced code.
    """
    text = str(e)
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    if not with_type:
        return line or type(e).__name__
    return f"{type(e).__name__}: {line}" if line else type(e).__name__

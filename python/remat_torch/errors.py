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

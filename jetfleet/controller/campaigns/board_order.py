"""The order in which each board runs a campaign's commands, as far as the controller knows it.

An agent runs the profiles it is sent one after the other, in the order sent. When a board vanishes (its agent
died, its link was cut) or stalls (no answer in time), the modes sent to it after the one it was running were only
waiting behind it: charging them an attempt too would fail innocent modes with a poisoned one (up to 32 of them
on a twin's pipeline). So the controller keeps, per board, the commands sent there that are not known to be
finished, in the order first sent (a resend of the same command id keeps its place: the agent joins the run it
has). A result finishes its command and every command sent there before it; a command refused at once, or never
delivered, leaves only its own place; a new agent process (another instance id in its hello) forgot them all.
"""

from __future__ import annotations


class BoardOrder:
    """Per board: command id -> the order it was first sent in, all sent to one agent process."""

    def __init__(self) -> None:
        self._boards: dict[str, dict[str, int]] = {}   # kept in the order first sent (a dict keeps insertion order)
        self._instance: dict[str, str] = {}            # device -> the agent process they were sent to
        self._n = 0

    def sent(self, device: str, command_id: str, instance: str) -> bool:
        """``command_id`` goes to ``device``, whose agent process is ``instance``: last in line where it is new (True),
        in its place where it was sent before (False)."""
        q = self._boards.setdefault(device, {})
        if self._instance.get(device, instance) != instance:   # a new agent process: the last one's commands are gone
            q.clear()
        self._instance[device] = instance
        if command_id in q:
            return False
        self._n += 1
        q[command_id] = self._n
        return True

    def finished(self, device: str, command_id: str) -> None:
        """The board sent ``command_id``'s result: it and every command sent there before it are done."""
        q = self._boards.get(device)
        at = q.get(command_id) if q else None
        if q is None or at is None:
            return
        done = []
        for c, n in q.items():   # in the order sent: those up to it
            if n > at:
                break
            done.append(c)
        for c in done:
            del q[c]

    def dropped(self, device: str, command_id: str) -> None:
        """``command_id`` never reached the board, or the board refused or failed it: only its own place is freed
        (a refusal comes at once, while what was sent before it may still run)."""
        q = self._boards.get(device)
        if q:
            q.pop(command_id, None)

    def behind(self, device: str, command_id: str) -> bool:
        """True when a command sent to the board before ``command_id`` is not known to be finished: ``command_id``
        was waiting behind it."""
        q = self._boards.get(device)
        return q is not None and command_id in q and next(iter(q)) != command_id

    def waiting(self, device: str) -> list[str]:
        """The commands on ``device`` not known to be finished, in the order sent."""
        return list(self._boards.get(device, ()))

    def clear(self) -> None:
        """Forget every board (the campaign ended)."""
        self._boards.clear()
        self._instance.clear()

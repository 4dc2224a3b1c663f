"""Placement: which queued jobs start, and on which free boards (``FleetScheduler.schedule``).

Queued jobs in order (priority, deadline, arrival) go to the free board that gives the best joint value, if the
joint value with them is at least the value without (otherwise they wait: the caps do not allow them yet). A
job *waits* for a busy board of a faster model when it would still finish WAIT_GAIN sooner there, and jobs
placed in one pass swap boards pairwise while the joint value grows.

In a small lab every free board is tried with an exact joint choice per job (as many solves as boards). With
more than EXACT_PLACED jobs placed a job is judged at the joint choice's prices instead (the value of its best
option less the watts it adds, priced at the lab's and its rack's value per watt: ``_worths``), only a
few representative boards per model and rack are looked at, whether its lowest mode fits is checked exactly,
and the joint choice is solved again after every batch of starts (an eighth of those placed): a pass over
2,000 queued jobs and 500 boards is then a few dozen solves instead of a million."""

from __future__ import annotations

import heapq
import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from jetfleet.controller.fleet.joint import TRIAL_GAP, TRIAL_NODES, JointRows
from jetfleet.controller.fleet.knapsack import GAP, Solution

if TYPE_CHECKING:
    from jetfleet.controller.fleet.scheduler import Board, FleetJob, FleetScheduler

WAIT_GAIN = 0.25         # a queued job waits for a busy faster board if it would finish this much sooner there
EXACT_PLACED = 24        # placed jobs up to which each placement is judged by exact joint choices
EXACT_BOARDS = 16        # free boards (of the job's models) up to which each is tried; more: representatives,
EXACT_TRIALS = 3         # of which the prices' best few are tried
BATCH_SHARE = 8          # above EXACT_PLACED: solved again after placed / BATCH_SHARE starts
EXACT_SWAPS = 12         # starts in one pass up to which every pair is tried for a swap
MAX_SWAP_TRIES = 16      # more starts: swaps tried (exactly), those the prices say gain most first


def place(s: FleetScheduler, rows: JointRows, placed: list[tuple[FleetJob, Board]],
          free: list[Board]) -> tuple[list[FleetJob], Solution | None]:
    """Place queued jobs on ``free`` boards (``placed`` and ``rows`` grow); the jobs started and the joint
    choice of everything placed."""
    best = rows.solve()
    if best is None:    # the running jobs do not fit even at their lowest modes: nothing more can start
        return [], None
    pool = _Pool(s, free)
    waits = _Waits(s)
    starts: list[FleetJob] = []
    refused: dict[tuple[object, ...], int] = {}   # a job like one refused since the last start is refused too
    version = pending = 0
    for job in sorted(s.queue, key=lambda j: j.key()):
        if not pool.left:
            break
        models = [m for m in job.candidates if pool.by_model.get(m)]
        sig = _signature(job)
        if not models or refused.get(sig) == version:
            continue
        exact = rows.n < s.exact_placed
        if exact and pool.count(models) <= EXACT_BOARDS:
            pick = _judge(s, rows, job, pool.boards(models), best, len(models) * EXACT_BOARDS)
        else:
            pick = _judge(s, rows, job, pool.representatives(models), best, EXACT_TRIALS if exact else 0)
        if pick is None:
            refused[sig] = version
            continue
        board, p, v, rk, solution = pick
        wait_for = waits.worth_waiting(job, board)
        if wait_for:
            waits.awaited.add(wait_for)
            continue
        rows.add(p, v, rk, board.idle_w)
        pool.take(board)
        placed.append((job, board))
        job.board, job.model = board.board_id, board.model
        starts.append(job)
        version += 1
        if solution is not None:
            best = solution
        else:
            pending += 1
            if pending >= max(1, rows.n // BATCH_SHARE):
                best, pending = rows.solve(), 0
                if best is None:   # cannot happen (each start's lowest mode was checked to fit); stop placing
                    break
    if len(starts) > 1 and best is not None:
        best = _swap(s, rows, placed, starts, best)
    if pending or (best is not None and best.gap > GAP):   # judged in trials to TRIAL_GAP: the choice to GAP
        best = rows.solve()
    return starts, best


Pick = tuple["Board", np.ndarray, np.ndarray, int, "Solution | None"]


def _judge(s: FleetScheduler, rows: JointRows, job: FleetJob, boards: list[Board], best: Solution,
           trials: int) -> Pick | None:
    """The board to start ``job`` on, with its options and the joint choice with it when it was solved; None
    when it must wait: its lowest mode fits on none, or the joint value would fall. The ``trials`` boards the
    prices rank highest are judged by solving the joint choice with the job (0: the prices alone decide)."""
    ranked: list[tuple[float, int, Pick]] = []
    for n, (b, w) in enumerate(zip(boards, _worths(s, rows, job, boards, best))):
        if w is not None:
            ranked.append((w[0], -n, (b, w[1], w[2], w[3], None)))
    if not ranked:
        return None
    if not trials:
        score, _, pick = max(ranked, key=lambda t: t[:2])
        b, p, _, rk, _ = pick
        if score < 0:
            return None
        if rows.price(best, rk) > 0 or rows.fits_beside(best, float(p.min()), rk, b.idle_w):
            return pick
        # No cap binds (the prices are 0), yet the job needs watts the running jobs use: judged exactly.
        return _judge(s, rows, job, [b], best, 1)
    solved: list[tuple[float, int, Pick]] = []
    for _, n, (b, p, v, rk, _) in sorted(ranked, key=lambda t: t[:2], reverse=True)[:trials]:
        r = rows.trial(p, v, rk, b.idle_w)
        if r is not None:
            solved.append((r.value, n, (b, p, v, rk, r)))
    if not solved:
        return None
    value, _, pick = max(solved, key=lambda t: t[:2])    # ties: the board listed first
    return pick if value >= best.value - best.gap * best.bound - 1e-9 else None


def _worths(s: FleetScheduler, rows: JointRows, job: FleetJob, boards: list[Board],
            prices: Solution) -> list[tuple[float, np.ndarray, np.ndarray, int] | None]:
    """What ``job`` is worth to a joint choice on each board, at the choice's prices (the Lagrangian estimate: the
    best of its options' value less the watts it adds over the board's idle draw, priced at the lab's and the
    board's rack's value per watt), None where its lowest mode does not fit (``JointRows.fits_lowest``); with its
    options there and the board's rack. The boards of a model that no job showed drawing more than predicted share
    the job's options: its best option per price is found once for them."""
    mu, nr = prices.mu, len(rows.domain.racks)
    price = [prices.lam + (mu[r] if r < len(mu) else 0.0) for r in range(nr)] + [prices.lam]   # last: no rack
    prices_np = np.array(price)
    shared: dict[str, tuple[np.ndarray, np.ndarray, list[float], float]] = {}
    out: list[tuple[float, np.ndarray, np.ndarray, int] | None] = []
    for b in boards:
        unseen = b.board_id not in s.board_ratio or math.isnan(s.board_ratio[b.board_id])
        hit = shared.get(b.model) if unseen else None
        if hit is None:
            p, v = s.row(job, b)
            hit = (p, v, (v[None, :] - prices_np[:, None] * p[None, :]).max(axis=1).tolist(), float(p.min()))
            if unseen:
                shared[b.model] = hit
        p, v, term, low = hit
        rk = rows.domain.rack(b.group)
        out.append((term[rk] + price[rk] * b.idle_w, p, v, rk) if rows.fits_lowest(low, rk, b.idle_w) else None)
    return out


class _Pool:
    """The free boards by model, in the order listed; the representatives (``_representatives``) of each (model,
    rack) kept until one of its boards is taken."""

    def __init__(self, s: FleetScheduler, free: list[Board]) -> None:
        self.s = s
        self.order = {id(b): i for i, b in enumerate(free)}
        self.by_model: dict[str, dict[int, Board]] = {}
        self.by_class: dict[tuple[str, str], dict[int, Board]] = {}
        for b in free:
            self.by_model.setdefault(b.model, {})[id(b)] = b
            self.by_class.setdefault((b.model, b.group), {})[id(b)] = b
        self.left = len(free)
        self._reps: dict[tuple[str, str], list[Board]] = {}

    def count(self, models: list[str]) -> int:
        """Free boards of these models."""
        return sum(len(self.by_model.get(m, {})) for m in models)

    def boards(self, models: list[str]) -> list[Board]:
        """The free boards of these models, in the order listed, one of each kind (boards of one model, rack and
        idle draw that no job showed drawing more than predicted are interchangeable)."""
        out: list[Board] = []
        kinds: set[object] = set()
        for b in sorted((b for m in models for b in self.by_model.get(m, {}).values()), key=lambda b: self.order[id(b)]):
            kind = (b.model, b.group, b.idle_w) if math.isnan(self.s.board_ratio.get(b.board_id, math.nan)) else b
            if kind not in kinds:
                kinds.add(kind)
                out.append(b)
        return out

    def representatives(self, models: list[str]) -> list[Board]:
        """A few of the free boards of each of these models (per rack), in the order listed."""
        out = []
        wanted = set(models)
        for c, boards in self.by_class.items():
            if c[0] in wanted and boards:
                if c not in self._reps:
                    self._reps[c] = _representatives(self.s, list(boards.values()))
                out += self._reps[c]
        return sorted(out, key=lambda b: self.order[id(b)])

    def take(self, board: Board) -> None:
        """A board is no longer free."""
        del self.by_model[board.model][id(board)]
        del self.by_class[(board.model, board.group)][id(board)]
        self._reps.pop((board.model, board.group), None)
        self.left -= 1


def _signature(job: FleetJob) -> tuple[object, ...]:
    """What the joint choice sees of a queued job: two jobs alike are placed alike."""
    return (job.priority, job.ratio, tuple((m, c.modes, float(c.time_ms[0]), float(c.power_hi_w[-1]))
                                           for m, c in sorted(job.candidates.items())))


def _representatives(s: FleetScheduler, boards: list[Board]) -> list[Board]:
    """Per (model, rack) of these boards: the one that draws most idle (its draw is what a job replaces) and the
    one that draws most idle among those no earlier job showed drawing more than predicted."""
    best: dict[tuple[str, str, bool], Board] = {}
    for b in boards:
        unseen = math.isnan(s.board_ratio.get(b.board_id, math.nan))
        for key in ((b.model, b.group, False), (b.model, b.group, True)):
            if key[2] and not unseen:
                continue
            if key not in best or b.idle_w > best[key].idle_w:
                best[key] = b
    return list({id(b): b for b in best.values()}.values())


class _Waits:
    """The busy boards a queued job might wait for, by model, soonest free first (``worth_waiting``)."""

    def __init__(self, s: FleetScheduler) -> None:
        self.awaited: set[str] = set()    # boards a queued job waits for (the next job does not count on them)
        self.heaps: dict[str, list[tuple[float, str]]] = {}
        for bid, other in s.running.items():
            b = s.board(bid)
            if not b.available:
                continue
            frees_s = (other.minibatches - other.done) * float(other.candidates[b.model].time_ms[other.option]) / 1e3
            self.heaps.setdefault(b.model, []).append((frees_s, bid))
        for h in self.heaps.values():
            heapq.heapify(h)

    def worth_waiting(self, job: FleetJob, board: Board) -> str:
        """A busy board of another model on which the job, started when that board frees (its job's remaining
        minibatches at its current mode), would still finish clearly sooner (by WAIT_GAIN) than on ``board`` at
        its fastest: that board's id (the job waits for it), else ''. Keeps long jobs off slow boards, which
        would otherwise set the makespan."""
        left = job.minibatches - job.done
        best_s = left * float(job.candidates[board.model].time_ms.min()) / 1e3 * (1 - WAIT_GAIN)
        best_bid = ""
        for model, heap in self.heaps.items():
            if model == board.model or model not in job.candidates:
                continue
            while heap and heap[0][1] in self.awaited:
                heapq.heappop(heap)
            if heap:
                there_s = heap[0][0] + left * float(job.candidates[model].time_ms.min()) / 1e3
                if there_s < best_s:
                    best_s, best_bid = there_s, heap[0][1]
        return best_bid


def _swap(s: FleetScheduler, rows: JointRows, placed: list[tuple[FleetJob, Board]], starts: list[FleetJob],
          best: Solution) -> Solution:
    """Jobs placed in one pass, greedily in queue order: exchange their boards pairwise while the joint value
    grows (two jobs on two board models are better matched the other way round). Every pair when few started;
    otherwise the pair the prices say gains most, tried exactly, up to MAX_SWAP_TRIES times."""
    started = {id(j) for j in starts}
    idx = [i for i, (j, _) in enumerate(placed) if id(j) in started]
    if len(idx) <= EXACT_SWAPS:
        improved = True
        while improved:
            improved = False
            for a, b in itertools.combinations(idx, 2):
                r = _try_swap(s, rows, placed, a, b, best)
                if r is not None:
                    best, improved = r, True
                    break
        return best
    prices = _Prices(s, rows, placed, idx, best)
    for _ in range(MAX_SWAP_TRIES):
        pair = prices.most_promising()
        if pair is None:
            break
        r = _try_swap(s, rows, placed, *pair, best)
        if r is None:
            break
        best = r
        prices.moved(*pair)
    return best


def _try_swap(s: FleetScheduler, rows: JointRows, placed: list[tuple[FleetJob, Board]], a: int, b: int,
              best: Solution) -> Solution | None:
    """Rows ``a`` and ``b`` exchange boards if the joint value grows (the new joint choice), else nothing changes."""
    (ja, ba), (jb, bb) = placed[a], placed[b]
    if ba.model == bb.model or bb.model not in ja.candidates or ba.model not in jb.candidates:
        return None
    dom = rows.domain
    old = [(rows.power[i].copy(), rows.value[i].copy()) for i in (a, b)]
    pa, va = s.row(ja, bb)
    pb, vb = s.row(jb, ba)
    rows.replace(a, pa, va, dom.rack(bb.group), bb.idle_w, ba.idle_w)
    rows.replace(b, pb, vb, dom.rack(ba.group), ba.idle_w, bb.idle_w)
    r = rows.solve(TRIAL_GAP, TRIAL_NODES)
    if r is not None and r.value > best.value + best.gap * best.bound + 1e-9:
        placed[a], placed[b] = (ja, bb), (jb, ba)
        ja.board, ja.model, jb.board, jb.model = bb.board_id, bb.model, ba.board_id, ba.model
        return r
    for i, (p, v), (board, other) in ((a, old[0], (ba, bb)), (b, old[1], (bb, ba))):
        keep = np.isfinite(p)
        rows.replace(i, p[keep], v[keep], dom.rack(board.group), board.idle_w, other.idle_w)
    return None


class _Prices:
    """What each started job is worth on a board of each (model, rack) class at the joint choice's prices
    (``_worths``, a class's first board standing for it), to find the exchange that gains most."""

    def __init__(self, s: FleetScheduler, rows: JointRows, placed: list[tuple[FleetJob, Board]], idx: list[int],
                 prices: Solution) -> None:
        self.placed, self.idx = placed, idx
        self.classes: dict[tuple[str, str], Board] = {}
        for i in idx:
            self.classes.setdefault((placed[i][1].model, placed[i][1].group), placed[i][1])
        keys = list(self.classes)
        self.col = {c: k for k, c in enumerate(keys)}
        self.model = np.array([c[0] for c in keys])
        self.worth = np.full((len(idx), len(keys)), -np.inf)
        for r, i in enumerate(idx):
            job = placed[i][0]
            boards = [board for board in self.classes.values() if board.model in job.candidates]
            for board, w in zip(boards, _worths(s, rows, job, boards, prices)):
                self.worth[r, self.col[(board.model, board.group)]] = w[0] if w is not None else -np.inf
        self.row_of = {i: r for r, i in enumerate(idx)}
        self.own = np.array([self._class(i) for i in idx])     # each started job's class now

    def _class(self, i: int) -> int:
        b = self.placed[i][1]
        return self.col[(b.model, b.group)]

    def moved(self, a: int, b: int) -> None:
        """Jobs ``a`` and ``b`` exchanged boards."""
        for i in (a, b):
            self.own[self.row_of[i]] = self._class(i)

    def most_promising(self) -> tuple[int, int] | None:
        """The pair of started jobs on boards of two models whose exchange the prices value most, if positive."""
        own = self.own
        here = self.worth[np.arange(len(self.idx)), own][:, None]
        with np.errstate(invalid="ignore"):    # a class a job cannot run in: -inf, and stays so
            gain = np.where(np.isfinite(self.worth), self.worth - here, -np.inf)   # moving to each class
        ncls = len(self.col)
        best_gain = np.full((ncls, ncls), -np.inf)     # [from, to]: the most any job of ``from`` gains in ``to``
        best_row = np.zeros((ncls, ncls), dtype=np.int64)
        for c in range(ncls):
            members = np.nonzero(own == c)[0]
            if len(members):
                g = gain[members]
                best_row[c] = members[np.argmax(g, axis=0)]
                best_gain[c] = g.max(axis=0)
        pair = best_gain + best_gain.T
        pair[self.model[:, None] == self.model[None, :]] = -np.inf
        c1, c2 = np.unravel_index(int(np.argmax(pair)), pair.shape)
        if not pair[c1, c2] > 1e-9:
            return None
        return self.idx[int(best_row[c1, c2])], self.idx[int(best_row[c2, c1])]

"""`jetfleet top`: the fleet in a terminal, refreshed every interval (textual).

The fleet screen lists every board (state, mode, power per rail, temperatures, utilisation, its work) and the
jobs and campaigns that are not over, with progress; Enter opens a board, ``s`` changes the sort, ``r`` reverses
it. The board screen shows one board in detail. Data comes from ``data.FleetSource`` off the event loop."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any, Callable, TypeVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from jetfleet.cli.top import view
from jetfleet.cli.top.data import BoardDetail, Fleet, FleetSource
from jetfleet.shared.errors import JetfleetError

T = TypeVar("T")


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking call in the default executor (asyncio.to_thread is Python 3.9+; the CLI runs on 3.8)."""
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args))


def _fill(table: DataTable[Any], rows: list[tuple[str, tuple[object, ...]]]) -> None:
    """Replace a table's rows (key, cells), keeping the cursor on the row with the same key."""
    selected = None
    if table.row_count:
        try:
            selected = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:   # noqa: BLE001  (no cursor row yet)
            selected = None
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    keys = [k for k, _ in rows]
    if selected in keys:
        table.move_cursor(row=keys.index(selected))


class BoardScreen(Screen):
    """One board: identity, mode and clocks, power per rail, temperatures, utilisation, its work, software."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("b", "app.pop_screen", "Back", show=False),
                Binding("q", "app.quit", "Quit")]

    def __init__(self, device_id: str) -> None:
        super().__init__()
        self.device_id = device_id
        self.detail: BoardDetail | None = None
        self.error = ""

    def compose(self) -> ComposeResult:
        """The board's panes."""
        yield Header()
        yield Static(id="identity")
        yield Static(id="clocks")
        rails: DataTable[Any] = DataTable(id="rails", cursor_type="none", zebra_stripes=True)
        rails.add_columns("RAIL", "POWER W", "OF THE BOARD'S POWER")
        yield rails
        temps: DataTable[Any] = DataTable(id="temps", cursor_type="none")
        temps.add_columns("SENSOR", "°C")
        yield temps
        work: DataTable[Any] = DataTable(id="board-work", cursor_type="none")
        work.add_columns(*view.WORK_COLUMNS)
        yield work
        yield Static(id="software")
        yield Footer()

    async def on_mount(self) -> None:
        """Draw at once, then every interval."""
        self.app.sub_title = f"board {self.device_id}"
        await self.refresh_board()
        self.set_interval(self.app.interval_s, self.refresh_board)   # type: ignore[attr-defined]

    async def refresh_board(self) -> None:
        """Ask the controller for the board (off the event loop) and redraw."""
        app: TopApp = self.app   # type: ignore[assignment]
        try:
            self.detail = await _off_loop(app.source.board, self.device_id, app.fleet.work)
            self.error = ""
        except JetfleetError as e:
            self.error = f"{e.code}: {e.message}"
        self.draw()
        app.shot_ready(self)

    def draw(self) -> None:
        """Fill the panes from the last answer."""
        d = self.detail
        ident = Text()
        if d is None:
            ident.append(f"{self.device_id}: {self.error or 'asking the controller...'}", style="bold red")
            self.query_one("#identity", Static).update(ident)
            return
        b = d.board
        ident.append(f"{b.device_id}  ", style="bold")
        ident.append(f"{b.model}  serial {d.serial}  ")
        ident.append_text(view.state_cell(b))
        ident.append(f"   {'emulated' if b.emulated else 'real board'}   {d.modes} modes in its catalog")
        if self.error:
            ident.append(f"\n{self.error} — retrying", style="bold red")
        self.query_one("#identity", Static).update(ident)
        clocks = Text()
        clocks.append("mode ", style="dim")
        clocks.append(b.mode_text, style="bold")
        if b.online and b.power_w is not None:
            clocks.append(f"    {b.cores_online} cores  CPU {b.cpu_mhz:g} MHz  GPU {b.gpu_mhz:g} MHz  "
                          f"EMC {b.mem_mhz:g} MHz   util CPU {b.cpu_util:.0%} GPU {b.gpu_util:.0%}   ")
            clocks.append(f"{b.power_w:.1f} W", style="bold")
        self.query_one("#clocks", Static).update(clocks)
        total = b.power_w or 1.0   # the board's power: a sum of rails, or a module-input rail (Orin Nano's VDD_IN)
        _fill(self.query_one("#rails", DataTable), [(r, (r, f"{w:.2f}", view.bar(w / total, 16)))
                                                    for r, w in b.rails_w.items()])
        _fill(self.query_one("#temps", DataTable), [(s, (s, view.temp_cell(c))) for s, c in sorted(b.temps_c.items())])
        _fill(self.query_one("#board-work", DataTable), [(w.work_id, view.work_row(w)) for w in b.work])
        soft = "  ".join(f"{k}={v}" for k, v in sorted(d.software.items()))
        presets = "  ".join(f"{k} {v}" for k, v in d.presets.items())
        self.query_one("#software", Static).update(
            Text.assemble(("software ", "dim"), soft or "-", "\n", ("presets  ", "dim"), presets or "-", "\n",
                          ("workloads ", "dim"), ", ".join(d.workloads) or "-"))


class TopApp(App):
    """The fleet screen (boards and work), refreshed every ``interval_s``; a board's screen on Enter."""

    TITLE = "jetfleet top"
    CSS = """
    #summary { height: auto; padding: 0 1; }
    #boards { height: 2fr; }
    #work-title, #clocks, #identity, #software { height: auto; padding: 0 1; }
    #work { height: 1fr; }
    #rails, #temps, #board-work { height: auto; max-height: 12; }
    """
    BINDINGS = [Binding("enter", "open_board", "Board"), Binding("s", "next_sort", "Sort"),
                Binding("r", "reverse_sort", "Reverse"), Binding("q", "quit", "Quit")]

    def __init__(self, source: FleetSource, *, interval_s: float = 1.0, sort: str = "id", reverse: bool = False,
                 board: str = "", screenshot: Path | None = None) -> None:
        super().__init__()
        self.source, self.interval_s = source, interval_s
        self.sort, self.reverse = sort, reverse
        self.fleet = Fleet(0.0)
        self.first_board = board
        self.screenshot = screenshot
        self._busy = False

    def compose(self) -> ComposeResult:
        """Summary, boards, work."""
        yield Header(show_clock=False)
        yield Static(id="summary")
        boards: DataTable[Any] = DataTable(id="boards", cursor_type="row", zebra_stripes=True)
        boards.add_columns(*view.BOARD_COLUMNS)
        yield boards
        yield Static(Text("Jobs and campaigns", style="bold"), id="work-title")
        work: DataTable[Any] = DataTable(id="work", cursor_type="none", zebra_stripes=True)
        work.add_columns(*view.WORK_COLUMNS)
        yield work
        yield Footer()

    async def on_mount(self) -> None:
        """First look at once, then every interval; open the board asked for on the command line."""
        self.sub_title = "connecting"
        await self.refresh_fleet()
        self.set_interval(self.interval_s, self.refresh_fleet)
        if self.first_board:
            await self.push_screen(BoardScreen(self.first_board))

    async def refresh_fleet(self) -> None:
        """Ask the controller (off the event loop; one look at a time) and redraw."""
        if self._busy:
            return
        self._busy = True
        try:
            self.fleet = await _off_loop(self.source.fleet)
        finally:
            self._busy = False
        if not self.is_running:
            return   # quit while the controller was being asked: the screen is gone, nothing to draw
        self.sub_title = self.source.address
        try:
            self.draw()
        except NoMatches:
            return   # the app is closing under this refresh: its widgets were removed
        if not self.first_board:
            self.shot_ready(self.screen)

    def draw(self) -> None:
        """Fill the fleet screen from the last look."""
        f = self.fleet
        self.query_one("#summary", Static).update(view.summary(f, self.source.address, self.sort, self.reverse))
        boards = view.sort_boards(f.boards, self.sort, self.reverse)
        _fill(self.query_one("#boards", DataTable), [(b.device_id, view.board_row(b)) for b in boards])
        _fill(self.query_one("#work", DataTable), [(f"{w.kind}:{w.work_id}", view.work_row(w)) for w in f.work])

    def selected_board(self) -> str | None:
        """The device id under the cursor of the boards table."""
        table = self.query_one("#boards", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    async def action_open_board(self) -> None:
        """Enter: the selected board's screen."""
        device = self.selected_board()
        if device is not None and isinstance(self.screen, Screen) and not isinstance(self.screen, BoardScreen):
            await self.push_screen(BoardScreen(device))

    def on_data_table_row_selected(self, event: Any) -> None:
        """Enter (or a click) on a board's row opens it."""
        if getattr(event.data_table, "id", "") == "boards":
            self.run_worker(self.action_open_board())

    def action_next_sort(self) -> None:
        """s: the next sort key (device, power, temperature, model, state)."""
        self.sort = view.SORT_ORDER[(view.SORT_ORDER.index(self.sort) + 1) % len(view.SORT_ORDER)]
        self.draw()

    def action_reverse_sort(self) -> None:
        """r: the other way round."""
        self.reverse = not self.reverse
        self.draw()

    def shot_ready(self, screen: Any) -> None:
        """With ``screenshot``, the first drawn screen asked for (the fleet, or the board given) is saved as SVG
        and the app ends: `jetfleet top --screenshot FILE`."""
        if self.screenshot is not None and screen is self.screen:
            path, self.screenshot = self.screenshot, None
            self.call_after_refresh(self._shoot, path)

    def _shoot(self, path: Path) -> None:
        path.write_text(self.export_screenshot(), encoding="utf-8")
        self.exit()

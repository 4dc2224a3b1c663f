"""A campaign's modes from what the operator asked: a named grid, ``random:K``, or an explicit list (a modes file),
each checked against the target's catalog; a bad or repeated item of a file is named by its line."""

from __future__ import annotations

from jetfleet.shared.catalog import Catalog
from jetfleet.shared.errors import InvalidArgument

MAX_MODES = 100_000


def resolve_modes(catalog: Catalog, spec: str, mode_list: list[str], seed: int,
                  mode_lines: list[int] | None = None) -> list[str]:
    """A campaign's modes as text: an explicit list, ``random:K`` (seeded) or a named grid of ``catalog``.

    Grids are counted and sampled by index, never built beyond MAX_MODES. InvalidArgument for an
    unknown spec, a repeated mode, an empty list or more than MAX_MODES modes; a bad or repeated item
    of a list is named by its line in its file (``mode_lines``) or its position."""
    if mode_list:
        if len(mode_list) > MAX_MODES:
            raise InvalidArgument(f"at most {MAX_MODES} modes per campaign, got {len(mode_list)}",
                                  field="mode_list")
        return _listed_modes(catalog, spec, mode_list, mode_lines or [])
    if spec.startswith("random:"):
        k_text = spec.split(":", 1)[1]
        hi = min(catalog.size, MAX_MODES)
        if not k_text.isdigit() or not 1 <= int(k_text) <= hi:
            raise InvalidArgument(f"modes {spec[:64]!r}: K must be 1..{hi} for {catalog.model}", field="modes")
        modes = [str(m) for m in catalog.sample(int(k_text), seed)]
    elif spec in catalog.grid_names:
        size = catalog.grid_size(spec)
        if size > MAX_MODES:
            raise InvalidArgument(f"grid {spec} of {catalog.model} has {size} modes; a campaign may have at most "
                                  f"{MAX_MODES} (use random:K)", field="modes")
        modes = [str(m) for m in catalog.grid(spec)]
    else:
        raise InvalidArgument(f"modes {spec[:64]!r}: expected one of {', '.join(catalog.grid_names)}, random:K, "
                              "or a file of modes", field="modes")
    if len(set(modes)) != len(modes):
        raise InvalidArgument("the mode list names a mode twice", field="mode_list")
    if not modes:
        raise InvalidArgument("the campaign has no modes", field="modes")
    return modes


def _listed_modes(catalog: Catalog, spec: str, mode_list: list[str], lines: list[int]) -> list[str]:
    """An explicit list of modes, each checked against ``catalog``; the first bad or repeated one named by its
    file line (``lines``) or its position in the list."""
    if lines and len(lines) != len(mode_list):
        raise InvalidArgument(f"mode_lines has {len(lines)} entries for {len(mode_list)} modes; one per mode or "
                              "none", field="mode_lines")
    source = f"modes file {spec[5:]}" if spec.startswith("file:") else "the mode list"

    def where(i: int) -> str:
        return f"line {lines[i]}" if lines else f"item {i + 1}"

    modes: list[str] = []
    first: dict[str, int] = {}
    for i, text in enumerate(mode_list):
        try:
            mode = str(catalog.parse_mode(text))
        except InvalidArgument as e:
            raise InvalidArgument(f"{source} {where(i)}: {text[:64]!r}: {e.message}", field="mode_list") from None
        if mode in first:
            raise InvalidArgument(f"{source} {where(i)}: {text[:64]!r} repeats {where(first[mode])} "
                                  f"({mode_list[first[mode]][:64]!r} = {mode})", field="mode_list")
        first[mode] = i
        modes.append(mode)
    return modes

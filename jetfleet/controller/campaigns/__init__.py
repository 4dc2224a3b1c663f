"""Profiling campaigns (the papers' protocol over a list of modes, on one board or a board model's boards):
``manager`` hands modes out and stores each result exactly once, ``run`` is one campaign's live state, ``modes``
resolves what to profile, ``results`` checks a board's answer and turns it into a stored profile."""

from jetfleet.controller.campaigns.manager import CampaignManager

__all__ = ["CampaignManager"]

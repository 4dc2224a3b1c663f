"""Pagoda (issue 16): time and energy rooflines per power mode and inference energy tuning, on the twin."""

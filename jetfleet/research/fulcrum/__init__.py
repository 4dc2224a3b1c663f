"""Fulcrum (issue 15): concurrent training and inference on one board: strategies and their evaluation."""

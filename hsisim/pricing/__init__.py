"""Prices and interruption hazards: spot price traces, censored lifetime fits, Spot Advisor bands."""

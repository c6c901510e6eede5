"""The version of hsisim (one place, read by the package and by everything it writes)."""

__version__ = "0.2.0"

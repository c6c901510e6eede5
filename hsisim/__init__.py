"""hsisim: what a hyperspectral-image training job really costs on a rented GPU cluster."""

__version__ = "0.1.0"
